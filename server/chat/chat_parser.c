/* The streaming output parser for the QWEN (Qwen3-Coder XML calls) and FLINT (GLM-4.7 argument
 * tags) formats; a HARMONY format's output goes to harmony_parser.c. Text waits in `pend`
 * only while it may still be the start of a tag. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/chat/chat_parser.h"
#include "server/chat/harmony_parser.h"

enum state {
    S_START,     /* FLINT: before the first output, which may open a think block */
    S_REASON,
    S_CONTENT,
    S_CALL_HEAD, /* pend opens with <tool_call>; waiting for the function name */
    S_ARGS,      /* between arguments */
    S_KEY,       /* FLINT: inside <arg_key> */
    S_VALUE_OPEN,/* FLINT: between </arg_key> and <arg_value> */
    S_VALUE,
    S_CALL_TAIL, /* QWEN: after </function>, before </tool_call> */
};

enum vtype { VT_STRING, VT_TYPED };

struct splash_chat_parser {
    const struct splash_chat_format *f;
    struct harmony_parser *harmony; /* a HARMONY format's parser: every call goes to it */
    const json_t *tools;
    enum state state;
    char *buf;        /* held-back output: pend = buf + head, n bytes */
    char *pend;
    size_t head, n, cap;
    int n_calls;
    int n_args;
    const json_t *props; /* the current tool's parameter properties */
    char key[256];
    enum vtype vtype;
    const json_t *vschema;
    char *val; /* a typed value, converted when it closes */
    size_t vn, vcap;
    bool value_lead;    /* QWEN: the value's first newline is markup */
    int strip_newlines; /* QWEN: newlines after </think> are markup */
    bool after_call;    /* whitespace between calls is markup */
    bool oom;
};

#define MAX_NAME 255

/* ---- buffers and deltas ------------------------------------------------------------------- */

static bool grow(char **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap * 2 : 256;
    while (c < need)
        c *= 2;
    char *np = realloc(*p, c);
    if (!np)
        return false;
    *p = np;
    *cap = c;
    return true;
}

static void emit(splash_chat_delta_fn fn, void *user, enum splash_chat_delta_kind kind, int call,
                 const char *text, size_t len)
{
    if (len == 0 && kind != SPLASH_DELTA_CALL_NAME)
        return;
    struct splash_chat_delta d = {kind, call, text, len};
    fn(user, &d);
}

/* Drops the first k pending bytes: the start moves, so a long feed is parsed in one pass
 * (feed moves what is left to the front once). */
static void consume(struct splash_chat_parser *p, size_t k)
{
    p->head += k;
    p->pend += k;
    p->n -= k;
}

static bool starts(const char *s, size_t n, const char *tag)
{
    size_t t = strlen(tag);
    return n >= t && memcmp(s, tag, t) == 0;
}

/* s is a proper prefix of tag (more input may complete it). */
static bool prefix_of(const char *s, size_t n, const char *tag)
{
    size_t t = strlen(tag);
    return n < t && memcmp(s, tag, n) == 0;
}

/* The earliest of the markers in s: returns its index and sets *at. Else -1, and *at is how
 * many bytes are certainly not the start of one. */
static int scan(const char *s, size_t n, const char *const *markers, size_t nm, size_t *at)
{
    int best = -1;
    size_t best_at = n;
    for (size_t m = 0; m < nm; m++) {
        size_t t = strlen(markers[m]);
        if (!t || t > n)
            continue;
        const char *hit = memmem(s, n, markers[m], t);
        if (hit && (size_t)(hit - s) < best_at) {
            best_at = (size_t)(hit - s);
            best = (int)m;
        }
    }
    if (best >= 0) {
        *at = best_at;
        return best;
    }
    size_t safe = n;
    for (size_t m = 0; m < nm; m++) {
        size_t t = strlen(markers[m]);
        for (size_t k = t - 1; k > 0; k--)
            if (k <= n && memcmp(s + n - k, markers[m], k) == 0) {
                if (n - k < safe)
                    safe = n - k;
                break;
            }
    }
    *at = safe;
    return -1;
}

static size_t skip_ws(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r'))
        i++;
    return i;
}

