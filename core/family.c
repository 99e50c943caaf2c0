/* The family vtable behind one set of wrappers (core/family.h). */
#include "core/family.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/meta.h"
#include "core/registry.h"

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* ---- selection ------------------------------------------------------------ */

static const char *meta_architecture(const struct splash_meta *m, char *buf, size_t size)
{
    const struct splash_meta_api *api = splash_meta_api_get();
    const char *arch = NULL;
    struct splash_err err;
    if (m->source == SPLASH_META_GGUF) {
        if (api->get_str(m, "general.architecture", &arch, &err) != SPLASH_OK)
            return NULL;
    } else if (api->get_str(m, "text_config.model_type", &arch, &err) != SPLASH_OK &&
               api->get_str(m, "model_type", &arch, &err) != SPLASH_OK) {
        return NULL;
    }
    snprintf(buf, size, "%s", arch);
    return buf;
}

static int claims(const struct splash_family_plugin *f, int source, const char *arch)
{
    const char *const *list = source == SPLASH_META_GGUF ? f->gguf_architectures : f->model_types;
    for (size_t i = 0; list && list[i]; i++)
        if (!strcmp(list[i], arch))
            return 1;
    return 0;
}

enum splash_status splash_family_select(const struct splash_registry *r, const struct splash_meta *m,
                                        const struct splash_family_plugin **family,
                                        struct splash_family_verdict *verdict,
                                        struct splash_err *err)
{
    char arch[128];
    if (!meta_architecture(m, arch, sizeof arch))
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s is missing", base_name(m->path),
                              m->source == SPLASH_META_GGUF ? "general.architecture" : "model_type");
    const struct splash_family_plugin *best = NULL, *tie = NULL;
    struct splash_family_verdict best_v;
    int claimed = 0;
    for (size_t i = 0; i < splash_registry_n_families(r); i++) {
        const struct splash_family_plugin *f = splash_registry_family(r, i);
        if (!claims(f, m->source, arch))
            continue;
        claimed++;
        struct splash_family_verdict v;
        enum splash_status st = splash_family_check_config(r, f, m, &v, err);
        if (st != SPLASH_OK)
            return st; /* the family serves this architecture and names what is wrong */
        if (v.score <= 0)
            continue;
        if (!best || v.score > best_v.score) {
            best = f;
            best_v = v;
            tie = NULL;
        } else if (v.score == best_v.score) {
            tie = f;
        }
    }
    if (tie)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: plugins %s and %s claim architecture %s equally",
                              base_name(m->path), best->header.name, tie->header.name, arch);
    if (!best)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              claimed ? "%s: architecture %s: its family declined this configuration"
                                      : "%s: architecture %s is not one Splash serves (no family plugin claims it)",
                              base_name(m->path), arch);
    *family = best;
    *verdict = best_v;
    return SPLASH_OK;
}

/* ---- the vtable ----------------------------------------------------------- */

enum splash_status splash_family_check_config(const struct splash_registry *r,
                                              const struct splash_family_plugin *f,
                                              const struct splash_meta *m,
                                              struct splash_family_verdict *v,
                                              struct splash_err *err)
{
    memset(v, 0, sizeof *v);
    if (!f->check_config)
        return SPLASH_OK; /* declines */
    enum splash_status st = f->check_config(splash_registry_host(r), m, v, err);
    /* a plugin before ABI 1.3 names no chat format: its families spoke Qwen's */
    if (!st && v->score > 0 && !v->chat_format[0])
        snprintf(v->chat_format, sizeof v->chat_format, "qwen");
    return st;
}

/* Before ABI 1.3 a declaration carried a role where the accept mask is now; the roles'
 * type rules as masks (their numbers are frozen with those plugins). */
