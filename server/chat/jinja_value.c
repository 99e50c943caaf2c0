/* Jinja values with Python's semantics: truth, equality, ordering, str() and repr(). */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "server/chat/jinja_internal.h"

/* ---- failure and allocation ------------------------------------------------------------------ */

void jj_fail(struct jj_ctx *c, enum jj_fail_kind kind, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (c->message && c->message_size) {
        va_list whole;
        va_copy(whole, ap);
        vsnprintf(c->message, c->message_size, fmt, whole);
        va_end(whole);
    }
    if (c->err)
        vsnprintf(c->err->msg, sizeof c->err->msg, fmt, ap);
    va_end(ap);
    c->fail_kind = kind;
    longjmp(c->fail, 1);
}

void jj_fail_undefined(struct jj_ctx *c, struct jj_value v)
{
    char msg[512];
    jj_undefined_message(&v, msg, sizeof msg);
    jj_fail(c, JJ_FAIL_RUNTIME, "%s", msg);
}

void *jj_alloc(struct jj_ctx *c, size_t size)
{
    void *p = jj_arena_alloc(&c->arena, size);
    if (!p)
        jj_fail(c, c->arena.limit && c->arena.total + size >= c->arena.limit ? JJ_FAIL_LIMIT
                                                                            : JJ_FAIL_NOMEM,
                "template rendering used more than %zu bytes of memory", c->limits.max_memory);
    return p;
}

void jj_step(struct jj_ctx *c)
{
    if (++c->steps > c->limits.max_steps)
        jj_fail(c, JJ_FAIL_LIMIT, "template ran more than %" PRIu64
                " loop iterations and calls", c->limits.max_steps);
}

/* ---- buffers ----------------------------------------------------------------------------------*/

/* Buffers grow in the render's arena, so an error unwinding past one leaks nothing. */
void jj_buf_put(struct jj_ctx *c, struct jj_buf *b, const char *p, size_t n)
{
    if (n == 0)
        return;
    if (b->n + n + 1 > b->cap) {
        if (b->n + n > c->limits.max_output)
            jj_fail(c, JJ_FAIL_LIMIT, "template output exceeds %zu bytes",
                    c->limits.max_output);
        size_t cap = b->cap ? b->cap * 2 : 64;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *np = jj_arena_alloc_raw(&c->arena, cap);
        if (!np)
            jj_fail(c, JJ_FAIL_LIMIT, "template rendering used more than %zu bytes of "
                    "memory", c->limits.max_memory);
        if (b->n)
            memcpy(np, b->p, b->n);
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = 0;
}

void jj_buf_putc(struct jj_ctx *c, struct jj_buf *b, char ch) { jj_buf_put(c, b, &ch, 1); }

struct jj_value jj_buf_to_str(struct jj_ctx *c, struct jj_buf *b)
{
    (void)c;
    struct jj_value v = jj_str(b->p ? b->p : "", b->n);
    *b = (struct jj_buf){0};
    return v;
}

/* ---- undefined --------------------------------------------------------------------------------*/

struct jj_value jj_undefined_name(struct jj_ctx *c, const char *name)
{
    struct jj_undef *u = jj_alloc(c, sizeof *u);
    u->style = JJ_UNDEF_NAME;
    u->key = jj_str(name, strlen(name));
    return (struct jj_value){.kind = JJ_UNDEFINED, .u.undef = u};
}

struct jj_value jj_undefined_attr(struct jj_ctx *c, struct jj_value obj, struct jj_value key)
{
    struct jj_undef *u = jj_alloc(c, sizeof *u);
    u->style = key.kind == JJ_STR ? JJ_UNDEF_ATTR : JJ_UNDEF_ELEMENT;
    u->obj_type = jj_object_type(obj);
    u->key = key;
    return (struct jj_value){.kind = JJ_UNDEFINED, .u.undef = u};
}

struct jj_value jj_undefined_hint(struct jj_ctx *c, const char *hint)
{
    struct jj_undef *u = jj_alloc(c, sizeof *u);
    u->style = JJ_UNDEF_HINT;
    u->hint = hint;
    return (struct jj_value){.kind = JJ_UNDEFINED, .u.undef = u};
}

/* repr() without a context: only for short keys in messages. */
static void repr_short(struct jj_value v, char *buf, size_t size)
{
    if (v.kind == JJ_STR) {
        char q = memchr(v.u.s.p, '\'', v.u.s.n) && !memchr(v.u.s.p, '"', v.u.s.n) ? '"' : '\'';
        snprintf(buf, size, "%c%.*s%c", q, (int)(v.u.s.n > 200 ? 200 : v.u.s.n), v.u.s.p, q);
    } else if (v.kind == JJ_INT) {
        snprintf(buf, size, "%" PRId64, v.u.i);
    } else {
        snprintf(buf, size, "%s", jj_type_name(v));
    }
}

void jj_undefined_message(const struct jj_value *v, char *buf, size_t size)
{
    const struct jj_undef *u = v->kind == JJ_UNDEFINED ? v->u.undef : NULL;
    char key[256];
    if (!u) {
        snprintf(buf, size, "value is undefined");
        return;
    }
    switch (u->style) {
    case JJ_UNDEF_NAME:
        repr_short(u->key, key, sizeof key);
        snprintf(buf, size, "%s is undefined", key);
        break;
    case JJ_UNDEF_ATTR:
        repr_short(u->key, key, sizeof key);
        snprintf(buf, size, "'%s' has no attribute %s", u->obj_type, key);
        break;
    case JJ_UNDEF_ELEMENT:
        repr_short(u->key, key, sizeof key);
        snprintf(buf, size, "%s has no element %s", u->obj_type, key);
        break;
    case JJ_UNDEF_HINT:
        snprintf(buf, size, "%s", u->hint);
        break;
    }
}

/* ---- containers ------------------------------------------------------------------------------*/

struct jj_list *jj_list_new(struct jj_ctx *c, size_t cap)
{
    struct jj_list *l = jj_alloc(c, sizeof *l);
    if (cap) {
        l->items = jj_alloc(c, cap * sizeof *l->items);
        l->cap = cap;
    }
    return l;
}

void jj_list_push(struct jj_ctx *c, struct jj_list *l, struct jj_value v)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        struct jj_value *items = jj_alloc(c, cap * sizeof *items);
        if (l->n)
            memcpy(items, l->items, l->n * sizeof *items);
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = v;
}

