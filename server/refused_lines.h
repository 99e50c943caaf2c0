/* One console line per request refused with a 4xx (Refused · ...), at most
 * REFUSED_LINES_BURST per REFUSED_LINES_WINDOW_S seconds so that a flood of bad
 * requests cannot flood the log; the lines held back are counted in the next one. */
#ifndef SPLASH_SERVER_REFUSED_LINES_H
#define SPLASH_SERVER_REFUSED_LINES_H

#include <pthread.h>

#define REFUSED_LINES_BURST 10
#define REFUSED_LINES_WINDOW_S 10.0

struct splash_refused_lines {
    pthread_mutex_t lock;
    double window_start;
    int in_window;
    unsigned long held_back;
};

void splash_refused_lines_init(struct splash_refused_lines *r);
/* code and message may be NULL; client is the peer's address text. */
void splash_refused_line(struct splash_refused_lines *r, const char *method, const char *path,
                         int status, const char *code, const char *message, const char *client);

#endif
