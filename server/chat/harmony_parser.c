/* The harmony output parser (see harmony_parser.h). Bytes wait in `pend` only while they
 * may still be the start of a marker or are an unfinished header. */
#include <stdlib.h>
#include <string.h>

#include "server/chat/harmony_parser.h"

#define MAX_HEADER 512 /* a header longer than this is not one: its bytes are answer text */
#define MAX_NAME 255

enum h_state {
    H_HEADER, /* collecting a message header up to <|message|> */
    H_BODY,   /* a message body, up to <|end|>, <|call|> or <|return|> */
    H_NEXT,   /* after a message: <|start|>ROLE opens the next header */
};

enum h_kind { K_REASONING, K_CONTENT, K_CALL };

struct harmony_parser {
    const json_t *tools;
    enum h_state state;
    enum h_kind kind;
    char *buf;
    size_t n, cap;
    int n_calls;
    /* a call's message, held until it closes: its arguments must be a JSON object */
    char name[MAX_NAME + 1];
    char *args;
    size_t args_n, args_cap;
};

static const char *const END_MARKERS[] = {"<|end|>", "<|call|>", "<|return|>"};

static void emit(splash_chat_delta_fn fn, void *user, enum splash_chat_delta_kind kind, int call,
                 const char *text, size_t len)
{
    if (len == 0 && kind != SPLASH_DELTA_CALL_NAME)
        return;
    struct splash_chat_delta d = {kind, call, text, len};
    fn(user, &d);
}

static void drop(struct harmony_parser *p, size_t k)
{
    memmove(p->buf, p->buf + k, p->n - k);
    p->n -= k;
}

/* Where the first of the markers starts in s (its index in *which), or, when none is
 * whole, how many leading bytes cannot be the start of one (*which = -1). */
static size_t find_marker(const char *s, size_t n, const char *const *m, int nm, int *which)
{
    size_t best = n;
    *which = -1;
    for (int i = 0; i < nm; i++) {
        size_t t = strlen(m[i]);
        const char *hit = t <= n ? memmem(s, n, m[i], t) : NULL;
        if (hit && (size_t)(hit - s) < best) {
            best = (size_t)(hit - s);
            *which = i;
        }
    }
    if (*which >= 0)
        return best;
    size_t safe = n;
    for (int i = 0; i < nm; i++) {
        size_t t = strlen(m[i]);
        for (size_t k = t - 1; k > 0; k--)
            if (k <= n && !memcmp(s + n - k, m[i], k)) {
                if (n - k < safe)
                    safe = n - k;
                break;
            }
    }
    return safe;
}

static bool has_tool(const json_t *tools, const char *name, size_t len)
{
    size_t i;
    const json_t *tool;
    json_array_foreach(tools, i, tool) {
        const json_t *fn = json_object_get(tool, "function");
        const char *n = json_string_value(json_object_get(fn ? fn : tool, "name"));
        if (n && strlen(n) == len && !memcmp(n, name, len))
            return true;
    }
    return false;
}

/* A word of the header after `key` (up to a space or a marker): its start and length. */
static bool header_word(const char *h, size_t n, const char *key, const char **w, size_t *len)
{
    size_t kl = strlen(key);
    const char *at = memmem(h, n, key, kl);
    if (!at)
        return false;
    const char *s = at + kl, *e = s, *end = h + n;
    while (e < end && *e != ' ' && *e != '<' && *e != '\n')
        e++;
    *w = s;
    *len = (size_t)(e - s);
    return *len > 0;
}

