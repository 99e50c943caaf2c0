/* Pre-download checkpoint rules: which quantization formats a safetensors target may
 * declare, that every projection, expert and the head is quantized, legacy Splash
 * packages, and gguf.require_quantized. */
#include "core/checkpoint_rules.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <ctype.h>
#include <fnmatch.h>
#include <limits.h>
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/meta.h"
#include "core/safetensors.h"

#define CT_MAX_REGEX 512
#define NAME_FMT "%.120s"

/* ---- module roles -------------------------------------------------------- */

static const char *const default_must[] = {
    "*_proj", "*.in_proj_*", "*.experts", "*.experts.*", "*.switch_mlp.*", "lm_head", "*.lm_head",
    NULL,
};
static const char *const default_may_skip[] = {
    "*embed_tokens", "*.mlp.gate", "*.router", "*shared_expert_gate",
    "*.in_proj_a",   "*.in_proj_b", "*.in_proj_ba", NULL,
};
static const char *const default_ignore[] = {
    "*vision_tower*", "*visual*", "*vision_model*", "*multi_modal_projector*",
    "mtp.*",          "*.mtp.*",  NULL,
};
static const struct splash_module_roles roles_default = {
    .must = default_must,
    .may_skip = default_may_skip,
    .ignore = default_ignore,
};

const struct splash_module_roles *splash_module_roles_default(void)
{
    return &roles_default;
}

static int glob_any(const char *const *globs, const char *name)
{
    for (; globs && *globs; globs++)
        if (fnmatch(*globs, name, 0) == 0)
            return 1;
    return 0;
}

int splash_module_ignored(const struct splash_module_roles *roles, const char *name)
{
    return glob_any((roles ? roles : &roles_default)->ignore, name);
}

int splash_module_must_quantize(const struct splash_module_roles *roles, const char *module)
{
    if (!roles)
        roles = &roles_default;
    return glob_any(roles->must, module) && !glob_any(roles->may_skip, module) &&
           !glob_any(roles->ignore, module);
}

/* ---- shared helpers ------------------------------------------------------- */

static const char *cfg_name(const struct splash_checkpoint_input *in)
{
    return in->config_name ? in->config_name : "config.json";
}

static const char *names_name(const struct splash_checkpoint_input *in)
{
    return in->names_file ? in->names_file : "the tensor names";
}