/* JSON string escaping of a value fragment. */
static void emit_escaped(struct splash_chat_parser *p, splash_chat_delta_fn fn, void *user,
                         const char *s, size_t n)
{
    char buf[512];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (k + 8 > sizeof buf) {
            emit(fn, user, SPLASH_DELTA_CALL_ARGS, p->n_calls - 1, buf, k);
            k = 0;
        }
        if (c == '"' || c == '\\') {
            buf[k++] = '\\';
            buf[k++] = (char)c;
        } else if (c == '\n') {
            buf[k++] = '\\';
            buf[k++] = 'n';
        } else if (c == '\r') {
            buf[k++] = '\\';
            buf[k++] = 'r';
        } else if (c == '\t') {
            buf[k++] = '\\';
            buf[k++] = 't';
        } else if (c < 0x20) {
            k += (size_t)snprintf(buf + k, sizeof buf - k, "\\u%04x", c);
        } else {
            buf[k++] = (char)c;
        }
    }
    emit(fn, user, SPLASH_DELTA_CALL_ARGS, p->n_calls - 1, buf, k);
}

/* ---- argument types ------------------------------------------------------------------------- */

static const json_t *find_tool_props(const json_t *tools, const char *name)
{
    size_t i;
    const json_t *tool;
    json_array_foreach(tools, i, tool) {
        const json_t *fn = json_object_get(tool, "function");
        if (!fn)
            fn = tool;
        const char *n = json_string_value(json_object_get(fn, "name"));
        if (n && strcmp(n, name) == 0)
            return json_object_get(json_object_get(fn, "parameters"), "properties");
    }
    return NULL;
}

static bool type_allows(const json_t *schema, const char *type)
{
    const json_t *t = json_object_get(schema, "type");
    if (json_is_string(t))
        return strcmp(json_string_value(t), type) == 0;
    size_t i;
    const json_t *e;
    json_array_foreach(t, i, e)
        if (json_is_string(e) && strcmp(json_string_value(e), type) == 0)
            return true;
    return false;
}

/* Converts a typed value by its schema: integer, number, boolean, null, object, array; text
 * that parses as none of its types is kept as a string. Returns malloc'ed JSON text. */
static char *convert_value(const json_t *schema, const char *s, size_t n)
{
    size_t b = skip_ws(s, n), e = n;
    while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\n' || s[e - 1] == '\t' || s[e - 1] == '\r'))
        e--;
    json_t *v = json_loadb(s + b, e - b, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    bool ok = false;
    if (v) {
        bool any = !schema || !json_object_get(schema, "type");
        switch (json_typeof(v)) {
        case JSON_INTEGER: ok = any || type_allows(schema, "integer") ||
                                type_allows(schema, "number"); break;
        case JSON_REAL: ok = any || type_allows(schema, "number"); break;
        case JSON_TRUE:
        case JSON_FALSE: ok = any || type_allows(schema, "boolean"); break;
        case JSON_NULL: ok = any || type_allows(schema, "null"); break;
        case JSON_OBJECT: ok = any || type_allows(schema, "object"); break;
        case JSON_ARRAY: ok = any || type_allows(schema, "array"); break;
        case JSON_STRING: ok = false; break;
        }
    }
    if (!v && schema && type_allows(schema, "boolean") && e - b >= 4) {
        /* Python spellings */
        if (e - b == 4 && memcmp(s + b, "True", 4) == 0)
            v = json_true(), ok = true;
        else if (e - b == 5 && memcmp(s + b, "False", 5) == 0)
            v = json_false(), ok = true;
    }
    char *out;
    if (ok) {
        out = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_PRESERVE_ORDER);
    } else {
        json_t *str = json_stringn(s, n);
        out = str ? json_dumps(str, JSON_ENCODE_ANY) : NULL;
        json_decref(str);
    }
    json_decref(v);
    return out;
}

/* ---- calls -----------------------------------------------------------------------------------*/

static void open_call(struct splash_chat_parser *p, splash_chat_delta_fn fn, void *user,
                      const char *name, size_t len)
{
    char n[MAX_NAME + 1];
    memcpy(n, name, len);
    n[len] = 0;
    p->props = find_tool_props(p->tools, n);
    p->n_calls++;
    p->n_args = 0;
    emit(fn, user, SPLASH_DELTA_CALL_NAME, p->n_calls - 1, name, len);
    emit(fn, user, SPLASH_DELTA_CALL_ARGS, p->n_calls - 1, "{", 1);
}

static void close_call(struct splash_chat_parser *p, splash_chat_delta_fn fn, void *user)
{
    emit(fn, user, SPLASH_DELTA_CALL_ARGS, p->n_calls - 1, "}", 1);
    p->after_call = true;
}