struct jj_value jj_list_value(struct jj_list *l)
{
    return (struct jj_value){.kind = JJ_LIST, .u.list = l};
}

struct jj_dict *jj_dict_new(struct jj_ctx *c, size_t cap)
{
    struct jj_dict *d = jj_alloc(c, sizeof *d);
    if (cap) {
        d->keys = jj_alloc(c, cap * sizeof *d->keys);
        d->vals = jj_alloc(c, cap * sizeof *d->vals);
        d->cap = cap;
    }
    return d;
}

struct jj_value *jj_dict_get_str(const struct jj_dict *d, const char *key, size_t n)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->keys[i].kind == JJ_STR && d->keys[i].u.s.n == n &&
            memcmp(d->keys[i].u.s.p, key, n) == 0)
            return &d->vals[i];
    return NULL;
}

struct jj_value *jj_dict_get(const struct jj_dict *d, struct jj_value key)
{
    if (key.kind == JJ_STR)
        return jj_dict_get_str(d, key.u.s.p, key.u.s.n);
    for (size_t i = 0; i < d->n; i++)
        if (jj_equal(d->keys[i], key))
            return &d->vals[i];
    return NULL;
}

void jj_dict_set(struct jj_ctx *c, struct jj_dict *d, struct jj_value key, struct jj_value v)
{
    struct jj_value *slot = jj_dict_get(d, key);
    if (slot) {
        *slot = v;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        struct jj_value *keys = jj_alloc(c, cap * sizeof *keys);
        struct jj_value *vals = jj_alloc(c, cap * sizeof *vals);
        if (d->n) {
            memcpy(keys, d->keys, d->n * sizeof *keys);
            memcpy(vals, d->vals, d->n * sizeof *vals);
        }
        d->keys = keys;
        d->vals = vals;
        d->cap = cap;
    }
    d->keys[d->n] = key;
    d->vals[d->n] = v;
    d->n++;
}