static const struct splash_module_roles *roles_of(const struct splash_checkpoint_input *in)
{
    return in->roles ? in->roles : &roles_default;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int is_head(const char *name)
{
    return fnmatch("lm_head", name, 0) == 0 || fnmatch("*.lm_head", name, 0) == 0;
}

static int tied_embeddings(const json_t *config)
{
    const json_t *text = json_object_get(config, "text_config");
    return json_is_true(json_object_get(config, "tie_word_embeddings")) ||
           json_is_true(json_object_get(text, "tie_word_embeddings"));
}

/* The modules a rule set must see quantized: from the tensor names (every module with
 * a .weight or .weight_packed that the roles require quantized), or, with the config
 * alone, the head unless the embeddings are tied. */
struct module_list {
    char **v;
    size_t n;
};

static void module_list_free(struct module_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

static enum splash_status required_modules(const struct splash_checkpoint_input *in,
                                           struct module_list *out, struct splash_err *err)
{
    out->v = NULL;
    out->n = 0;
    size_t cap = in->tensors ? in->n_tensors : 1;
    out->v = malloc((cap ? cap : 1) * sizeof *out->v);
    if (!out->v)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    if (!in->tensors) {
        if (!tied_embeddings(in->config) && splash_module_must_quantize(roles_of(in), "lm_head")) {
            if (!(out->v[0] = strdup("lm_head")))
                goto out_nomem;
            out->n = 1;
        }
        return SPLASH_OK;
    }
    for (size_t i = 0; i < in->n_tensors; i++) {
        const char *t = in->tensors[i];
        size_t len = strlen(t), cut;
        if (ends_with(t, ".weight"))
            cut = len - 7;
        else if (ends_with(t, ".weight_packed"))
            cut = len - 14;
        else
            continue;
        char *mod = strndup(t, cut);
        if (!mod)
            goto out_nomem;
        if (!splash_module_must_quantize(roles_of(in), mod)) {
            free(mod);
            continue;
        }
        out->v[out->n++] = mod;
    }
    /* a module holding both .weight and .weight_packed counts once */
    qsort(out->v, out->n, sizeof *out->v, cmp_str);
    size_t w = 0;
    for (size_t i = 0; i < out->n; i++) {
        if (w && strcmp(out->v[w - 1], out->v[i]) == 0)
            free(out->v[i]);
        else
            out->v[w++] = out->v[i];
    }
    out->n = w;
    return SPLASH_OK;
out_nomem:
    module_list_free(out);
    return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
}

/* A JSON integer, or `def` when absent; 0 when present but not an integer. */
static int opt_int(const json_t *obj, const char *key, long long def, long long *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return 1;
    }
    if (!json_is_integer(v))
        return 0;
    *out = json_integer_value(v);
    return 1;
}

/* ---- MLX ------------------------------------------------------------------ */

/* Validates one mode/bits/group_size triple; `where` names it ("quantization" or
 * "quantization.MODULE"). */
static enum splash_status mlx_format(const struct splash_checkpoint_input *in, const char *where,
                                     const json_t *obj, struct splash_err *err)
{
    const json_t *mode_v = json_object_get(obj, "mode");
    const char *mode = "affine";
    if (mode_v && !json_is_null(mode_v)) {
        if (!json_is_string(mode_v))
            return splash_err_set(err, SPLASH_ERR_INVALID, "%s: " NAME_FMT ".mode must be a string",
                                  cfg_name(in), where);
        mode = json_string_value(mode_v);
    }
    long long def_bits, def_group;
    if (!strcmp(mode, "affine")) {
        def_bits = 4;
        def_group = 64;
    } else if (!strcmp(mode, "mxfp4")) {
        def_bits = 4;
        def_group = 32;
    } else if (!strcmp(mode, "nvfp4")) {
        def_bits = 4;
        def_group = 16;
    } else {
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: " NAME_FMT ": mode %.32s is not supported (affine, mxfp4 or "
                              "nvfp4)",
                              cfg_name(in), where, mode);
    }
    long long bits, group;
    if (!opt_int(obj, "bits", def_bits, &bits) || !opt_int(obj, "group_size", def_group, &group))
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: " NAME_FMT ": bits and group_size must be integers",
                              cfg_name(in), where);
    int ok;
    if (!strcmp(mode, "affine"))
        ok = (bits >= 2 && bits <= 6) || bits == 8 ? group == 32 || group == 64 || group == 128 : 0;
    else
        ok = bits == def_bits && group == def_group;
    if (ok)
        return SPLASH_OK;
    if (!strcmp(mode, "affine"))
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: " NAME_FMT ": affine %lld bits in groups of %lld is not "
                              "supported (2, 3, 4, 5, 6 or 8 bits in groups of 32, 64 or 128)",
                              cfg_name(in), where, bits, group);
    return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                          "%s: " NAME_FMT ": %s %lld bits in groups of %lld is not supported "
                          "(%s is %lld bits in groups of %lld)",
                          cfg_name(in), where, mode, bits, group, mode, def_bits, def_group);
}

static int mlx_global_key(const char *key)
{
    return !strcmp(key, "group_size") || !strcmp(key, "bits") || !strcmp(key, "mode") ||
           !strcmp(key, "quant_method");
}

static int has_name(char *const *sorted, size_t n, const char *name)
{
    return bsearch(&name, sorted, n, sizeof *sorted, cmp_str) != NULL;
}

enum splash_status splash_checkpoint_check_mlx(const struct splash_checkpoint_input *in,
                                               const json_t *q, struct splash_err *err)
{
    enum splash_status st;
    if (!json_is_object(q))
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: quantization must be an object",
                              cfg_name(in));
    if ((st = mlx_format(in, "quantization", q, err)))
        return st;
    const char *key;
    const json_t *value;
    json_object_foreach((json_t *)q, key, value) {
        if (mlx_global_key(key))
            continue;
        char where[192];
        snprintf(where, sizeof where, "quantization." NAME_FMT, key);
        if (json_is_false(value)) {
            if (splash_module_must_quantize(roles_of(in), key))
                return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                      "%s: %s: false, but projections, experts and the head "
                                      "load only quantized",
                                      cfg_name(in), where);
        } else if (json_is_object(value)) {
            /* a module's own entry wins; its mode defaults to affine */
            if ((st = mlx_format(in, where, value, err)))
                return st;
        } else if (!json_is_true(value)) {
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "%s: %s must be an object or false", cfg_name(in), where);
        }
    }
    if (!in->tensors)
        return SPLASH_OK;
    /* with the names known: every required module's weight comes with its scales */
    struct module_list mods;
    if ((st = required_modules(in, &mods, err)))
        return st;
    char **sorted = malloc((in->n_tensors ? in->n_tensors : 1) * sizeof *sorted);
    if (!sorted) {
        module_list_free(&mods);
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    }
    memcpy(sorted, in->tensors, in->n_tensors * sizeof *sorted);
    qsort(sorted, in->n_tensors, sizeof *sorted, cmp_str);
    for (size_t i = 0; i < mods.n && !st; i++) {
        char scales[512];
        int len = snprintf(scales, sizeof scales, "%s.scales", mods.v[i]);
        if (len < 0 || (size_t)len >= sizeof scales || !has_name(sorted, in->n_tensors, scales))
            st = splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                "%s: " NAME_FMT " is unquantized (no .scales), but projections, "
                                "experts and the head load only quantized",
                                names_name(in), mods.v[i]);
    }
    free(sorted);
    module_list_free(&mods);
    return st;
}

