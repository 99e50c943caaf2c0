/* Download progress: on a terminal a bar per file and one for the total (bytes, rate,
 * ETA), redrawn twice a second; otherwise one line every few seconds. */
#ifndef SPLASH_HUB_PROGRESS_H
#define SPLASH_HUB_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

/* Where a progress line goes (the console's stdout in serve, stderr for a command). */
typedef void (*splash_hub_line_fn)(const char *line);

struct splash_hub_progress;

/* names and sizes of the n files; tty draws bars on stderr, else lines every
 * line_seconds through line. */
struct splash_hub_progress *splash_hub_progress_start(const char *const *names,
                                                      const uint64_t *sizes, size_t n, int tty,
                                                      double line_seconds, splash_hub_line_fn line);
/* File i now holds `bytes` (resumed bytes count: the rate counts what moved). */
void splash_hub_progress_set(struct splash_hub_progress *p, size_t i, uint64_t bytes);
void splash_hub_progress_stop(struct splash_hub_progress *p);

/* "1.2 GB", "340 MB" */
void splash_hub_format_bytes(uint64_t bytes, char *buf, size_t size);

#endif
