/* Sampling: greedy, filters, seeded draws matching their distribution, penalties, logprobs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "server/engine/sampling.h"
#include "server/engine/sampling_scan.h"
#include "tests/support/kernel_rows.h"
#include "tests/support/rng.h"

static void test_sampling_greedy_takes_lowest_of_ties(void **state)
{
    float logits[5] = {0.1f, 2.0f, -1.0f, 2.0f, 0.5f};
    struct splash_sampling_params p = {.temperature = 0};
    struct splash_sampler s;
    assert_int_equal(splash_sampler_init(&s, &p, 5), 0);
    assert_int_equal(splash_sampler_sample(&s, logits, NULL, NULL, 0), 1);
    splash_sampler_free(&s);
}

static void test_sampling_top_k_one_is_greedy(void **state)
{
    float logits[6] = {0.3f, -2.0f, 1.5f, 1.49f, 0.0f, 1.0f};
    struct splash_sampling_params p = {.temperature = 1.5f, .top_k = 1, .seed = 7};
    struct splash_sampler s;
    splash_sampler_init(&s, &p, 6);
    for (int i = 0; i < 50; i++) {
        float copy[6];
        memcpy(copy, logits, sizeof copy);
        assert_int_equal(splash_sampler_sample(&s, copy, NULL, NULL, 0), 2);
    }
    splash_sampler_free(&s);
}

/* Draw frequencies follow softmax(logits / T) within 4 standard errors. */
static void test_sampling_matches_distribution(void **state)
{
    const float logits[4] = {1.0f, 0.0f, -1.0f, 0.5f};
    const float t = 0.8f;
    double expect[4], z = 0;
    for (int i = 0; i < 4; i++)
        z += (expect[i] = exp(logits[i] / t));
    struct splash_sampling_params p = {.temperature = t, .seed = 42};
    struct splash_sampler s;
    splash_sampler_init(&s, &p, 4);
    int counts[4] = {0};
    const int draws = 20000;
    for (int i = 0; i < draws; i++) {
        float copy[4];
        memcpy(copy, logits, sizeof copy);
        counts[splash_sampler_sample(&s, copy, NULL, NULL, 0)]++;
    }
    for (int i = 0; i < 4; i++) {
        double pi = expect[i] / z;
        double se = sqrt(pi * (1 - pi) / draws);
        assert_true(fabs((double)counts[i] / draws - pi) < 4 * se);
    }
    splash_sampler_free(&s);
}

static void test_sampling_seed_repeats(void **state)
{
    float base[8] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
    struct splash_sampling_params p = {.temperature = 1.0f, .top_p = 0.9f, .seed = 1234};
    int32_t a[32], b[32];
    for (int run = 0; run < 2; run++) {
        struct splash_sampler s;
        splash_sampler_init(&s, &p, 8);
        for (int i = 0; i < 32; i++) {
            float copy[8];
            memcpy(copy, base, sizeof copy);
            (run ? b : a)[i] = splash_sampler_sample(&s, copy, NULL, NULL, 0);
        }
        splash_sampler_free(&s);
    }
    assert_memory_equal(a, b, sizeof a);
}

static void test_sampling_top_p_and_min_p_filter(void **state)
{
    /* probabilities at T=1: token 0 dominates; top_p 0.5 keeps only it */
    float logits[4] = {5.0f, 1.0f, 0.9f, 0.8f};
    struct splash_sampling_params p = {.temperature = 1.0f, .top_p = 0.5f, .seed = 3};
    struct splash_sampler s;
    splash_sampler_init(&s, &p, 4);
    for (int i = 0; i < 100; i++) {
        float copy[4];
        memcpy(copy, logits, sizeof copy);
        assert_int_equal(splash_sampler_sample(&s, copy, NULL, NULL, 0), 0);
    }
    splash_sampler_free(&s);
    struct splash_sampling_params q = {.temperature = 1.0f, .min_p = 0.5f, .seed = 3};
    float near[3] = {1.0f, 0.9f, -3.0f}; /* exp(-4) < 0.5: token 2 never drawn */
    splash_sampler_init(&s, &q, 3);
    for (int i = 0; i < 200; i++) {
        float copy[3];
        memcpy(copy, near, sizeof copy);
        assert_int_not_equal(splash_sampler_sample(&s, copy, NULL, NULL, 0), 2);
    }
    splash_sampler_free(&s);
}

