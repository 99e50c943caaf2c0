/* The console: one writer thread keeps stdout and stderr lines in the order they
 * come; a bounded queue drops lines (and says how many) rather than block. */
#ifndef SPLASH_SERVER_CONSOLE_H
#define SPLASH_SERVER_CONSOLE_H

#include <stdint.h>

enum splash_console_stream { SPLASH_CONSOLE_OUT = 1, SPLASH_CONSOLE_ERR = 2 };

#define SPLASH_CONSOLE_QUEUE 1024

void splash_console_start(void);
/* Queues one line (no trailing newline needed); never blocks on the output. */
void splash_console_line(enum splash_console_stream stream, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Lines dropped because the queue was full, since start. */
uint64_t splash_console_dropped(void);
/* Waits up to timeout_ms for queued lines to be written, then stops the thread. */
void splash_console_stop(int timeout_ms);

#endif