/* ---- Model Optimizer ------------------------------------------------------- */

/* A pattern covers a module it matches or one of whose dotted prefixes it matches. */
static int pattern_covers(const char *pattern, const char *module)
{
    if (fnmatch(pattern, module, 0) == 0)
        return 1;
    char buf[512];
    size_t len = strlen(module);
    if (len >= sizeof buf)
        return 0;
    memcpy(buf, module, len + 1);
    for (size_t i = len; i > 0; i--) {
        if (buf[i - 1] != '.')
            continue;
        buf[i - 1] = 0;
        if (fnmatch(pattern, buf, 0) == 0)
            return 1;
    }
    return 0;
}

static enum splash_status modelopt_algo(const struct splash_checkpoint_input *in,
                                        const char *layer, const json_t *algo_v,
                                        const json_t *group_v, struct splash_err *err)
{
    if (!json_is_string(algo_v))
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: quantization_config: " NAME_FMT ": quant_algo is missing",
                              cfg_name(in), layer);
    const char *algo = json_string_value(algo_v);
    if (!strcasecmp(algo, "FP8"))
        return SPLASH_OK;
    if (!strcasecmp(algo, "NVFP4") || !strcasecmp(algo, "W4A16_NVFP4")) {
        if (!group_v || json_is_null(group_v) ||
            (json_is_integer(group_v) && json_integer_value(group_v) == 16))
            return SPLASH_OK;
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: quantization_config: " NAME_FMT ": %s must be in groups of 16",
                              cfg_name(in), layer, algo);
    }
    return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                          "%s: quantization_config: " NAME_FMT ": quant_algo %.40s is not "
                          "supported (NVFP4 or W4A16_NVFP4 in groups of 16, or FP8 per tensor)",
                          cfg_name(in), layer, algo);
}

static const json_t *modelopt_ignore(const json_t *q)
{
    const json_t *ign = json_object_get(q, "ignore");
    return ign ? ign : json_object_get(q, "exclude_modules");
}

enum splash_status splash_checkpoint_check_modelopt(const struct splash_checkpoint_input *in,
                                                    const json_t *q, struct splash_err *err)
{
    enum splash_status st;
    const json_t *layers = json_object_get(q, "quantized_layers");
    const json_t *ignore = modelopt_ignore(q);
    if (layers && !json_is_object(layers))
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: quantization_config.quantized_layers must be an object",
                              cfg_name(in));
    if (ignore && !json_is_array(ignore))
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: quantization_config.ignore must be an array", cfg_name(in));
    for (size_t i = 0; ignore && i < json_array_size(ignore); i++)
        if (!json_is_string(json_array_get(ignore, i)))
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "%s: quantization_config.ignore[%zu] must be a string",
                                  cfg_name(in), i);
    if (layers) {
        const char *key;
        const json_t *entry;
        json_object_foreach((json_t *)layers, key, entry) {
            if (!json_is_object(entry))
                return splash_err_set(err, SPLASH_ERR_INVALID,
                                      "%s: quantization_config.quantized_layers." NAME_FMT
                                      " must be an object",
                                      cfg_name(in), key);
            const json_t *group = json_object_get(entry, "group_size");
            if ((st = modelopt_algo(in, key, json_object_get(entry, "quant_algo"),
                                    group ? group : json_object_get(q, "group_size"), err)))
                return st;
        }
    } else if ((st = modelopt_algo(in, "every layer", json_object_get(q, "quant_algo"),
                                   json_object_get(q, "group_size"), err))) {
        return st;
    }
    struct module_list mods;
    if ((st = required_modules(in, &mods, err)))
        return st;
    for (size_t i = 0; i < mods.n && !st; i++) {
        const char *mod = mods.v[i];
        if (layers) {
            if (!json_object_get(layers, mod))
                st = splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                    "%s: quantization_config: " NAME_FMT " is not a quantized "
                                    "layer, but projections, experts and the head must be",
                                    cfg_name(in), mod);
            continue;
        }
        for (size_t j = 0; ignore && j < json_array_size(ignore); j++) {
            const char *pat = json_string_value(json_array_get(ignore, j));
            if (pattern_covers(pat, mod)) {
                st = splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                    "%s: quantization_config: " NAME_FMT " is ignored (%.60s), "
                                    "but projections, experts and the head must be quantized",
                                    cfg_name(in), mod, pat);
                break;
            }
        }
    }
    module_list_free(&mods);
    if (st || in->tensors || layers)
        return st;
    /* config alone: an ignore entry that itself names a required module */
    for (size_t j = 0; ignore && j < json_array_size(ignore); j++) {
        const char *pat = json_string_value(json_array_get(ignore, j));
        if (splash_module_must_quantize(roles_of(in), pat) &&
            !(is_head(pat) && tied_embeddings(in->config)))
            return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                  "%s: quantization_config: " NAME_FMT " is ignored, but "
                                  "projections, experts and the head must be quantized",
                                  cfg_name(in), pat);
    }
    return SPLASH_OK;
}

