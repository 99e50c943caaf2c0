/* The Flint family plugin (GGUF architecture flint): claims, the header's verdict with its
 * flat configuration, the declaration list and the vtable over model.c, cache.c and
 * forward.c. Its models speak the FLINT chat format. */
#include <stdio.h>
#include <string.h>

#include "families/flint/flint.h"
#include "splash/plugin.h"

static enum splash_status fl_check_config(const struct splash_host *host,
                                          const struct splash_meta *m,
                                          struct splash_family_verdict *v, struct splash_err *err)
{
    memset(v, 0, sizeof *v);
    const char *arch = NULL;
    if (host->meta->source(m) != SPLASH_META_GGUF ||
        host->meta->get_str(m, "general.architecture", &arch, NULL) || strcmp(arch, FLINT_ARCH))
        return SPLASH_OK;
    struct flint_config c;
    enum splash_status st = flint_config_read(host, m, &c, err);
    if (st)
        return st;
    v->score = 100;
    snprintf(v->architecture, sizeof v->architecture, "Flint (%s)", FLINT_ARCH);
    flint_config_summary(&c, v->summary, sizeof v->summary);
    snprintf(v->chat_format, sizeof v->chat_format, "flint");
    return flint_text_config(&c, v->text_config, sizeof v->text_config, err);
}

static enum splash_status fl_declare_tensors(const struct splash_host *host,
                                             const struct splash_meta *m, splash_decl_emit_fn emit,
                                             void *ctx, struct splash_err *err)
{
    return flint_declare(host, m, NULL, emit, ctx, err);
}

static enum splash_status fl_model_create(const struct splash_host *host,
                                          const struct splash_meta *m,
                                          const struct splash_model_opts *opts, void **model,
                                          struct splash_err *err)
{
    struct flint_model *fm;
    enum splash_status st = flint_model_create(host, m, opts, &fm, err);
    if (!st)
        *model = fm;
    return st;
}

static void fl_model_destroy(void *model)
{
    flint_model_destroy(model);
}

static void fl_model_info(const void *model, struct splash_model_info *info)
{
    flint_model_info(model, info);
}

static enum splash_status fl_seq_create(void *model, void **seq, struct splash_err *err)
{
    struct flint_seq *s;
    enum splash_status st = flint_seq_create(model, &s, err);
    if (!st)
        *seq = s;
    return st;
}

static void fl_seq_destroy(void *model, void *seq)
{
    flint_seq_destroy(model, seq);
}

static enum splash_status fl_seq_truncate(void *model, void *seq, int32_t n_keep,
                                          struct splash_err *err)
{
    return flint_seq_truncate(model, seq, n_keep, err);
}

static enum splash_status fl_forward(void *model, const struct splash_lane *lanes, int32_t n_lanes,
                                     struct splash_err *err)
{
    return flint_forward(model, lanes, NULL, n_lanes, NULL, err);
}

static enum splash_status fl_forward_taps(void *model, const struct splash_lane *lanes,
                                          int32_t n_lanes, const struct splash_taps *taps,
                                          struct splash_err *err)
{
    return flint_forward(model, lanes, NULL, n_lanes, taps, err);
}

static enum splash_status fl_forward_runs(void *model, const struct splash_lane *lanes,
                                          const struct splash_lane_runs *runs, int32_t n_lanes,
                                          const struct splash_taps *taps, struct splash_err *err)
{
    return flint_forward(model, lanes, runs, n_lanes, taps, err);
}

static uint64_t fl_seq_saved_bytes(const void *model, int32_t n_tokens)
{
    return flint_seq_saved_bytes(model, n_tokens);
}

static enum splash_status fl_seq_save(void *model, const void *seq,
                                      int (*write)(void *ctx, const void *bytes, size_t n),
                                      void *ctx, struct splash_err *err)
{
    return flint_seq_save(model, seq, write, ctx, err);
}

