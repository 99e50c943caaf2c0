/* Timing the engine's batched decode step in-process: the family's forward over
 * n lanes of one decode token each (with a logits row per lane, as the engine
 * asks), set against the same step over one lane. Used by bench/bench-serve. */
#ifndef SPLASH_ENGINE_STEP_BENCH_H
#define SPLASH_ENGINE_STEP_BENCH_H

#include <stdint.h>

#include "splash/status.h"

struct splash_loaded_model;

#define SPLASH_STEP_BENCH_MAX_COUNTS 8

struct splash_step_bench_result {
    int32_t n_counts;
    int32_t lanes[SPLASH_STEP_BENCH_MAX_COUNTS];       /* the lane counts timed */
    double best_seconds[SPLASH_STEP_BENCH_MAX_COUNTS]; /* fastest step of the repetitions */
    double mean_seconds[SPLASH_STEP_BENCH_MAX_COUNTS];
    int32_t context; /* tokens each sequence held at the end */
};

/* Creates max(lanes) sequences, prefills each with n_prefill tokens, then per
 * repetition steps once at every lane count in turn (interleaved, so a change
 * in machine load hits every count alike). lanes: 1..64 each, n_counts up to
 * SPLASH_STEP_BENCH_MAX_COUNTS; n_prefill >= 1; reps >= 1. */
enum splash_status splash_step_bench(struct splash_loaded_model *lm, const int32_t *lanes,
                                     int32_t n_counts, int32_t n_prefill, int32_t reps,
                                     struct splash_step_bench_result *out, struct splash_err *err);

#endif
