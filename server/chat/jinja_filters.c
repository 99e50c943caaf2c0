/* Jinja2's builtin filters and tests, as the sandboxed chat-template environment has them. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/chat/jinja_internal.h"

typedef struct jj_value (*filter_fn)(struct jj_ctx *c, struct jj_value v, struct jj_args *a);

/* ---- helpers -------------------------------------------------------------------------------- */

static bool none_or_missing(const struct jj_value *v) { return !v || v->kind == JJ_NONE; }

static int64_t int_arg(struct jj_ctx *c, struct jj_value *v, int64_t dflt, const char *what)
{
    if (none_or_missing(v))
        return dflt;
    if (v->kind == JJ_INT)
        return v->u.i;
    if (v->kind == JJ_BOOL)
        return v->u.b;
    jj_fail(c, JJ_FAIL_RUNTIME, "%s must be an integer, not %s", what, jj_type_name(*v));
}

static struct jj_str str_of(struct jj_ctx *c, struct jj_value v)
{
    return jj_to_str(c, v).u.s;
}

/* Jinja's attribute paths: "a.b.0" reads a, then b, then item 0. */
static struct jj_value attr_path(struct jj_ctx *c, struct jj_value v, struct jj_value path)
{
    if (path.kind == JJ_INT)
        return jj_getitem(c, v, path);
    if (path.kind != JJ_STR)
        jj_fail(c, JJ_FAIL_RUNTIME, "attribute must be a string or an integer");
    const char *p = path.u.s.p, *end = p + path.u.s.n;
    while (p <= end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        size_t n = dot ? (size_t)(dot - p) : (size_t)(end - p);
        bool digits = n > 0;
        int64_t idx = 0;
        for (size_t i = 0; i < n; i++) {
            if (p[i] < '0' || p[i] > '9' || idx > INT64_MAX / 10 - 10)
                digits = false;
            else
                idx = idx * 10 + (p[i] - '0');
        }
        v = digits ? jj_getitem(c, v, jj_int(idx)) : jj_getitem(c, v, jj_str(p, n));
        if (!dot)
            break;
        p = dot + 1;
    }
    return v;
}

/* Lower-cases strings for the case-insensitive sorts (Jinja's ignore_case). */
static struct jj_value fold(struct jj_ctx *c, struct jj_value v, bool case_sensitive)
{
    if (!case_sensitive && v.kind == JJ_STR)
        return jj_str_case(c, v.u.s, 0);
    return v;
}

/* A stable merge sort: Python's sort is stable, and comparisons may fail the render. */
static void merge_sort(struct jj_ctx *c, struct jj_value *keys, size_t *idx, size_t *tmp,
                       size_t n)
{
    if (n < 2)
        return;
    size_t h = n / 2;
    merge_sort(c, keys, idx, tmp, h);
    merge_sort(c, keys, idx + h, tmp, n - h);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n)
        tmp[k++] = jj_compare(c, keys[idx[j]], keys[idx[i]]) < 0 ? idx[j++] : idx[i++];
    while (i < h)
        tmp[k++] = idx[i++];
    while (j < n)
        tmp[k++] = idx[j++];
    memcpy(idx, tmp, n * sizeof *idx);
}

static size_t *sorted_order(struct jj_ctx *c, struct jj_value *keys, size_t n, bool reverse)
{
    size_t *idx = jj_alloc(c, (n ? n : 1) * sizeof *idx);
    size_t *tmp = jj_alloc(c, (n ? n : 1) * sizeof *tmp);
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    if (reverse) {
        /* Python's reverse=True keeps equal items in order: sort the reversed list, reverse */
        for (size_t i = 0; i < n; i++)
            idx[i] = n - 1 - i;
        merge_sort(c, keys, idx, tmp, n);
        for (size_t i = 0; i < n / 2; i++) {
            size_t t = idx[i];
            idx[i] = idx[n - 1 - i];
            idx[n - 1 - i] = t;
        }
        return idx;
    }
    merge_sort(c, keys, idx, tmp, n);
    return idx;
}

/* ---- filters --------------------------------------------------------------------------------- */

static struct jj_value f_abs(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    (void)a;
    if (v.kind == JJ_INT)
        return jj_int(v.u.i < 0 ? -v.u.i : v.u.i);
    if (v.kind == JJ_BOOL)
        return jj_int(v.u.b);
    if (v.kind == JJ_FLOAT)
        return jj_float(fabs(v.u.f));
    jj_fail(c, JJ_FAIL_RUNTIME, "bad operand type for abs(): '%s'", jj_type_name(v));
}

static struct jj_value f_attr(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    struct jj_value *name = jj_arg(a, 0, "name");
    if (!name || name->kind != JJ_STR)
        jj_fail(c, JJ_FAIL_RUNTIME, "attr filter needs a name");
    return jj_getattr(c, v, name->u.s.p, name->u.s.n);
}

static struct jj_value f_capitalize(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    (void)a;
    return jj_str_case(c, str_of(c, v), 3);
}

static struct jj_value f_lower(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    (void)a;
    return jj_str_case(c, str_of(c, v), 0);
}

