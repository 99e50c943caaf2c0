/* One entry of a family's declaration list (tensor_decls.h). */
#include "families/common/tensor_decls.h"

#include <stdio.h>

void tensor_decls_emit(splash_decl_emit_fn emit, void *ctx, int32_t il, const char *name,
                       uint32_t accept, uint32_t flags, int32_t n_dims, int64_t ne0, int64_t ne1,
                       int64_t ne2, uint32_t bind, void *dst)
{
    struct splash_tensor_decl d = {.layer = il,
                                   .n_dims = n_dims,
                                   .ne = {ne0, ne1, ne2, 1},
                                   .accept = accept,
                                   .flags = flags,
                                   .bind = dst ? bind : SPLASH_BIND_NONE,
                                   .dst = dst};
    if (il >= 0)
        snprintf(d.name, sizeof d.name, "blk.%d.%s", il, name);
    else
        snprintf(d.name, sizeof d.name, "%s", name);
    emit(ctx, &d);
}
