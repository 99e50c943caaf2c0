/* Sampling. Filters apply in llama.cpp's usual order (penalties, top-k, top-p,
 * min-p, temperature) on a candidate list sorted once by logit. */
#include "server/engine/sampling.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/host_impl.h"
#include "server/engine/sampling_scan.h"

/* Whether the NEON scans run here (SPLASH_FORCE_ISA=scalar turns them off). */
static int neon_scans(void)
{
#if defined(__aarch64__)
    return (splash_cpu_features() & SPLASH_CPU_NEON) != 0;
#else
    return 0;
#endif
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t xoshiro_next(uint64_t *s)
{
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1) with 53 bits. */
static double uniform(struct splash_sampler *s)
{
    return (double)(xoshiro_next(s->rng) >> 11) * 0x1.0p-53;
}

int splash_sampler_init(struct splash_sampler *s, const struct splash_sampling_params *p,
                        int32_t n_vocab)
{
    memset(s, 0, sizeof *s);
    s->params = *p;
    s->n_vocab = n_vocab;
    uint64_t seed = p->seed;
    for (int i = 0; i < 4; i++)
        s->rng[i] = splitmix(&seed);
    s->counts = calloc((size_t)n_vocab, sizeof *s->counts);
    s->ids = malloc((size_t)n_vocab * sizeof *s->ids);
    s->probs = malloc((size_t)n_vocab * sizeof *s->probs);
    if (!s->counts || !s->ids || !s->probs) {
        splash_sampler_free(s);
        return -1;
    }
    return 0;
}

void splash_sampler_free(struct splash_sampler *s)
{
    free(s->counts);
    free(s->ids);
    free(s->probs);
    s->counts = NULL;
    s->ids = NULL;
    s->probs = NULL;
}

void splash_sampler_accept(struct splash_sampler *s, int32_t token)
{
    if (token >= 0 && token < s->n_vocab && s->counts[token] < UINT32_MAX)
        s->counts[token]++;
}

int32_t splash_argmax(const float *x, int64_t n)
{
#if defined(__aarch64__)
    if (neon_scans())
        return splash_argmax_neon(x, n);
#endif
    int32_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = (int32_t)i;
    return best;
}

static void apply_penalties(const struct splash_sampler *s, float *logits)
{
    const struct splash_sampling_params *p = &s->params;
    int rep = p->repetition_penalty > 0 && p->repetition_penalty != 1.0f;
    if (!rep && p->presence_penalty == 0 && p->frequency_penalty == 0)
        return;
    for (int32_t i = 0; i < s->n_vocab; i++) {
        uint32_t c = s->counts[i];
        if (!c)
            continue;
        if (rep)
            logits[i] = logits[i] > 0 ? logits[i] / p->repetition_penalty
                                      : logits[i] * p->repetition_penalty;
        logits[i] -= p->presence_penalty + p->frequency_penalty * (float)c;
    }
}

static int by_logit_desc(const void *a, const void *b, void *ctx)
{
    const float *logits = ctx;
    float la = logits[*(const int32_t *)a], lb = logits[*(const int32_t *)b];
    if (la != lb)
        return la < lb ? 1 : -1;
    return *(const int32_t *)a - *(const int32_t *)b;
}

/* Sorts into ids[0..) the candidates with logit >= thr, descending; returns how many. */
static int32_t collect_sorted(struct splash_sampler *s, const float *logits, float thr)
{
    int32_t m = 0;
    for (int32_t i = 0; i < s->n_vocab; i++)
        if (logits[i] >= thr)
            s->ids[m++] = i;
    qsort_r(s->ids, (size_t)m, sizeof *s->ids, by_logit_desc, (void *)logits);
    return m;
}

/* The k largest logits, sorted descending, in ids[0..k). A threshold bisected
 * over the logits' range keeps the sort to a little more than k entries. */
static int32_t top_candidates(struct splash_sampler *s, const float *logits, int32_t k)
{
    int32_t n = s->n_vocab;
    if (k <= 0 || k >= n)
        return collect_sorted(s, logits, -INFINITY);
    const int neon = neon_scans();
    (void)neon; /* x86-64: no NEON scans */
    float lo = logits[0], hi = logits[0];
#if defined(__aarch64__)
    if (!neon || !splash_logit_range_neon(logits, n, &lo, &hi))
#endif
        for (int32_t i = 1; i < n; i++) {
            lo = logits[i] < lo ? logits[i] : lo;
            hi = logits[i] > hi ? logits[i] : hi;
        }
    float a = lo, b = hi;
    for (int it = 0; it < 24 && b > a; it++) {
        float mid = a + (b - a) * 0.5f;
        int32_t cnt = 0;
        /* counting stops at 4k: whether it stopped there or a little past, the tests below
         * decide alike */
#if defined(__aarch64__)
        if (neon)
            cnt = splash_count_at_least_neon(logits, n, mid, 4 * k);
        else
#endif
            for (int32_t i = 0; i < n && cnt < 4 * k; i++)
                cnt += logits[i] >= mid;
        if (cnt >= k)
            a = mid;
        else
            b = mid;
        if (cnt >= k && cnt < 4 * k)
            break;
    }
    int32_t m = collect_sorted(s, logits, a);
    return m < k ? m : k;
}

static void log_softmax_stats(const float *logits, int32_t n, float *max_out, double *lse_out)
{
    float mx = -FLT_MAX;
    for (int32_t i = 0; i < n; i++)
        if (logits[i] > mx)
            mx = logits[i];
    double sum = 0;
    for (int32_t i = 0; i < n; i++)
        sum += exp((double)logits[i] - mx);
    *max_out = mx;
    *lse_out = log(sum) + mx;
}

/* The candidates a sampled draw picks from, in ids[0..n) with their weights in probs
 * (sum in *sum): temperature, then top-k, top-p and min-p. */
static int32_t sampled_candidates(struct splash_sampler *s, const float *logits, double *sum_out)
{
    const struct splash_sampling_params *p = &s->params;
    int filters = p->top_k > 0 || (p->top_p > 0 && p->top_p < 1) || p->min_p > 0;
    int32_t n;
    if (filters) {
        n = top_candidates(s, logits, p->top_k);
    } else {
        /* plain temperature: no order needed */
        n = s->n_vocab;
        int32_t best = splash_argmax(logits, n);
        for (int32_t i = 0; i < n; i++)
            s->ids[i] = i;
        s->ids[0] = best;
        s->ids[best] = 0;
    }
    float mx = logits[s->ids[0]];
    double sum = 0;
    for (int32_t i = 0; i < n; i++) {
        s->probs[i] = (float)exp((double)(logits[s->ids[i]] - mx) / p->temperature);
        sum += s->probs[i];
    }
    /* top-p: the smallest prefix whose mass reaches p */
    if (p->top_p > 0 && p->top_p < 1) {
        double acc = 0;
        for (int32_t i = 0; i < n; i++) {
            acc += s->probs[i] / sum;
            if (acc >= p->top_p) {
                n = i + 1;
                break;
            }
        }
    }
    /* min-p: drop candidates below min_p times the best probability */
    if (p->min_p > 0) {
        float floor_p = p->min_p * s->probs[0];
        int32_t keep = 1;
        while (keep < n && s->probs[keep] >= floor_p)
            keep++;
        n = keep;
    }
    sum = 0;
    for (int32_t i = 0; i < n; i++)
        sum += s->probs[i];
    *sum_out = sum;
    return n;
}

/* One draw from the candidates (weights summing to sum). */
static int32_t draw(struct splash_sampler *s, int32_t n, double sum)
{
    double r = uniform(s) * sum, acc = 0;
    int32_t chosen = -1;
    for (int32_t i = 0; i < n; i++) {
        acc += s->probs[i];
        if (s->probs[i] > 0)
            chosen = s->ids[i]; /* rounding past the end: the last with any weight */
        if (r < acc)
            break;
    }
    return chosen;
}

/* The log-probability and alternatives the API reports for the chosen token. */
static void report(struct splash_sampler *s, const float *logits, int32_t chosen, double lse,
                   float *logprob, struct splash_token_logprob *top, int n_top)
{
    if (logprob)
        *logprob = (float)((double)logits[chosen] - lse);
    if (top && n_top > 0) {
        int32_t n = top_candidates(s, logits, n_top);
        for (int32_t i = 0; i < n_top; i++) {
            top[i].id = i < n ? s->ids[i] : -1;
            top[i].logprob = i < n ? (float)((double)logits[s->ids[i]] - lse) : -INFINITY;
        }
    }
}

int32_t splash_sampler_sample(struct splash_sampler *s, float *logits, float *logprob,
                              struct splash_token_logprob *top, int n_top)
{
    return splash_sampler_sample_proposed(s, logits, -1, NULL, logprob, top, n_top);
}

int32_t splash_sampler_sample_proposed(struct splash_sampler *s, float *logits, int32_t proposed,
                                       int *accepted, float *logprob,
                                       struct splash_token_logprob *top, int n_top)
{
    const struct splash_sampling_params *p = &s->params;
    apply_penalties(s, logits);
    double lse = 0;
    if (logprob || (top && n_top > 0)) {
        float mx;
        log_softmax_stats(logits, s->n_vocab, &mx, &lse);
    }
    int32_t chosen;
    if (p->temperature <= 0) {
        chosen = splash_argmax(logits, s->n_vocab);
    } else {
        double sum;
        int32_t n = sampled_candidates(s, logits, &sum);
        int32_t at = -1;
        for (int32_t i = 0; proposed >= 0 && i < n; i++)
            if (s->ids[i] == proposed)
                at = i;
        if (at < 0) {
            chosen = draw(s, n, sum);
        } else if (uniform(s) * sum < s->probs[at]) {
            chosen = proposed; /* accepted with the probability the target gives it */
        } else {
            /* rejected: a draw from the rest, renormalised (the residual of a point mass) */
            double rest = sum - (double)s->probs[at];
            s->probs[at] = 0;
            chosen = rest > 0 ? draw(s, n, rest) : proposed;
        }
    }
    if (accepted)
        *accepted = proposed >= 0 && chosen == proposed;
    report(s, logits, chosen, lse, logprob, top, n_top);
    splash_sampler_accept(s, chosen);
    return chosen;
}

double splash_sampler_uniform(struct splash_sampler *s)
{
    return uniform(s);
}

int32_t splash_sampler_sample_drafted(struct splash_sampler *s, float *logits, int32_t proposed,
                                      const int32_t *q_ids, const float *q_probs, int n_q,
                                      int *accepted, float *logprob,
                                      struct splash_token_logprob *top, int n_top)
{
    double q_x = 0;
    for (int i = 0; q_ids && i < n_q; i++)
        if (q_ids[i] == proposed)
            q_x = q_probs[i];
    /* greedy, or a proposal q gave nothing (taken as deterministic) */
    if (s->params.temperature <= 0 || !(q_x > 0))
        return splash_sampler_sample_proposed(s, logits, proposed, accepted, logprob, top, n_top);
    apply_penalties(s, logits);
    double lse = 0;
    if (logprob || (top && n_top > 0)) {
        float mx;
        log_softmax_stats(logits, s->n_vocab, &mx, &lse);
    }
    double sum;
    int32_t n = sampled_candidates(s, logits, &sum);
    double p_x = 0;
    for (int32_t i = 0; i < n; i++)
        if (s->ids[i] == proposed)
            p_x = s->probs[i] / sum;
    int32_t chosen;
    if (p_x > 0 && uniform(s) * q_x < p_x) {
        chosen = proposed;
    } else {
        /* the residual: each candidate's p less its q, what is left above zero */
        double rest = 0;
        for (int32_t i = 0; i < n; i++) {
            double q = 0;
            for (int j = 0; j < n_q; j++)
                if (q_ids[j] == s->ids[i])
                    q = q_probs[j];
            double r = s->probs[i] / sum - q;
            s->probs[i] = r > 0 ? (float)r : 0.0f;
            rest += s->probs[i];
        }
        chosen = rest > 0 ? draw(s, n, rest) : proposed;
    }
    if (accepted)
        *accepted = chosen == proposed;
    report(s, logits, chosen, lse, logprob, top, n_top);
    splash_sampler_accept(s, chosen);
    return chosen;
}
