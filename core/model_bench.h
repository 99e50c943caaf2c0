/* Timing a loaded model the way llama-bench does: a prefill of n_prompt tokens in
 * one batch and a decode of n_gen tokens one at a time, each from an empty
 * sequence, after a warm-up that touches every weight. Used by `splash bench`
 * and bench/bench-model. */
#ifndef SPLASH_CORE_MODEL_BENCH_H
#define SPLASH_CORE_MODEL_BENCH_H

#include <stdint.h>

#include "splash/status.h"

struct splash_loaded_model;

struct splash_bench_result {
    int32_t n_prompt, n_gen, reps;
    double prefill_seconds, decode_seconds;  /* mean of the repetitions */
    double prefill_tps, decode_tps;          /* tokens per second (0 when not run) */
};

/* n_prompt or n_gen 0 skips that test; reps >= 1. Token ids are a fixed
 * pseudo-random sequence over the vocabulary. */
enum splash_status splash_model_bench(struct splash_loaded_model *lm, int32_t n_prompt,
                                      int32_t n_gen, int32_t reps,
                                      struct splash_bench_result *out, struct splash_err *err);

#endif