struct jj_value jj_dict_value(struct jj_dict *d)
{
    return (struct jj_value){.kind = JJ_DICT, .u.dict = d};
}

/* ---- Python semantics ----------------------------------------------------------------------- */

const char *jj_type_name(struct jj_value v)
{
    switch (v.kind) {
    case JJ_UNDEFINED: return "Undefined";
    case JJ_NONE: return "NoneType";
    case JJ_BOOL: return "bool";
    case JJ_INT: return "int";
    case JJ_FLOAT: return "float";
    case JJ_STR: return "str";
    case JJ_LIST: return v.u.list->is_tuple ? "tuple" : "list";
    case JJ_DICT: return "dict";
    case JJ_NS: return "Namespace";
    case JJ_FUNC: return v.u.fn->kind == JJ_FN_MACRO ? "Macro" : "function";
    case JJ_LOOP: return "LoopContext";
    }
    return "object";
}

const char *jj_object_type(struct jj_value v)
{
    switch (v.kind) {
    case JJ_NONE: return "None";
    case JJ_BOOL: return "bool object";
    case JJ_INT: return "int object";
    case JJ_FLOAT: return "float object";
    case JJ_STR: return "str object";
    case JJ_LIST: return v.u.list->is_tuple ? "tuple object" : "list object";
    case JJ_DICT: return "dict object";
    case JJ_NS: return "jinja2.utils.Namespace object";
    case JJ_FUNC: return "jinja2.runtime.Macro object";
    case JJ_LOOP: return "jinja2.runtime.LoopContext object";
    case JJ_UNDEFINED: return "jinja2.runtime.Undefined object";
    }
    return "object";
}

bool jj_is_number(struct jj_value v)
{
    return v.kind == JJ_BOOL || v.kind == JJ_INT || v.kind == JJ_FLOAT;
}

double jj_as_double(struct jj_value v)
{
    switch (v.kind) {
    case JJ_BOOL: return v.u.b ? 1.0 : 0.0;
    case JJ_INT: return (double)v.u.i;
    case JJ_FLOAT: return v.u.f;
    default: return 0.0;
    }
}

static int64_t as_int(struct jj_value v) { return v.kind == JJ_BOOL ? v.u.b : v.u.i; }

bool jj_truthy(struct jj_value v)
{
    switch (v.kind) {
    case JJ_UNDEFINED:
    case JJ_NONE: return false;
    case JJ_BOOL: return v.u.b;
    case JJ_INT: return v.u.i != 0;
    case JJ_FLOAT: return v.u.f != 0.0;
    case JJ_STR: return v.u.s.n != 0;
    case JJ_LIST: return v.u.list->n != 0;
    case JJ_DICT: return v.u.dict->n != 0;
    default: return true;
    }
}

bool jj_equal(struct jj_value a, struct jj_value b)
{
    if (jj_is_number(a) && jj_is_number(b)) {
        if (a.kind != JJ_FLOAT && b.kind != JJ_FLOAT)
            return as_int(a) == as_int(b);
        return jj_as_double(a) == jj_as_double(b);
    }
    if (a.kind != b.kind)
        return false;
    switch (a.kind) {
    case JJ_UNDEFINED:
    case JJ_NONE: return true;
    case JJ_STR: return a.u.s.n == b.u.s.n && memcmp(a.u.s.p, b.u.s.p, a.u.s.n) == 0;
    case JJ_LIST:
        if (a.u.list->is_tuple != b.u.list->is_tuple || a.u.list->n != b.u.list->n)
            return false;
        for (size_t i = 0; i < a.u.list->n; i++)
            if (!jj_equal(a.u.list->items[i], b.u.list->items[i]))
                return false;
        return true;
    case JJ_DICT:
        if (a.u.dict->n != b.u.dict->n)
            return false;
        for (size_t i = 0; i < a.u.dict->n; i++) {
            struct jj_value *o = jj_dict_get(b.u.dict, a.u.dict->keys[i]);
            if (!o || !jj_equal(a.u.dict->vals[i], *o))
                return false;
        }
        return true;
    case JJ_NS: return a.u.dict == b.u.dict;
    case JJ_FUNC: return a.u.fn == b.u.fn;
    case JJ_LOOP: return a.u.loop == b.u.loop;
    default: return false;
    }
}

