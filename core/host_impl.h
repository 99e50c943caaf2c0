/* The core's runtime services behind the host table (logging, memory, CPU features,
 * kernel rows), which the compute layer uses too. */
#ifndef SPLASH_CORE_HOST_IMPL_H
#define SPLASH_CORE_HOST_IMPL_H

#include "splash/format.h"
#include "splash/plugin.h"
#include "splash/host.h"

/* The compute layer's kernel table (kernels/table.c defines it): the core hands it to
 * plugins through the host table and includes nothing of the kernels. */
const struct splash_kernels *splash_kernels_get(void);
const struct splash_ssm_kernels *splash_ssm_kernels_get(void);

/* CPU features after SPLASH_FORCE_ISA (scalar|avx2|avx512) is applied. */
uint64_t splash_cpu_features(void);
/* Human-readable list: "avx2 fma f16c avx512f ... (forced: scalar)". */
void splash_cpu_describe(char *buf, size_t size);

/* The first kernel row the CPU supports (the scalar reference as last resort). */
const struct splash_kernel_row *splash_format_pick_row(const struct splash_format_type *f,
                                                       uint64_t cpu_features);
/* The picked row's mul_rows, or the core's default loop over vec_dot. */
void splash_format_mul_rows(const struct splash_kernel_row *row, int64_t n, const void *w,
                            size_t w_stride, int64_t n_w, const void *act, size_t act_stride,
                            int64_t n_act, float *out, size_t out_stride);

void splash_log(enum splash_log_level level, const char *who, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Lines below this level are dropped (default INFO; SPLASH_LOG=debug). */
void splash_log_set_level(enum splash_log_level level);

void *splash_alloc_aligned(size_t align, size_t size);
void splash_free_aligned(void *p);

#endif
