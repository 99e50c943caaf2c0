/* The mixture-of-experts FFN of the Qwen MoE hybrids (GGUF qwen35moe), as a
 * struct hybrid_ffn_ops the hybrid trunk calls in every layer: a router in its
 * stored format, softmax over all experts in fp32, top-k renormalised, the
 * routed experts batched per expert (kernels' matmul_experts, each expert's
 * weights read once per step for all the rows routed to it), and a shared
 * expert scaled by the sigmoid of its scalar gate. Part of the qwen_moe plugin
 * alone (the trunk in families/common knows no experts); names are prefixed moe_
 * because the static plugin archive links every plugin together. */
#ifndef SPLASH_FAMILIES_QWEN_MOE_MOE_H
#define SPLASH_FAMILIES_QWEN_MOE_MOE_H

#include <stddef.h>
#include <stdint.h>

#include "families/common/hybrid.h"

#define MOE_MAX_EXPERTS 4096
#define MOE_MAX_USED 64

/* The MoE block's sizes, from GGUF metadata or config.json. */
struct moe_config {
    int32_t n_expert;   /* routed experts the file holds (may be fewer than the family's) */
    int32_t n_used;     /* experts each token takes */
    int64_t n_ff_exp;   /* each routed expert's width */
    int64_t n_ff_shexp; /* the shared expert's width */
};

/* Reads and checks the MoE sizes; errors name the key at fault. */
enum splash_status moe_config_read(const struct splash_host *host, const struct splash_meta *m,
                                   const char *arch, struct moe_config *cfg,
                                   struct splash_err *err);
/* ", 256 experts (8 used) of ff 512, shared ff 512" appended to buf. */
void moe_config_summary(const struct moe_config *cfg, char *buf, size_t size);

/* A MoE hybrid's declaration list (a splash_declare_fn's body): the trunk's tensors and,
 * per layer, the router, the routed experts (ffn_{gate,up,down}_exps, or ffn_gate_up_exps
 * where the file fuses gate and up) and the shared expert with its gate, all held to the
 * header's expert count; bound into model when it is not NULL. */
enum splash_status moe_declare(const struct splash_host *host, const struct splash_meta *m,
                               const char *arch, struct hybrid_model *model,
                               splash_decl_emit_fn emit, void *ctx, struct splash_err *err);

/* The FFN ops for hybrid_model_create (its declarations need moe_declare's sizes). */
extern const struct hybrid_ffn_ops moe_ffn_ops;

/* Diagnostics for tests: after routing, fn gets each row's top-k margin in layer il
 * (the last chosen expert's router logit minus the best unchosen one's; +inf when
 * every expert is chosen). Not thread-safe against a running forward. */
typedef void (*moe_route_observer_fn)(void *ctx, int32_t il, int64_t row, float margin);
void moe_ffn_set_observer(void *layer_ffn, moe_route_observer_fn fn, void *ctx);

/* The streamed experts' counters of a qwen_moe model (family.h expert_stats): 1, or 0
 * when its experts load whole. */
int moe_expert_stats(const void *hybrid_model, struct splash_expert_stats *out);
/* family.h expert_resize: takes back (grow 1) or gives back (grow 0) one elastic chunk of
 * the store; its bytes, or 0. */
uint64_t moe_expert_resize(void *hybrid_model, int32_t grow, uint64_t max_bytes);

/* ---- element-wise kernels (moe_math.c, moe_avx2.c) ------------------------------- */

/* h[r][i] = silu(g[r][i]) * u[r][i] for rows r of n floats; g and u rows at
 * stride in_stride, h rows at stride n. h may equal g when in_stride == n. */
typedef void (*moe_swiglu_fn)(const float *g, const float *u, int64_t in_stride, float *h,
                              int64_t rows, int64_t n);
/* out[i] = s * sh[i] + sum_j w[j] * y[j * n + i] for one row: the shared expert's
 * output sh scaled by s, plus k routed outputs y weighted by w. sh may be NULL (s
 * ignored). */
typedef void (*moe_combine_fn)(float *out, const float *sh, float s, const float *y, const float *w,
                               int32_t k, int64_t n);

struct moe_simd {
    const char *isa;
    moe_swiglu_fn swiglu;
    moe_combine_fn combine;
};

/* The first row the CPU supports (cpu_features bits); the scalar reference last. */
const struct moe_simd *moe_simd_pick(uint64_t cpu_features);
/* Every row this build has, for tests: NULL-terminated order, reference last. */
const struct moe_simd *moe_simd_at(size_t i);

/* Softmax of one row of n_expert router logits in fp32, its k largest
 * probabilities (ties to the lower index) renormalised to sum 1. */
void moe_route_row(const float *logits, int32_t n_expert, int32_t k, int32_t *ids, float *w);

#endif