int jj_compare(struct jj_ctx *c, struct jj_value a, struct jj_value b)
{
    if (a.kind == JJ_UNDEFINED)
        jj_fail_undefined(c, a);
    if (b.kind == JJ_UNDEFINED)
        jj_fail_undefined(c, b);
    if (jj_is_number(a) && jj_is_number(b)) {
        if (a.kind != JJ_FLOAT && b.kind != JJ_FLOAT)
            return as_int(a) < as_int(b) ? -1 : as_int(a) > as_int(b);
        double x = jj_as_double(a), y = jj_as_double(b);
        return x < y ? -1 : x > y;
    }
    if (a.kind == JJ_STR && b.kind == JJ_STR) {
        size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
        int r = n ? memcmp(a.u.s.p, b.u.s.p, n) : 0;
        if (r)
            return r;
        return a.u.s.n < b.u.s.n ? -1 : a.u.s.n > b.u.s.n;
    }
    if (a.kind == JJ_LIST && b.kind == JJ_LIST && a.u.list->is_tuple == b.u.list->is_tuple) {
        size_t n = a.u.list->n < b.u.list->n ? a.u.list->n : b.u.list->n;
        for (size_t i = 0; i < n; i++) {
            if (jj_equal(a.u.list->items[i], b.u.list->items[i]))
                continue;
            return jj_compare(c, a.u.list->items[i], b.u.list->items[i]);
        }
        return a.u.list->n < b.u.list->n ? -1 : a.u.list->n > b.u.list->n;
    }
    jj_fail(c, JJ_FAIL_RUNTIME, "'<' not supported between instances of '%s' and '%s'",
            jj_type_name(a), jj_type_name(b));
}

/* ---- str() and repr() ------------------------------------------------------------------------ */

void jj_format_float(double f, char *buf, size_t size)
{
    if (isnan(f)) {
        snprintf(buf, size, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(buf, size, f < 0 ? "-inf" : "inf");
        return;
    }
    /* the shortest digits that read back as f */
    char e[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, f);
        if (strtod(e, NULL) == f)
            break;
    }
    /* e = [-]d[.ddd]e[+-]xx */
    const char *p = e;
    bool neg = *p == '-';
    if (neg)
        p++;
    char digits[24];
    size_t nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    int exp10 = (int)strtol(p + 1, NULL, 10); /* value = d.ddd x 10^exp10 */
    int decpt = exp10 + 1;   /* digits before the point */
    char out[64];
    size_t k = 0;
    if (neg)
        out[k++] = '-';
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            out[k++] = '0';
            out[k++] = '.';
            for (int i = 0; i < -decpt; i++)
                out[k++] = '0';
            for (size_t i = 0; i < nd; i++)
                out[k++] = digits[i];
        } else {
            for (int i = 0; i < decpt; i++)
                out[k++] = (size_t)i < nd ? digits[i] : '0';
            out[k++] = '.';
            if ((size_t)decpt < nd)
                for (size_t i = (size_t)decpt; i < nd; i++)
                    out[k++] = digits[i];
            else
                out[k++] = '0';
        }
        out[k] = 0;
    } else {
        out[k++] = digits[0];
        if (nd > 1) {
            out[k++] = '.';
            for (size_t i = 1; i < nd; i++)
                out[k++] = digits[i];
        }
        snprintf(out + k, sizeof out - k, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    }
    snprintf(buf, size, "%s", out);
}