static struct jj_value f_upper(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    (void)a;
    return jj_str_case(c, str_of(c, v), 1);
}

static struct jj_value f_title(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    (void)a;
    return jj_str_case(c, str_of(c, v), 2);
}

static struct jj_value f_center(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    struct jj_str s = str_of(c, v);
    int64_t width = int_arg(c, jj_arg(a, 0, "width"), 80, "width");
    int64_t len = (int64_t)jj_utf8_count(s);
    if (width <= len)
        return jj_str(s.p, s.n);
    if (width > (int64_t)c->limits.max_output)
        jj_fail(c, JJ_FAIL_LIMIT, "center width too large");
    int64_t pad = width - len, left = pad / 2 + (pad & width & 1);
    struct jj_buf b = {0};
    for (int64_t i = 0; i < left; i++)
        jj_buf_putc(c, &b, ' ');
    jj_buf_put(c, &b, s.p, s.n);
    for (int64_t i = 0; i < pad - left; i++)
        jj_buf_putc(c, &b, ' ');
    return jj_buf_to_str(c, &b);
}

static struct jj_value f_default(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    struct jj_value *dflt = jj_arg(a, 0, "default_value");
    struct jj_value *boolean = jj_arg(a, 1, "boolean");
    (void)c;
    if (v.kind == JJ_UNDEFINED || (boolean && jj_truthy(*boolean) && !jj_truthy(v)))
        return dflt ? *dflt : jj_str("", 0);
    return v;
}

static struct jj_value f_length(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    (void)a;
    return jj_int(jj_length(c, v));
}

static struct jj_value f_items(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    (void)a;
    if (v.kind == JJ_UNDEFINED)
        return jj_list_value(jj_list_new(c, 0));
    if (v.kind != JJ_DICT)
        jj_fail(c, JJ_FAIL_RUNTIME, "Can only get item pairs from a mapping.");
    const struct jj_dict *d = v.u.dict;
    struct jj_list *l = jj_list_new(c, d->n);
    for (size_t i = 0; i < d->n; i++) {
        struct jj_list *pair = jj_list_new(c, 2);
        pair->is_tuple = true;
        pair->items[0] = d->keys[i];
        pair->items[1] = d->vals[i];
        pair->n = 2;
        l->items[l->n++] = jj_list_value(pair);
    }
    return jj_list_value(l);
}

static struct jj_value f_dictsort(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    struct jj_value *cs = jj_arg(a, 0, "case_sensitive"), *by = jj_arg(a, 1, "by");
    struct jj_value *rev = jj_arg(a, 2, "reverse");
    struct jj_value items = f_items(c, v, a);
    int pos = 0;
    if (by && by->kind == JJ_STR) {
        if (by->u.s.n == 5 && memcmp(by->u.s.p, "value", 5) == 0)
            pos = 1;
        else if (!(by->u.s.n == 3 && memcmp(by->u.s.p, "key", 3) == 0))
            jj_fail(c, JJ_FAIL_RUNTIME, "You can only sort by either \"key\" or \"value\"");
    }
    const struct jj_list *l = items.u.list;
    struct jj_value *keys = jj_alloc(c, (l->n ? l->n : 1) * sizeof *keys);
    for (size_t i = 0; i < l->n; i++)
        keys[i] = fold(c, l->items[i].u.list->items[pos], cs && jj_truthy(*cs));
    size_t *order = sorted_order(c, keys, l->n, rev && jj_truthy(*rev));
    struct jj_list *r = jj_list_new(c, l->n);
    for (size_t i = 0; i < l->n; i++)
        r->items[r->n++] = l->items[order[i]];
    return jj_list_value(r);
}

static struct jj_value html_escape(struct jj_ctx *c, struct jj_str s)
{
    struct jj_buf b = {0};
    for (size_t i = 0; i < s.n; i++) {
        switch (s.p[i]) {
        case '&': jj_buf_put(c, &b, "&amp;", 5); break;
        case '<': jj_buf_put(c, &b, "&lt;", 4); break;
        case '>': jj_buf_put(c, &b, "&gt;", 4); break;
        case '"': jj_buf_put(c, &b, "&#34;", 5); break;
        case '\'': jj_buf_put(c, &b, "&#39;", 5); break;
        default: jj_buf_putc(c, &b, s.p[i]);
        }
    }
    return jj_buf_to_str(c, &b);
}

static struct jj_value f_escape(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    (void)a;
    return html_escape(c, str_of(c, v));
}

static struct jj_value f_first(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    (void)a;
    struct jj_list *l = jj_iterate(c, v);
    return l->n ? l->items[0] : jj_undefined_hint(c, "No first item, sequence was empty.");
}

static struct jj_value f_last(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    (void)a;
    struct jj_list *l = jj_iterate(c, v);
    return l->n ? l->items[l->n - 1]
                : jj_undefined_hint(c, "No last item, sequence was empty.");
}

