/* Attribute and item access, and the str, dict and list methods the sandbox allows. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "server/chat/jinja_internal.h"

struct jj_value *jj_arg(struct jj_args *a, size_t i, const char *name)
{
    if (i < a->n_pos)
        return &a->pos[i];
    for (size_t k = 0; name && k < a->n_kw; k++)
        if (strcmp(a->kw_names[k], name) == 0)
            return &a->kw[k];
    return NULL;
}

/* ---- method tables -------------------------------------------------------------------------- */

enum method {
    M_NONE,
    /* str */
    M_STARTSWITH, M_ENDSWITH, M_STRIP, M_LSTRIP, M_RSTRIP, M_SPLIT, M_RSPLIT, M_SPLITLINES,
    M_REPLACE, M_UPPER, M_LOWER, M_TITLE, M_CAPITALIZE, M_FIND, M_RFIND, M_INDEX, M_COUNT,
    M_JOIN, M_ISDIGIT, M_ISALPHA, M_ISALNUM, M_ISSPACE, M_ISUPPER, M_ISLOWER, M_FORMAT,
    M_REMOVEPREFIX, M_REMOVESUFFIX, M_PARTITION, M_RPARTITION, M_ZFILL,
    /* dict */
    M_ITEMS, M_KEYS, M_VALUES, M_GET, M_COPY,
    /* mutating: listed so the sandbox can refuse them by name */
    M_UNSAFE,
};

struct method_name {
    const char *name;
    enum method m;
};

static const struct method_name str_methods[] = {
    {"startswith", M_STARTSWITH}, {"endswith", M_ENDSWITH}, {"strip", M_STRIP},
    {"lstrip", M_LSTRIP}, {"rstrip", M_RSTRIP}, {"split", M_SPLIT}, {"rsplit", M_RSPLIT},
    {"splitlines", M_SPLITLINES}, {"replace", M_REPLACE}, {"upper", M_UPPER},
    {"lower", M_LOWER}, {"title", M_TITLE}, {"capitalize", M_CAPITALIZE}, {"find", M_FIND},
    {"rfind", M_RFIND}, {"index", M_INDEX}, {"count", M_COUNT}, {"join", M_JOIN},
    {"isdigit", M_ISDIGIT}, {"isalpha", M_ISALPHA}, {"isalnum", M_ISALNUM},
    {"isspace", M_ISSPACE}, {"isupper", M_ISUPPER}, {"islower", M_ISLOWER},
    {"format", M_FORMAT}, {"removeprefix", M_REMOVEPREFIX}, {"removesuffix", M_REMOVESUFFIX},
    {"partition", M_PARTITION}, {"rpartition", M_RPARTITION}, {"zfill", M_ZFILL},
    {NULL, M_NONE},
};

static const struct method_name dict_methods[] = {
    {"items", M_ITEMS}, {"keys", M_KEYS}, {"values", M_VALUES}, {"get", M_GET},
    {"copy", M_COPY}, {"pop", M_UNSAFE}, {"popitem", M_UNSAFE}, {"update", M_UNSAFE},
    {"setdefault", M_UNSAFE}, {"clear", M_UNSAFE}, {"fromkeys", M_UNSAFE}, {NULL, M_NONE},
};

static const struct method_name list_methods[] = {
    {"index", M_INDEX}, {"count", M_COUNT}, {"copy", M_COPY}, {"append", M_UNSAFE},
    {"extend", M_UNSAFE}, {"insert", M_UNSAFE}, {"pop", M_UNSAFE}, {"remove", M_UNSAFE},
    {"reverse", M_UNSAFE}, {"sort", M_UNSAFE}, {"clear", M_UNSAFE}, {NULL, M_NONE},
};

static enum method find_method(const struct method_name *table, const char *name, size_t n)
{
    for (const struct method_name *m = table; m->name; m++)
        if (strlen(m->name) == n && memcmp(m->name, name, n) == 0)
            return m->m;
    return M_NONE;
}

