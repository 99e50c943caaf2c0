/* Progress lines while a model's weights are prepared (mapped, checked, repacked): a
 * load of many GB takes seconds, and the console says how far it is. */
#ifndef SPLASH_LOAD_PROGRESS_H
#define SPLASH_LOAD_PROGRESS_H

#include <stdint.h>

struct splash_load_progress;

/* Starts reporting, about every 2 s after the first 2 s, the share of total_bytes the
 * kernels have prepared; NULL when it cannot (the load then runs silently). */
struct splash_load_progress *splash_load_progress_start(const char *name, uint64_t total_bytes);
/* Counts bytes of weight tensors the kernels have prepared (repacked where they
 * repack): what a load's progress reports. */
void splash_load_progress_add(uint64_t bytes);
/* Stops and frees the reporter. */
void splash_load_progress_stop(struct splash_load_progress *p);

#endif