static bool parse_float(struct jj_str s, double *out)
{
    char tmp[128];
    struct jj_str t = jj_strip(s, NULL, true, true);
    if (t.n == 0 || t.n >= sizeof tmp)
        return false;
    size_t k = 0;
    for (size_t i = 0; i < t.n; i++)
        if (t.p[i] != '_')
            tmp[k++] = t.p[i];
    tmp[k] = 0;
    char *end;
    double d = strtod(tmp, &end);
    if (*end || (tmp[0] == '0' && (tmp[1] == 'x' || tmp[1] == 'X')))
        return false;
    *out = d;
    return true;
}

static bool parse_int(struct jj_str s, int base, int64_t *out)
{
    char tmp[128];
    struct jj_str t = jj_strip(s, NULL, true, true);
    if (t.n == 0 || t.n >= sizeof tmp)
        return false;
    size_t k = 0;
    for (size_t i = 0; i < t.n; i++)
        if (t.p[i] != '_')
            tmp[k++] = t.p[i];
    tmp[k] = 0;
    char *end;
    errno = 0;
    long long v = strtoll(tmp, &end, base);
    if (*end || errno)
        return false;
    *out = v;
    return true;
}

static struct jj_value f_int(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    struct jj_value *dflt = jj_arg(a, 0, "default");
    int base = (int)int_arg(c, jj_arg(a, 1, "base"), 10, "base");
    struct jj_value fallback = dflt ? *dflt : jj_int(0);
    switch (v.kind) {
    case JJ_INT: return v;
    case JJ_BOOL: return jj_int(v.u.b);
    case JJ_FLOAT:
        if (isnan(v.u.f) || isinf(v.u.f) || fabs(v.u.f) >= 9.2e18)
            return fallback;
        return jj_int((int64_t)v.u.f);
    case JJ_STR: {
        int64_t i;
        double d;
        if (base >= 2 && base <= 36 && parse_int(v.u.s, base, &i))
            return jj_int(i);
        if (parse_float(v.u.s, &d) && !isnan(d) && fabs(d) < 9.2e18)
            return jj_int((int64_t)d);
        return fallback;
    }
    default: return fallback;
    }
}

static struct jj_value f_float(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    (void)c;
    struct jj_value *dflt = jj_arg(a, 0, "default");
    struct jj_value fallback = dflt ? *dflt : jj_float(0.0);
    double d;
    switch (v.kind) {
    case JJ_INT:
    case JJ_BOOL:
    case JJ_FLOAT: return jj_float(jj_as_double(v));
    case JJ_STR: return parse_float(v.u.s, &d) ? jj_float(d) : fallback;
    default: return fallback;
    }
}

static struct jj_value f_indent(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    struct jj_value *w = jj_arg(a, 0, "width");
    bool first = jj_arg(a, 1, "first") && jj_truthy(*jj_arg(a, 1, "first"));
    bool blank = jj_arg(a, 2, "blank") && jj_truthy(*jj_arg(a, 2, "blank"));
    struct jj_str ind;
    if (w && w->kind == JJ_STR) {
        ind = w->u.s;
    } else {
        int64_t width = int_arg(c, w, 4, "width");
        if (width < 0)
            width = 0;
        if (width > 4096)
            jj_fail(c, JJ_FAIL_LIMIT, "indent width too large");
        char *sp = jj_alloc(c, (size_t)width + 1);
        memset(sp, ' ', (size_t)width);
        ind = (struct jj_str){sp, (size_t)width};
    }
    struct jj_str s = str_of(c, v);
    /* Jinja appends "\n" before splitlines (so a trailing break keeps an empty last line) */
    struct jj_buf sn = {0};
    jj_buf_put(c, &sn, s.p, s.n);
    jj_buf_putc(c, &sn, '\n');
    struct jj_list *lines = jj_splitlines(c, jj_buf_to_str(c, &sn).u.s);
    struct jj_buf b = {0};
    if (first)
        jj_buf_put(c, &b, ind.p, ind.n);
    for (size_t i = 0; i < lines->n; i++) {
        struct jj_str line = lines->items[i].u.s;
        if (i) {
            jj_buf_putc(c, &b, '\n');
            if (blank || line.n)
                jj_buf_put(c, &b, ind.p, ind.n);
        }
        jj_buf_put(c, &b, line.p, line.n);
    }
    return jj_buf_to_str(c, &b);
}

static struct jj_value f_join(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    struct jj_value *sep = jj_arg(a, 0, "d"), *attr = jj_arg(a, 1, "attribute");
    struct jj_str d = sep ? str_of(c, *sep) : (struct jj_str){"", 0};
    struct jj_list *l = jj_iterate(c, v);
    struct jj_buf b = {0};
    for (size_t i = 0; i < l->n; i++) {
        if (i)
            jj_buf_put(c, &b, d.p, d.n);
        struct jj_value item = l->items[i];
        if (!none_or_missing(attr))
            item = attr_path(c, item, *attr);
        jj_str_into(c, &b, item);
    }
    return jj_buf_to_str(c, &b);
}

static struct jj_value f_list(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    (void)a;
    struct jj_list *l = jj_iterate(c, v);
    struct jj_list *r = jj_list_new(c, l->n);
    memcpy(r->items, l->items, l->n * sizeof *l->items);
    r->n = l->n;
    return jj_list_value(r);
}