static struct jj_value bound(struct jj_ctx *c, struct jj_value self, enum method m,
                             const char *name, size_t n)
{
    struct jj_func *fn = jj_alloc(c, sizeof *fn);
    fn->kind = JJ_FN_METHOD;
    fn->id = m;
    fn->self = self;
    fn->name = jj_arena_strndup(&c->arena, name, n);
    return (struct jj_value){.kind = JJ_FUNC, .u.fn = fn};
}

static struct jj_value unsafe(struct jj_ctx *c, struct jj_value obj, const char *name, size_t n)
{
    char hint[200];
    snprintf(hint, sizeof hint, "access to attribute '%.*s' of '%s' object is unsafe.",
             (int)(n > 60 ? 60 : n), name, jj_type_name(obj));
    return jj_undefined_hint(c, jj_arena_strndup(&c->arena, hint, strlen(hint)));
}

/* ---- attribute access ------------------------------------------------------------------------*/

static struct jj_value loop_attr(struct jj_ctx *c, struct jj_value v, const char *name, size_t n)
{
    const struct jj_loop *l = v.u.loop;
    int64_t len = (int64_t)l->items->n, i = l->index0;
#define IS(s) (n == sizeof(s) - 1 && memcmp(name, s, n) == 0)
    if (IS("index"))
        return jj_int(i + 1);
    if (IS("index0"))
        return jj_int(i);
    if (IS("revindex"))
        return jj_int(len - i);
    if (IS("revindex0"))
        return jj_int(len - i - 1);
    if (IS("first"))
        return jj_bool(i == 0);
    if (IS("last"))
        return jj_bool(i == len - 1);
    if (IS("length"))
        return jj_int(len);
    if (IS("depth"))
        return jj_int(1);
    if (IS("depth0"))
        return jj_int(0);
    if (IS("previtem"))
        return i > 0 ? l->items->items[i - 1]
                     : jj_undefined_hint(c, "there is no previous item");
    if (IS("nextitem"))
        return i + 1 < len ? l->items->items[i + 1]
                           : jj_undefined_hint(c, "there is no next item");
    if (IS("cycle") || IS("changed")) {
        struct jj_func *fn = jj_alloc(c, sizeof *fn);
        fn->kind = IS("cycle") ? JJ_FN_LOOP_CYCLE : JJ_FN_LOOP_CHANGED;
        fn->self = v;
        fn->name = IS("cycle") ? "cycle" : "changed";
        return (struct jj_value){.kind = JJ_FUNC, .u.fn = fn};
    }
#undef IS
    return jj_undefined_attr(c, v, jj_str(jj_arena_strndup(&c->arena, name, n), n));
}

struct jj_value jj_getattr(struct jj_ctx *c, struct jj_value obj, const char *name, size_t n)
{
    enum method m;
    struct jj_value key = jj_str(name, n);
    switch (obj.kind) {
    case JJ_UNDEFINED: jj_fail_undefined(c, obj);
    case JJ_STR:
        if ((m = find_method(str_methods, name, n)) != M_NONE)
            return bound(c, obj, m, name, n);
        break;
    case JJ_DICT:
        if ((m = find_method(dict_methods, name, n)) != M_NONE)
            return m == M_UNSAFE ? unsafe(c, obj, name, n) : bound(c, obj, m, name, n);
        {
            struct jj_value *v = jj_dict_get_str(obj.u.dict, name, n);
            if (v)
                return *v;
        }
        break;
    case JJ_NS: {
        struct jj_value *v = jj_dict_get_str(obj.u.dict, name, n);
        if (v)
            return *v;
        break;
    }
    case JJ_LIST:
        if ((m = find_method(list_methods, name, n)) != M_NONE)
            return m == M_UNSAFE ? unsafe(c, obj, name, n) : bound(c, obj, m, name, n);
        break;
    case JJ_LOOP: return loop_attr(c, obj, name, n);
    default: break;
    }
    return jj_undefined_attr(c, obj, key);
}