uint32_t splash_decl_role_accept(uint32_t role)
{
    static const uint32_t masks[] = {
        [1] = SPLASH_ACCEPT_LINEAR,                                        /* linear */
        [2] = SPLASH_ACCEPT_LINEAR,                                        /* token table */
        [3] = SPLASH_ACCEPT_FLOAT,                                         /* norm */
        [4] = SPLASH_ACCEPT_QUANT | SPLASH_ACCEPT_F32 | SPLASH_ACCEPT_BF16, /* router */
        [5] = SPLASH_ACCEPT_F32 | SPLASH_ACCEPT_BF16 | SPLASH_ACCEPT_Q8_0, /* shared-expert gate */
        [6] = SPLASH_ACCEPT_F32,                                           /* GDN conv, decay */
        [7] = SPLASH_ACCEPT_LINEAR | SPLASH_ACCEPT_F32,                    /* GDN alpha/beta */
        [8] = SPLASH_ACCEPT_F32,                                           /* attention sinks */
        [9] = SPLASH_ACCEPT_FLOAT,                                         /* any float */
    };
    return role < sizeof masks / sizeof masks[0] ? masks[role] : 0;
}

struct legacy_emit {
    splash_decl_emit_fn emit;
    void *ctx;
};

static void emit_legacy(void *ctx, const struct splash_tensor_decl *d)
{
    const struct legacy_emit *le = ctx;
    /* such a plugin's declaration ends before the members ABI 1.3 appended */
    struct splash_tensor_decl mapped = {0};
    memcpy(&mapped, d, offsetof(struct splash_tensor_decl, bind));
    mapped.accept = splash_decl_role_accept(d->accept);
    le->emit(le->ctx, &mapped);
}

enum splash_status splash_family_declare_tensors(const struct splash_registry *r,
                                                 const struct splash_family_plugin *f,
                                                 const struct splash_meta *m,
                                                 splash_decl_emit_fn emit, void *ctx,
                                                 struct splash_err *err)
{
    if (!f->declare_tensors)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "family plugin %s declares no tensors",
                              f->header.name);
    if (f->header.abi_minor < 3) {
        struct legacy_emit le = {.emit = emit, .ctx = ctx};
        return f->declare_tensors(splash_registry_host(r), m, emit_legacy, &le, err);
    }
    return f->declare_tensors(splash_registry_host(r), m, emit, ctx, err);
}

const struct splash_family_preset *splash_family_presets(const struct splash_family_plugin *f)
{
    return f->header.abi_minor >= 4 ? f->presets : NULL;
}

static int claims_architecture(const struct splash_family_plugin *f, const char *arch)
{
    for (const char *const *a = f->gguf_architectures; a && *a; a++)
        if (!strcmp(*a, arch))
            return 1;
    return 0;
}

static const char *preset_value_fault(const struct splash_preset_value *v)
{
    if (v->kind < SPLASH_PRESET_U32 || v->kind > SPLASH_PRESET_BOOLS)
        return "an unknown kind";
    if (v->kind == SPLASH_PRESET_STR && !v->str)
        return "no string";
    if (v->kind >= SPLASH_PRESET_U32S &&
        (!v->nums || v->n < 1 || v->n > SPLASH_PRESET_MAX_ARRAY))
        return "an array of no elements or more than SPLASH_PRESET_MAX_ARRAY";
    return NULL;
}

enum splash_status splash_family_presets_check(const struct splash_family_plugin *f, char *why,
                                               size_t why_size)
{
    const struct splash_family_preset *p = splash_family_presets(f);
    for (; p && p->name; p++) {
        if (!p->architecture || !claims_architecture(f, p->architecture)) {
            snprintf(why, why_size, "preset %s: architecture %s is not one the family claims",
                     p->name, p->architecture ? p->architecture : "(none)");
            return SPLASH_ERR_INVALID;
        }
        if (!p->values || p->n_vocab < 1) {
            snprintf(why, why_size, "preset %s: no values or no vocabulary", p->name);
            return SPLASH_ERR_INVALID;
        }
        for (const struct splash_preset_value *v = p->values; v->key; v++) {
            const char *fault = preset_value_fault(v);
            if (fault) {
                snprintf(why, why_size, "preset %s: %s has %s", p->name, v->key, fault);
                return SPLASH_ERR_INVALID;
            }
        }
    }
    return SPLASH_OK;
}