static struct jj_value f_map(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    struct jj_list *l = jj_iterate(c, v);
    struct jj_list *r = jj_list_new(c, l->n);
    struct jj_value *attr = NULL, *dflt = NULL;
    for (size_t k = 0; k < a->n_kw; k++) {
        if (strcmp(a->kw_names[k], "attribute") == 0)
            attr = &a->kw[k];
        else if (strcmp(a->kw_names[k], "default") == 0)
            dflt = &a->kw[k];
    }
    if (attr) {
        for (size_t i = 0; i < l->n; i++) {
            struct jj_value x = attr_path(c, l->items[i], *attr);
            if (x.kind == JJ_UNDEFINED && dflt)
                x = *dflt;
            r->items[r->n++] = x;
        }
        return jj_list_value(r);
    }
    if (a->n_pos == 0 || a->pos[0].kind != JJ_STR)
        jj_fail(c, JJ_FAIL_RUNTIME, "map requires a filter argument");
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)a->pos[0].u.s.n, a->pos[0].u.s.p);
    struct jj_args rest = {a->pos + 1, a->n_pos - 1, a->kw_names, a->kw, a->n_kw};
    for (size_t i = 0; i < l->n; i++)
        r->items[r->n++] = jj_call_filter(c, name, l->items[i], &rest, 0);
    return jj_list_value(r);
}

static struct jj_value select_common(struct jj_ctx *c, struct jj_value v, struct jj_args *a,
                                     bool keep, bool by_attr)
{
    struct jj_list *l = jj_iterate(c, v);
    struct jj_list *r = jj_list_new(c, 0);
    size_t off = by_attr ? 1 : 0;
    struct jj_value *attr = by_attr ? jj_arg(a, 0, NULL) : NULL;
    if (by_attr && !attr)
        jj_fail(c, JJ_FAIL_RUNTIME, "Missing parameter for attribute name");
    char test[64] = "";
    bool has_test = a->n_pos > off;
    if (has_test) {
        if (a->pos[off].kind != JJ_STR)
            jj_fail(c, JJ_FAIL_RUNTIME, "test name must be a string");
        snprintf(test, sizeof test, "%.*s", (int)a->pos[off].u.s.n, a->pos[off].u.s.p);
    }
    struct jj_args rest = {0};
    if (has_test)
        rest = (struct jj_args){a->pos + off + 1, a->n_pos - off - 1, a->kw_names, a->kw,
                                a->n_kw};
    for (size_t i = 0; i < l->n; i++) {
        jj_step(c);
        struct jj_value x = by_attr ? attr_path(c, l->items[i], *attr) : l->items[i];
        bool r_ok = has_test ? jj_call_test(c, test, x, &rest, 0) : jj_truthy(x);
        if (r_ok == keep)
            jj_list_push(c, r, l->items[i]);
    }
    return jj_list_value(r);
}

static struct jj_value f_select(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    return select_common(c, v, a, true, false);
}

static struct jj_value f_reject(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    return select_common(c, v, a, false, false);
}

static struct jj_value f_selectattr(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    return select_common(c, v, a, true, true);
}

static struct jj_value f_rejectattr(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    return select_common(c, v, a, false, true);
}

static struct jj_value minmax(struct jj_ctx *c, struct jj_value v, struct jj_args *a, int sign)
{
    struct jj_value *cs = jj_arg(a, 0, "case_sensitive"), *attr = jj_arg(a, 1, "attribute");
    struct jj_list *l = jj_iterate(c, v);
    if (l->n == 0)
        return jj_undefined_hint(c, sign < 0 ? "No aggregated item, sequence was empty."
                                             : "No aggregated item, sequence was empty.");
    size_t best = 0;
    struct jj_value best_key;
    for (size_t i = 0; i < l->n; i++) {
        struct jj_value k = l->items[i];
        if (!none_or_missing(attr))
            k = attr_path(c, k, *attr);
        k = fold(c, k, cs && jj_truthy(*cs));
        if (i == 0 || jj_compare(c, k, best_key) * sign > 0) {
            best = i;
            best_key = k;
        }
    }
    return l->items[best];
}

static struct jj_value f_min(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    return minmax(c, v, a, -1);
}

static struct jj_value f_max(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    return minmax(c, v, a, 1);
}

static struct jj_value f_pprint(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    (void)a;
    struct jj_buf b = {0};
    jj_repr_into(c, &b, v);
    return jj_buf_to_str(c, &b);
}

static struct jj_value f_replace(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    struct jj_value *old = jj_arg(a, 0, "old"), *new = jj_arg(a, 1, "new");
    if (!old || !new)
        jj_fail(c, JJ_FAIL_RUNTIME, "replace() needs old and new");
    return jj_py_replace(c, str_of(c, v), str_of(c, *old), str_of(c, *new),
                         int_arg(c, jj_arg(a, 2, "count"), -1, "count"));
}