struct jj_value jj_getitem(struct jj_ctx *c, struct jj_value obj, struct jj_value key)
{
    if (obj.kind == JJ_UNDEFINED)
        jj_fail_undefined(c, obj);
    if ((key.kind == JJ_INT || key.kind == JJ_BOOL) && (obj.kind == JJ_LIST ||
                                                        obj.kind == JJ_STR)) {
        int64_t i = key.kind == JJ_BOOL ? key.u.b : key.u.i;
        if (obj.kind == JJ_LIST) {
            int64_t len = (int64_t)obj.u.list->n;
            int64_t k = i < 0 ? i + len : i;
            if (k >= 0 && k < len)
                return obj.u.list->items[k];
        } else {
            struct jj_list *chars = jj_iterate(c, obj);
            int64_t len = (int64_t)chars->n;
            int64_t k = i < 0 ? i + len : i;
            if (k >= 0 && k < len)
                return chars->items[k];
        }
        return jj_undefined_attr(c, obj, key);
    }
    if (obj.kind == JJ_DICT) {
        struct jj_value *v = jj_dict_get(obj.u.dict, key);
        if (v)
            return *v;
    }
    if (key.kind == JJ_STR)
        return jj_getattr(c, obj, key.u.s.p, key.u.s.n);
    return jj_undefined_attr(c, obj, key);
}

/* ---- str methods -----------------------------------------------------------------------------*/

static struct jj_str want_str(struct jj_ctx *c, struct jj_value *v, const char *what)
{
    if (!v || v->kind != JJ_STR)
        jj_fail(c, JJ_FAIL_RUNTIME, "%s arg must be str, not %s", what,
                v ? jj_type_name(*v) : "nothing");
    return v->u.s;
}

static bool opt_none(struct jj_value *v) { return !v || v->kind == JJ_NONE; }

static int64_t want_int(struct jj_ctx *c, struct jj_value *v, int64_t dflt)
{
    if (opt_none(v))
        return dflt;
    if (v->kind == JJ_INT)
        return v->u.i;
    if (v->kind == JJ_BOOL)
        return v->u.b;
    jj_fail(c, JJ_FAIL_RUNTIME, "'%s' object cannot be interpreted as an integer",
            jj_type_name(*v));
}

static bool affix_match(struct jj_ctx *c, struct jj_str s, struct jj_value *arg, bool end)
{
    if (arg && arg->kind == JJ_LIST && arg->u.list->is_tuple) {
        for (size_t i = 0; i < arg->u.list->n; i++)
            if (affix_match(c, s, &arg->u.list->items[i], end))
                return true;
        return false;
    }
    if (!arg || arg->kind != JJ_STR)
        jj_fail(c, JJ_FAIL_RUNTIME, "%s first arg must be str or a tuple of str, not %s",
                end ? "endswith" : "startswith", arg ? jj_type_name(*arg) : "nothing");
    struct jj_str a = arg->u.s;
    if (a.n > s.n)
        return false;
    return memcmp(end ? s.p + s.n - a.n : s.p, a.p, a.n) == 0;
}