static enum splash_status fl_seq_load(void *model, const void *buf, uint64_t size, void **seq,
                                      struct splash_err *err)
{
    struct flint_seq *s;
    enum splash_status st = flint_seq_load(model, buf, size, &s, err);
    if (!st)
        *seq = s;
    return st;
}

static enum splash_status fl_seq_save_page(void *model, const void *seq, int64_t page,
                                           int (*write)(void *ctx, const void *bytes, size_t n),
                                           void *ctx, struct splash_err *err)
{
    return flint_seq_save_page(model, seq, page, write, ctx, err);
}

static uint64_t fl_seq_rest_bytes(const void *model, int32_t n_tokens)
{
    return flint_seq_rest_bytes(model, n_tokens);
}

static enum splash_status fl_seq_save_rest(void *model, const void *seq,
                                           int (*write)(void *ctx, const void *bytes, size_t n),
                                           void *ctx, struct splash_err *err)
{
    return flint_seq_save_rest(model, seq, write, ctx, err);
}

static enum splash_status fl_seq_load_parts(void *model, const void *const *pages,
                                            int64_t n_pages, const void *rest,
                                            uint64_t rest_size, void **seq,
                                            struct splash_err *err)
{
    struct flint_seq *s;
    enum splash_status st = flint_seq_load_parts(model, pages, n_pages, rest, rest_size, &s, err);
    if (!st)
        *seq = s;
    return st;
}

static enum splash_status fl_seq_fork(void *model, const void *src, int32_t n_tokens, void **dst,
                                      struct splash_err *err)
{
    struct flint_seq *s;
    enum splash_status st = flint_seq_fork(model, src, n_tokens, &s, err);
    if (!st)
        *dst = s;
    return st;
}

/* Speculative decoding's verify rows: Flint keeps no recurrent state, and a truncation
 * drops KV past the kept rows exactly (later positions are rewritten when fed again), so
 * arming needs nothing saved. */
static enum splash_status fl_seq_keep_rows(void *model, void *seq, int32_t n_rows,
                                           struct splash_err *err)
{
    if (n_rows < 0 || n_rows > 15)
        return splash_err_set(err, SPLASH_ERR_INVALID, "keep rows: %d (0 to 15)", n_rows);
    return SPLASH_OK;
}

static uint64_t fl_cache_bytes(const void *model)
{
    return ((const struct flint_model *)model)->cache_bytes;
}

static const char *const fl_gguf_architectures[] = {FLINT_ARCH, NULL};
static const char *const fl_model_types[] = {NULL};

static const struct splash_family_plugin fl_plugin = {
    .header = SPLASH_PLUGIN_HEADER_INIT(SPLASH_PLUGIN_FAMILY, "flint", "0.1.0",
                                        struct splash_family_plugin),
    .gguf_architectures = fl_gguf_architectures,
    .model_types = fl_model_types,
    .check_config = fl_check_config,
    .declare_tensors = fl_declare_tensors,
    .model_create = fl_model_create,
    .model_destroy = fl_model_destroy,
    .model_info = fl_model_info,
    .seq_create = fl_seq_create,
    .seq_destroy = fl_seq_destroy,
    .seq_truncate = fl_seq_truncate,
    .forward = fl_forward,
    .seq_fork = fl_seq_fork,
    .cache_bytes = fl_cache_bytes,
    .forward_taps = fl_forward_taps,
    .seq_keep_rows = fl_seq_keep_rows,
    .forward_runs = fl_forward_runs,
    .seq_saved_bytes = fl_seq_saved_bytes,
    .seq_save = fl_seq_save,
    .seq_load = fl_seq_load,
    .seq_save_page = fl_seq_save_page,
    .seq_rest_bytes = fl_seq_rest_bytes,
    .seq_save_rest = fl_seq_save_rest,
    .seq_load_parts = fl_seq_load_parts,
    .presets = flint_presets,
};

static const struct splash_plugin_header *fl_entry(const struct splash_host *host)
{
    (void)host;
    return &fl_plugin.header;
}

SPLASH_PLUGIN_DEFINE(family_flint, fl_entry)