static struct jj_value f_reverse(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    (void)a;
    struct jj_list *l = jj_iterate(c, v);
    if (v.kind == JJ_STR) {
        struct jj_buf b = {0};
        for (size_t i = l->n; i-- > 0;)
            jj_buf_put(c, &b, l->items[i].u.s.p, l->items[i].u.s.n);
        return jj_buf_to_str(c, &b);
    }
    struct jj_list *r = jj_list_new(c, l->n);
    for (size_t i = l->n; i-- > 0;)
        r->items[r->n++] = l->items[i];
    return jj_list_value(r);
}

/* Python's round(int, n): n >= 0 keeps it, n < 0 rounds half to even to a multiple of 10^-n */
static struct jj_value round_int(int64_t x, int64_t prec)
{
    if (prec >= 0)
        return jj_int(x);
    if (prec < -18)
        return jj_int(0);
    int64_t m = 1;
    for (int64_t i = 0; i < -prec; i++)
        m *= 10;
    int64_t q = x / m, r = x % m;
    if (r < 0) {
        q--;
        r += m;
    }
    /* x = q*m + r with 0 <= r < m */
    if (2 * r > m || (2 * r == m && (q & 1)))
        q++;
    int64_t out;
    if (__builtin_mul_overflow(q, m, &out))
        return jj_int(x);
    return jj_int(out);
}

/* Python's round(float, n): the correctly rounded decimal, as printf's %.*f gives it */
static double round_float(double x, int64_t prec)
{
    if (!isfinite(x) || prec > 323)
        return x;
    if (prec >= 0) {
        char buf[720]; /* 309 integer digits, the point, 323 decimals */
        snprintf(buf, sizeof buf, "%.*f", (int)prec, x);
        return strtod(buf, NULL);
    }
    if (prec < -308)
        return 0.0 * x;
    double scale = pow(10.0, (double)-prec);
    double r = nearbyint(x / scale) * scale;
    return isfinite(r) ? r : x;
}

static struct jj_value f_round(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    int64_t prec = int_arg(c, jj_arg(a, 0, "precision"), 0, "precision");
    struct jj_value *method = jj_arg(a, 1, "method");
    bool ceil_m = method && method->kind == JJ_STR && method->u.s.n == 4 &&
                  memcmp(method->u.s.p, "ceil", 4) == 0;
    bool floor_m = method && method->kind == JJ_STR && method->u.s.n == 5 &&
                   memcmp(method->u.s.p, "floor", 5) == 0;
    bool common_m = !method || (method->kind == JJ_STR && method->u.s.n == 6 &&
                                memcmp(method->u.s.p, "common", 6) == 0);
    if (!ceil_m && !floor_m && !common_m)
        jj_fail(c, JJ_FAIL_RUNTIME, "method must be common, ceil or floor");
    if (!jj_is_number(v))
        jj_fail(c, JJ_FAIL_RUNTIME, "type %s doesn't define __round__ method",
                jj_type_name(v));
    if (common_m)
        return v.kind == JJ_FLOAT ? jj_float(round_float(v.u.f, prec))
                                  : round_int(v.kind == JJ_BOOL ? v.u.b : v.u.i, prec);
    /* math.ceil/floor(value * 10**precision) / 10**precision */
    if (prec < -20 || prec > 20)
        prec = prec < 0 ? -20 : 20;
    double x = jj_as_double(v), scale = pow(10.0, (double)prec);
    return jj_float(ceil_m ? ceil(x * scale) / scale : floor(x * scale) / scale);
}

static struct jj_value f_safe(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    (void)c;
    (void)a;
    return v;
}

static struct jj_value f_sort(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    struct jj_value *rev = jj_arg(a, 0, "reverse"), *cs = jj_arg(a, 1, "case_sensitive");
    struct jj_value *attr = jj_arg(a, 2, "attribute");
    struct jj_list *l = jj_iterate(c, v);
    struct jj_value *keys = jj_alloc(c, (l->n ? l->n : 1) * sizeof *keys);
    for (size_t i = 0; i < l->n; i++) {
        struct jj_value k = l->items[i];
        if (!none_or_missing(attr))
            k = attr_path(c, k, *attr);
        keys[i] = fold(c, k, cs && jj_truthy(*cs));
    }
    size_t *order = sorted_order(c, keys, l->n, rev && jj_truthy(*rev));
    struct jj_list *r = jj_list_new(c, l->n);
    for (size_t i = 0; i < l->n; i++)
        r->items[r->n++] = l->items[order[i]];
    return jj_list_value(r);
}

static struct jj_value f_string(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    (void)a;
    return jj_to_str(c, v);
}

static struct jj_value f_sum(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    struct jj_value *attr = jj_arg(a, 0, "attribute"), *start = jj_arg(a, 1, "start");
    struct jj_list *l = jj_iterate(c, v);
    struct jj_value total = start ? *start : jj_int(0);
    for (size_t i = 0; i < l->n; i++) {
        struct jj_value x = l->items[i];
        if (!none_or_missing(attr))
            x = attr_path(c, x, *attr);
        if (!jj_is_number(x) || !jj_is_number(total))
            jj_fail(c, JJ_FAIL_RUNTIME, "unsupported operand type(s) for +: '%s' and '%s'",
                    jj_type_name(total), jj_type_name(x));
        if (x.kind == JJ_FLOAT || total.kind == JJ_FLOAT)
            total = jj_float(jj_as_double(total) + jj_as_double(x));
        else
            total = jj_int((total.kind == JJ_BOOL ? total.u.b : total.u.i) +
                           (x.kind == JJ_BOOL ? x.u.b : x.u.i));
    }
    return total;
}