/* ---- compressed-tensors ----------------------------------------------------- */

/* A target or ignore entry: a module name, re:REGEX matched from the name's start,
 * or the class Linear (which every projection, expert and head is). */
struct ct_matcher {
    const char *text;
    pcre2_code *re;
    int linear;
};

struct ct_group {
    const char *name;
    struct ct_matcher *targets;
    size_t n_targets;
};

struct ct_state {
    struct ct_group *groups;
    size_t n_groups;
    struct ct_matcher *ignore;
    size_t n_ignore;
    pcre2_match_context *mctx;
};

static void ct_state_free(struct ct_state *s)
{
    for (size_t g = 0; g < s->n_groups; g++) {
        for (size_t i = 0; i < s->groups[g].n_targets; i++)
            pcre2_code_free(s->groups[g].targets[i].re);
        free(s->groups[g].targets);
    }
    free(s->groups);
    for (size_t i = 0; i < s->n_ignore; i++)
        pcre2_code_free(s->ignore[i].re);
    free(s->ignore);
    pcre2_match_context_free(s->mctx);
}

static enum splash_status ct_compile(const struct splash_checkpoint_input *in, const char *where,
                                     const json_t *v, struct ct_matcher *m,
                                     struct splash_err *err)
{
    memset(m, 0, sizeof *m);
    if (!json_is_string(v))
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s must be a string", cfg_name(in),
                              where);
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    m->text = s;
    if (strncmp(s, "re:", 3) == 0) {
        if (len - 3 > CT_MAX_REGEX)
            return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                  "%s: %s: a regular expression of %zu bytes (at most %d)",
                                  cfg_name(in), where, len - 3, CT_MAX_REGEX);
        int code;
        PCRE2_SIZE off;
        m->re = pcre2_compile((PCRE2_SPTR)s + 3, len - 3, PCRE2_ANCHORED | PCRE2_UTF, &code, &off,
                              NULL);
        if (!m->re) {
            PCRE2_UCHAR msg[96];
            pcre2_get_error_message(code, msg, sizeof msg);
            return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: %.60s at offset %zu",
                                  cfg_name(in), where, (const char *)msg, (size_t)off);
        }
        return SPLASH_OK;
    }
    if (!strcmp(s, "Linear")) {
        m->linear = 1;
        return SPLASH_OK;
    }
    if (memchr(s, 0, len) || !*s || (isupper((unsigned char)s[0]) && !strchr(s, '.')))
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: %s: %.60s is not a module name, re: expression or Linear",
                              cfg_name(in), where, s);
    return SPLASH_OK;
}

/* 1 on a match, 0 on none, -1 when the expression gives up (match limits). */
static int ct_match(const struct ct_state *s, const struct ct_matcher *m, const char *module)
{
    if (m->linear)
        return 1;
    if (!m->re)
        return strcmp(m->text, module) == 0;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(m->re, NULL);
    if (!md)
        return -1;
    int rc = pcre2_match(m->re, (PCRE2_SPTR)module, strlen(module), 0, 0, md, s->mctx);
    pcre2_match_data_free(md);
    return rc >= 0 ? 1 : rc == PCRE2_ERROR_NOMATCH ? 0 : -1;
}

