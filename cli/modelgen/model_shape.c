/* make-model's shapes from the families' preset tables (see model_shape.h). */
#include "cli/modelgen/model_shape.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/family.h"
#include "core/registry.h"

/* ---- the presets of every family -------------------------------------------------- */

/* The i-th preset of all (families in registry order, each family's table in its own
 * order); NULL past the last. */
static const struct splash_family_preset *preset_at(const struct splash_registry *r, size_t i,
                                                    const struct splash_family_plugin **family)
{
    for (size_t f = 0; f < splash_registry_n_families(r); f++) {
        const struct splash_family_plugin *fp = splash_registry_family(r, f);
        for (const struct splash_family_preset *p = splash_family_presets(fp); p && p->name; p++)
            if (i-- == 0) {
                *family = fp;
                return p;
            }
    }
    return NULL;
}

size_t splash_model_shape_count(const struct splash_registry *r)
{
    const struct splash_family_plugin *f;
    size_t n = 0;
    while (preset_at(r, n, &f))
        n++;
    return n;
}

static enum splash_status copy_preset(const struct splash_family_preset *p,
                                      const struct splash_family_plugin *f,
                                      struct splash_model_shape *s, struct splash_err *err)
{
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", p->name);
    snprintf(s->arch, sizeof s->arch, "%s", p->architecture);
    snprintf(s->family, sizeof s->family, "%s", f->header.name);
    snprintf(s->about, sizeof s->about, "%s", p->about ? p->about : "");
    s->n_vocab = p->n_vocab;
    s->tied = p->tied;
    snprintf(s->chat_format, sizeof s->chat_format, "%s", p->chat_format ? p->chat_format : "");
    for (const struct splash_preset_value *v = p->values; v->key; v++) {
        if (s->n_values == SPLASH_MODEL_SHAPE_MAX_VALUES ||
            strlen(v->key) >= sizeof s->values[0].key ||
            (v->str && strlen(v->str) >= sizeof s->values[0].str))
            return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                  "preset %s (family %s): %s: more values, or longer, than "
                                  "make-model holds",
                                  p->name, f->header.name, v->key);
        struct splash_model_value *d = &s->values[s->n_values++];
        snprintf(d->key, sizeof d->key, "%s", v->key);
        d->kind = v->kind;
        d->num = v->num;
        if (v->kind >= SPLASH_PRESET_U32S) {
            d->n = v->n; /* at most SPLASH_PRESET_MAX_ARRAY: the loader checked */
            memcpy(d->nums, v->nums, v->n * sizeof *v->nums);
        }
        if (v->kind == SPLASH_PRESET_STR)
            snprintf(d->str, sizeof d->str, "%s", v->str);
    }
    return SPLASH_OK;
}

enum splash_status splash_model_shape_at(const struct splash_registry *r, size_t i,
                                         struct splash_model_shape *out, struct splash_err *err)
{
    const struct splash_family_plugin *f = NULL;
    const struct splash_family_preset *p = preset_at(r, i, &f);
    if (!p)
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND, "no preset %zu", i);
    return copy_preset(p, f, out, err);
}

static double preset_num(const struct splash_family_preset *p, const char *key)
{
    for (const struct splash_preset_value *v = p->values; v->key; v++)
        if (!strcmp(v->key, key))
            return v->kind >= SPLASH_PRESET_U32S ? v->nums[0] : v->num;
    return 0;
}

static int of_arch(const struct splash_family_preset *p, const struct splash_family_plugin *f,
                   const char *arch)
{
    return !arch || !strcmp(arch, p->architecture) || !strcmp(arch, f->header.name);
}

enum splash_status splash_model_shape_find(const struct splash_registry *r, const char *arch,
                                           const char *name, struct splash_model_shape *out,
                                           struct splash_err *err)
{
    const struct splash_family_preset *best = NULL, *p;
    const struct splash_family_plugin *best_f = NULL, *f;
    double best_size = 0;
    for (size_t i = 0; (p = preset_at(r, i, &f)); i++) {
        if (name) {
            if (strcmp(p->name, name))
                continue;
            if (!of_arch(p, f, arch))
                return splash_err_set(err, SPLASH_ERR_INVALID,
                                      "shape %s is of architecture %s (family %s), not %s",
                                      name, p->architecture, f->header.name, arch);
            return copy_preset(p, f, out, err);
        }
        double size = preset_num(p, "embedding_length") * preset_num(p, "block_count");
        if (of_arch(p, f, arch) && (!best || size < best_size)) {
            best = p;
            best_f = f;
            best_size = size;
        }
    }
    if (!best)
        return name ? splash_err_set(err, SPLASH_ERR_NOT_FOUND,
                                     "no shape named %s (--list shows them)", name)
                    : splash_err_set(err, SPLASH_ERR_NOT_FOUND,
                                     "no shape of architecture %s (--list shows them)",
                                     arch ? arch : "(none)");
    return copy_preset(best, best_f, out, err);
}

static struct splash_model_value *value_of(const struct splash_model_shape *s, const char *key)
{
    for (size_t i = 0; i < s->n_values; i++)
        if (!strcmp(s->values[i].key, key))
            return (struct splash_model_value *)&s->values[i];
    return NULL;
}

