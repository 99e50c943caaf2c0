/* Kernel-row selection and the default for a format's optional mul_rows. */
#include "core/host_impl.h"

const struct splash_kernel_row *splash_format_pick_row(const struct splash_format_type *f,
                                                       uint64_t cpu_features)
{
    if (!f->rows || f->n_rows == 0)
        return NULL;
    for (uint32_t i = 0; i < f->n_rows; i++) {
        if ((f->rows[i].cpu_requires & cpu_features) == f->rows[i].cpu_requires)
            return &f->rows[i];
    }
    return &f->rows[f->n_rows - 1];
}

void splash_format_mul_rows(const struct splash_kernel_row *row, int64_t n, const void *w,
                            size_t w_stride, int64_t n_w, const void *act, size_t act_stride,
                            int64_t n_act, float *out, size_t out_stride)
{
    if (row->mul_rows) {
        row->mul_rows(n, w, w_stride, n_w, act, act_stride, n_act, out, out_stride);
        return;
    }
    const char *wb = w;
    const char *ab = act;
    for (int64_t j = 0; j < n_act; j++)
        for (int64_t i = 0; i < n_w; i++)
            row->vec_dot(n, &out[(size_t)j * out_stride + (size_t)i], wb + (size_t)i * w_stride,
                         ab + (size_t)j * act_stride);
}