static struct jj_value f_tojson(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    /* transformers: tojson(x, ensure_ascii=False, indent=None, separators=None,
     * sort_keys=False) */
    struct jj_value *ea = jj_arg(a, 0, "ensure_ascii"), *ind = jj_arg(a, 1, "indent");
    struct jj_value *seps = jj_arg(a, 2, "separators"), *sk = jj_arg(a, 3, "sort_keys");
    struct jj_json_opts o = {.ensure_ascii = ea && jj_truthy(*ea),
                             .sort_keys = sk && jj_truthy(*sk)};
    if (!none_or_missing(ind)) {
        o.has_indent = true;
        if (ind->kind == JJ_STR) {
            o.indent = ind->u.s;
        } else {
            int64_t n = int_arg(c, ind, 0, "indent");
            if (n < 0)
                n = 0;
            if (n > 1024)
                jj_fail(c, JJ_FAIL_LIMIT, "tojson indent too large");
            char *sp = jj_alloc(c, (size_t)n + 1);
            memset(sp, ' ', (size_t)n);
            o.indent = (struct jj_str){sp, (size_t)n};
        }
    }
    if (!none_or_missing(seps)) {
        if (seps->kind != JJ_LIST || seps->u.list->n != 2 ||
            seps->u.list->items[0].kind != JJ_STR || seps->u.list->items[1].kind != JJ_STR)
            jj_fail(c, JJ_FAIL_RUNTIME, "separators must be a pair of strings");
        o.item_sep = seps->u.list->items[0].u.s;
        o.key_sep = seps->u.list->items[1].u.s;
    } else {
        o.item_sep = o.has_indent ? (struct jj_str){",", 1} : (struct jj_str){", ", 2};
        o.key_sep = (struct jj_str){": ", 2};
    }
    struct jj_buf b = {0};
    jj_tojson(c, &b, v, &o);
    return jj_buf_to_str(c, &b);
}

static struct jj_value f_trim(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    struct jj_value *chars = jj_arg(a, 0, "chars");
    struct jj_str s = str_of(c, v), cs;
    if (!none_or_missing(chars))
        cs = str_of(c, *chars);
    struct jj_str r = jj_strip(s, none_or_missing(chars) ? NULL : &cs, true, true);
    return jj_str(r.p, r.n);
}

static struct jj_value f_truncate(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    struct jj_str s = str_of(c, v);
    int64_t length = int_arg(c, jj_arg(a, 0, "length"), 255, "length");
    bool killwords = jj_arg(a, 1, "killwords") && jj_truthy(*jj_arg(a, 1, "killwords"));
    struct jj_value *endv = jj_arg(a, 2, "end");
    struct jj_str end = endv ? str_of(c, *endv) : (struct jj_str){"...", 3};
    int64_t leeway = int_arg(c, jj_arg(a, 3, "leeway"), 5, "leeway");
    struct jj_list *chars = jj_iterate(c, jj_str(s.p, s.n));
    if ((int64_t)chars->n <= length + leeway)
        return jj_str(s.p, s.n);
    int64_t keep = length - (int64_t)jj_utf8_count(end);
    if (keep < 0)
        keep = 0;
    size_t bytes = 0;
    for (int64_t i = 0; i < keep && (size_t)i < chars->n; i++)
        bytes += chars->items[i].u.s.n;
    if (!killwords) {
        size_t sp = bytes;
        while (sp > 0 && s.p[sp - 1] != ' ')
            sp--;
        if (sp > 0)
            bytes = sp - 1;
    }
    struct jj_buf b = {0};
    jj_buf_put(c, &b, s.p, bytes);
    jj_buf_put(c, &b, end.p, end.n);
    return jj_buf_to_str(c, &b);
}

static struct jj_value f_unique(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    struct jj_value *cs = jj_arg(a, 0, "case_sensitive"), *attr = jj_arg(a, 1, "attribute");
    struct jj_list *l = jj_iterate(c, v);
    struct jj_list *r = jj_list_new(c, 0), *seen = jj_list_new(c, 0);
    for (size_t i = 0; i < l->n; i++) {
        jj_step(c);
        struct jj_value k = l->items[i];
        if (!none_or_missing(attr))
            k = attr_path(c, k, *attr);
        k = fold(c, k, cs && jj_truthy(*cs));
        if (k.kind == JJ_DICT || k.kind == JJ_NS || (k.kind == JJ_LIST && !k.u.list->is_tuple))
            jj_fail(c, JJ_FAIL_RUNTIME, "unhashable type: '%s'", jj_type_name(k));
        bool dup = false;
        for (size_t j = 0; j < seen->n && !dup; j++)
            dup = jj_equal(seen->items[j], k);
        if (!dup) {
            jj_list_push(c, seen, k);
            jj_list_push(c, r, l->items[i]);
        }
    }
    return jj_list_value(r);
}

