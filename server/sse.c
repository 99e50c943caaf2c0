/* SSE framing. */
#include "server/sse.h"

#include <stdlib.h>
#include <string.h>

static void append(struct splash_sse *s, const char *text, size_t n)
{
    if (s->off && s->off == s->len)
        s->off = s->len = 0;
    if (s->len + n > s->cap) {
        size_t cap = s->cap ? s->cap : 1024;
        while (cap < s->len + n)
            cap *= 2;
        char *grown = realloc(s->buf, cap);
        if (!grown)
            return;
        s->buf = grown;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, text, n);
    s->len += n;
}

void splash_sse_event(struct splash_sse *s, const char *name, json_t *body)
{
    if (name) {
        append(s, "event: ", 7);
        append(s, name, strlen(name));
        append(s, "\n", 1);
    }
    char *text = json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(body);
    append(s, "data: ", 6);
    if (text) {
        append(s, text, strlen(text));
        free(text);
    }
    append(s, "\n\n", 2);
}

void splash_sse_raw(struct splash_sse *s, const char *text)
{
    append(s, "data: ", 6);
    append(s, text, strlen(text));
    append(s, "\n\n", 2);
}

size_t splash_sse_take(struct splash_sse *s, char *out, size_t max)
{
    size_t n = s->len - s->off;
    if (n > max)
        n = max;
    memcpy(out, s->buf + s->off, n);
    s->off += n;
    return n;
}

void splash_sse_free(struct splash_sse *s)
{
    free(s->buf);
    memset(s, 0, sizeof *s);
}