static enum splash_status ct_group_weights(const struct splash_checkpoint_input *in,
                                           const char *group, const json_t *g,
                                           const char *fmt, struct splash_err *err)
{
    char where[160];
    snprintf(where, sizeof where, "quantization_config.config_groups.%.80s", group);
    const json_t *w = json_object_get(g, "weights");
    if (!json_is_object(w))
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: %s: the group quantizes no weights",
                              cfg_name(in), where);
    const char *type = json_string_value(json_object_get(w, "type"));
    const char *strategy = json_string_value(json_object_get(w, "strategy"));
    const json_t *sym = json_object_get(w, "symmetric");
    const json_t *dyn = json_object_get(w, "dynamic");
    const json_t *actorder = json_object_get(w, "actorder");
    long long bits, group_size;
    if (!opt_int(w, "num_bits", -1, &bits) || !opt_int(w, "group_size", -1, &group_size))
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: %s: num_bits and group_size must be integers", cfg_name(in),
                              where);
    if (json_is_false(sym))
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: %s: asymmetric weights are not supported", cfg_name(in), where);
    if (dyn && !json_is_false(dyn) && !json_is_null(dyn))
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: %s: dynamic weight quantization is not supported",
                              cfg_name(in), where);
    if (actorder && !json_is_null(actorder) && !json_is_false(actorder))
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: %s: actorder reorders columns; weights must be in their "
                              "stored column order",
                              cfg_name(in), where);
    if (!strcmp(fmt, "nvfp4-pack-quantized")) {
        if (type && !strcmp(type, "float") && bits == 4 && strategy &&
            !strcmp(strategy, "tensor_group") && group_size == 16)
            return SPLASH_OK;
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: %s: nvfp4-pack-quantized must be float 4-bit by tensor_group "
                              "in groups of 16",
                              cfg_name(in), where);
    }
    if (type && !strcmp(type, "float") && bits == 8 && strategy &&
        (!strcmp(strategy, "channel") || !strcmp(strategy, "tensor")))
        return SPLASH_OK;
    return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                          "%s: %s: float-quantized must be float 8-bit by channel or tensor",
                          cfg_name(in), where);
}

static enum splash_status ct_parse(const struct splash_checkpoint_input *in, const json_t *q,
                                   struct ct_state *s, struct splash_err *err)
{
    enum splash_status st;
    const json_t *groups = json_object_get(q, "config_groups");
    const json_t *ignore = json_object_get(q, "ignore");
    const char *top_fmt = json_string_value(json_object_get(q, "format"));
    if (!json_is_object(groups) || json_object_size(groups) == 0)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: quantization_config.config_groups must be a non-empty object",
                              cfg_name(in));
    if (ignore && !json_is_null(ignore) && !json_is_array(ignore))
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: quantization_config.ignore must be an array", cfg_name(in));
    s->mctx = pcre2_match_context_create(NULL);
    s->groups = calloc(json_object_size(groups), sizeof *s->groups);
    s->ignore = calloc(json_array_size(ignore) + 1, sizeof *s->ignore);
    if (!s->mctx || !s->groups || !s->ignore)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    pcre2_set_match_limit(s->mctx, 100000);
    pcre2_set_depth_limit(s->mctx, 1000);
    const char *gname;
    const json_t *g;
    json_object_foreach((json_t *)groups, gname, g) {
        char where[192];
        snprintf(where, sizeof where, "quantization_config.config_groups.%.80s", gname);
        if (!json_is_object(g))
            return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s must be an object",
                                  cfg_name(in), where);
        const char *fmt = json_string_value(json_object_get(g, "format"));
        if (!fmt)
            fmt = top_fmt;
        if (!fmt || (strcmp(fmt, "nvfp4-pack-quantized") && strcmp(fmt, "float-quantized")))
            return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                  "%s: %s: format %.40s is not supported (nvfp4-pack-quantized or "
                                  "float-quantized)",
                                  cfg_name(in), where, fmt ? fmt : "(none)");
        if ((st = ct_group_weights(in, gname, g, fmt, err)))
            return st;
        const json_t *targets = json_object_get(g, "targets");
        if (!json_is_array(targets) || json_array_size(targets) == 0)
            return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: targets must be a non-empty "
                                  "array", cfg_name(in), where);
        struct ct_group *grp = &s->groups[s->n_groups++];
        grp->name = gname;
        if (!(grp->targets = calloc(json_array_size(targets), sizeof *grp->targets)))
            return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < json_array_size(targets); i++) {
            char what[224];
            snprintf(what, sizeof what, "%s.targets[%zu]", where, i);
            st = ct_compile(in, what, json_array_get(targets, i), &grp->targets[i], err);
            grp->n_targets = i + 1;
            if (st)
                return st;
        }
    }
    for (size_t i = 0; i < json_array_size(ignore); i++) {
        char what[64];
        snprintf(what, sizeof what, "quantization_config.ignore[%zu]", i);
        st = ct_compile(in, what, json_array_get(ignore, i), &s->ignore[i], err);
        s->n_ignore = i + 1;
        if (st)
            return st;
    }
    return SPLASH_OK;
}

