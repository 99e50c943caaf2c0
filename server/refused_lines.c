#include "server/refused_lines.h"

#include <stdio.h>
#include <time.h>

#include "server/console.h"

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Request text goes to a terminal: control bytes become '?' so a path cannot
 * move the cursor or forge a line. */
static void printable(char *out, size_t size, const char *in)
{
    size_t n = 0;
    for (; in && *in && n + 1 < size; in++)
        out[n++] = (unsigned char)*in < 0x20 || *in == 0x7f ? '?' : *in;
    out[n] = 0;
}

void splash_refused_lines_init(struct splash_refused_lines *r)
{
    pthread_mutex_init(&r->lock, NULL);
    r->window_start = -REFUSED_LINES_WINDOW_S;
    r->in_window = 0;
    r->held_back = 0;
}

void splash_refused_line(struct splash_refused_lines *r, const char *method, const char *path,
                         int status, const char *code, const char *message, const char *client)
{
    double t = mono_s();
    pthread_mutex_lock(&r->lock);
    if (t - r->window_start >= REFUSED_LINES_WINDOW_S) {
        r->window_start = t;
        r->in_window = 0;
    }
    if (r->in_window >= REFUSED_LINES_BURST) {
        r->held_back++;
        pthread_mutex_unlock(&r->lock);
        return;
    }
    r->in_window++;
    unsigned long held = r->held_back;
    r->held_back = 0;
    pthread_mutex_unlock(&r->lock);
    char m[24], p[128], msg[200];
    printable(m, sizeof m, method);
    printable(p, sizeof p, path);
    printable(msg, sizeof msg, message);
    char more[96] = "";
    if (held)
        snprintf(more, sizeof more, " · %lu more refused before it (lines limited to %d per %.0f s)",
                 held, REFUSED_LINES_BURST, REFUSED_LINES_WINDOW_S);
    splash_console_line(SPLASH_CONSOLE_OUT, "Refused · %s %s · %d%s%.48s · from %.64s%s%s%s", m, p,
                        status, code ? " " : "", code ? code : "", client, msg[0] ? " · " : "", msg,
                        more);
}
