/* The batched decode step, timed in-process over the family's forward. */
#include "server/engine/step_bench.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/family.h"
#include "core/model_load.h"

#define STEP_BENCH_MAX_LANES 64

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* xorshift: a fixed pseudo-random token stream over the vocabulary */
static int32_t next_token(uint64_t *s, int64_t n_vocab)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (int32_t)(*s % (uint64_t)n_vocab);
}

struct bench_seqs {
    struct splash_loaded_model *lm;
    void *seq[STEP_BENCH_MAX_LANES];
    int32_t pos[STEP_BENCH_MAX_LANES];
    int32_t next[STEP_BENCH_MAX_LANES]; /* the token each sequence's next step feeds */
    struct splash_lane lanes[STEP_BENCH_MAX_LANES];
    float *logits; /* (n_seqs, n_vocab) */
    uint64_t rng;
};

/* One decode step over sequences 0..n-1; *seconds is what forward took. */
static enum splash_status decode_step(struct bench_seqs *b, int32_t n, double *seconds,
                                      struct splash_err *err)
{
    int64_t n_vocab = b->lm->info.n_vocab;
    for (int32_t i = 0; i < n; i++) {
        b->lanes[i] = (struct splash_lane){.seq = b->seq[i],
                                           .tokens = &b->next[i],
                                           .n_tokens = 1,
                                           .pos0 = b->pos[i],
                                           .logits = b->logits + (size_t)i * (size_t)n_vocab,
                                           .logits_all = 0};
    }
    double t0 = now_seconds();
    enum splash_status st = splash_family_forward(b->lm->family, b->lm->model, b->lanes, n, err);
    *seconds = now_seconds() - t0;
    if (st)
        return st;
    for (int32_t i = 0; i < n; i++) {
        b->pos[i]++;
        b->next[i] = next_token(&b->rng, n_vocab);
    }
    return SPLASH_OK;
}

enum splash_status splash_step_bench(struct splash_loaded_model *lm, const int32_t *lanes,
                                     int32_t n_counts, int32_t n_prefill, int32_t reps,
                                     struct splash_step_bench_result *out, struct splash_err *err)
{
    memset(out, 0, sizeof *out);
    if (n_counts < 1 || n_counts > SPLASH_STEP_BENCH_MAX_COUNTS || n_prefill < 1 || reps < 1)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "step bench: %d lane counts (1 to %d), prefill %d, %d repetitions",
                              n_counts, SPLASH_STEP_BENCH_MAX_COUNTS, n_prefill, reps);
    int32_t n_seqs = 0;
    for (int32_t c = 0; c < n_counts; c++) {
        if (lanes[c] < 1 || lanes[c] > STEP_BENCH_MAX_LANES)
            return splash_err_set(err, SPLASH_ERR_INVALID, "step bench: %d lanes (1 to %d)",
                                  lanes[c], STEP_BENCH_MAX_LANES);
        if (lanes[c] > n_seqs)
            n_seqs = lanes[c];
    }
    const struct splash_family_plugin *fam = lm->family;
    int64_t n_vocab = lm->info.n_vocab;
    struct bench_seqs *b = calloc(1, sizeof *b);
    int32_t *prompt = malloc((size_t)n_seqs * (size_t)n_prefill * sizeof *prompt);
    enum splash_status st = SPLASH_OK;
    if (!b || !prompt || !(b->logits = malloc((size_t)n_seqs * (size_t)n_vocab * sizeof(float)))) {
        st =
            splash_err_set(err, SPLASH_ERR_NOMEM, "step bench: out of memory for %d lanes", n_seqs);
        goto out_free;
    }
    b->lm = lm;
    b->rng = 0x9E3779B97F4A7C15ull;
    for (int32_t i = 0; i < n_seqs; i++)
        if ((st = splash_family_seq_create(fam, lm->model, &b->seq[i], err))) {
            b->seq[i] = NULL;
            goto out_seqs;
        }

    /* prefill: every sequence's prompt in one batched forward */
    for (int32_t i = 0; i < n_seqs; i++) {
        int32_t *p = prompt + (size_t)i * (size_t)n_prefill;
        for (int32_t k = 0; k < n_prefill; k++)
            p[k] = next_token(&b->rng, n_vocab);
        b->lanes[i] = (struct splash_lane){.seq = b->seq[i],
                                           .tokens = p,
                                           .n_tokens = n_prefill,
                                           .pos0 = 0,
                                           .logits = NULL,
                                           .logits_all = 0};
        b->pos[i] = n_prefill;
        b->next[i] = next_token(&b->rng, n_vocab);
    }
    if ((st = splash_family_forward(fam, lm->model, b->lanes, n_seqs, err)))
        goto out_seqs;

    /* warm-up: buffers sized for the widest step and the narrowest */
    double t;
    if ((st = decode_step(b, n_seqs, &t, err)) || (st = decode_step(b, 1, &t, err)))
        goto out_seqs;

    out->n_counts = n_counts;
    for (int32_t c = 0; c < n_counts; c++) {
        out->lanes[c] = lanes[c];
        out->best_seconds[c] = 1e30;
    }
    for (int32_t r = 0; r < reps; r++)
        for (int32_t c = 0; c < n_counts; c++) {
            if ((st = decode_step(b, lanes[c], &t, err)))
                goto out_seqs;
            if (t < out->best_seconds[c])
                out->best_seconds[c] = t;
            out->mean_seconds[c] += t / reps;
        }
    out->context = b->pos[0];
out_seqs:
    for (int32_t i = 0; i < n_seqs; i++)
        if (b->seq[i])
            splash_family_seq_destroy(fam, lm->model, b->seq[i]);
out_free:
    if (b)
        free(b->logits);
    free(b);
    free(prompt);
    return st;
}