static void test_sampling_penalties(void **state)
{
    struct splash_sampling_params p = {.temperature = 0, .presence_penalty = 1.0f,
                                       .frequency_penalty = 0.5f};
    struct splash_sampler s;
    splash_sampler_init(&s, &p, 3);
    splash_sampler_accept(&s, 0);
    splash_sampler_accept(&s, 0);
    float logits[3] = {2.5f, 0.6f, 0.0f};
    /* token 0: 2.5 - 1.0 - 2*0.5 = 0.5 < 0.6 */
    assert_int_equal(splash_sampler_sample(&s, logits, NULL, NULL, 0), 1);
    assert_float_equal(logits[0], 0.5f, 1e-6);
    splash_sampler_free(&s);
    struct splash_sampling_params r = {.temperature = 0, .repetition_penalty = 2.0f};
    splash_sampler_init(&s, &r, 2);
    splash_sampler_accept(&s, 0);
    splash_sampler_accept(&s, 1);
    float l2[2] = {2.0f, -1.0f};
    splash_sampler_sample(&s, l2, NULL, NULL, 0);
    assert_float_equal(l2[0], 1.0f, 1e-6);
    assert_float_equal(l2[1], -2.0f, 1e-6);
    splash_sampler_free(&s);
}

static void test_sampling_logprobs(void **state)
{
    float logits[3] = {1.0f, 2.0f, 0.0f};
    double z = exp(1.0) + exp(2.0) + exp(0.0);
    struct splash_sampling_params p = {.temperature = 0};
    struct splash_sampler s;
    splash_sampler_init(&s, &p, 3);
    float lp;
    struct splash_token_logprob top[2];
    assert_int_equal(splash_sampler_sample(&s, logits, &lp, top, 2), 1);
    assert_float_equal(lp, (float)(2.0 - log(z)), 1e-5);
    assert_int_equal(top[0].id, 1);
    assert_int_equal(top[1].id, 0);
    assert_float_equal(top[1].logprob, (float)(1.0 - log(z)), 1e-5);
    splash_sampler_free(&s);
}

#if defined(__aarch64__)
/* The NEON scans give the plain loops' results: argmax (first of ties, NaN skipped, a NaN
 * first element), the range and the count at or above a threshold (until a stop), on
 * every length 1..70 of logits with ties, signed zeros and NaNs. */
static void test_sampling_neon_scans_match_loops(void **state)
{
    (void)state;
    if (!test_cpu_has(SPLASH_CPU_NEON, "the NEON sampling scans"))
        return;
    uint64_t rng = 0x5eed5eed5eedull;
    float x[70];
    for (int trial = 0; trial < 400; trial++) {
        const int32_t n = 1 + trial % 70;
        for (int32_t i = 0; i < n; i++) {
            const uint64_t r = test_xorshift64(&rng);
            x[i] = (float)(int)(r % 9) - 4.0f; /* few values: many ties */
            if (r % 13 == 0)
                x[i] = -0.0f;
            if (trial % 5 == 4 && r % 17 == 0)
                x[i] = NAN;
        }
        if (trial % 50 == 9)
            x[0] = NAN;
        int32_t want = 0;
        for (int32_t i = 1; i < n; i++)
            if (x[i] > x[want])
                want = i;
        const int32_t got = splash_argmax_neon(x, n);
        if (got != want)
            fail_msg("trial %d (n %d): argmax %d, the loop %d", trial, n, got, want);
        int nan = 0;
        float lo = x[0], hi = x[0];
        for (int32_t i = 0; i < n; i++) {
            nan |= x[i] != x[i];
            lo = x[i] < lo ? x[i] : lo;
            hi = x[i] > hi ? x[i] : hi;
        }
        float glo, ghi;
        const int ok = splash_logit_range_neon(x, n, &glo, &ghi);
        if (ok == nan || (ok && (glo != lo || ghi != hi)))
            fail_msg("trial %d (n %d): range %d [%g, %g], the loop nan %d [%g, %g]", trial, n,
                     ok, (double)glo, (double)ghi, nan, (double)lo, (double)hi);
        for (float thr = -4.5f; thr < 5.0f; thr += 1.5f)
            for (int32_t stop = 1; stop <= 80; stop += 13) {
                int32_t cnt = 0;
                for (int32_t i = 0; i < n && cnt < stop; i++)
                    cnt += x[i] >= thr;
                const int32_t c = splash_count_at_least_neon(x, n, thr, stop);
                /* the same count, or both at least stop (the loop stops there) */
                if (c != cnt && !(cnt >= stop && c >= stop && c < stop + 16))
                    fail_msg("trial %d (n %d): count >= %g until %d: %d, the loop %d", trial,
                             n, (double)thr, stop, c, cnt);
            }
    }
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sampling_greedy_takes_lowest_of_ties),
        cmocka_unit_test(test_sampling_top_k_one_is_greedy),
        cmocka_unit_test(test_sampling_matches_distribution),
        cmocka_unit_test(test_sampling_seed_repeats),
        cmocka_unit_test(test_sampling_top_p_and_min_p_filter),
        cmocka_unit_test(test_sampling_penalties),
        cmocka_unit_test(test_sampling_logprobs),
#if defined(__aarch64__)
        cmocka_unit_test(test_sampling_neon_scans_match_loops),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
