/* The gpt-oss family plugin (GGUF architecture gpt-oss): claims, the header's verdict,
 * tensor declarations and the vtable over model.c, cache.c and forward.c. */
#include <stdio.h>
#include <string.h>

#include "families/gpt_oss/gpt_oss.h"
#include "splash/plugin.h"

/* The sizes OpenAI released, by name. */
struct gptoss_size {
    const char *name;
    int64_t n_embd, n_layers;
    int32_t n_expert;
};

static const struct gptoss_size gptoss_sizes[] = {
    {"gpt-oss-20b", 2880, 24, 32},
    {"gpt-oss-120b", 2880, 36, 128},
};

/* Harmony needs its tags as single tokens; a vocabulary without them (a test model's)
 * speaks the core's default format. */
static int vocab_has(const struct splash_host *host, const struct splash_meta *m, const char *tok)
{
    struct splash_err err;
    size_t n = 0;
    if (host->meta->arr_len(m, "tokenizer.ggml.tokens", &n, &err))
        return 0;
    for (size_t i = n; i-- > 0;) { /* special tokens sit at the end */
        const char *s;
        if (!host->meta->arr_str(m, "tokenizer.ggml.tokens", i, &s, &err) && !strcmp(s, tok))
            return 1;
    }
    return 0;
}

static enum splash_status go_check_config(const struct splash_host *host,
                                          const struct splash_meta *m,
                                          struct splash_family_verdict *v, struct splash_err *err)
{
    memset(v, 0, sizeof *v);
    const char *arch = NULL;
    if (host->meta->source(m) != SPLASH_META_GGUF ||
        host->meta->get_str(m, "general.architecture", &arch, NULL) || strcmp(arch, GPTOSS_ARCH))
        return SPLASH_OK;
    struct gptoss_config c;
    enum splash_status st = gptoss_config_read(host, m, &c, err);
    if (st)
        return st;
    v->score = 100;
    snprintf(v->architecture, sizeof v->architecture, "gpt-oss (%s)", GPTOSS_ARCH);
    for (size_t i = 0; i < sizeof gptoss_sizes / sizeof gptoss_sizes[0]; i++)
        if (gptoss_sizes[i].n_embd == c.n_embd && gptoss_sizes[i].n_layers == c.n_layers &&
            gptoss_sizes[i].n_expert == c.n_expert)
            snprintf(v->size_name, sizeof v->size_name, "%s", gptoss_sizes[i].name);
    gptoss_config_summary(&c, v->summary, sizeof v->summary);
    if (vocab_has(host, m, "<|channel|>"))
        snprintf(v->chat_format, sizeof v->chat_format, "harmony");
    return SPLASH_OK;
}

static enum splash_status go_declare_tensors(const struct splash_host *host,
                                             const struct splash_meta *m, splash_decl_emit_fn emit,
                                             void *ctx, struct splash_err *err)
{
    return gptoss_declare(host, m, NULL, emit, ctx, err);
}

static enum splash_status go_model_create(const struct splash_host *host,
                                          const struct splash_meta *m,
                                          const struct splash_model_opts *opts, void **model,
                                          struct splash_err *err)
{
    struct gptoss_model *gm;
    enum splash_status st = gptoss_model_create(host, m, opts, &gm, err);
    if (!st)
        *model = gm;
    return st;
}

static void go_model_destroy(void *model)
{
    gptoss_model_destroy(model);
}

static void go_model_info(const void *model, struct splash_model_info *info)
{
    gptoss_model_info(model, info);
}

static enum splash_status go_seq_create(void *model, void **seq, struct splash_err *err)
{
    struct gptoss_seq *s;
    enum splash_status st = gptoss_seq_create(model, &s, err);
    if (!st)
        *seq = s;
    return st;
}

static void go_seq_destroy(void *model, void *seq)
{
    gptoss_seq_destroy(model, seq);
}

static enum splash_status go_seq_truncate(void *model, void *seq, int32_t n_keep,
                                          struct splash_err *err)
{
    return gptoss_seq_truncate(model, seq, n_keep, err);
}

static enum splash_status go_forward(void *model, const struct splash_lane *lanes, int32_t n_lanes,
                                     struct splash_err *err)
{
    return gptoss_forward(model, lanes, NULL, n_lanes, err);
}

