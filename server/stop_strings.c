/* Stop-string matching with a hold-back of the longest stop's length minus one. */
#include "server/stop_strings.h"

#include <stdlib.h>
#include <string.h>

int splash_stop_filter_init(struct splash_stop_filter *f, const json_t *stop, char *msg,
                            size_t msg_size)
{
    memset(f, 0, sizeof *f);
    if (!stop || json_is_null(stop))
        return 0;
    if (json_is_string(stop)) {
        if (!json_string_length(stop))
            return 0;
        f->stops[f->n_stops++] = strdup(json_string_value(stop));
        return 0;
    }
    if (!json_is_array(stop) || json_array_size(stop) > SPLASH_MAX_STOPS) {
        snprintf(msg, msg_size, "stop must be a string or an array of at most %d strings",
                 SPLASH_MAX_STOPS);
        return -1;
    }
    for (size_t i = 0; i < json_array_size(stop); i++) {
        json_t *s = json_array_get(stop, i);
        if (!json_is_string(s)) {
            snprintf(msg, msg_size, "stop[%zu] must be a string", i);
            splash_stop_filter_free(f);
            return -1;
        }
        if (json_string_length(s))
            f->stops[f->n_stops++] = strdup(json_string_value(s));
    }
    return 0;
}

static size_t longest_stop(const struct splash_stop_filter *f)
{
    size_t n = 0;
    for (int i = 0; i < f->n_stops; i++)
        if (strlen(f->stops[i]) > n)
            n = strlen(f->stops[i]);
    return n;
}

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

int splash_stop_filter_feed(struct splash_stop_filter *f, const char *text, size_t len, char **out,
                            size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    if (f->matched)
        return 1;
    if (!f->n_stops) {
        *out = dup_n(text, len);
        *out_len = len;
        return 0;
    }
    if (f->n_held + len + 1 > f->cap) {
        size_t cap = f->cap ? f->cap : 256;
        while (cap < f->n_held + len + 1)
            cap *= 2;
        char *grown = realloc(f->held, cap);
        if (!grown)
            return 0;
        f->held = grown;
        f->cap = cap;
    }
    memcpy(f->held + f->n_held, text, len);
    f->n_held += len;
    f->held[f->n_held] = 0;
    /* the earliest match of any stop ends the text */
    size_t cut = (size_t)-1;
    for (int i = 0; i < f->n_stops; i++) {
        char *m = memmem(f->held, f->n_held, f->stops[i], strlen(f->stops[i]));
        if (m && (size_t)(m - f->held) < cut)
            cut = (size_t)(m - f->held);
    }
    if (cut != (size_t)-1) {
        f->matched = 1;
        *out = dup_n(f->held, cut);
        *out_len = cut;
        f->n_held = 0;
        return 1;
    }
    size_t keep = longest_stop(f) - 1;
    if (f->n_held > keep) {
        size_t release = f->n_held - keep;
        /* never split a UTF-8 character */
        while (release > 0 && ((unsigned char)f->held[release] & 0xc0) == 0x80)
            release--;
        *out = dup_n(f->held, release);
        *out_len = release;
        memmove(f->held, f->held + release, f->n_held - release);
        f->n_held -= release;
    }
    return 0;
}

void splash_stop_filter_flush(struct splash_stop_filter *f, char **out, size_t *out_len)
{
    *out = f->matched ? NULL : dup_n(f->held ? f->held : "", f->n_held);
    *out_len = f->matched ? 0 : f->n_held;
    f->n_held = 0;
}

void splash_stop_filter_free(struct splash_stop_filter *f)
{
    for (int i = 0; i < f->n_stops; i++)
        free(f->stops[i]);
    free(f->held);
    memset(f, 0, sizeof *f);
}