static struct jj_value f_wordcount(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    (void)a;
    struct jj_str s = str_of(c, v);
    int64_t n = 0;
    bool in_word = false;
    /* len(re.findall(r"\w+", s)) */
    for (size_t i = 0; i < s.n;) {
        size_t len;
        bool w = jj_cp_class(jj_utf8_decode(s.p + i, s.n - i, &len), JJ_CP_WORD);
        if (w && !in_word)
            n++;
        in_word = w;
        i += len;
    }
    return jj_int(n);
}

static struct jj_value f_format(struct jj_ctx *c, struct jj_value v, struct jj_args *a)
{
    struct jj_str fmt = str_of(c, v);
    if (a->n_kw) {
        struct jj_dict *d = jj_dict_new(c, a->n_kw);
        for (size_t k = 0; k < a->n_kw; k++)
            jj_dict_set(c, d, jj_str(a->kw_names[k], strlen(a->kw_names[k])), a->kw[k]);
        return jj_percent_format(c, fmt, jj_dict_value(d));
    }
    struct jj_list *t = jj_list_new(c, a->n_pos);
    t->is_tuple = true;
    for (size_t i = 0; i < a->n_pos; i++)
        t->items[t->n++] = a->pos[i];
    return jj_percent_format(c, fmt, jj_list_value(t));
}

static const struct {
    const char *name;
    filter_fn fn;
} filters[] = {
    {"abs", f_abs}, {"attr", f_attr}, {"capitalize", f_capitalize}, {"center", f_center},
    {"count", f_length}, {"d", f_default}, {"default", f_default}, {"dictsort", f_dictsort},
    {"e", f_escape}, {"escape", f_escape}, {"first", f_first}, {"float", f_float},
    {"forceescape", f_escape}, {"format", f_format}, {"indent", f_indent}, {"int", f_int},
    {"items", f_items}, {"join", f_join}, {"last", f_last}, {"length", f_length},
    {"list", f_list}, {"lower", f_lower}, {"map", f_map}, {"max", f_max}, {"min", f_min},
    {"pprint", f_pprint}, {"reject", f_reject}, {"rejectattr", f_rejectattr},
    {"replace", f_replace}, {"reverse", f_reverse}, {"round", f_round}, {"safe", f_safe},
    {"select", f_select}, {"selectattr", f_selectattr}, {"sort", f_sort},
    {"string", f_string}, {"sum", f_sum}, {"title", f_title}, {"tojson", f_tojson},
    {"trim", f_trim}, {"truncate", f_truncate}, {"unique", f_unique}, {"upper", f_upper},
    {"wordcount", f_wordcount},
};

bool jj_filter_exists(const char *name)
{
    for (size_t i = 0; i < sizeof filters / sizeof *filters; i++)
        if (strcmp(filters[i].name, name) == 0)
            return true;
    return false;
}

struct jj_value jj_call_filter(struct jj_ctx *c, const char *name, struct jj_value v,
                               struct jj_args *args, int line)
{
    for (size_t i = 0; i < sizeof filters / sizeof *filters; i++)
        if (strcmp(filters[i].name, name) == 0)
            return filters[i].fn(c, v, args);
    if (line)
        jj_fail(c, JJ_FAIL_RUNTIME, "line %d: No filter named '%s'.", line, name);
    jj_fail(c, JJ_FAIL_RUNTIME, "No filter named '%s'.", name);
}

/* ---- tests ------------------------------------------------------------------------------- */

static bool t_cmp(struct jj_ctx *c, struct jj_value v, struct jj_args *a, int op)
{
    struct jj_value *o = jj_arg(a, 0, NULL);
    if (!o)
        jj_fail(c, JJ_FAIL_RUNTIME, "test needs an argument");
    switch (op) {
    case 0: return jj_equal(v, *o);
    case 1: return !jj_equal(v, *o);
    case 2: return jj_compare(c, v, *o) < 0;
    case 3: return jj_compare(c, v, *o) <= 0;
    case 4: return jj_compare(c, v, *o) > 0;
    default: return jj_compare(c, v, *o) >= 0;
    }
}

static bool all_case(struct jj_ctx *c, struct jj_value v, bool upper)
{
    /* Jinja's upper and lower tests: str(value).isupper() / islower() */
    return jj_str_all_case(str_of(c, v), upper);
}

static bool same(struct jj_value a, struct jj_value b)
{
    if (a.kind != b.kind)
        return false;
    switch (a.kind) {
    case JJ_NONE:
    case JJ_UNDEFINED: return true;
    case JJ_BOOL: return a.u.b == b.u.b;
    case JJ_INT: return a.u.i == b.u.i && a.u.i >= -5 && a.u.i <= 256; /* CPython's cache */
    case JJ_STR: return a.u.s.p == b.u.s.p && a.u.s.n == b.u.s.n;
    case JJ_LIST: return a.u.list == b.u.list;
    case JJ_DICT:
    case JJ_NS: return a.u.dict == b.u.dict;
    default: return a.u.fn == b.u.fn;
    }
}

