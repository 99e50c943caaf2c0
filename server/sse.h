/* Server-sent events: a byte queue the streaming producers fill with events
 * and the HTTP layer drains. */
#ifndef SPLASH_SERVER_SSE_H
#define SPLASH_SERVER_SSE_H

#include <jansson.h>
#include <stddef.h>
#include <sys/types.h>

struct splash_sse {
    char *buf;
    size_t len, off, cap;
};

/* Appends "event: NAME\n" (when name) and "data: JSON\n\n"; takes the body's reference. */
void splash_sse_event(struct splash_sse *s, const char *name, json_t *body);
/* Appends "data: TEXT\n\n" (e.g. "[DONE]"). */
void splash_sse_raw(struct splash_sse *s, const char *text);
/* Copies up to max queued bytes into out; returns how many (0 when empty). */
size_t splash_sse_take(struct splash_sse *s, char *out, size_t max);
void splash_sse_free(struct splash_sse *s);

#endif