enum splash_status splash_family_model_create(const struct splash_registry *r,
                                              const struct splash_family_plugin *f,
                                              const struct splash_meta *m,
                                              const struct splash_model_opts *opts, void **model,
                                              struct splash_model_info *info,
                                              struct splash_err *err)
{
    if (!f->model_create || !f->forward || !f->seq_create || !f->seq_destroy ||
        !f->model_destroy)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "family plugin %s cannot run models",
                              f->header.name);
    enum splash_status st = f->model_create(splash_registry_host(r), m, opts, model, err);
    if (st)
        return st;
    memset(info, 0, sizeof *info);
    if (f->model_info)
        f->model_info(*model, info);
    return SPLASH_OK;
}

void splash_family_model_destroy(const struct splash_family_plugin *f, void *model)
{
    if (model)
        f->model_destroy(model);
}

enum splash_status splash_family_seq_create(const struct splash_family_plugin *f, void *model,
                                            void **seq, struct splash_err *err)
{
    return f->seq_create(model, seq, err);
}

void splash_family_seq_destroy(const struct splash_family_plugin *f, void *model, void *seq)
{
    if (seq)
        f->seq_destroy(model, seq);
}

enum splash_status splash_family_seq_truncate(const struct splash_family_plugin *f, void *model,
                                              void *seq, int32_t n_keep, struct splash_err *err)
{
    if (!f->seq_truncate)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "family plugin %s cannot truncate a sequence",
                              f->header.name);
    return f->seq_truncate(model, seq, n_keep, err);
}

enum splash_status splash_family_forward(const struct splash_family_plugin *f, void *model,
                                         const struct splash_lane *lanes, int32_t n_lanes,
                                         struct splash_err *err)
{
    return f->forward(model, lanes, n_lanes, err);
}

/* ABI 1.2 prefix-caching members; older plugins: no fork (every prompt is prefilled
 * whole), the cache's bytes counted by the caller. */
int splash_family_can_fork(const struct splash_family_plugin *f)
{
    return f->seq_fork != NULL;
}

enum splash_status splash_family_seq_fork(const struct splash_family_plugin *f, void *model,
                                          const void *src, int32_t n_tokens, void **dst,
                                          struct splash_err *err)
{
    if (!f->seq_fork)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "family plugin %s predates ABI 1.2: sequences cannot be forked",
                              f->header.name);
    return f->seq_fork(model, src, n_tokens, dst, err);
}

int splash_family_expert_stats(const struct splash_family_plugin *f, const void *model,
                               struct splash_expert_stats *out)
{
    memset(out, 0, sizeof *out);
    return f->expert_stats ? f->expert_stats(model, out) : 0;
}

uint64_t splash_family_expert_resize(const struct splash_family_plugin *f, void *model,
                                     int32_t grow, uint64_t max_bytes)
{
    return f->header.abi_minor >= 5 && f->expert_resize ? f->expert_resize(model, grow, max_bytes)
                                                        : 0;
}

uint64_t splash_family_cache_bytes(const struct splash_family_plugin *f, const void *model,
                                   uint64_t counted)
{
    return f->cache_bytes ? f->cache_bytes(model) : counted;
}

/* ABI 1.3: the draft's taps. */
int splash_family_has_taps(const struct splash_family_plugin *f)
{
    return f->forward_taps != NULL;
}

enum splash_status splash_family_forward_taps(const struct splash_family_plugin *f, void *model,
                                              const struct splash_lane *lanes, int32_t n_lanes,
                                              const struct splash_taps *taps,
                                              struct splash_err *err)
{
    if (!taps)
        return f->forward(model, lanes, n_lanes, err);
    if (!f->forward_taps)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "family plugin %s writes no draft taps (it predates ABI 1.3)",
                              f->header.name);
    return f->forward_taps(model, lanes, n_lanes, taps, err);
}