static struct jj_value split(struct jj_ctx *c, struct jj_str s, struct jj_value *sep_v,
                             int64_t maxsplit, bool from_right)
{
    struct jj_list *l = jj_list_new(c, 0);
    if (opt_none(sep_v)) {
        /* runs of whitespace, none at the ends */
        struct jj_str rest = jj_strip(s, NULL, !from_right, from_right);
        while (rest.n) {
            if (maxsplit >= 0 && (int64_t)l->n == maxsplit) {
                jj_list_push(c, l, jj_str(rest.p, rest.n));
                break;
            }
            size_t i = 0, len = 0;
            if (!from_right) {
                while (i < rest.n && !jj_utf8_space(rest.p + i, rest.n - i, &len))
                    i += len ? len : 1;
                jj_list_push(c, l, jj_str(rest.p, i));
                rest = jj_strip((struct jj_str){rest.p + i, rest.n - i}, NULL, true, false);
            } else {
                size_t j = rest.n;
                while (j > 0) {
                    size_t k = j - 1;
                    while (k > 0 && ((unsigned char)rest.p[k] & 0xC0) == 0x80)
                        k--;
                    if (jj_utf8_space(rest.p + k, j - k, &len))
                        break;
                    j = k;
                }
                jj_list_push(c, l, jj_str(rest.p + j, rest.n - j));
                rest = jj_strip((struct jj_str){rest.p, j}, NULL, false, true);
            }
        }
    } else {
        struct jj_str sep = want_str(c, sep_v, "split()");
        if (sep.n == 0)
            jj_fail(c, JJ_FAIL_RUNTIME, "empty separator");
        if (!from_right) {
            size_t start = 0;
            for (;;) {
                const char *hit = NULL;
                if (maxsplit < 0 || (int64_t)l->n < maxsplit)
                    hit = memmem(s.p + start, s.n - start, sep.p, sep.n);
                if (!hit) {
                    jj_list_push(c, l, jj_str(s.p + start, s.n - start));
                    break;
                }
                jj_list_push(c, l, jj_str(s.p + start, (size_t)(hit - s.p) - start));
                start = (size_t)(hit - s.p) + sep.n;
            }
        } else {
            size_t end = s.n;
            for (;;) {
                size_t hit = SIZE_MAX;
                if (maxsplit < 0 || (int64_t)l->n < maxsplit)
                    for (size_t i = end >= sep.n ? end - sep.n + 1 : 0; i-- > 0;)
                        if (memcmp(s.p + i, sep.p, sep.n) == 0) {
                            hit = i;
                            break;
                        }
                if (hit == SIZE_MAX) {
                    jj_list_push(c, l, jj_str(s.p, end));
                    break;
                }
                jj_list_push(c, l, jj_str(s.p + hit + sep.n, end - hit - sep.n));
                end = hit;
            }
        }
    }
    if (from_right)
        for (size_t i = 0; i < l->n / 2; i++) {
            struct jj_value t = l->items[i];
            l->items[i] = l->items[l->n - 1 - i];
            l->items[l->n - 1 - i] = t;
        }
    return jj_list_value(l);
}

static struct jj_value replace(struct jj_ctx *c, struct jj_str s, struct jj_str old,
                               struct jj_str new, int64_t count)
{
    struct jj_buf b = {0};
    size_t i = 0;
    int64_t done = 0;
    if (old.n == 0) {
        /* Python inserts new between characters and at both ends */
        struct jj_list *chars = jj_iterate(c, jj_str(s.p, s.n));
        for (size_t k = 0; k <= chars->n; k++) {
            if (count < 0 || done < count) {
                jj_buf_put(c, &b, new.p, new.n);
                done++;
            }
            if (k < chars->n)
                jj_buf_put(c, &b, chars->items[k].u.s.p, chars->items[k].u.s.n);
        }
        return jj_buf_to_str(c, &b);
    }
    while (i < s.n) {
        const char *hit = count < 0 || done < count ? memmem(s.p + i, s.n - i, old.p, old.n)
                                                    : NULL;
        if (!hit)
            break;
        jj_buf_put(c, &b, s.p + i, (size_t)(hit - (s.p + i)));
        jj_buf_put(c, &b, new.p, new.n);
        i = (size_t)(hit - s.p) + old.n;
        done++;
    }
    jj_buf_put(c, &b, s.p + i, s.n - i);
    if (b.n == 0)
        return jj_str("", 0);
    return jj_buf_to_str(c, &b);
}

struct jj_value jj_py_replace(struct jj_ctx *c, struct jj_str s, struct jj_str old,
                              struct jj_str new, int64_t count)
{
    return replace(c, s, old, new, count);
}

static int64_t find(struct jj_str s, struct jj_str sub, bool from_right)
{
    if (sub.n > s.n)
        return -1;
    if (!from_right) {
        const char *hit = sub.n ? memmem(s.p, s.n, sub.p, sub.n) : s.p;
        return hit ? (int64_t)jj_utf8_count((struct jj_str){s.p, (size_t)(hit - s.p)}) : -1;
    }
    for (size_t i = s.n - sub.n + 1; i-- > 0;)
        if (memcmp(s.p + i, sub.p, sub.n) == 0)
            return (int64_t)jj_utf8_count((struct jj_str){s.p, i});
    return -1;
}