static void open_value(struct splash_chat_parser *p, splash_chat_delta_fn fn, void *user)
{
    json_t *key = json_string(p->key);
    if (!key) /* not UTF-8 (output the server has not sanitized): still a key */
        key = json_string("\xEF\xBF\xBD");
    char *k = key ? json_dumps(key, JSON_ENCODE_ANY) : NULL;
    json_decref(key);
    if (p->n_args)
        emit(fn, user, SPLASH_DELTA_CALL_ARGS, p->n_calls - 1, ", ", 2);
    if (k) {
        emit(fn, user, SPLASH_DELTA_CALL_ARGS, p->n_calls - 1, k, strlen(k));
        emit(fn, user, SPLASH_DELTA_CALL_ARGS, p->n_calls - 1, ": ", 2);
    }
    free(k);
    p->vschema = json_object_get(p->props, p->key);
    const json_t *type = json_object_get(p->vschema, "type");
    p->vtype = json_is_string(type) && strcmp(json_string_value(type), "string") == 0
                   ? VT_STRING : VT_TYPED;
    p->vn = 0;
    if (p->vtype == VT_STRING)
        emit(fn, user, SPLASH_DELTA_CALL_ARGS, p->n_calls - 1, "\"", 1);
}

static void value_bytes(struct splash_chat_parser *p, splash_chat_delta_fn fn, void *user,
                        const char *s, size_t n)
{
    if (p->vtype == VT_STRING) {
        emit_escaped(p, fn, user, s, n);
        return;
    }
    if (!grow(&p->val, &p->vcap, p->vn + n + 1)) {
        p->oom = true;
        return;
    }
    memcpy(p->val + p->vn, s, n);
    p->vn += n;
}

static void close_value(struct splash_chat_parser *p, splash_chat_delta_fn fn, void *user)
{
    if (p->vtype == VT_STRING) {
        emit(fn, user, SPLASH_DELTA_CALL_ARGS, p->n_calls - 1, "\"", 1);
    } else {
        char *json = convert_value(p->vschema, p->val ? p->val : "", p->vn);
        if (json)
            emit(fn, user, SPLASH_DELTA_CALL_ARGS, p->n_calls - 1, json, strlen(json));
        else
            emit(fn, user, SPLASH_DELTA_CALL_ARGS, p->n_calls - 1, "null", 4);
        free(json);
    }
    p->n_args++;
}

/* ---- the state machine ----------------------------------------------------------------------- */