/* ABI 1.3: a family without it cannot drop a verify pass's rejected rows; the engine
 * then decodes without speculation. */
int splash_family_can_keep_rows(const struct splash_family_plugin *f)
{
    return f->seq_keep_rows != NULL;
}

enum splash_status splash_family_seq_keep_rows(const struct splash_family_plugin *f, void *model,
                                               void *seq, int32_t n_rows, struct splash_err *err)
{
    if (!f->seq_keep_rows)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "family plugin %s predates ABI 1.3: a verify pass's rows cannot be "
                              "dropped",
                              f->header.name);
    return f->seq_keep_rows(model, seq, n_rows, err);
}

/* ABI 1.3: several runs of a lane in one step. */
int splash_family_has_runs(const struct splash_family_plugin *f)
{
    return f->forward_runs != NULL;
}

enum splash_status splash_family_forward_runs(const struct splash_family_plugin *f, void *model,
                                              const struct splash_lane *lanes,
                                              const struct splash_lane_runs *runs,
                                              int32_t n_lanes, const struct splash_taps *taps,
                                              struct splash_err *err)
{
    if (!f->forward_runs)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "family plugin %s predates ABI 1.3: one run per forward call",
                              f->header.name);
    return f->forward_runs(model, lanes, runs, n_lanes, taps, err);
}

/* ABI 1.3: sequences as bytes (the SSD tier); an older plugin has no SSD tier. */
int splash_family_can_save(const struct splash_family_plugin *f)
{
    return f->seq_saved_bytes && f->seq_save && f->seq_load;
}

uint64_t splash_family_seq_saved_bytes(const struct splash_family_plugin *f, const void *model,
                                       int32_t n_tokens)
{
    return f->seq_saved_bytes ? f->seq_saved_bytes(model, n_tokens) : 0;
}

enum splash_status splash_family_seq_save(const struct splash_family_plugin *f, void *model,
                                          const void *seq,
                                          int (*write)(void *ctx, const void *bytes, size_t n),
                                          void *ctx, struct splash_err *err)
{
    if (!f->seq_save)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "family plugin %s predates ABI 1.3: sequences cannot be saved",
                              f->header.name);
    return f->seq_save(model, seq, write, ctx, err);
}

enum splash_status splash_family_seq_load(const struct splash_family_plugin *f, void *model,
                                          const void *buf, uint64_t size, void **seq,
                                          struct splash_err *err)
{
    if (!f->seq_load)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "family plugin %s predates ABI 1.3: sequences cannot be loaded",
                              f->header.name);
    return f->seq_load(model, buf, size, seq, err);
}

int splash_family_saves_parts(const struct splash_family_plugin *f)
{
    return f->header.abi_minor >= 6 && f->seq_save_page && f->seq_rest_bytes &&
           f->seq_save_rest && f->seq_load_parts;
}

enum splash_status splash_family_seq_save_page(const struct splash_family_plugin *f, void *model,
                                               const void *seq, int64_t page,
                                               int (*write)(void *ctx, const void *bytes,
                                                            size_t n),
                                               void *ctx, struct splash_err *err)
{
    return f->seq_save_page(model, seq, page, write, ctx, err);
}

uint64_t splash_family_seq_rest_bytes(const struct splash_family_plugin *f, const void *model,
                                      int32_t n_tokens)
{
    return f->seq_rest_bytes(model, n_tokens);
}

enum splash_status splash_family_seq_save_rest(const struct splash_family_plugin *f, void *model,
                                               const void *seq,
                                               int (*write)(void *ctx, const void *bytes,
                                                            size_t n),
                                               void *ctx, struct splash_err *err)
{
    return f->seq_save_rest(model, seq, write, ctx, err);
}

enum splash_status splash_family_seq_load_parts(const struct splash_family_plugin *f, void *model,
                                                const void *const *pages, int64_t n_pages,
                                                const void *rest, uint64_t rest_size, void **seq,
                                                struct splash_err *err)
{
    return f->seq_load_parts(model, pages, n_pages, rest, rest_size, seq, err);
}