/* str.isdigit, isalpha, isalnum, isspace (kind 0..3), isupper (4), islower (5) */
static bool all_chars(struct jj_str s, int kind)
{
    static const enum jj_cp_class cls[] = {JJ_CP_DIGIT, JJ_CP_ALPHA, JJ_CP_ALNUM, JJ_CP_SPACE};
    if (kind >= 4)
        return jj_str_all_case(s, kind == 4);
    if (s.n == 0)
        return false;
    for (size_t i = 0; i < s.n;) {
        size_t len;
        int32_t cp = jj_utf8_decode(s.p + i, s.n - i, &len);
        i += len;
        if (!jj_cp_class(cp, cls[kind]))
            return false;
    }
    return true;
}

static struct jj_value str_format(struct jj_ctx *c, struct jj_str fmt, struct jj_args *a)
{
    struct jj_buf b = {0};
    size_t auto_idx = 0;
    for (size_t i = 0; i < fmt.n; i++) {
        char ch = fmt.p[i];
        if ((ch == '{' || ch == '}') && i + 1 < fmt.n && fmt.p[i + 1] == ch) {
            jj_buf_putc(c, &b, ch);
            i++;
            continue;
        }
        if (ch != '{') {
            jj_buf_putc(c, &b, ch);
            continue;
        }
        const char *close = memchr(fmt.p + i, '}', fmt.n - i);
        if (!close)
            jj_fail(c, JJ_FAIL_RUNTIME, "Single '{' encountered in format string");
        struct jj_str field = {fmt.p + i + 1, (size_t)(close - fmt.p) - i - 1};
        const char *colon = memchr(field.p, ':', field.n);
        if (colon)
            field.n = (size_t)(colon - field.p);
        struct jj_value *v = NULL;
        if (field.n == 0) {
            v = auto_idx < a->n_pos ? &a->pos[auto_idx] : NULL;
            auto_idx++;
        } else if (field.p[0] >= '0' && field.p[0] <= '9') {
            size_t idx = 0;
            for (size_t k = 0; k < field.n && field.p[k] >= '0' && field.p[k] <= '9'; k++)
                idx = idx * 10 + (size_t)(field.p[k] - '0');
            v = idx < a->n_pos ? &a->pos[idx] : NULL;
        } else {
            for (size_t k = 0; k < a->n_kw; k++)
                if (strlen(a->kw_names[k]) == field.n &&
                    memcmp(a->kw_names[k], field.p, field.n) == 0)
                    v = &a->kw[k];
        }
        if (!v)
            jj_fail(c, JJ_FAIL_RUNTIME, "Replacement index %zu out of range for "
                    "positional args tuple", auto_idx ? auto_idx - 1 : 0);
        jj_str_into(c, &b, *v);
        i = (size_t)(close - fmt.p);
    }
    return jj_buf_to_str(c, &b);
}

static struct jj_value partition(struct jj_ctx *c, struct jj_str s, struct jj_str sep,
                                 bool from_right)
{
    struct jj_list *l = jj_list_new(c, 3);
    l->is_tuple = true;
    int64_t idx = -1;
    if (sep.n == 0)
        jj_fail(c, JJ_FAIL_RUNTIME, "empty separator");
    if (!from_right) {
        const char *hit = memmem(s.p, s.n, sep.p, sep.n);
        idx = hit ? hit - s.p : -1;
    } else {
        for (size_t i = s.n >= sep.n ? s.n - sep.n + 1 : 0; i-- > 0;)
            if (memcmp(s.p + i, sep.p, sep.n) == 0) {
                idx = (int64_t)i;
                break;
            }
    }
    if (idx < 0) {
        struct jj_value empty = jj_str("", 0), whole = jj_str(s.p, s.n);
        l->items[0] = from_right ? empty : whole;
        l->items[1] = empty;
        l->items[2] = from_right ? whole : empty;
    } else {
        l->items[0] = jj_str(s.p, (size_t)idx);
        l->items[1] = jj_str(sep.p, sep.n);
        l->items[2] = jj_str(s.p + idx + sep.n, s.n - (size_t)idx - sep.n);
    }
    l->n = 3;
    return jj_list_value(l);
}