static const char *const test_names[] = {
    "defined", "undefined", "none", "boolean", "false", "true", "integer", "float", "number",
    "string", "mapping", "iterable", "sequence", "callable", "sameas", "escaped", "even",
    "odd", "divisibleby", "eq", "equalto", "==", "ne", "!=", "lt", "lessthan", "<", "le",
    "<=", "gt", "greaterthan", ">", "ge", ">=", "in", "lower", "upper", "filter", "test",
};

bool jj_test_exists(const char *name)
{
    for (size_t i = 0; i < sizeof test_names / sizeof *test_names; i++)
        if (strcmp(test_names[i], name) == 0)
            return true;
    return false;
}

bool jj_call_test(struct jj_ctx *c, const char *name, struct jj_value v, struct jj_args *a,
                  int line)
{
#define IS(s) (strcmp(name, s) == 0)
    if (IS("defined"))
        return v.kind != JJ_UNDEFINED;
    if (IS("undefined"))
        return v.kind == JJ_UNDEFINED;
    if (IS("none"))
        return v.kind == JJ_NONE;
    if (IS("boolean"))
        return v.kind == JJ_BOOL;
    if (IS("false"))
        return v.kind == JJ_BOOL && !v.u.b;
    if (IS("true"))
        return v.kind == JJ_BOOL && v.u.b;
    if (IS("integer"))
        return v.kind == JJ_INT;
    if (IS("float"))
        return v.kind == JJ_FLOAT;
    if (IS("number"))
        return jj_is_number(v);
    if (IS("string"))
        return v.kind == JJ_STR;
    if (IS("mapping"))
        return v.kind == JJ_DICT;
    if (IS("iterable"))
        return v.kind == JJ_STR || v.kind == JJ_LIST || v.kind == JJ_DICT ||
               v.kind == JJ_UNDEFINED;
    if (IS("sequence"))
        return v.kind == JJ_STR || v.kind == JJ_LIST || v.kind == JJ_DICT ||
               v.kind == JJ_UNDEFINED;
    if (IS("callable"))
        return v.kind == JJ_FUNC;
    if (IS("sameas")) {
        struct jj_value *o = jj_arg(a, 0, "other");
        return o && same(v, *o);
    }
    if (IS("escaped"))
        return false;
    if (IS("even") || IS("odd") || IS("divisibleby")) {
        if (v.kind != JJ_INT && v.kind != JJ_BOOL)
            jj_fail(c, JJ_FAIL_RUNTIME, "not all arguments converted during string "
                    "formatting");
        int64_t x = v.kind == JJ_BOOL ? v.u.b : v.u.i;
        if (IS("even"))
            return x % 2 == 0;
        if (IS("odd"))
            return x % 2 != 0;
        int64_t d = int_arg(c, jj_arg(a, 0, "num"), 0, "num");
        if (d == 0)
            jj_fail(c, JJ_FAIL_RUNTIME, "integer modulo by zero");
        return d == -1 || x % d == 0;
    }
    if (IS("eq") || IS("equalto") || IS("=="))
        return t_cmp(c, v, a, 0);
    if (IS("ne") || IS("!="))
        return t_cmp(c, v, a, 1);
    if (IS("lt") || IS("lessthan") || IS("<"))
        return t_cmp(c, v, a, 2);
    if (IS("le") || IS("<="))
        return t_cmp(c, v, a, 3);
    if (IS("gt") || IS("greaterthan") || IS(">"))
        return t_cmp(c, v, a, 4);
    if (IS("ge") || IS(">="))
        return t_cmp(c, v, a, 5);
    if (IS("in")) {
        struct jj_value *seq = jj_arg(a, 0, "seq");
        if (!seq)
            jj_fail(c, JJ_FAIL_RUNTIME, "in test needs a sequence");
        if (seq->kind == JJ_STR) {
            if (v.kind != JJ_STR)
                jj_fail(c, JJ_FAIL_RUNTIME, "'in <string>' requires string as left "
                        "operand, not %s", jj_type_name(v));
            return v.u.s.n == 0 || memmem(seq->u.s.p, seq->u.s.n, v.u.s.p, v.u.s.n);
        }
        if (seq->kind == JJ_DICT)
            return jj_dict_get(seq->u.dict, v) != NULL;
        struct jj_list *l = jj_iterate(c, *seq);
        for (size_t i = 0; i < l->n; i++)
            if (jj_equal(l->items[i], v))
                return true;
        return false;
    }
    if (IS("lower"))
        return all_case(c, v, false);
    if (IS("upper"))
        return all_case(c, v, true);
    if (IS("filter") || IS("test")) {
        if (v.kind != JJ_STR)
            return false;
        char n[64];
        snprintf(n, sizeof n, "%.*s", (int)v.u.s.n, v.u.s.p);
        return IS("filter") ? jj_filter_exists(n) : jj_test_exists(n);
    }
#undef IS
    if (line)
        jj_fail(c, JJ_FAIL_RUNTIME, "line %d: No test named '%s'.", line, name);
    jj_fail(c, JJ_FAIL_RUNTIME, "No test named '%s'.", name);
}
