/* The template globals: Jinja2's range, dict and namespace, and transformers' raise_exception
 * and strftime_now. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "server/chat/jinja_internal.h"

enum jj_global {
    G_RANGE,
    G_DICT,
    G_NAMESPACE,
    G_RAISE_EXCEPTION,
    G_STRFTIME_NOW,
};

static const char *const global_names[] = {
    [G_RANGE] = "range",
    [G_DICT] = "dict",
    [G_NAMESPACE] = "namespace",
    [G_RAISE_EXCEPTION] = "raise_exception",
    [G_STRFTIME_NOW] = "strftime_now",
};

bool jj_global_lookup(struct jj_ctx *c, const char *name, struct jj_value *out)
{
    for (size_t i = 0; i < sizeof global_names / sizeof *global_names; i++) {
        if (strcmp(global_names[i], name) != 0)
            continue;
        struct jj_func *fn = jj_alloc(c, sizeof *fn);
        fn->kind = JJ_FN_GLOBAL;
        fn->id = (int)i;
        fn->name = global_names[i];
        *out = (struct jj_value){.kind = JJ_FUNC, .u.fn = fn};
        return true;
    }
    return false;
}

static int64_t range_arg(struct jj_ctx *c, struct jj_value v)
{
    if (v.kind == JJ_INT)
        return v.u.i;
    if (v.kind == JJ_BOOL)
        return v.u.b;
    jj_fail(c, JJ_FAIL_RUNTIME, "'%s' object cannot be interpreted as an integer",
            jj_type_name(v));
}

static struct jj_value range(struct jj_ctx *c, struct jj_args *a)
{
    int64_t start = 0, stop, step = 1;
    if (a->n_pos == 1) {
        stop = range_arg(c, a->pos[0]);
    } else if (a->n_pos == 2 || a->n_pos == 3) {
        start = range_arg(c, a->pos[0]);
        stop = range_arg(c, a->pos[1]);
        if (a->n_pos == 3)
            step = range_arg(c, a->pos[2]);
    } else {
        jj_fail(c, JJ_FAIL_RUNTIME, "range expected 1 to 3 arguments, got %zu", a->n_pos);
    }
    if (step == 0)
        jj_fail(c, JJ_FAIL_RUNTIME, "range() arg 3 must not be zero");
    struct jj_list *l = jj_list_new(c, 0);
    /* the sandbox's MAX_RANGE */
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (l->n >= 100000)
            jj_fail(c, JJ_FAIL_LIMIT, "Range too big. The sandbox blocks ranges larger "
                    "than MAX_RANGE (100000).");
        jj_list_push(c, l, jj_int(i));
        if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step))
            break;
    }
    return jj_list_value(l);
}

static struct jj_value make_dict(struct jj_ctx *c, struct jj_args *a, const char *what)
{
    struct jj_dict *d = jj_dict_new(c, a->n_kw);
    if (a->n_pos > 1)
        jj_fail(c, JJ_FAIL_RUNTIME, "%s expected at most 1 argument, got %zu", what,
                a->n_pos);
    if (a->n_pos == 1) {
        struct jj_value src = a->pos[0];
        if (src.kind == JJ_DICT || src.kind == JJ_NS) {
            for (size_t i = 0; i < src.u.dict->n; i++)
                jj_dict_set(c, d, src.u.dict->keys[i], src.u.dict->vals[i]);
        } else {
            struct jj_list *pairs = jj_iterate(c, src);
            for (size_t i = 0; i < pairs->n; i++) {
                struct jj_list *p = jj_iterate(c, pairs->items[i]);
                if (p->n != 2)
                    jj_fail(c, JJ_FAIL_RUNTIME, "dictionary update sequence element "
                            "#%zu has length %zu; 2 is required", i, p->n);
                jj_dict_set(c, d, p->items[0], p->items[1]);
            }
        }
    }
    for (size_t k = 0; k < a->n_kw; k++)
        jj_dict_set(c, d, jj_str(a->kw_names[k], strlen(a->kw_names[k])), a->kw[k]);
    return jj_dict_value(d);
}

struct jj_value jj_call_global(struct jj_ctx *c, struct jj_func *fn, struct jj_args *a)
{
    switch ((enum jj_global)fn->id) {
    case G_RANGE: return range(c, a);
    case G_DICT: return make_dict(c, a, "dict");
    case G_NAMESPACE: {
        struct jj_value d = make_dict(c, a, "namespace");
        d.kind = JJ_NS;
        return d;
    }
    case G_RAISE_EXCEPTION: {
        struct jj_value *msg = jj_arg(a, 0, "message");
        struct jj_value s = msg ? jj_to_str(c, *msg) : jj_str("", 0);
        jj_fail(c, JJ_FAIL_RAISED, "%.*s", (int)(s.u.s.n > 4000 ? 4000 : s.u.s.n), s.u.s.p);
    }
    case G_STRFTIME_NOW: {
        struct jj_value *fmt = jj_arg(a, 0, "format");
        if (!fmt || fmt->kind != JJ_STR)
            jj_fail(c, JJ_FAIL_RUNTIME, "strftime_now needs a format string");
        char f[256], out[512];
        snprintf(f, sizeof f, "%.*s", (int)(fmt->u.s.n > 255 ? 255 : fmt->u.s.n), fmt->u.s.p);
        time_t t = (time_t)c->now;
        struct tm tm;
        localtime_r(&t, &tm);
        size_t n = f[0] ? strftime(out, sizeof out, f, &tm) : 0;
        char *p = jj_alloc(c, n + 1);
        memcpy(p, out, n);
        return jj_str(p, n);
    }
    }
    jj_fail(c, JJ_FAIL_RUNTIME, "unknown global");
}
