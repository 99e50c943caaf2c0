/* The hybrid trunk's metadata as a make-model preset (splash/family.h, ABI 1.4): the
 * <arch>.* keys in the order llama.cpp's converter writes them for qwen35, so a preset
 * table is one line a size. A MoE family appends its expert keys. */
#ifndef SPLASH_FAMILIES_HYBRID_PRESETS_H
#define SPLASH_FAMILIES_HYBRID_PRESETS_H

#include "splash/family.h"

#define HYBRID_PRESET_U32(key_, v) {.key = (key_), .kind = SPLASH_PRESET_U32, .num = (v)}
#define HYBRID_PRESET_F32(key_, v) {.key = (key_), .kind = SPLASH_PRESET_F32, .num = (v)}

/* Qwen3.5's rotary base and norm epsilon */
#define HYBRID_QWEN_ROPE_BASE 10000000.0
#define HYBRID_QWEN_EPS 1e-6f

/* ctx: native window; embd, layers, ff: hidden size, blocks, FFN width; heads, kv,
 * head_dim, rot: attention heads, KV heads, head width and its rotary dims; s0..s3: the
 * IMROPE sections; gk, gv, dk, dv: GDN key heads, value heads and their widths; every:
 * layer il is full attention when (il + 1) % every == 0 */
#define HYBRID_PRESET_TRUNK(ctx, embd, layers, ff, heads, kv, head_dim, rot, s0, s1, s2, s3, \
                            gk, gv, dk, dv, every)                                          \
    HYBRID_PRESET_U32("context_length", ctx), HYBRID_PRESET_U32("embedding_length", embd),   \
        HYBRID_PRESET_U32("block_count", layers),                                           \
        HYBRID_PRESET_U32("feed_forward_length", ff),                                       \
        HYBRID_PRESET_U32("attention.head_count", heads),                                   \
        HYBRID_PRESET_U32("attention.head_count_kv", kv),                                   \
        HYBRID_PRESET_U32("attention.key_length", head_dim),                                \
        HYBRID_PRESET_U32("attention.value_length", head_dim),                              \
        HYBRID_PRESET_U32("rope.dimension_count", rot),                                     \
        {.key = "rope.dimension_sections", .kind = SPLASH_PRESET_I32S, .n = 4,              \
         .nums = (const double[]){s0, s1, s2, s3}},                                         \
        HYBRID_PRESET_F32("rope.freq_base", HYBRID_QWEN_ROPE_BASE),                         \
        HYBRID_PRESET_F32("attention.layer_norm_rms_epsilon", HYBRID_QWEN_EPS),             \
        HYBRID_PRESET_U32("ssm.conv_kernel", 4), HYBRID_PRESET_U32("ssm.state_size", dk),    \
        HYBRID_PRESET_U32("ssm.group_count", gk), HYBRID_PRESET_U32("ssm.time_step_rank", gv), \
        HYBRID_PRESET_U32("ssm.inner_size", (gv) * (dv)),                                   \
        HYBRID_PRESET_U32("full_attention_interval", every)

#endif
