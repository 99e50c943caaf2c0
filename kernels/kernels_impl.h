/* The core's implementation of struct splash_kernels (include/splash/kernels.h). */
#ifndef SPLASH_KERNELS_IMPL_H
#define SPLASH_KERNELS_IMPL_H

#include "splash/kernels.h"

const struct splash_kernels *splash_kernels_get(void);

#endif
