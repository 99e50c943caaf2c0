/* One entry of a family's declaration list (splash/family.h's declare): the tensor's
 * name ("blk.<il>.<name>" for a layer's, the name as is for il < 0), its shape and what it
 * accepts, bound into dst when a model is being built (dst NULL: checked, not bound).
 * Family-neutral (the hybrid trunk, gpt_oss and flint emit through it); names are prefixed
 * tensor_decls_ because the static plugin archive links every plugin together. */
#ifndef SPLASH_FAMILIES_TENSOR_DECLS_H
#define SPLASH_FAMILIES_TENSOR_DECLS_H

#include <stdint.h>

#include "splash/family.h"

void tensor_decls_emit(splash_decl_emit_fn emit, void *ctx, int32_t il, const char *name,
                       uint32_t accept, uint32_t flags, int32_t n_dims, int64_t ne0, int64_t ne1,
                       int64_t ne2, uint32_t bind, void *dst);

#endif