static struct jj_value call_str_method(struct jj_ctx *c, enum method m, struct jj_str s,
                                       struct jj_args *a)
{
    struct jj_value *a0 = jj_arg(a, 0, NULL), *a1 = jj_arg(a, 1, NULL);
    switch (m) {
    case M_STARTSWITH: return jj_bool(affix_match(c, s, a0, false));
    case M_ENDSWITH: return jj_bool(affix_match(c, s, a0, true));
    case M_STRIP:
    case M_LSTRIP:
    case M_RSTRIP: {
        struct jj_str chars;
        if (!opt_none(a0))
            chars = want_str(c, a0, "strip");
        struct jj_str r = jj_strip(s, opt_none(a0) ? NULL : &chars, m != M_RSTRIP,
                                   m != M_LSTRIP);
        return jj_str(r.p, r.n);
    }
    case M_SPLIT:
    case M_RSPLIT:
        return split(c, s, jj_arg(a, 0, "sep"), want_int(c, jj_arg(a, 1, "maxsplit"), -1),
                     m == M_RSPLIT);
    case M_SPLITLINES: return jj_list_value(jj_splitlines(c, s));
    case M_REPLACE:
        return replace(c, s, want_str(c, a0, "replace()"), want_str(c, a1, "replace()"),
                       want_int(c, jj_arg(a, 2, "count"), -1));
    case M_UPPER: return jj_str_case(c, s, 1);
    case M_LOWER: return jj_str_case(c, s, 0);
    case M_TITLE: return jj_str_case(c, s, 4);
    case M_CAPITALIZE: return jj_str_case(c, s, 3);
    case M_FIND:
    case M_RFIND:
    case M_INDEX: {
        int64_t r = find(s, want_str(c, a0, "find()"), m == M_RFIND);
        if (r < 0 && m == M_INDEX)
            jj_fail(c, JJ_FAIL_RUNTIME, "substring not found");
        return jj_int(r);
    }
    case M_COUNT: {
        struct jj_str sub = want_str(c, a0, "count()");
        if (sub.n == 0)
            return jj_int((int64_t)jj_utf8_count(s) + 1);
        int64_t n = 0;
        for (size_t i = 0; i + sub.n <= s.n;) {
            const char *hit = memmem(s.p + i, s.n - i, sub.p, sub.n);
            if (!hit)
                break;
            n++;
            i = (size_t)(hit - s.p) + sub.n;
        }
        return jj_int(n);
    }
    case M_JOIN: {
        if (!a0)
            jj_fail(c, JJ_FAIL_RUNTIME, "join() takes exactly one argument");
        struct jj_list *items = jj_iterate(c, *a0);
        struct jj_buf b = {0};
        for (size_t i = 0; i < items->n; i++) {
            if (items->items[i].kind != JJ_STR)
                jj_fail(c, JJ_FAIL_RUNTIME, "sequence item %zu: expected str instance, "
                        "%s found", i, jj_type_name(items->items[i]));
            if (i)
                jj_buf_put(c, &b, s.p, s.n);
            jj_buf_put(c, &b, items->items[i].u.s.p, items->items[i].u.s.n);
        }
        return jj_buf_to_str(c, &b);
    }
    case M_ISDIGIT: return jj_bool(all_chars(s, 0));
    case M_ISALPHA: return jj_bool(all_chars(s, 1));
    case M_ISALNUM: return jj_bool(all_chars(s, 2));
    case M_ISSPACE: return jj_bool(all_chars(s, 3));
    case M_ISUPPER: return jj_bool(all_chars(s, 4));
    case M_ISLOWER: return jj_bool(all_chars(s, 5));
    case M_FORMAT: return str_format(c, s, a);
    case M_REMOVEPREFIX:
    case M_REMOVESUFFIX: {
        struct jj_str x = want_str(c, a0, "remove");
        if (x.n <= s.n && m == M_REMOVEPREFIX && memcmp(s.p, x.p, x.n) == 0)
            return jj_str(s.p + x.n, s.n - x.n);
        if (x.n <= s.n && m == M_REMOVESUFFIX && memcmp(s.p + s.n - x.n, x.p, x.n) == 0)
            return jj_str(s.p, s.n - x.n);
        return jj_str(s.p, s.n);
    }
    case M_PARTITION:
    case M_RPARTITION: return partition(c, s, want_str(c, a0, "partition()"), m == M_RPARTITION);
    case M_ZFILL: {
        int64_t width = want_int(c, a0, 0);
        int64_t len = (int64_t)jj_utf8_count(s);
        if (width <= len)
            return jj_str(s.p, s.n);
        if (width > (int64_t)c->limits.max_output)
            jj_fail(c, JJ_FAIL_LIMIT, "zfill width too large");
        struct jj_buf b = {0};
        size_t off = 0;
        if (s.n && (s.p[0] == '-' || s.p[0] == '+')) {
            jj_buf_putc(c, &b, s.p[0]);
            off = 1;
        }
        for (int64_t i = 0; i < width - len; i++)
            jj_buf_putc(c, &b, '0');
        jj_buf_put(c, &b, s.p + off, s.n - off);
        return jj_buf_to_str(c, &b);
    }
    default: break;
    }
    jj_fail(c, JJ_FAIL_RUNTIME, "unsupported str method");
}