/* One step; false when it needs more input. */
static bool step(struct splash_chat_parser *p, splash_chat_delta_fn fn, void *user, bool final)
{
    const struct splash_chat_format *f = p->f;
    bool qwen = f->calls == SPLASH_CALLS_QWEN_XML;
    bool tools = p->tools && json_array_size(p->tools) > 0;
    char *s = p->pend;
    size_t n = p->n, at;
    if (n == 0)
        return false;
    switch (p->state) {
    case S_START:
        if (!final && prefix_of(s, n, f->think_open))
            return false;
        if (starts(s, n, f->think_open)) {
            consume(p, strlen(f->think_open));
            p->state = S_REASON;
        } else {
            p->state = S_CONTENT;
        }
        return true;
    case S_REASON: {
        /* a call opens the answer only as a whole call head (QWEN); for a model that opens
         * its reasoning itself, a <tool_call> inside the think block is reasoning */
        const char *markers[] = {f->think_close, "<tool_call>\n<function="};
        int m = scan(s, n, markers, qwen && tools ? 2 : 1, &at);
        if (m < 0) {
            size_t k = final ? n : at;
            if (!final && qwen && k > 0 && s[k - 1] == '\n')
                k--; /* may be the newline Qwen's templates put before </think> */
            emit(fn, user, SPLASH_DELTA_REASONING, 0, s, k);
            consume(p, k);
            return k > 0 && p->n > 0;
        }
        emit(fn, user, SPLASH_DELTA_REASONING, 0, s,
             m == 0 && qwen && at > 0 && s[at - 1] == '\n' ? at - 1 : at);
        if (m == 0) {
            consume(p, at + strlen(f->think_close));
            p->state = S_CONTENT;
            p->strip_newlines = qwen ? 2 : 0;
        } else {
            consume(p, at);
            p->state = S_CALL_HEAD;
        }
        return true;
    }
    case S_CONTENT: {
        if (p->strip_newlines > 0 && s[0] == '\n') {
            consume(p, 1);
            p->strip_newlines--;
            return true;
        }
        p->strip_newlines = 0;
        if (p->after_call) {
            size_t w = skip_ws(s, n);
            if (w == n && !final)
                return false; /* may be the space between two calls */
            if (!final && prefix_of(s + w, n - w, f->call_open))
                return false; /* the blanks go only before a whole call tag */
            if (!starts(s + w, n - w, f->call_open))
                p->after_call = false;
            else if (w > 0) {
                consume(p, w);
                return true;
            }
        }
        const char *markers[] = {f->think_close, f->call_open};
        int m = scan(s, n, markers, tools ? 2 : 1, &at);
        if (m < 0) {
            size_t k = final ? n : at;
            /* blanks before a call are markup: hold them until text follows */
            while (!final && tools && k > 0 && (s[k - 1] == '\n' || s[k - 1] == ' '))
                k--;
            emit(fn, user, SPLASH_DELTA_CONTENT, 0, s, k);
            consume(p, k);
            return k > 0 && p->n > 0;
        }
        size_t text_len = at;
        while (m == 1 && text_len > 0 && (s[text_len - 1] == '\n' || s[text_len - 1] == ' '))
            text_len--;
        emit(fn, user, SPLASH_DELTA_CONTENT, 0, s, text_len);
        if (m == 0) {
            /* a </think> after the reasoning's end: only the tag goes */
            consume(p, at + strlen(f->think_close));
        } else {
            /* the blanks before it stay, in case this is no call after all */
            consume(p, text_len);
            p->state = S_CALL_HEAD;
        }
        return true;
    }
    case S_CALL_HEAD: {
        size_t open = skip_ws(s, n) + strlen(f->call_open);
        const char *r = s + open;
        size_t rn = n - open;
        size_t name_at, name_len = 0, end = 0;
        bool ok = false, wait = false;
        if (qwen) {
            size_t w = skip_ws(r, rn);
            const char *fx = "<function=";
            if (prefix_of(r + w, rn - w, fx) || (w == rn)) {
                wait = true;
            } else if (starts(r + w, rn - w, fx)) {
                name_at = open + w + strlen(fx);
                const char *gt = memchr(s + name_at, '>', n - name_at);
                if (!gt) {
                    wait = n - name_at <= MAX_NAME;
                } else {
                    name_len = (size_t)(gt - (s + name_at));
                    end = name_at + name_len + 1;
                    ok = name_len > 0 && name_len <= MAX_NAME &&
                         !memchr(s + name_at, '<', name_len) &&
                         !memchr(s + name_at, '\n', name_len);
                    if (ok && end < n && s[end] == '\n')
                        end++;
                    else if (ok && end == n && !final)
                        wait = true, ok = false; /* the newline after it may follow */
                }
            }
        } else {
            const char *markers[] = {"<arg_key>", f->call_close};
            int m = scan(r, rn, markers, 2, &at);
            if (m < 0) {
                /* wait while what has come could still be a name: one already too long or
                 * holding a '<' is text, as the whole output would make it */
                size_t b = skip_ws(r, at), e = at;
                while (e > b && (r[e - 1] == ' ' || r[e - 1] == '\n' || r[e - 1] == '\t'))
                    e--;
                wait = e - b <= MAX_NAME && !memchr(r + b, '<', e - b);
            } else {
                size_t b = skip_ws(r, at), e = at;
                while (e > b && (r[e - 1] == ' ' || r[e - 1] == '\n' || r[e - 1] == '\t'))
                    e--;
                name_at = open + b;
                name_len = e - b;
                end = open + at;
                ok = name_len > 0 && name_len <= MAX_NAME && !memchr(r + b, '<', name_len);
            }
        }
        if (wait && !final)
            return false;
        if (!ok) {
            /* not a call after all: the tag is text */
            emit(fn, user, SPLASH_DELTA_CONTENT, 0, s, open);
            consume(p, open);
            p->state = S_CONTENT;
            return true;
        }
        open_call(p, fn, user, s + name_at, name_len);
        consume(p, end);
        p->state = S_ARGS;
        return true;
    }
    case S_ARGS: {
        size_t w = skip_ws(s, n);
        const char *r = s + w;
        size_t rn = n - w;
        const char *key_tag = qwen ? "<parameter=" : "<arg_key>";
        const char *end_tag = qwen ? "</function>" : f->call_close;
        if (!final && (rn == 0 || prefix_of(r, rn, key_tag) || prefix_of(r, rn, end_tag)))
            return false;
        if (starts(r, rn, end_tag)) {
            consume(p, w + strlen(end_tag));
            if (qwen) {
                p->state = S_CALL_TAIL;
            } else {
                close_call(p, fn, user);
                p->state = S_CONTENT;
            }
            return true;
        }
        if (starts(r, rn, key_tag)) {
            if (!qwen) {
                consume(p, w + strlen(key_tag));
                p->state = S_KEY;
                return true;
            }
            size_t kat = strlen(key_tag);
            const char *gt = memchr(r + kat, '>', rn - kat);
            if (!gt && !final && rn - kat <= MAX_NAME)
                return false;
            size_t klen = gt ? (size_t)(gt - (r + kat)) : 0;
            if (gt && klen > 0 && klen < sizeof p->key) {
                memcpy(p->key, r + kat, klen);
                p->key[klen] = 0;
                consume(p, w + kat + klen + 1);
                open_value(p, fn, user);
                p->value_lead = true;
                p->state = S_VALUE;
                return true;
            }
        }
        /* the call's markup broke: close it, the rest is text */
        close_call(p, fn, user);
        p->after_call = false;
        p->state = S_CONTENT;
        return true;
    }
    case S_KEY: {
        const char *markers[] = {"</arg_key>"};
        int m = scan(s, n, markers, 1, &at);
        /* wait while the key may still end within its limit, however the bytes arrive */
        if (m < 0 && !final && at < sizeof p->key)
            return false;
        if (m < 0 || at >= sizeof p->key) {
            close_call(p, fn, user);
            p->after_call = false;
            p->state = S_CONTENT;
            return true;
        }
        size_t b = skip_ws(s, at), e = at;
        while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\n'))
            e--;
        memcpy(p->key, s + b, e - b);
        p->key[e - b] = 0;
        consume(p, at + strlen("</arg_key>"));
        p->state = S_VALUE_OPEN;
        return true;
    }
    case S_VALUE_OPEN: {
        size_t w = skip_ws(s, n);
        if (!final && (w == n || prefix_of(s + w, n - w, "<arg_value>")))
            return false;
        if (starts(s + w, n - w, "<arg_value>")) {
            consume(p, w + strlen("<arg_value>"));
            open_value(p, fn, user);
            p->value_lead = false;
            p->state = S_VALUE;
            return true;
        }
        close_call(p, fn, user);
        p->after_call = false;
        p->state = S_CONTENT;
        return true;
    }
    case S_VALUE: {
        if (p->value_lead) {
            p->value_lead = false;
            if (s[0] == '\n') {
                consume(p, 1);
                return true;
            }
        }
        const char *qm[] = {"</parameter>", "</function>"};
        const char *gm[] = {"</arg_value>"};
        int m = qwen ? scan(s, n, qm, 2, &at) : scan(s, n, gm, 1, &at);
        if (m < 0) {
            size_t k = at;
            if (final) {
                k = n;
            } else if (qwen && k > 0 && s[k - 1] == '\n') {
                k--; /* may be the newline before </parameter> */
            }
            value_bytes(p, fn, user, s, k);
            consume(p, k);
            if (final) {
                close_value(p, fn, user);
                close_call(p, fn, user);
                p->state = S_CONTENT;
            }
            return k > 0 && p->n > 0;
        }
        size_t k = at;
        if (qwen && k > 0 && s[k - 1] == '\n')
            k--;
        value_bytes(p, fn, user, s, k);
        close_value(p, fn, user);
        /* </function> closing a value without </parameter> is left for S_ARGS */
        consume(p, qwen && m == 1 ? at : at + strlen(qwen ? qm[0] : gm[0]));
        p->state = S_ARGS;
        return true;
    }
    case S_CALL_TAIL: {
        size_t w = skip_ws(s, n);
        if (!final && (w == n || prefix_of(s + w, n - w, f->call_close)))
            return false;
        close_call(p, fn, user);
        if (starts(s + w, n - w, f->call_close))
            consume(p, w + strlen(f->call_close));
        else
            p->after_call = false;
        p->state = S_CONTENT;
        return true;
    }
    }
    return false;
}

