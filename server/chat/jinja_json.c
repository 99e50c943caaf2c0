/* The tojson filter transformers installs: Python's json.dumps, byte for byte. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/chat/jinja_internal.h"

static uint32_t decode_cp(const char *p, size_t n, size_t *len)
{
    unsigned char ch = (unsigned char)p[0];
    size_t want = ch >= 0xF0 ? 4 : ch >= 0xE0 ? 3 : ch >= 0xC0 ? 2 : 1;
    if (want > n)
        want = 1;
    uint32_t cp = want == 4 ? ch & 0x07u : want == 3 ? ch & 0x0Fu : want == 2 ? ch & 0x1Fu : ch;
    for (size_t k = 1; k < want; k++)
        cp = (cp << 6) | ((unsigned char)p[k] & 0x3Fu);
    *len = want;
    return cp;
}

static void put_escaped(struct jj_ctx *c, struct jj_buf *b, struct jj_str s, bool ensure_ascii)
{
    jj_buf_putc(c, b, '"');
    size_t start = 0; /* bytes from start to i are copied as they are, in one go */
    for (size_t i = 0; i < s.n;) {
        unsigned char ch = (unsigned char)s.p[i];
        const char *esc = NULL;
        char tmp[16];
        size_t len = 1;
        switch (ch) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (ch < 0x20) {
                snprintf(tmp, sizeof tmp, "\\u%04x", ch);
                esc = tmp;
            } else if (ch >= 0x80 && ensure_ascii) {
                uint32_t cp = decode_cp(s.p + i, s.n - i, &len);
                if (cp >= 0x10000) {
                    uint32_t v = cp - 0x10000;
                    snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", (unsigned)(0xD800 + (v >> 10)),
                             (unsigned)(0xDC00 + (v & 0x3FF)));
                } else {
                    snprintf(tmp, sizeof tmp, "\\u%04x", (unsigned)cp);
                }
                esc = tmp;
            }
        }
        if (esc) {
            jj_buf_put(c, b, s.p + start, i - start);
            jj_buf_put(c, b, esc, strlen(esc));
            start = i + len;
        }
        i += len;
    }
    jj_buf_put(c, b, s.p + start, s.n - start);
    jj_buf_putc(c, b, '"');
}

static void newline_indent(struct jj_ctx *c, struct jj_buf *b, const struct jj_json_opts *o,
                           unsigned level)
{
    jj_buf_putc(c, b, '\n');
    for (unsigned i = 0; i < level; i++)
        jj_buf_put(c, b, o->indent.p, o->indent.n);
}

static int key_cmp(const void *x, const void *y)
{
    const struct jj_str *a = x, *b = y;
    size_t n = a->n < b->n ? a->n : b->n;
    int r = n ? memcmp(a->p, b->p, n) : 0;
    return r ? r : (a->n > b->n) - (a->n < b->n);
}

static void dump(struct jj_ctx *c, struct jj_buf *b, struct jj_value v,
                 const struct jj_json_opts *o, unsigned level)
{
    if (level > 200)
        jj_fail(c, JJ_FAIL_LIMIT, "tojson: value nested too deep");
    char tmp[64];
    switch (v.kind) {
    case JJ_NONE: jj_buf_put(c, b, "null", 4); return;
    case JJ_BOOL: jj_buf_put(c, b, v.u.b ? "true" : "false", v.u.b ? 4 : 5); return;
    case JJ_INT:
        snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i);
        jj_buf_put(c, b, tmp, strlen(tmp));
        return;
    case JJ_FLOAT:
        if (isnan(v.u.f))
            snprintf(tmp, sizeof tmp, "NaN");
        else if (isinf(v.u.f))
            snprintf(tmp, sizeof tmp, v.u.f < 0 ? "-Infinity" : "Infinity");
        else
            jj_format_float(v.u.f, tmp, sizeof tmp);
        jj_buf_put(c, b, tmp, strlen(tmp));
        return;
    case JJ_STR: put_escaped(c, b, v.u.s, o->ensure_ascii); return;
    case JJ_LIST: {
        const struct jj_list *l = v.u.list;
        if (l->n == 0) {
            jj_buf_put(c, b, "[]", 2);
            return;
        }
        jj_buf_putc(c, b, '[');
        for (size_t i = 0; i < l->n; i++) {
            if (i)
                jj_buf_put(c, b, o->item_sep.p, o->item_sep.n);
            if (o->has_indent)
                newline_indent(c, b, o, level + 1);
            dump(c, b, l->items[i], o, level + 1);
        }
        if (o->has_indent)
            newline_indent(c, b, o, level);
        jj_buf_putc(c, b, ']');
        return;
    }
    case JJ_DICT:
    case JJ_NS: {
        const struct jj_dict *d = v.u.dict;
        if (d->n == 0) {
            jj_buf_put(c, b, "{}", 2);
            return;
        }
        size_t *order = jj_alloc(c, d->n * sizeof *order);
        for (size_t i = 0; i < d->n; i++)
            order[i] = i;
        if (o->sort_keys) {
            /* sort indices by key; keys must all be strings to sort */
            struct jj_str *keys = jj_alloc(c, d->n * sizeof *keys);
            for (size_t i = 0; i < d->n; i++) {
                if (d->keys[i].kind != JJ_STR)
                    jj_fail(c, JJ_FAIL_RUNTIME, "tojson: sort_keys needs string keys");
                keys[i] = d->keys[i].u.s;
            }
            /* insertion sort of indices keeps equal keys stable */
            for (size_t i = 1; i < d->n; i++) {
                size_t cur = order[i], j = i;
                while (j > 0 && key_cmp(&keys[order[j - 1]], &keys[cur]) > 0) {
                    order[j] = order[j - 1];
                    j--;
                }
                order[j] = cur;
            }
        }
        jj_buf_putc(c, b, '{');
        for (size_t k = 0; k < d->n; k++) {
            size_t i = order[k];
            if (k)
                jj_buf_put(c, b, o->item_sep.p, o->item_sep.n);
            if (o->has_indent)
                newline_indent(c, b, o, level + 1);
            struct jj_value key = d->keys[i];
            switch (key.kind) {
            case JJ_STR: put_escaped(c, b, key.u.s, o->ensure_ascii); break;
            case JJ_NONE: jj_buf_put(c, b, "\"null\"", 6); break;
            case JJ_BOOL:
                jj_buf_put(c, b, key.u.b ? "\"true\"" : "\"false\"", key.u.b ? 6 : 7);
                break;
            case JJ_INT:
            case JJ_FLOAT:
                jj_buf_putc(c, b, '"');
                dump(c, b, key, o, level + 1);
                jj_buf_putc(c, b, '"');
                break;
            default:
                jj_fail(c, JJ_FAIL_RUNTIME, "keys must be str, int, float, bool or None, "
                        "not %s", jj_type_name(key));
            }
            jj_buf_put(c, b, o->key_sep.p, o->key_sep.n);
            dump(c, b, d->vals[i], o, level + 1);
        }
        if (o->has_indent)
            newline_indent(c, b, o, level);
        jj_buf_putc(c, b, '}');
        return;
    }
    default:
        jj_fail(c, JJ_FAIL_RUNTIME, "Object of type %s is not JSON serializable",
                jj_type_name(v));
    }
}

void jj_tojson(struct jj_ctx *c, struct jj_buf *b, struct jj_value v,
               const struct jj_json_opts *opts)
{
    dump(c, b, v, opts, 0);
}
