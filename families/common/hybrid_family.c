/* The family vtable members the Qwen families share, in the vtable's own signatures: both
 * plugins' descriptors point here, the dense family's for its declarations and model too. */
#include <stdio.h>
#include <string.h>

#include "families/common/hybrid.h"

/* The GGUF architecture, the trunk's key prefix ("" for a config.json, whose keys have none). */
static const char *file_arch(const struct splash_host *host, const struct splash_meta *m)
{
    const char *arch = "";
    if (host->meta->source(m) == SPLASH_META_GGUF &&
        host->meta->get_str(m, "general.architecture", &arch, NULL) != SPLASH_OK)
        arch = "";
    return arch;
}

enum splash_status hybrid_family_declare(const struct splash_host *host,
                                         const struct splash_meta *m, void *model,
                                         splash_decl_emit_fn emit, void *ctx,
                                         struct splash_err *err)
{
    return hybrid_declare(host, m, file_arch(host, m), &hybrid_ffn_dense, NULL, model, emit, ctx,
                          err);
}

enum splash_status hybrid_family_declare_tensors(const struct splash_host *host,
                                                 const struct splash_meta *m,
                                                 splash_decl_emit_fn emit, void *ctx,
                                                 struct splash_err *err)
{
    return hybrid_family_declare(host, m, NULL, emit, ctx, err);
}

enum splash_status hybrid_family_model_create(const struct splash_host *host,
                                              const struct splash_meta *m,
                                              const struct splash_model_opts *opts, void **model,
                                              struct splash_err *err)
{
    struct hybrid_model *hm;
    enum splash_status st = hybrid_model_create(host, m, file_arch(host, m), &hybrid_ffn_dense,
                                                hybrid_family_declare, opts, &hm, err);
    if (!st)
        *model = hm;
    return st;
}

void hybrid_family_model_destroy(void *model)
{
    hybrid_model_destroy(model);
}

void hybrid_family_model_info(const void *model, struct splash_model_info *info)
{
    hybrid_model_info(model, info);
}

enum splash_status hybrid_family_seq_create(void *model, void **seq, struct splash_err *err)
{
    struct hybrid_seq *s;
    enum splash_status st = hybrid_seq_create(model, &s, err);
    if (!st)
        *seq = s;
    return st;
}

void hybrid_family_seq_destroy(void *model, void *seq)
{
    hybrid_seq_destroy(model, seq);
}

enum splash_status hybrid_family_seq_truncate(void *model, void *seq, int32_t n_keep,
                                              struct splash_err *err)
{
    return hybrid_seq_truncate(model, seq, n_keep, err);
}

enum splash_status hybrid_family_forward(void *model, const struct splash_lane *lanes,
                                         int32_t n_lanes, struct splash_err *err)
{
    return hybrid_forward(model, lanes, n_lanes, err);
}

enum splash_status hybrid_family_forward_runs(void *model, const struct splash_lane *lanes,
                                              const struct splash_lane_runs *runs, int32_t n_lanes,
                                              const struct splash_taps *taps,
                                              struct splash_err *err)
{
    return hybrid_forward_runs(model, lanes, runs, n_lanes, taps, err);
}

enum splash_status hybrid_family_seq_fork(void *model, const void *src, int32_t n_tokens,
                                          void **dst, struct splash_err *err)
{
    struct hybrid_seq *s;
    enum splash_status st = hybrid_seq_fork(model, src, n_tokens, &s, err);
    if (!st)
        *dst = s;
    return st;
}

uint64_t hybrid_family_cache_bytes(const void *model)
{
    return hybrid_cache_bytes(model);
}

enum splash_status hybrid_family_forward_taps(void *model, const struct splash_lane *lanes,
                                              int32_t n_lanes, const struct splash_taps *taps,
                                              struct splash_err *err)
{
    return hybrid_forward_taps(model, lanes, n_lanes, taps, err);
}

enum splash_status hybrid_family_seq_keep_rows(void *model, void *seq, int32_t n_rows,
                                               struct splash_err *err)
{
    return hybrid_seq_keep_rows(model, seq, n_rows, err);
}