struct jj_value jj_call_method(struct jj_ctx *c, struct jj_func *fn, struct jj_args *a)
{
    struct jj_value self = fn->self;
    enum method m = (enum method)fn->id;
    if (self.kind == JJ_STR)
        return call_str_method(c, m, self.u.s, a);
    struct jj_value *a0 = jj_arg(a, 0, NULL);
    if (self.kind == JJ_DICT) {
        const struct jj_dict *d = self.u.dict;
        switch (m) {
        case M_ITEMS: {
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
        case M_KEYS:
        case M_VALUES: {
            struct jj_list *l = jj_list_new(c, d->n);
            memcpy(l->items, m == M_KEYS ? d->keys : d->vals, d->n * sizeof *l->items);
            l->n = d->n;
            return jj_list_value(l);
        }
        case M_GET: {
            if (!a0)
                jj_fail(c, JJ_FAIL_RUNTIME, "get expected at least 1 argument, got 0");
            struct jj_value *v = jj_dict_get(d, *a0);
            if (v)
                return *v;
            struct jj_value *dflt = jj_arg(a, 1, NULL);
            return dflt ? *dflt : jj_none();
        }
        case M_COPY: {
            struct jj_dict *copy = jj_dict_new(c, d->n);
            memcpy(copy->keys, d->keys, d->n * sizeof *d->keys);
            memcpy(copy->vals, d->vals, d->n * sizeof *d->vals);
            copy->n = d->n;
            return jj_dict_value(copy);
        }
        default: break;
        }
    }
    if (self.kind == JJ_LIST) {
        const struct jj_list *l = self.u.list;
        switch (m) {
        case M_INDEX:
            for (size_t i = 0; a0 && i < l->n; i++)
                if (jj_equal(l->items[i], *a0))
                    return jj_int((int64_t)i);
            jj_fail(c, JJ_FAIL_RUNTIME, "value is not in list");
        case M_COUNT: {
            int64_t n = 0;
            for (size_t i = 0; a0 && i < l->n; i++)
                n += jj_equal(l->items[i], *a0);
            return jj_int(n);
        }
        case M_COPY: {
            struct jj_list *copy = jj_list_new(c, l->n);
            memcpy(copy->items, l->items, l->n * sizeof *l->items);
            copy->n = l->n;
            return jj_list_value(copy);
        }
        default: break;
        }
    }
    jj_fail(c, JJ_FAIL_RUNTIME, "unsupported method '%s'", fn->name ? fn->name : "?");
}
