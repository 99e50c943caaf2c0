/* Stop strings over streamed text: text is released only once no stop string
 * can still begin in it; a match ends the output before the stop string. */
#ifndef SPLASH_SERVER_STOP_STRINGS_H
#define SPLASH_SERVER_STOP_STRINGS_H

#include <jansson.h>
#include <stddef.h>

#define SPLASH_MAX_STOPS 8

struct splash_stop_filter {
    char *stops[SPLASH_MAX_STOPS];
    int n_stops;
    char *held;          /* text not yet released */
    size_t n_held, cap;
    int matched;
};

/* Reads `stop` (a string or an array of up to 8 non-empty strings); -1 with msg. */
int splash_stop_filter_init(struct splash_stop_filter *f, const json_t *stop, char *msg,
                            size_t msg_size);
/* Feeds text; *out receives (malloc'ed, NUL-terminated) the text now safe to send.
 * Returns 1 once a stop string matched (later feeds release nothing). */
int splash_stop_filter_feed(struct splash_stop_filter *f, const char *text, size_t len, char **out,
                            size_t *out_len);
/* At the end: whatever is still held. */
void splash_stop_filter_flush(struct splash_stop_filter *f, char **out, size_t *out_len);
void splash_stop_filter_free(struct splash_stop_filter *f);

#endif
