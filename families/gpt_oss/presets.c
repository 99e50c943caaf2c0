/* gpt-oss's make-model sizes (splash/family.h, ABI 1.4): the gpt-oss.* keys a file of that
 * shape carries, in the order the reference's converter writes them. */
#include "families/gpt_oss/gpt_oss.h"

#define U32(key_, v)                                                                               \
    {                                                                                              \
        .key = (key_), .kind = SPLASH_PRESET_U32, .num = (v)                                       \
    }
#define F32(key_, v)                                                                               \
    {                                                                                              \
        .key = (key_), .kind = SPLASH_PRESET_F32, .num = (v)                                       \
    }

/* ctx, hidden, layers, ff, heads, KV heads, head dim (all rotary), sliding window (every
 * other layer from layer 0), experts, used, expert FFN width; base 150000, eps 1e-5 and
 * YaRN 32 over 4096 as OpenAI ships it */
#define GPTOSS_VALUES(ctx, embd, layers, ff, heads, kv, head_dim, window, n_exp, used, ff_exp)     \
    {                                                                                              \
        U32("context_length", ctx), U32("embedding_length", embd), U32("block_count", layers),     \
            U32("feed_forward_length", ff), U32("attention.head_count", heads),                    \
            U32("attention.head_count_kv", kv), U32("attention.key_length", head_dim),             \
            U32("attention.value_length", head_dim), U32("rope.dimension_count", head_dim),        \
            F32("rope.freq_base", 150000.0), F32("attention.layer_norm_rms_epsilon", 1e-5f),       \
            U32("attention.sliding_window", window), U32("expert_count", n_exp),                   \
            U32("expert_used_count", used), U32("expert_feed_forward_length", ff_exp),             \
            {.key = "rope.scaling.type", .kind = SPLASH_PRESET_STR, .str = "yarn"},                \
            F32("rope.scaling.factor", 32.0), U32("rope.scaling.original_context_length", 4096),   \
        {                                                                                          \
            0                                                                                      \
        }                                                                                          \
    }

static const struct splash_preset_value gptoss_20b_4l[] =
    GPTOSS_VALUES(131072, 2880, 4, 2880, 64, 8, 64, 128, 32, 4, 2880);
static const struct splash_preset_value gptoss_tiny[] =
    GPTOSS_VALUES(131072, 192, 4, 256, 8, 2, 32, 16, 8, 2, 256);

const struct splash_family_preset gptoss_presets[] = {
    {"gpt-oss-20b-4l", GPTOSS_ARCH,
     "gpt-oss-20b's layers, four of them (layers 0 and 2 slide over 128 tokens)", 201088, 0,
     gptoss_20b_4l, "harmony"},
    {"gpt-oss-tiny", GPTOSS_ARCH, "the test data's tiny gpt-oss (gptoss/README.md)", 2048, 0,
     gptoss_tiny, "harmony"},
    {0},
};