static enum splash_status ct_regex_failed(const struct splash_checkpoint_input *in,
                                          const struct ct_matcher *m, const char *mod,
                                          struct splash_err *err)
{
    return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                          "%s: quantization_config: %.60s gives up matching " NAME_FMT,
                          cfg_name(in), m->text, mod);
}

enum splash_status
splash_checkpoint_check_compressed_tensors(const struct splash_checkpoint_input *in,
                                           const json_t *q, struct splash_err *err)
{
    struct ct_state s = {0};
    struct module_list mods = {0};
    enum splash_status st = ct_parse(in, q, &s, err);
    if (st)
        goto out_state;
    if ((st = required_modules(in, &mods, err)))
        goto out_state;
    for (size_t i = 0; i < mods.n && !st; i++) {
        const char *mod = mods.v[i];
        for (size_t j = 0; j < s.n_ignore && !st; j++) {
            int r = ct_match(&s, &s.ignore[j], mod);
            if (r < 0)
                st = ct_regex_failed(in, &s.ignore[j], mod, err);
            else if (r)
                st = splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                    "%s: quantization_config: " NAME_FMT " is ignored (%.60s), "
                                    "but projections, experts and the head must be quantized",
                                    cfg_name(in), mod, s.ignore[j].text);
        }
        int covered = 0;
        for (size_t g = 0; g < s.n_groups && !covered && !st; g++)
            for (size_t t = 0; t < s.groups[g].n_targets && !covered && !st; t++) {
                int r = ct_match(&s, &s.groups[g].targets[t], mod);
                if (r < 0)
                    st = ct_regex_failed(in, &s.groups[g].targets[t], mod, err);
                covered = r > 0;
            }
        if (!st && !covered)
            st = splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                "%s: quantization_config: " NAME_FMT " is the target of no "
                                "config group, but projections, experts and the head must be",
                                cfg_name(in), mod);
    }
    if (st || in->tensors)
        goto out_mods;
    /* config alone: an ignore entry that names a required module outright */
    for (size_t j = 0; j < s.n_ignore; j++)
        if (!s.ignore[j].re && !s.ignore[j].linear &&
            splash_module_must_quantize(roles_of(in), s.ignore[j].text) &&
            !(is_head(s.ignore[j].text) && tied_embeddings(in->config))) {
            st = splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                "%s: quantization_config: " NAME_FMT " is ignored, but "
                                "projections, experts and the head must be quantized",
                                cfg_name(in), s.ignore[j].text);
            break;
        }
out_mods:
    module_list_free(&mods);
out_state:
    ct_state_free(&s);
    return st;
}

/* ---- dispatch ------------------------------------------------------------- */

static const json_t *config_section(const json_t *config, const char *key)
{
    const json_t *v = json_object_get(config, key);
    if (!v)
        v = json_object_get(json_object_get(config, "text_config"), key);
    return v;
}

enum splash_status splash_checkpoint_check(const struct splash_checkpoint_input *in, int *kind,
                                           struct splash_err *err)
{
    if (!json_is_object(in->config))
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: not a JSON object", cfg_name(in));
    const json_t *qc = config_section(in->config, "quantization_config");
    const json_t *mlx = config_section(in->config, "quantization");
    const json_t *method = json_object_get(qc, "quant_method");
    if (qc && !json_is_object(qc))
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: quantization_config must be an object", cfg_name(in));
    if (method) {
        const char *m = json_string_value(method);
        if (m && !strcmp(m, "modelopt")) {
            if (kind)
                *kind = SPLASH_CHECKPOINT_MODELOPT;
            return splash_checkpoint_check_modelopt(in, qc, err);
        }
        if (m && !strcmp(m, "compressed-tensors")) {
            if (kind)
                *kind = SPLASH_CHECKPOINT_COMPRESSED_TENSORS;
            return splash_checkpoint_check_compressed_tensors(in, qc, err);
        }
        if (!mlx)
            return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                  "%s: quantization_config.quant_method %.40s is not supported "
                                  "(MLX, modelopt or compressed-tensors)",
                                  cfg_name(in), m ? m : "(not a string)");
    }
    /* mlx-lm writes quantization, and a copy as quantization_config */
    if (!mlx && qc && !method)
        mlx = qc;
    if (!mlx)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: the checkpoint is not quantized; Splash loads quantized MLX, "
                              "Model Optimizer or compressed-tensors checkpoints",
                              cfg_name(in));
    if (kind)
        *kind = SPLASH_CHECKPOINT_MLX;
    return splash_checkpoint_check_mlx(in, mlx, err);
}

