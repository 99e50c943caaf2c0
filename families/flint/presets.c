/* Flint's make-model sizes (splash/family.h, ABI 1.4): the flint.* keys a file of that
 * shape carries. No Flint release's sizes are public, so these are test and benchmark
 * shapes, not a release's: make-model writes them with the built-in Flint vocabulary. */
#include "families/flint/flint.h"

#define U32(key_, v) {.key = (key_), .kind = SPLASH_PRESET_U32, .num = (v)}
#define F32(key_, v) {.key = (key_), .kind = SPLASH_PRESET_F32, .num = (v)}
#define BOOL(key_, v) {.key = (key_), .kind = SPLASH_PRESET_BOOL, .num = (v)}
#define BOOLS4(key_, a, b, c, d)                                                              \
    {.key = (key_), .kind = SPLASH_PRESET_BOOLS, .n = 4, .nums = (const double[]){a, b, c, d}}

/* ctx, embd, ff: native window, hidden size, dense FFN width; heads, kv, head_dim: attention;
 * window: the sliding layers' window; x, used, fx, fs: experts, experts a token takes, their
 * width and the shared expert's. Four layers: 0 and 2 slide and have RoPE, 1 and 3 attend to
 * everything without RoPE; layer 0 is dense; a softmax router renormalised over the chosen,
 * its scale stated (1). */
#define FLINT_PRESET_4L(ctx, embd, ff, heads, kv, head_dim, window, x, used, fx, fs)          \
    U32("context_length", ctx), U32("embedding_length", embd), U32("block_count", 4),         \
        U32("feed_forward_length", ff), U32("attention.head_count", heads),                   \
        U32("attention.head_count_kv", kv), U32("attention.key_length", head_dim),            \
        U32("attention.value_length", head_dim), U32("rope.dimension_count", head_dim),       \
        F32("rope.freq_base", 10000.0), F32("attention.layer_norm_rms_epsilon", 1e-5),        \
        U32("attention.sliding_window", window),                                              \
        BOOLS4("attention.sliding_window_pattern", 1, 0, 1, 0),                               \
        BOOLS4("attention.rope_pattern", 1, 0, 1, 0), U32("leading_dense_block_count", 1),    \
        U32("expert_count", x), U32("expert_used_count", used),                               \
        U32("expert_feed_forward_length", fx), U32("expert_shared_feed_forward_length", fs),  \
        U32("expert_gating_func", FLINT_GATING_SOFTMAX), BOOL("expert_weights_norm", 1),      \
        F32("expert_weights_scale", 1.0)

static const struct splash_preset_value flint_tiny[] = {
    FLINT_PRESET_4L(4096, 256, 512, 4, 2, 64, 16, 8, 2, 256, 256), {0}};
static const struct splash_preset_value flint_bench_4l[] = {
    FLINT_PRESET_4L(131072, 2048, 6144, 32, 4, 64, 4096, 64, 4, 768, 768), {0}};

const struct splash_family_preset flint_presets[] = {
    {"flint-tiny", FLINT_ARCH,
     "a tiny Flint for tests (4 layers: 2 sliding with RoPE, 2 full without; 1 dense)", 2048,
     0, flint_tiny, "flint"},
    {"flint-bench-4l", FLINT_ARCH,
     "a Flint-shaped 4-layer benchmark (hidden 2048, 64 experts of 768, 4 used; no release's "
     "sizes)",
     151552, 0, flint_bench_4l, "flint"},
    {0},
};
