/* The worker pool: persistent pthreads that split ranges; the caller joins in. */
#ifndef SPLASH_CORE_THREADPOOL_H
#define SPLASH_CORE_THREADPOOL_H

#include "splash/host.h"

/* n_threads includes the calling thread; 0 = the number of physical cores. */
struct splash_pool *splash_pool_create(int n_threads);
void splash_pool_destroy(struct splash_pool *pool);
int splash_pool_threads(const struct splash_pool *pool);
/* Splits [0, n) into chunks of at least grain items; returns when all ran.
 * A NULL pool runs everything on the calling thread. */
void splash_pool_parallel_for(struct splash_pool *pool, int64_t n, int64_t grain, splash_range_fn fn,
                              void *ctx);
/* Sections handed to the workers so far (a range run on the calling thread alone is
 * none): each costs a hand-off, so a step's count is what tests and benches watch. */
unsigned long long splash_pool_sections(const struct splash_pool *pool);
/* Physical cores of this machine (falls back to online CPUs). */
int splash_physical_cores(void);

#endif