double splash_model_shape_get(const struct splash_model_shape *s, const char *key)
{
    const struct splash_model_value *v = value_of(s, key);
    if (!v)
        return 0;
    return v->kind >= SPLASH_PRESET_U32S ? (v->n ? v->nums[0] : 0) : v->num;
}

/* ---- --dims ------------------------------------------------------------------------ */

/* One number of kind (an array's element kind): integers in their type's range, bools 0
 * or 1, floats finite. */
static int parse_number(const char *s, size_t len, int32_t kind, double *out)
{
    char num[64];
    if (len == 0 || len >= sizeof num)
        return -1;
    memcpy(num, s, len);
    num[len] = 0;
    char *end;
    errno = 0;
    if (kind == SPLASH_PRESET_F32 || kind == SPLASH_PRESET_F32S) {
        double d = strtod(num, &end);
        if (end == num || *end || errno || !isfinite(d))
            return -1;
        *out = d;
        return 0;
    }
    long long v = strtoll(num, &end, 10);
    if (end == num || *end || errno)
        return -1;
    int is_bool = kind == SPLASH_PRESET_BOOL || kind == SPLASH_PRESET_BOOLS;
    int is_u32 = kind == SPLASH_PRESET_U32 || kind == SPLASH_PRESET_U32S;
    long long lo = is_bool ? 0 : is_u32 ? 0 : INT32_MIN;
    long long hi = is_bool ? 1 : is_u32 ? UINT32_MAX : INT32_MAX;
    if (v < lo || v > hi)
        return -1;
    *out = (double)v;
    return 0;
}

static enum splash_status set_value(struct splash_model_value *d, const char *v, size_t len,
                                    struct splash_err *err)
{
    if (d->kind == SPLASH_PRESET_STR) {
        if (len >= sizeof d->str)
            return splash_err_set(err, SPLASH_ERR_INVALID, "--dims: %s: too long", d->key);
        memcpy(d->str, v, len);
        d->str[len] = 0;
        return SPLASH_OK;
    }
    if (d->kind < SPLASH_PRESET_U32S) {
        if (parse_number(v, len, d->kind, &d->num))
            return splash_err_set(err, SPLASH_ERR_INVALID, "--dims: %s: '%.*s' is not a %s",
                                  d->key, (int)len, v,
                                  d->kind == SPLASH_PRESET_F32    ? "number"
                                  : d->kind == SPLASH_PRESET_BOOL ? "0 or 1"
                                                                  : "whole number in range");
        return SPLASH_OK;
    }
    double nums[SPLASH_PRESET_MAX_ARRAY];
    uint32_t n = 0;
    for (const char *p = v, *end = v + len; p <= end; n++) {
        const char *slash = memchr(p, '/', (size_t)(end - p));
        size_t item = slash ? (size_t)(slash - p) : (size_t)(end - p);
        if (n == SPLASH_PRESET_MAX_ARRAY || parse_number(p, item, d->kind, &nums[n]))
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "--dims: %s: '%.*s' is not up to %d numbers A/B/...", d->key,
                                  (int)len, v, SPLASH_PRESET_MAX_ARRAY);
        p += item + 1;
    }
    memcpy(d->nums, nums, n * sizeof *nums);
    d->n = n;
    return SPLASH_OK;
}

enum splash_status splash_model_shape_parse_dims(struct splash_model_shape *s, const char *dims,
                                                 struct splash_err *err)
{
    for (const char *p = dims; *p;) {
        const char *comma = strchr(p, ',');
        size_t item_len = comma ? (size_t)(comma - p) : strlen(p);
        const char *eq = memchr(p, '=', item_len);
        if (!eq)
            return splash_err_set(err, SPLASH_ERR_INVALID, "--dims: '%.*s' is not KEY=VALUE",
                                  (int)item_len, p);
        char key[64];
        size_t key_len = (size_t)(eq - p);
        snprintf(key, sizeof key, "%.*s", (int)(key_len < 63 ? key_len : 63), p);
        const char *v = eq + 1;
        size_t v_len = item_len - key_len - 1;
        struct splash_model_value *d = value_of(s, key);
        double x;
        enum splash_status st = SPLASH_OK;
        if (!strcmp(key, "vocab") || !strcmp(key, "tied")) {
            int tied = key[0] == 't';
            if (parse_number(v, v_len, tied ? SPLASH_PRESET_BOOL : SPLASH_PRESET_U32, &x))
                return splash_err_set(err, SPLASH_ERR_INVALID, "--dims: %s: '%.*s' is not %s",
                                      key, (int)v_len, v, tied ? "0 or 1" : "a number");
            if (tied)
                s->tied = (int32_t)x;
            else
                s->n_vocab = (int64_t)x;
        } else if (!d) {
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "--dims: %s is not a key of shape %s (%s.* keys as the "
                                  "preset writes them, vocab or tied)",
                                  key, s->name, s->arch);
        } else if ((st = set_value(d, v, v_len, err))) {
            return st;
        }
        p += item_len;
        if (*p == ',')
            p++;
    }
    return SPLASH_OK;
}
