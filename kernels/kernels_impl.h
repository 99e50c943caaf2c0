/* The core's implementation of struct splash_kernels (include/splash/kernels.h). */
#ifndef SPLASH_KERNELS_IMPL_H
#define SPLASH_KERNELS_IMPL_H

#include <stdint.h>

#include "splash/kernels.h"

const struct splash_kernels *splash_kernels_get(void);
/* Frees every repacked weight image (each is made again from the mapped rows on its next
 * use) but those over an import's rows already given back; returns the bytes freed. */
size_t splash_matmul_release_images(void);

#endif