/* ---- Splash packages -------------------------------------------------------- */

static const struct {
    const char *marker, *mlx_model;
} package_models[] = {
    {"35B-A3B", "mlx-community/Qwen3.6-35B-A3B-4bit"},
    {"27B", "mlx-community/Qwen3.8-27B-4bit"},
};

static int mentions_splash(const json_t *v)
{
    const char *s = json_string_value(v);
    if (!s)
        return 0;
    for (; *s; s++)
        if (strncasecmp(s, "splash", 6) == 0)
            return 1;
    return 0;
}

int splash_checkpoint_is_package(const char *dir, char *mlx_model, size_t size)
{
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/manifest.json", dir) >= sizeof path)
        return 0;
    json_t *man = json_load_file(path, 0, NULL);
    if (!man)
        return 0;
    const json_t *repo = json_object_get(
        json_object_get(json_object_get(man, "upstream"), "target"), "repo_id");
    int is_package = mentions_splash(json_object_get(man, "format")) ||
                     mentions_splash(json_object_get(man, "package_format")) ||
                     json_is_string(repo);
    if (is_package && mlx_model && size) {
        const char *pick = json_string_value(repo);
        char *text = json_dumps(man, JSON_COMPACT);
        for (size_t i = 0; !pick && text && i < sizeof package_models / sizeof package_models[0];
             i++)
            if (strstr(text, package_models[i].marker))
                pick = package_models[i].mlx_model;
        snprintf(mlx_model, size, "%s",
                 pick ? pick
                      : "mlx-community/Qwen3.8-27B-4bit or mlx-community/Qwen3.6-35B-A3B-4bit");
        free(text);
    }
    json_decref(man);
    return is_package;
}

/* ---- the whole check of a directory ---------------------------------------------- */

struct name_set {
    const char **v;
    size_t n;
    json_t *owner;                       /* the index whose keys v points into */
    struct splash_safetensors **shards;  /* or the shard headers */
    size_t n_shards;
};

static void name_set_free(struct name_set *s)
{
    free(s->v);
    json_decref(s->owner);
    for (size_t i = 0; i < s->n_shards; i++)
        splash_safetensors_close(s->shards[i]);
    free(s->shards);
}

/* Tensor names from the index's weight_map, else from the shards' headers; none when
 * neither is present yet (config.json alone before a download). */
static enum splash_status gather_names(const char *dir, struct name_set *s, const char **source,
                                       struct splash_err *err)
{
    char path[PATH_MAX];
    struct stat sb;
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (stat(path, &sb) == 0) {
        json_error_t jerr;
        s->owner = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
        if (!s->owner)
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "model.safetensors.index.json: line %d: %s", jerr.line,
                                  jerr.text);
        json_t *map = json_object_get(s->owner, "weight_map");
        if (!json_is_object(map))
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "model.safetensors.index.json: weight_map must be an object");
        if (!(s->v = malloc((json_object_size(map) + 1) * sizeof *s->v)))
            return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
        const char *key;
        json_t *value;
        json_object_foreach(map, key, value)
            s->v[s->n++] = key;
        *source = "model.safetensors.index.json";
        return SPLASH_OK;
    }
    char **names;
    size_t n;
    struct splash_err lerr;
    if (splash_safetensors_list_shards(dir, &names, &n, &lerr))
        return SPLASH_OK; /* no weights here yet */
    enum splash_status st = SPLASH_OK;
    size_t total = 0;
    if (!(s->shards = calloc(n, sizeof *s->shards))) {
        st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
        goto out_names;
    }
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if ((st = splash_safetensors_open(path, SPLASH_SAFETENSORS_HEADERS_ONLY, &s->shards[i],
                                          err)))
            goto out_names;
        s->n_shards = i + 1;
        total += s->shards[i]->n_tensors;
    }
    if (!(s->v = malloc((total + 1) * sizeof *s->v))) {
        st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
        goto out_names;
    }
    for (size_t i = 0; i < s->n_shards; i++)
        for (size_t j = 0; j < s->shards[i]->n_tensors; j++)
            s->v[s->n++] = s->shards[i]->tensors[j].info.name;
    /* one file named as such; shards of other names by what they are */
    *source = n == 1 && !strcmp(names[0], "model.safetensors") ? "model.safetensors"
                                                               : "the safetensors headers";