/* ---- public ---------------------------------------------------------------------------------- */

struct splash_chat_parser *splash_chat_parser_create(const struct splash_chat_parser_opts *o)
{
    struct splash_chat_parser *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->f = o->format ? o->format : &splash_chat_format_qwen;
    p->tools = o->tools;
    if (p->f->calls == SPLASH_CALLS_HARMONY && !(p->harmony = harmony_parser_create(o->tools))) {
        free(p);
        return NULL;
    }
    if (p->f->model_opens_think)
        p->state = S_START;
    else
        p->state = o->starts_in_reasoning ? S_REASON : S_CONTENT;
    return p;
}

void splash_chat_parser_destroy(struct splash_chat_parser *p)
{
    if (!p)
        return;
    harmony_parser_destroy(p->harmony);
    free(p->buf);
    free(p->val);
    free(p);
}

void splash_chat_parser_feed(struct splash_chat_parser *p, const char *text, size_t len,
                             splash_chat_delta_fn fn, void *user)
{
    if (p->harmony) {
        harmony_parser_feed(p->harmony, text, len, fn, user);
        return;
    }
    if (p->head) {
        memmove(p->buf, p->pend, p->n);
        p->head = 0;
        p->pend = p->buf;
    }
    if (!grow(&p->buf, &p->cap, p->n + len + 1)) {
        /* keep the bytes flowing as text rather than lose them */
        emit(fn, user, SPLASH_DELTA_CONTENT, 0, text, len);
        return;
    }
    p->pend = p->buf;
    memcpy(p->pend + p->n, text, len);
    p->n += len;
    while (step(p, fn, user, false))
        ;
}