static void repr_str(struct jj_ctx *c, struct jj_buf *b, struct jj_str s)
{
    bool has_sq = memchr(s.p, '\'', s.n) != NULL, has_dq = memchr(s.p, '"', s.n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    jj_buf_putc(c, b, q);
    for (size_t i = 0; i < s.n; i++) {
        unsigned char ch = (unsigned char)s.p[i];
        char esc[16];
        if (ch == (unsigned char)q || ch == '\\') {
            esc[0] = '\\';
            esc[1] = (char)ch;
            jj_buf_put(c, b, esc, 2);
        } else if (ch == '\n') {
            jj_buf_put(c, b, "\\n", 2);
        } else if (ch == '\r') {
            jj_buf_put(c, b, "\\r", 2);
        } else if (ch == '\t') {
            jj_buf_put(c, b, "\\t", 2);
        } else if (ch < 0x20 || ch == 0x7f) {
            snprintf(esc, sizeof esc, "\\x%02x", ch);
            jj_buf_put(c, b, esc, 4);
        } else if (ch < 0x80) {
            jj_buf_putc(c, b, (char)ch);
        } else {
            /* Python escapes what str.isprintable rejects: C1 controls, format characters,
             * separators other than ' ', unassigned code points */
            size_t len;
            int32_t cp = jj_utf8_decode(s.p + i, s.n - i, &len);
            if (len == 1 || jj_cp_printable(cp)) {
                jj_buf_put(c, b, s.p + i, len);
            } else {
                int n = snprintf(esc, sizeof esc, cp < 0x100 ? "\\x%02x" : cp < 0x10000 ?
                                 "\\u%04x" : "\\U%08x", (unsigned)cp);
                jj_buf_put(c, b, esc, (size_t)n);
            }
            i += len - 1;
        }
    }
    jj_buf_putc(c, b, q);
}

static void put_int(struct jj_ctx *c, struct jj_buf *b, int64_t i)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%" PRId64, i);
    jj_buf_put(c, b, tmp, (size_t)n);
}

static void put_float(struct jj_ctx *c, struct jj_buf *b, double f)
{
    char tmp[64];
    jj_format_float(f, tmp, sizeof tmp);
    jj_buf_put(c, b, tmp, strlen(tmp));
}

static void repr_or_str(struct jj_ctx *c, struct jj_buf *b, struct jj_value v, bool repr)
{
    switch (v.kind) {
    case JJ_UNDEFINED:
        if (repr)
            jj_buf_put(c, b, "Undefined", 9);
        break;
    case JJ_NONE: jj_buf_put(c, b, "None", 4); break;
    case JJ_BOOL: jj_buf_put(c, b, v.u.b ? "True" : "False", v.u.b ? 4 : 5); break;
    case JJ_INT: put_int(c, b, v.u.i); break;
    case JJ_FLOAT: put_float(c, b, v.u.f); break;
    case JJ_STR:
        if (repr)
            repr_str(c, b, v.u.s);
        else
            jj_buf_put(c, b, v.u.s.p, v.u.s.n);
        break;
    case JJ_LIST: {
        const struct jj_list *l = v.u.list;
        jj_buf_putc(c, b, l->is_tuple ? '(' : '[');
        for (size_t i = 0; i < l->n; i++) {
            if (i)
                jj_buf_put(c, b, ", ", 2);
            repr_or_str(c, b, l->items[i], true);
        }
        if (l->is_tuple && l->n == 1)
            jj_buf_putc(c, b, ',');
        jj_buf_putc(c, b, l->is_tuple ? ')' : ']');
        break;
    }
    case JJ_DICT: {
        const struct jj_dict *d = v.u.dict;
        jj_buf_putc(c, b, '{');
        for (size_t i = 0; i < d->n; i++) {
            if (i)
                jj_buf_put(c, b, ", ", 2);
            repr_or_str(c, b, d->keys[i], true);
            jj_buf_put(c, b, ": ", 2);
            repr_or_str(c, b, d->vals[i], true);
        }
        jj_buf_putc(c, b, '}');
        break;
    }
    case JJ_NS: {
        const struct jj_dict *d = v.u.dict;
        jj_buf_put(c, b, "<Namespace {", 12);
        for (size_t i = 0; i < d->n; i++) {
            if (i)
                jj_buf_put(c, b, ", ", 2);
            repr_or_str(c, b, d->keys[i], true);
            jj_buf_put(c, b, ": ", 2);
            repr_or_str(c, b, d->vals[i], true);
        }
        jj_buf_put(c, b, "}>", 2);
        break;
    }
    case JJ_FUNC: {
        const char *name = v.u.fn->name ? v.u.fn->name : "function";
        jj_buf_put(c, b, "<function ", 10);
        jj_buf_put(c, b, name, strlen(name));
        jj_buf_putc(c, b, '>');
        break;
    }
    case JJ_LOOP: jj_buf_put(c, b, "<LoopContext>", 13); break;
    }
}