out_names:
    free(names);
    return st;
}

/* Older Model Optimizer exports keep their quantization in hf_quant_config.json. */
static void merge_hf_quant_config(const char *dir, json_t *config)
{
    if (json_object_get(config, "quantization_config") || json_object_get(config, "quantization"))
        return;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/hf_quant_config.json", dir);
    json_t *hf = json_load_file(path, 0, NULL);
    if (!hf)
        return;
    json_t *q = json_object_get(hf, "quantization");
    if (json_is_object(q)) {
        json_t *copy = json_deep_copy(q);
        if (copy && json_object_set_new(copy, "quant_method", json_string("modelopt")) == 0)
            json_object_set(config, "quantization_config", copy);
        json_decref(copy);
    }
    json_decref(hf);
}

enum splash_status splash_check_checkpoint(const char *dir_or_config, int *kind,
                                           struct splash_err *err)
{
    struct stat sb;
    if (stat(dir_or_config, &sb) != 0)
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND, "%s: no such file or directory",
                              dir_or_config);
    int is_dir = S_ISDIR(sb.st_mode);
    char path[PATH_MAX];
    if (is_dir) {
        char mlx_model[160];
        if (splash_checkpoint_is_package(dir_or_config, mlx_model, sizeof mlx_model))
            return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                  "%.60s: a Splash package, a format this Splash no longer "
                                  "loads; serve %s instead",
                                  dir_or_config, mlx_model);
        if ((size_t)snprintf(path, sizeof path, "%s/config.json", dir_or_config) >= sizeof path)
            return splash_err_set(err, SPLASH_ERR_INVALID, "%s: path too long", dir_or_config);
    } else {
        snprintf(path, sizeof path, "%s", dir_or_config);
    }
    json_error_t jerr;
    json_t *config = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!config)
        return splash_err_set(err, SPLASH_ERR_INVALID, "config.json: line %d: %s", jerr.line,
                              jerr.text);
    enum splash_status st = SPLASH_OK;
    struct name_set names = {0};
    struct splash_checkpoint_input in = {.config = config, .config_name = "config.json"};
    if (is_dir) {
        merge_hf_quant_config(dir_or_config, config);
        if ((st = gather_names(dir_or_config, &names, &in.names_file, err)))
            goto out_names;
        if (names.v) {
            in.tensors = names.v;
            in.n_tensors = names.n;
        }
    }
    st = splash_checkpoint_check(&in, kind, err);
out_names:
    name_set_free(&names);
    json_decref(config);
    return st;
}

/* ---- gguf.require_quantized ------------------------------------------------- */

enum splash_status splash_gguf_require_quantized(const struct splash_meta *m,
                                                 struct splash_err *err)
{
    const struct splash_meta_api *api = splash_meta_api_get();
    double unquantized = 0, quantized = 0;
    for (size_t i = 0; i < api->n_tensors(m); i++) {
        const struct splash_tensor_info *t = api->tensor_at(m, i);
        double values = 1;
        for (int d = 0; d < 4; d++)
            values *= (double)t->ne[d];
        if (t->dtype == SPLASH_DTYPE_F32 || t->dtype == SPLASH_DTYPE_F16 ||
            t->dtype == SPLASH_DTYPE_BF16)
            unquantized += values;
        else if (t->dtype >= 0 && (t->dtype < 24 || t->dtype > 28))
            quantized += values; /* GGML 24..28 are the integer and F64 types */
    }
    if (unquantized <= quantized)
        return SPLASH_OK;
    const char *path = api->path(m);
    const char *slash = strrchr(path, '/');
    return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                          "%s: %.0f%% of its values are BF16, F16 or F32; Splash serves "
                          "quantized GGUFs: choose a quantized variant (such as Q4_K_M)",
                          slash ? slash + 1 : path,
                          100.0 * unquantized / (unquantized + quantized));
}
