/* Running a family plugin's model in tests: open a GGUF, create the model, teacher-forced
 * logits. */
#ifndef SPLASH_TEST_MODEL_RUN_H
#define SPLASH_TEST_MODEL_RUN_H

#include <stdint.h>

#include "splash/family.h"

struct splash_meta;
struct splash_pool;

struct test_run {
    const struct splash_family_plugin *fam;
    struct splash_meta *meta;
    void *model;
    struct splash_model_info info;
};

struct test_run_opts {
    const struct splash_family_plugin *fam;
    struct splash_pool *pool;
    int kv_format, state_format;
    /* return 1 (printing a note, nothing left open) when a tensor's type has no format
     * plugin yet, rather than leave it to model_create */
    int skip_unformatted;
    uint64_t expert_memory; /* splash_model_opts' (0: experts load whole) */
    int32_t expert_elastic; /* splash_model_opts' (1: the store starts at its floor) */
};

/* The registered family plugin of that name (in the global registry); fails the test when
 * none is. */
const struct splash_family_plugin *test_family(const char *name);

/* Opens the GGUF at path and creates o->fam's model on it; label names the model in
 * messages. Fails the test on an error; returns 0, or 1 for a skipped model. */
int test_run_open(struct test_run *r, const struct test_run_opts *o, const char *path,
                  const char *label);
void test_run_close(struct test_run *r);

/* Teacher-forced logits of n tokens (malloc'ed [n][n_vocab]): one forward, or one token per
 * forward (decode). step_pos0 (optional) gets each step's first position before its
 * forward, for observers of the model. */
float *test_run_logits(struct test_run *r, const int32_t *tokens, int32_t n, int decode,
                       int32_t *step_pos0);

#endif