void jj_str_into(struct jj_ctx *c, struct jj_buf *b, struct jj_value v)
{
    repr_or_str(c, b, v, false);
}

void jj_repr_into(struct jj_ctx *c, struct jj_buf *b, struct jj_value v)
{
    repr_or_str(c, b, v, true);
}

struct jj_value jj_to_str(struct jj_ctx *c, struct jj_value v)
{
    if (v.kind == JJ_STR)
        return v;
    if (v.kind == JJ_UNDEFINED)
        return jj_str("", 0);
    struct jj_buf b = {0};
    jj_str_into(c, &b, v);
    return jj_buf_to_str(c, &b);
}

/* ---- JSON input ------------------------------------------------------------------------------ */

struct jj_value jj_from_json(struct jj_ctx *c, const void *json)
{
    const json_t *j = json;
    switch (json_typeof(j)) {
    case JSON_NULL: return jj_none();
    case JSON_TRUE: return jj_bool(true);
    case JSON_FALSE: return jj_bool(false);
    case JSON_INTEGER: return jj_int((int64_t)json_integer_value(j));
    case JSON_REAL: return jj_float(json_real_value(j));
    case JSON_STRING: return jj_str(json_string_value(j), json_string_length(j));
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        struct jj_list *l = jj_list_new(c, n);
        for (size_t i = 0; i < n; i++)
            l->items[i] = jj_from_json(c, json_array_get(j, i));
        l->n = n;
        return jj_list_value(l);
    }
    case JSON_OBJECT: {
        size_t n = json_object_size(j);
        struct jj_dict *d = jj_dict_new(c, n);
        const char *key;
        size_t klen;
        json_t *val;
        /* keys are unique in a json_t, so append without lookups */
        json_object_keylen_foreach((json_t *)j, key, klen, val) {
            d->keys[d->n] = jj_str(key, klen);
            d->vals[d->n] = jj_from_json(c, val);
            d->n++;
        }
        return jj_dict_value(d);
    }
    }
    return jj_none();
}

/* ---- iteration ----------------------------------------------------------------------------- */

struct jj_list *jj_iterate(struct jj_ctx *c, struct jj_value v)
{
    switch (v.kind) {
    case JJ_UNDEFINED: return jj_list_new(c, 0);
    case JJ_LIST: return v.u.list;
    case JJ_DICT: {
        struct jj_list *l = jj_list_new(c, v.u.dict->n);
        memcpy(l->items, v.u.dict->keys, v.u.dict->n * sizeof *l->items);
        l->n = v.u.dict->n;
        return l;
    }
    case JJ_STR: {
        struct jj_list *l = jj_list_new(c, v.u.s.n);
        for (size_t i = 0; i < v.u.s.n;) {
            size_t len = 1;
            unsigned char ch = (unsigned char)v.u.s.p[i];
            if (ch >= 0xF0)
                len = 4;
            else if (ch >= 0xE0)
                len = 3;
            else if (ch >= 0xC0)
                len = 2;
            if (i + len > v.u.s.n)
                len = v.u.s.n - i;
            l->items[l->n++] = jj_str(v.u.s.p + i, len);
            i += len;
        }
        return l;
    }
    default:
        jj_fail(c, JJ_FAIL_RUNTIME, "'%s' object is not iterable", jj_type_name(v));
    }
}

int64_t jj_length(struct jj_ctx *c, struct jj_value v)
{
    switch (v.kind) {
    case JJ_UNDEFINED: return 0;
    case JJ_STR: return (int64_t)jj_utf8_count(v.u.s);
    case JJ_LIST: return (int64_t)v.u.list->n;
    case JJ_DICT: return (int64_t)v.u.dict->n;
    default:
        jj_fail(c, JJ_FAIL_RUNTIME, "object of type '%s' has no len()", jj_type_name(v));
    }
}
