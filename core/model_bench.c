/* llama-bench-like prefill and decode timings of a loaded model. */
#include "core/model_bench.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/family.h"
#include "core/model_load.h"

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One run from an empty sequence: n tokens as one batch (prefill) or one at a
 * time (decode); *seconds is what the forward calls took. */
static enum splash_status run_once(struct splash_loaded_model *lm, const int32_t *tokens,
                                   int32_t n, int batch, float *logits, double *seconds,
                                   struct splash_err *err)
{
    const struct splash_family_plugin *fam = lm->family;
    void *seq = NULL;
    enum splash_status st = splash_family_seq_create(fam, lm->model, &seq, err);
    if (st)
        return st;
    double t0 = now_seconds();
    if (batch) {
        struct splash_lane lane = {.seq = seq, .tokens = tokens, .n_tokens = n, .pos0 = 0,
                                   .logits = logits, .logits_all = 0};
        st = splash_family_forward(fam, lm->model, &lane, 1, err);
    } else {
        for (int32_t i = 0; i < n && !st; i++) {
            struct splash_lane lane = {.seq = seq, .tokens = tokens + i, .n_tokens = 1,
                                       .pos0 = i, .logits = logits, .logits_all = 0};
            st = splash_family_forward(fam, lm->model, &lane, 1, err);
        }
    }
    *seconds = now_seconds() - t0;
    splash_family_seq_destroy(fam, lm->model, seq);
    return st;
}

enum splash_status splash_model_bench(struct splash_loaded_model *lm, int32_t n_prompt,
                                      int32_t n_gen, int32_t reps,
                                      struct splash_bench_result *out, struct splash_err *err)
{
    memset(out, 0, sizeof *out);
    if (n_prompt < 0 || n_gen < 0 || reps < 1)
        return splash_err_set(err, SPLASH_ERR_INVALID, "bench: -p %d -n %d -r %d", n_prompt,
                              n_gen, reps);
    int32_t n = n_prompt > n_gen ? n_prompt : n_gen;
    if (n < 16)
        n = 16; /* the warm-up's */
    int64_t n_vocab = lm->info.n_vocab;
    int32_t *tokens = malloc((size_t)n * sizeof *tokens);
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    enum splash_status st = SPLASH_OK;
    if (!tokens || !logits) {
        st = splash_err_set(err, SPLASH_ERR_NOMEM, "bench: out of memory");
        goto out_free;
    }
    uint64_t s = 0x2545F4914F6CDD1Dull;
    for (int32_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        tokens[i] = (int32_t)(s % (uint64_t)n_vocab);
    }
    /* warm-up: every weight paged in and every buffer sized (a prefill of the timed
     * length: the forward keeps its step buffers, grown to the largest step so far) */
    double t;
    if ((st = run_once(lm, tokens, n_prompt > 0 ? n_prompt : 16, 1, logits, &t, err)) ||
        (st = run_once(lm, tokens, 4, 0, logits, &t, err)))
        goto out_free;
    out->n_prompt = n_prompt;
    out->n_gen = n_gen;
    out->reps = reps;
    for (int32_t r = 0; r < reps; r++) {
        if (n_prompt > 0) {
            if ((st = run_once(lm, tokens, n_prompt, 1, logits, &t, err)))
                goto out_free;
            out->prefill_seconds += t / reps;
        }
        if (n_gen > 0) {
            if ((st = run_once(lm, tokens, n_gen, 0, logits, &t, err)))
                goto out_free;
            out->decode_seconds += t / reps;
        }
    }
    if (out->prefill_seconds > 0)
        out->prefill_tps = n_prompt / out->prefill_seconds;
    if (out->decode_seconds > 0)
        out->decode_tps = n_gen / out->decode_seconds;
out_free:
    free(logits);
    free(tokens);
    return st;
}