static enum splash_status go_forward_runs(void *model, const struct splash_lane *lanes,
                                          const struct splash_lane_runs *runs, int32_t n_lanes,
                                          const struct splash_taps *taps, struct splash_err *err)
{
    if (taps)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "gpt_oss gives no draft taps");
    return gptoss_forward(model, lanes, runs, n_lanes, err);
}

static uint64_t go_seq_saved_bytes(const void *model, int32_t n_tokens)
{
    return gptoss_seq_saved_bytes(model, n_tokens);
}

static enum splash_status go_seq_save(void *model, const void *seq,
                                      int (*write)(void *ctx, const void *bytes, size_t n),
                                      void *ctx, struct splash_err *err)
{
    return gptoss_seq_save(model, seq, write, ctx, err);
}

static enum splash_status go_seq_load(void *model, const void *buf, uint64_t size, void **seq,
                                      struct splash_err *err)
{
    struct gptoss_seq *s;
    enum splash_status st = gptoss_seq_load(model, buf, size, &s, err);
    if (!st)
        *seq = s;
    return st;
}

static enum splash_status go_seq_save_page(void *model, const void *seq, int64_t page,
                                           int (*write)(void *ctx, const void *bytes, size_t n),
                                           void *ctx, struct splash_err *err)
{
    return gptoss_seq_save_page(model, seq, page, write, ctx, err);
}

static uint64_t go_seq_rest_bytes(const void *model, int32_t n_tokens)
{
    return gptoss_seq_rest_bytes(model, n_tokens);
}

static enum splash_status go_seq_save_rest(void *model, const void *seq,
                                           int (*write)(void *ctx, const void *bytes, size_t n),
                                           void *ctx, struct splash_err *err)
{
    return gptoss_seq_save_rest(model, seq, write, ctx, err);
}

static enum splash_status go_seq_load_parts(void *model, const void *const *pages,
                                            int64_t n_pages, const void *rest,
                                            uint64_t rest_size, void **seq,
                                            struct splash_err *err)
{
    struct gptoss_seq *s;
    enum splash_status st =
        gptoss_seq_load_parts(model, pages, n_pages, rest, rest_size, &s, err);
    if (!st)
        *seq = s;
    return st;
}

static enum splash_status go_seq_fork(void *model, const void *src, int32_t n_tokens, void **dst,
                                      struct splash_err *err)
{
    struct gptoss_seq *s;
    enum splash_status st = gptoss_seq_fork(model, src, n_tokens, &s, err);
    if (!st)
        *dst = s;
    return st;
}

static uint64_t go_cache_bytes(const void *model)
{
    return ((const struct gptoss_model *)model)->cache_bytes;
}

static const char *const go_gguf_architectures[] = {GPTOSS_ARCH, NULL};
static const char *const go_model_types[] = {NULL};

static const struct splash_family_plugin go_plugin = {
    .header = SPLASH_PLUGIN_HEADER_INIT(SPLASH_PLUGIN_FAMILY, "gpt_oss", "0.1.0",
                                        struct splash_family_plugin),
    .gguf_architectures = go_gguf_architectures,
    .model_types = go_model_types,
    .check_config = go_check_config,
    .declare_tensors = go_declare_tensors,
    .model_create = go_model_create,
    .model_destroy = go_model_destroy,
    .model_info = go_model_info,
    .seq_create = go_seq_create,
    .seq_destroy = go_seq_destroy,
    .seq_truncate = go_seq_truncate,
    .forward = go_forward,
    .seq_fork = go_seq_fork,
    .cache_bytes = go_cache_bytes,
    .forward_runs = go_forward_runs,
    .seq_saved_bytes = go_seq_saved_bytes,
    .seq_save = go_seq_save,
    .seq_load = go_seq_load,
    .seq_save_page = go_seq_save_page,
    .seq_rest_bytes = go_seq_rest_bytes,
    .seq_save_rest = go_seq_save_rest,
    .seq_load_parts = go_seq_load_parts,
    .presets = gptoss_presets,
};

static const struct splash_plugin_header *go_entry(const struct splash_host *host)
{
    (void)host;
    return &go_plugin.header;
}

SPLASH_PLUGIN_DEFINE(family_gpt_oss, go_entry)