void splash_chat_parser_finish(struct splash_chat_parser *p, splash_chat_delta_fn fn,
                               void *user)
{
    if (p->harmony) {
        harmony_parser_finish(p->harmony, fn, user);
        return;
    }
    for (int guard = 0; p->n > 0 && guard < 1000000; guard++)
        if (!step(p, fn, user, true))
            break;
    if (p->n > 0) {
        emit(fn, user, p->state == S_REASON ? SPLASH_DELTA_REASONING : SPLASH_DELTA_CONTENT, 0,
             p->pend, p->n);
        p->n = 0;
    }
    /* a call the output left open still closes its arguments */
    if (p->state == S_VALUE) {
        close_value(p, fn, user);
        close_call(p, fn, user);
    } else if (p->state == S_ARGS || p->state == S_KEY || p->state == S_VALUE_OPEN ||
               p->state == S_CALL_TAIL) {
        close_call(p, fn, user);
    }
    p->state = S_CONTENT;
}

/* ---- accumulation ------------------------------------------------------------------------- */

/* The bytes a string of n bytes (and its 0) is allocated with: powers of two, so a reply
 * accumulated token by token is copied O(log n) times, not once per token. */
static size_t text_cap(size_t n)
{
    size_t c = 64;
    while (c < n)
        c *= 2;
    return c;
}

static void append(char **s, size_t *n, const char *text, size_t len)
{
    char *np = *s;
    if (!np || text_cap(*n + len + 1) > text_cap(*n + 1)) {
        np = realloc(*s, text_cap(*n + len + 1));
        if (!np)
            return;
    }
    memcpy(np + *n, text, len);
    *n += len;
    np[*n] = 0;
    *s = np;
}

void splash_chat_result_add(void *result, const struct splash_chat_delta *d)
{
    struct splash_chat_result *r = result;
    switch (d->kind) {
    case SPLASH_DELTA_REASONING: append(&r->reasoning, &r->reasoning_len, d->text, d->len); break;
    case SPLASH_DELTA_CONTENT: append(&r->content, &r->content_len, d->text, d->len); break;
    case SPLASH_DELTA_CALL_NAME: {
        struct splash_chat_call *calls = realloc(r->calls, (r->n_calls + 1) * sizeof *calls);
        if (!calls)
            return;
        r->calls = calls;
        struct splash_chat_call *c = &calls[r->n_calls++];
        memset(c, 0, sizeof *c);
        size_t nlen = 0;
        append(&c->name, &nlen, d->text, d->len);
        break;
    }
    case SPLASH_DELTA_CALL_ARGS:
        if (d->call >= 0 && (size_t)d->call < r->n_calls)
            append(&r->calls[d->call].args, &r->calls[d->call].args_len, d->text, d->len);
        break;
    }
}

void splash_chat_result_free(struct splash_chat_result *r)
{
    free(r->reasoning);
    free(r->content);
    for (size_t i = 0; i < r->n_calls; i++) {
        free(r->calls[i].name);
        free(r->calls[i].args);
    }
    free(r->calls);
    memset(r, 0, sizeof *r);
}
