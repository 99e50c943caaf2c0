/* Token sampling: penalties, temperature, top-k, top-p, min-p, seeded draws,
 * and log-probabilities with top alternatives. Used by the engine, not plugins. */
#ifndef SPLASH_ENGINE_SAMPLING_H
#define SPLASH_ENGINE_SAMPLING_H

#include <stddef.h>
#include <stdint.h>

struct splash_sampling_params {
    float temperature;        /* <= 0: greedy */
    int32_t top_k;            /* <= 0: off */
    float top_p;              /* >= 1: off */
    float min_p;              /* <= 0: off */
    float presence_penalty;   /* OpenAI: subtract once if the token appeared */
    float frequency_penalty;  /* OpenAI: subtract per occurrence */
    float repetition_penalty; /* 1: off; divides positive logits, multiplies negative */
    uint64_t seed;
};

/* Per-request sampler state: the RNG and token counts for the penalties. */
struct splash_sampler {
    struct splash_sampling_params params;
    uint64_t rng[4];          /* xoshiro256** state */
    int32_t n_vocab;
    uint32_t *counts;         /* occurrences of each token in the penalty window */
    /* scratch sized n_vocab */
    int32_t *ids;
    float *probs;
};

struct splash_token_logprob {
    int32_t id;
    float logprob;
};

int splash_sampler_init(struct splash_sampler *s, const struct splash_sampling_params *p,
                        int32_t n_vocab);
void splash_sampler_free(struct splash_sampler *s);
/* Counts a token (prompt or generated) for the penalties. */
void splash_sampler_accept(struct splash_sampler *s, int32_t token);

/* Picks the next token from logits (modified in place by the penalties). If
 * logprob is non-NULL it receives the chosen token's log-probability under the
 * unfiltered distribution at temperature 1 (as the OpenAI API reports), and
 * top[0..n_top) the most likely alternatives. */
int32_t splash_sampler_sample(struct splash_sampler *s, float *logits, float *logprob,
                              struct splash_token_logprob *top, int n_top);

/* splash_sampler_sample given a proposed token (speculative decoding; -1: none): a
 * greedy sampler takes the argmax and *accepted says whether it is the proposal; a
 * sampled one accepts the proposal with the probability its distribution gives it and
 * otherwise draws from the rest of that distribution renormalised, so the token drawn
 * has exactly the distribution a plain draw has. *accepted (optional): chosen == proposed. */
int32_t splash_sampler_sample_proposed(struct splash_sampler *s, float *logits, int32_t proposed,
                                       int *accepted, float *logprob,
                                       struct splash_token_logprob *top, int n_top);

/* splash_sampler_sample_proposed for a proposal drawn from a distribution q (a draft's
 * selector: q_probs[i] the probability it gave q_ids[i], 0 elsewhere): a sampled lane
 * accepts the proposal with probability min(1, p/q) and otherwise draws from the residual
 * max(0, p - q) renormalised, which leaves the token exactly p-distributed. Greedy as
 * splash_sampler_sample_proposed. */
int32_t splash_sampler_sample_drafted(struct splash_sampler *s, float *logits, int32_t proposed,
                                      const int32_t *q_ids, const float *q_probs, int n_q,
                                      int *accepted, float *logprob,
                                      struct splash_token_logprob *top, int n_top);
/* A uniform number in [0, 1) from the request's generator (a draft's own draws). */
double splash_sampler_uniform(struct splash_sampler *s);

/* Index of the largest value, ties to the lowest index. */
int32_t splash_argmax(const float *x, int64_t n);

#endif
