/* The machine's read bandwidth as the benchmarks measure it: threads summing 64-bit
 * words of a buffer far larger than the caches with the widest loads the CPU has,
 * best of 5 passes. bench-formats and bench-model set kernel speeds against it. */
#ifndef SPLASH_BENCH_READ_BANDWIDTH_H
#define SPLASH_BENCH_READ_BANDWIDTH_H

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define BW_MAX_THREADS 64

static double bw_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#if defined(__x86_64__)
/* Sums of 64-bit words with the widest loads the CPU has and four independent
 * accumulators, so the loop is bound by the memory system, not by the adds. */
__attribute__((target("avx512f"))) static uint64_t sum_avx512(const uint64_t *p, size_t n)
{
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 32 <= n; i += 32) {
        a0 = _mm512_add_epi64(a0, _mm512_load_si512(p + i));
        a1 = _mm512_add_epi64(a1, _mm512_load_si512(p + i + 8));
        a2 = _mm512_add_epi64(a2, _mm512_load_si512(p + i + 16));
        a3 = _mm512_add_epi64(a3, _mm512_load_si512(p + i + 24));
    }
    return (uint64_t)_mm512_reduce_add_epi64(
        _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
}

__attribute__((target("avx2"))) static uint64_t sum_avx2(const uint64_t *p, size_t n)
{
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 16 <= n; i += 16) {
        a0 = _mm256_add_epi64(a0, _mm256_load_si256((const __m256i *)(p + i)));
        a1 = _mm256_add_epi64(a1, _mm256_load_si256((const __m256i *)(p + i + 4)));
        a2 = _mm256_add_epi64(a2, _mm256_load_si256((const __m256i *)(p + i + 8)));
        a3 = _mm256_add_epi64(a3, _mm256_load_si256((const __m256i *)(p + i + 12)));
    }
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)lanes,
                        _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
    return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

#endif

#if defined(__aarch64__)
/* arm64: 128-bit loads (ldp q pairs) into four independent accumulators. */
static uint64_t sum_neon(const uint64_t *p, size_t n)
{
    uint64x2_t a0 = vdupq_n_u64(0), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 8 <= n; i += 8) {
        a0 = vaddq_u64(a0, vld1q_u64(p + i));
        a1 = vaddq_u64(a1, vld1q_u64(p + i + 2));
        a2 = vaddq_u64(a2, vld1q_u64(p + i + 4));
        a3 = vaddq_u64(a3, vld1q_u64(p + i + 6));
    }
    return vaddvq_u64(vaddq_u64(vaddq_u64(a0, a1), vaddq_u64(a2, a3)));
}
#else
static uint64_t sum_plain(const uint64_t *p, size_t n)
{
    uint64_t a0 = 0, a1 = 0;
    for (size_t i = 0; i + 2 <= n; i += 2) {
        a0 += p[i];
        a1 += p[i + 1];
    }
    return a0 + a1;
}
#endif

struct sum_task {
    const uint64_t *p;
    size_t n;
    uint64_t result;
};

static void *sum_thread(void *arg)
{
    struct sum_task *t = arg;
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f"))
        t->result = sum_avx512(t->p, t->n);
    else if (__builtin_cpu_supports("avx2"))
        t->result = sum_avx2(t->p, t->n);
    else
#endif
#if defined(__aarch64__)
        t->result = sum_neon(t->p, t->n);
#else
        t->result = sum_plain(t->p, t->n);
#endif
    return NULL;
}

/* Best of 5 passes over the buffer split between n_threads, in GB/s. */
static double read_bandwidth(const uint64_t *buf, size_t n_words, int n_threads)
{
    if (n_threads > BW_MAX_THREADS)
        n_threads = BW_MAX_THREADS;
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        pthread_t th[BW_MAX_THREADS];
        struct sum_task tasks[BW_MAX_THREADS];
        size_t per = n_words / (size_t)n_threads / 32 * 32;
        double t0 = bw_now();
        for (int t = 0; t < n_threads; t++) {
            tasks[t] = (struct sum_task){buf + (size_t)t * per, per, 0};
            pthread_create(&th[t], NULL, sum_thread, &tasks[t]);
        }
        uint64_t total = 0;
        for (int t = 0; t < n_threads; t++) {
            pthread_join(th[t], NULL);
            total += tasks[t].result;
        }
        double dt = bw_now() - t0;
        if (total == 42) /* keep the sum alive */
            fputc(' ', stderr);
        double gbs = (double)(per * (size_t)n_threads * 8) / dt / 1e9;
        if (gbs > best)
            best = gbs;
    }
    return best;
}

#endif