/* A whole header (the text before <|message|>): what its body is. */
static void open_message(struct harmony_parser *p, const char *h, size_t n,
                         splash_chat_delta_fn fn, void *user)
{
    const char *ch = NULL, *to = NULL;
    size_t ch_len = 0, to_len = 0;
    header_word(h, n, "<|channel|>", &ch, &ch_len);
    if (header_word(h, n, "to=", &to, &to_len) && to_len > 10 &&
        !memcmp(to, "functions.", 10)) {
        to += 10;
        to_len -= 10;
    }
    if (ch && ch_len == 8 && !memcmp(ch, "analysis", 8)) {
        p->kind = K_REASONING;
    } else if (to && to_len <= MAX_NAME && p->tools && has_tool(p->tools, to, to_len)) {
        p->kind = K_CALL;
        memcpy(p->name, to, to_len);
        p->name[to_len] = 0;
        p->args_n = 0;
    } else {
        p->kind = K_CONTENT;
    }
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

/* A call's message closed: a call when its body is a JSON object (an empty one is {}),
 * else the body is answer text. */
static void close_message(struct harmony_parser *p, splash_chat_delta_fn fn, void *user)
{
    if (p->kind == K_CALL) {
        const char *a = p->args ? p->args : "";
        size_t b = 0, e = p->args_n;
        while (b < e && is_blank(a[b]))
            b++;
        while (e > b && is_blank(a[e - 1]))
            e--;
        json_t *v = e > b ? json_loadb(a + b, e - b, 0, NULL) : NULL;
        if (e == b || json_is_object(v)) {
            p->n_calls++;
            emit(fn, user, SPLASH_DELTA_CALL_NAME, p->n_calls - 1, p->name, strlen(p->name));
            emit(fn, user, SPLASH_DELTA_CALL_ARGS, p->n_calls - 1, e > b ? a + b : "{}",
                 e > b ? e - b : 2);
        } else {
            emit(fn, user, SPLASH_DELTA_CONTENT, 0, a, p->args_n);
        }
        json_decref(v);
        p->args_n = 0;
    }
    p->kind = K_CONTENT;
}

static void body_bytes(struct harmony_parser *p, const char *s, size_t k, splash_chat_delta_fn fn,
                       void *user)
{
    if (!k)
        return;
    if (p->kind == K_REASONING) {
        emit(fn, user, SPLASH_DELTA_REASONING, 0, s, k);
    } else if (p->kind == K_CALL) {
        if (p->args_n + k + 1 > p->args_cap) {
            size_t c = p->args_cap ? p->args_cap : 256;
            while (c < p->args_n + k + 1)
                c *= 2;
            char *na = realloc(p->args, c);
            if (!na) {
                /* no room to hold the call: its bytes go on as text, in order */
                emit(fn, user, SPLASH_DELTA_CONTENT, 0, p->args, p->args_n);
                emit(fn, user, SPLASH_DELTA_CONTENT, 0, s, k);
                p->args_n = 0;
                p->kind = K_CONTENT;
                return;
            }
            p->args = na;
            p->args_cap = c;
        }
        memcpy(p->args + p->args_n, s, k);
        p->args_n += k;
    } else {
        emit(fn, user, SPLASH_DELTA_CONTENT, 0, s, k);
    }
}

/* One step over the pending bytes; false when more input is needed. */
static bool step(struct harmony_parser *p, splash_chat_delta_fn fn, void *user, bool final)
{
    char *s = p->buf;
    size_t n = p->n;
    int which;
    if (n == 0)
        return false;
    switch (p->state) {
    case H_NEXT: {
        static const char *const start[] = {"<|start|>"};
        size_t at = find_marker(s, n, start, 1, &which);
        if (which < 0) {
            /* text between messages is no message: answer text */
            size_t k = final ? n : at;
            emit(fn, user, SPLASH_DELTA_CONTENT, 0, s, k);
            drop(p, k);
            return k > 0 && p->n > 0;
        }
        emit(fn, user, SPLASH_DELTA_CONTENT, 0, s, at);
        drop(p, at + strlen(start[0]));
        p->state = H_HEADER;
        return true;
    }
    case H_HEADER: {
        static const char *const msg[] = {"<|message|>"};
        size_t at = find_marker(s, n, msg, 1, &which);
        /* a header ends with a marker starting within MAX_HEADER bytes, however the bytes
         * arrive: a stream waits until such a marker would be whole before giving up, and
         * the same text whole takes no marker starting later */
        if (which >= 0 && at > MAX_HEADER)
            which = -1;
        if (which < 0) {
            if (!final && n < MAX_HEADER + strlen(msg[0]))
                return false;
            /* no header after all: the bytes are the answer */
            p->kind = K_CONTENT;
            p->state = H_BODY;
            return true;
        }
        open_message(p, s, at, fn, user);
        drop(p, at + strlen(msg[0]));
        p->state = H_BODY;
        return true;
    }
    case H_BODY: {
        size_t at = find_marker(s, n, END_MARKERS, 3, &which);
        if (which < 0) {
            size_t k = final ? n : at;
            body_bytes(p, s, k, fn, user);
            drop(p, k);
            return k > 0 && p->n > 0;
        }
        body_bytes(p, s, at, fn, user);
        drop(p, at + strlen(END_MARKERS[which]));
        close_message(p, fn, user);
        p->state = H_NEXT;
        return true;
    }
    }
    return false;
}

struct harmony_parser *harmony_parser_create(const json_t *tools)
{
    struct harmony_parser *p = calloc(1, sizeof *p);
    if (p) {
        p->tools = tools;
        p->state = H_HEADER; /* the generation prompt ends with <|start|>assistant */
    }
    return p;
}

void harmony_parser_destroy(struct harmony_parser *p)
{
    if (p) {
        free(p->buf);
        free(p->args);
    }
    free(p);
}

void harmony_parser_feed(struct harmony_parser *p, const char *text, size_t len,
                         splash_chat_delta_fn fn, void *user)
{
    if (p->n + len + 1 > p->cap) {
        size_t c = p->cap ? p->cap : 256;
        while (c < p->n + len + 1)
            c *= 2;
        char *nb = realloc(p->buf, c);
        if (!nb) {
            /* keep the bytes flowing as text rather than lose them */
            emit(fn, user, SPLASH_DELTA_CONTENT, 0, text, len);
            return;
        }
        p->buf = nb;
        p->cap = c;
    }
    memcpy(p->buf + p->n, text, len);
    p->n += len;
    while (step(p, fn, user, false))
        ;
}

void harmony_parser_finish(struct harmony_parser *p, splash_chat_delta_fn fn, void *user)
{
    for (int guard = 0; p->n > 0 && guard < 1000; guard++)
        if (!step(p, fn, user, true))
            break;
    if (p->state == H_BODY)
        close_message(p, fn, user);
    p->state = H_NEXT;
}
