/* The compute layer's kernels (kernels/): every SIMD primitive table
 * against the scalar reference, and each kernel against a plain double-precision
 * implementation of its contract written here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/host_impl.h"
#include "core/threadpool.h"
#include "core/registry.h"
#include "kernels/ops.h"
#include "splash/family.h"
#include "splash/fp.h"
#include "tests/support/kernel_rows.h"

static struct splash_pool *pool;

static int setup(void **state)
{
    pool = splash_pool_create(2);
    return pool ? 0 : -1;
}

static int teardown(void **state)
{
    splash_pool_destroy(pool);
    return 0;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float frand(void) /* uniform in [-1, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

static float *rand_vec(int64_t n, float scale)
{
    float *v = malloc((size_t)n * sizeof *v);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = frand() * scale;
    return v;
}

static int supported(const struct kernel_vec *v)
{
    char what[96];
    snprintf(what, sizeof what, "hybrid kernels %s", v->isa);
    return test_cpu_has(v->cpu_requires, what);
}

/* |a - b| <= tol * (1 + |b|) or fail naming the element. */
static void close_or_fail(const char *what, const float *a, const float *b, int64_t n, double tol)
{
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (!(e <= tol * (1.0 + fabs((double)b[i]))))
            fail_msg("%s: element %lld: %.8g, expected %.8g", what, (long long)i, a[i], b[i]);
    }
}

/* ---- worker pool ------------------------------------------------------------------ */

struct cover_ctx {
    _Atomic int *hits;
    _Atomic int bad_range;
    int64_t n, grain;
    _Atomic int threads_seen;
    int slow; /* each index a millisecond */
};

static void cover_range(void *ctx, int64_t begin, int64_t end, int thread)
{
    struct cover_ctx *c = ctx;
    if (begin < 0 || end > c->n || begin >= end)
        c->bad_range = 1;
    for (int64_t i = begin; i < end; i++) {
        if (c->slow)
            usleep(1000);
        c->hits[i]++;
    }
    c->threads_seen |= 1 << thread;
}

static void test_pool_runs_every_index_once(void **state)
{
    const int64_t sizes[] = {1, 2, 3, 17, 100, 1000, 151936};
    const int64_t grains[] = {1, 16, 1000};
    int both = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (size_t gi = 0; gi < sizeof grains / sizeof grains[0]; gi++) {
            int64_t n = sizes[si];
            struct cover_ctx c = {.n = n, .grain = grains[gi]};
            c.hits = calloc((size_t)n, sizeof *c.hits);
            assert_non_null(c.hits);
            /* many sections back to back, as decode issues them */
            for (int rep = 0; rep < 50; rep++)
                splash_pool_parallel_for(pool, n, grains[gi], cover_range, &c);
            assert_int_equal(c.bad_range, 0);
            for (int64_t i = 0; i < n; i++)
                if (c.hits[i] != 50)
                    fail_msg("n %lld grain %lld: index %lld ran %d times in 50 sections",
                             (long long)n, (long long)grains[gi], (long long)i, (int)c.hits[i]);
            free((void *)c.hits);
        }
    /* a long section is shared: the worker joins (within a few tries on a busy machine; a
     * short one the caller may finish before the worker is back on a core, and it then
     * goes on without it) */
    struct cover_ctx c = {.n = 64, .grain = 1, .slow = 1};
    c.hits = calloc((size_t)c.n, sizeof *c.hits);
    assert_non_null(c.hits);
    for (int rep = 0; rep < 200 && !both; rep++) {
        c.threads_seen = 0;
        splash_pool_parallel_for(pool, c.n, 1, cover_range, &c);
        both = c.threads_seen == 3;
    }
    free((void *)c.hits);
    assert_true(both);
}

/* ---- primitives ------------------------------------------------------------------ */

/* A row's multi-token delta rule (a verify pass's rows in registers) gives the bits of one
 * gdn_row call per token of the same table, the state row and every output. */
static void test_hybrid_gdn_row_tokens_match_row_calls(void **state)
{
    (void)state;
    const int64_t lens[] = {64, 100, 128, 256};
    const int32_t toks[] = {1, 5, 8, 15};
    enum { NVH = 3, STRIDE = 300 };
    int checked = 0;
    for (size_t ti = 0; kernel_vec_tables[ti]; ti++) {
        const struct kernel_vec *v = kernel_vec_tables[ti];
        if (!v->gdn_row_tokens || !supported(v))
            continue;
        checked++;
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
            for (size_t ki = 0; ki < sizeof toks / sizeof toks[0]; ki++) {
                int64_t n = lens[li];
                int32_t nt = toks[ki];
                float *k = rand_vec(nt * STRIDE, 0.2f), *q = rand_vec(nt * STRIDE, 0.2f);
                float *vv = rand_vec(nt * 2, 1), *beta = rand_vec(nt * NVH, 1);
                float *s1 = rand_vec(n, 1), *s2 = malloc((size_t)n * sizeof *s2);
                float a[16], o1[32], o2[16];
                assert_non_null(s2);
                memcpy(s2, s1, (size_t)n * sizeof *s2);
                for (int32_t t = 0; t < nt; t++) {
                    a[t] = 0.8f + 0.01f * (float)t;
                    beta[t * NVH] = 0.5f + 0.5f * beta[t * NVH] * beta[t * NVH];
                }
                v->gdn_row_tokens(n, s1, nt, a, k, q, STRIDE, vv, 2, beta, NVH, o1, 2);
                for (int32_t t = 0; t < nt; t++)
                    o2[t] = v->gdn_row(n, s2, a[t], k + t * STRIDE, q + t * STRIDE, vv[t * 2],
                                       beta[t * NVH]);
                for (int32_t t = 0; t < nt; t++)
                    if (memcmp(&o1[2 * t], &o2[t], sizeof(float)))
                        fail_msg("%s gdn_row_tokens n=%lld tokens=%d: output %d is %.9g, gdn_row "
                                 "calls %.9g",
                                 v->isa, (long long)n, nt, t, (double)o1[2 * t], (double)o2[t]);
                if (memcmp(s1, s2, (size_t)n * sizeof *s1))
                    fail_msg("%s gdn_row_tokens n=%lld tokens=%d: the state row differs from "
                             "gdn_row calls'",
                             v->isa, (long long)n, nt);
                free(k), free(q), free(vv), free(beta), free(s1), free(s2);
            }
    }
    print_message("gdn_row_tokens checked on %d table(s)\n", checked);
}

static void test_hybrid_vec_tables_match_reference(void **state)
{
    const struct kernel_vec *ref = &kernel_vec_ref;
    const int64_t lens[] = {1, 7, 16, 33, 64, 100, 128, 257};
    int checked = 0;
    for (size_t t = 0; kernel_vec_tables[t]; t++) {
        const struct kernel_vec *v = kernel_vec_tables[t];
        if (v == ref || !supported(v))
            continue;
        checked++;
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            int64_t n = lens[li];
            char what[64];
            float *a = rand_vec(n, 1), *b = rand_vec(n, 1), *w = rand_vec(n, 1);
            uint16_t *bb = malloc((size_t)n * 2);
            int8_t *bi = malloc((size_t)n);
            for (int64_t i = 0; i < n; i++) {
                bb[i] = splash_fp32_to_bf16(b[i]);
                bi[i] = (int8_t)lrintf(b[i] * 127);
            }
            float r1, r2;
#define SCALAR(name, expr_v, expr_r)                                                               \
    do {                                                                                           \
        r1 = (expr_v);                                                                             \
        r2 = (expr_r);                                                                             \
        snprintf(what, sizeof what, "%s %s n=%lld", v->isa, name, (long long)n);                   \
        close_or_fail(what, &r1, &r2, 1, 1e-5 * sqrt((double)n));                                  \
    } while (0)
            SCALAR("dot", v->dot(n, a, b), ref->dot(n, a, b));
            SCALAR("sumsq", v->sumsq(n, a), ref->sumsq(n, a));
            SCALAR("dot_bf16", v->dot_bf16(n, a, bb), ref->dot_bf16(n, a, bb));
            SCALAR("dot_i8", v->dot_i8(n, a, bi), ref->dot_i8(n, a, bi));
            float *y1 = rand_vec(n, 1), *y2 = malloc((size_t)n * sizeof *y2);
#define VECTOR(name, call_v, call_r)                                                               \
    do {                                                                                           \
        memcpy(y2, y1, (size_t)n * sizeof *y2);                                                    \
        float *y = y1;                                                                             \
        call_v;                                                                                    \
        y = y2;                                                                                    \
        call_r;                                                                                    \
        snprintf(what, sizeof what, "%s %s n=%lld", v->isa, name, (long long)n);                   \
        close_or_fail(what, y1, y2, n, 1e-6);                                                      \
        memcpy(y1, y2, (size_t)n * sizeof *y2);                                                    \
    } while (0)
            VECTOR("axpy", v->axpy(n, 0.7f, a, y), ref->axpy(n, 0.7f, a, y));
            VECTOR("scale", v->scale(n, -1.3f, y), ref->scale(n, -1.3f, y));
            VECTOR("scale_mul", v->scale_mul(n, a, 0.9f, w, y), ref->scale_mul(n, a, 0.9f, w, y));
            VECTOR("scale_mul/1", v->scale_mul(n, a, 0.9f, NULL, y),
                   ref->scale_mul(n, a, 0.9f, NULL, y));
            VECTOR("axpy_bf16", v->axpy_bf16(n, 0.3f, bb, y), ref->axpy_bf16(n, 0.3f, bb, y));
            VECTOR("axpy_i8", v->axpy_i8(n, 0.01f, bi, y), ref->axpy_i8(n, 0.01f, bi, y));
            /* one delta-rule row: the row and the returned output */
            float o1 = 0, o2 = 0;
            VECTOR("gdn_row", o1 = v->gdn_row(n, y, 0.9f, a, w, 0.5f, 0.7f),
                   o2 = ref->gdn_row(n, y, 0.9f, a, w, 0.5f, 0.7f));
            SCALAR("gdn_row out", o1, o2);
            /* gemm_nt: 5 x 3 outputs over n */
            float *c1 = rand_vec(15, 1), *c2 = malloc(15 * sizeof *c2);
            float *ma = rand_vec(5 * n, 1), *mb = rand_vec(3 * n, 1);
            memcpy(c2, c1, 15 * sizeof *c2);
            v->gemm_nt(5, 3, n, ma, n, mb, n, c1, 3, 1);
            ref->gemm_nt(5, 3, n, ma, n, mb, n, c2, 3, 1);
            snprintf(what, sizeof what, "%s gemm_nt n=%lld", v->isa, (long long)n);
            close_or_fail(what, c1, c2, 15, 1e-5 * sqrt((double)n));
            free(c1), free(c2), free(ma), free(mb);
            /* gemm_nn: 6 x n outputs over 5 and n x 6 outputs over n, both accumulate modes */
            for (int acc = 0; acc < 2; acc++) {
                float *na = rand_vec((n + 6) * (n + 6), 1), *nb = rand_vec((n + 6) * (n + 6), 1);
                float *d1 = rand_vec(6 * n, 1), *d2 = malloc((size_t)(6 * n) * sizeof *d2);
                memcpy(d2, d1, (size_t)(6 * n) * sizeof *d2);
                v->gemm_nn(6, n, 5, na, 5, nb, n, d1, n, acc);
                ref->gemm_nn(6, n, 5, na, 5, nb, n, d2, n, acc);
                snprintf(what, sizeof what, "%s gemm_nn 6x%lld acc %d", v->isa, (long long)n, acc);
                close_or_fail(what, d1, d2, 6 * n, 1e-5);
                v->gemm_nn(n, 6, n, nb, n, na, 6, d1, 6, acc);
                ref->gemm_nn(n, 6, n, nb, n, na, 6, d2, 6, acc);
                snprintf(what, sizeof what, "%s gemm_nn %lldx6 acc %d", v->isa, (long long)n, acc);
                close_or_fail(what, d1, d2, 6 * n, 1e-5 * sqrt((double)n));
                free(na), free(nb), free(d1), free(d2);
            }
            /* SiLU over a wide range (saturating ends included) */
            {
                float *sx = malloc((size_t)n * sizeof *sx), *s1 = malloc((size_t)n * sizeof *s1),
                      *s2 = malloc((size_t)n * sizeof *s2);
                for (int64_t i = 0; i < n; i++)
                    sx[i] = 30.0f * a[i] + (i == 0 ? -100.0f : i == 1 ? 100.0f : 0.0f);
                v->silu(n, sx, s1);
                ref->silu(n, sx, s2);
                snprintf(what, sizeof what, "%s silu n=%lld", v->isa, (long long)n);
                close_or_fail(what, s1, s2, n, 2e-6);
                free(sx), free(s1), free(s2);
            }
            /* exp_sum with a -inf entry (a masked score) */
            {
                float *ex = rand_vec(n, 20);
                float *e1 = malloc((size_t)n * 4), *e2 = malloc((size_t)n * 4);
                ex[n / 2] = -INFINITY;
                float s1 = v->exp_sum(n, ex, 3.0f, e1), s2 = ref->exp_sum(n, ex, 3.0f, e2);
                snprintf(what, sizeof what, "%s exp_sum n=%lld", v->isa, (long long)n);
                close_or_fail(what, e1, e2, n, 2e-6);
                close_or_fail(what, &s1, &s2, 1, 2e-6 * sqrt((double)n));
                free(ex), free(e1), free(e2);
            }
            /* the f16 cache's attention rows: the scalar's bits */
            {
                float *fx = rand_vec(n, 3), *r1 = malloc((size_t)n * 4), *r2 = malloc((size_t)n * 4);
                uint16_t *fv = malloc((size_t)n * 2), *a1 = malloc((size_t)n * 2),
                         *a2 = malloc((size_t)n * 2);
                fx[0] = 70000.0f; /* past f16: Inf */
                if (n > 3)
                    fx[3] = 3e-6f; /* an f16 subnormal */
                /* optional rows (NEON has none: attention takes the reference's); the draws
                 * above are made either way, so later checks see the same data */
                if (v->round_f16) {
                    v->round_f16(n, fx, r1);
                    ref->round_f16(n, fx, r2);
                    snprintf(what, sizeof what, "%s round_f16 n=%lld", v->isa, (long long)n);
                    if (memcmp(r1, r2, (size_t)n * 4))
                        fail_msg("%s: not the scalar's bits", what);
                    for (int64_t i = 0; i < n; i++) {
                        fv[i] = splash_fp32_to_fp16(b[i]);
                        a1[i] = a2[i] = splash_fp32_to_fp16(w[i]);
                    }
                    ref->round_f16(n, a, r2);
                    double d1 = v->dot_f16(n, r2, fv), d2 = ref->dot_f16(n, r2, fv);
                    snprintf(what, sizeof what, "%s dot_f16 n=%lld", v->isa, (long long)n);
                    if (memcmp(&d1, &d2, sizeof d1))
                        fail_msg("%s: %.17g, the scalar %.17g", what, d1, d2);
                    static const float ms[] = {1.0f, 0.37f, 0.0f}, vs[] = {0.81f, 1.0f, 1.0f};
                    for (int c = 0; c < 3; c++) {
                        v->acc_f16(n, a1, fv, ms[c], vs[c]);
                        ref->acc_f16(n, a2, fv, ms[c], vs[c]);
                        snprintf(what, sizeof what, "%s acc_f16 n=%lld ms %g", v->isa, (long long)n,
                                 (double)ms[c]);
                        if (memcmp(a1, a2, (size_t)n * 2))
                            fail_msg("%s: not the scalar's bits", what);
                    }
                }
                free(fx), free(r1), free(r2), free(fv), free(a1), free(a2);
            }
            /* conv_silu: n channels, 3 tokens, kw 4, the first rows from the state */
            {
                float *cx = rand_vec(3 * n, 1), *cs = rand_vec(3 * n, 1), *cw = rand_vec(4 * n, 1);
                float *o1 = malloc((size_t)(3 * n) * sizeof *o1),
                      *o2 = malloc((size_t)(3 * n) * sizeof *o2);
                v->conv_silu(3, n, cx, n, cs, n, cw, 4, o1, n);
                ref->conv_silu(3, n, cx, n, cs, n, cw, 4, o2, n);
                snprintf(what, sizeof what, "%s conv_silu n=%lld", v->isa, (long long)n);
                close_or_fail(what, o1, o2, 3 * n, 2e-6);
                free(cx), free(cs), free(cw), free(o1), free(o2);
            }
            /* rope_pairs: the reference's bits (each product rounded, no FMA); its values
             * come from y1 and a, not new draws, so the later tests' data stay the same
             * whichever tables have rope_pairs */
            if (v->rope_pairs) {
                float *r1 = malloc((size_t)(2 * n) * sizeof *r1),
                      *r2 = malloc((size_t)(2 * n) * sizeof *r2),
                      *rcs = malloc((size_t)(2 * n) * sizeof *rcs);
                for (int64_t i = 0; i < n; i++) {
                    r1[i] = r2[i] = 3.0f * y1[i];
                    r1[n + i] = r2[n + i] = -2.0f * a[i];
                    rcs[2 * i] = b[i];
                    rcs[2 * i + 1] = w[i];
                }
                v->rope_pairs((int32_t)n, r1, r1 + n, rcs);
                ref->rope_pairs((int32_t)n, r2, r2 + n, rcs);
                for (int64_t i = 0; i < 2 * n; i++)
                    if (memcmp(&r1[i], &r2[i], sizeof r1[i]))
                        fail_msg("%s rope_pairs n=%lld: element %lld %.9g, the reference %.9g",
                                 v->isa, (long long)n, (long long)i, (double)r1[i], (double)r2[i]);
                free(rcs), free(r1), free(r2);
            }
            free(a), free(b), free(w), free(bb), free(bi), free(y1), free(y2);
        }
    }
    printf("  %d SIMD table(s) checked against the scalar reference\n", checked);
}

/* ---- norms and rotary ------------------------------------------------------------------ */

static void test_hybrid_rmsnorm_l2norm_rope(void **state)
{
    const int64_t n = 37, d = 96;
    float *x = rand_vec(n * d, 3), *w = rand_vec(d, 1), *y = malloc((size_t)(n * d) * 4);
    float *expect = malloc((size_t)(n * d) * 4);
    for (int64_t r = 0; r < n; r++) {
        double ss = 0;
        for (int64_t i = 0; i < d; i++)
            ss += (double)x[r * d + i] * x[r * d + i];
        double s = 1.0 / sqrt(ss / d + 1e-6);
        for (int64_t i = 0; i < d; i++)
            expect[r * d + i] = (float)(x[r * d + i] * s * w[i]);
    }
    kernel_rmsnorm(pool, x, d, w, y, d, n, d, 1e-6f);
    close_or_fail("rmsnorm", y, expect, n * d, 1e-6);
    /* l2norm with a scale */
    memcpy(y, x, (size_t)(n * d) * 4);
    kernel_l2norm(pool, y, d, n, d, 1e-6f, 0.5f);
    for (int64_t r = 0; r < n; r++) {
        double ss = 0;
        for (int64_t i = 0; i < d; i++)
            ss += (double)x[r * d + i] * x[r * d + i];
        for (int64_t i = 0; i < d; i++)
            expect[r * d + i] = (float)(x[r * d + i] * 0.5 / sqrt(ss));
    }
    close_or_fail("l2norm", y, expect, n * d, 1e-6);
    /* rope: 2 heads of 48 in rows of 96, 8 pairs rotated, the rest untouched */
    float *cs = malloc((size_t)n * 8 * 2 * 4);
    for (int64_t r = 0; r < n; r++)
        for (int p = 0; p < 8; p++) {
            double th = r * pow(1e4, -2.0 * p / 16);
            cs[(r * 8 + p) * 2] = (float)cos(th);
            cs[(r * 8 + p) * 2 + 1] = (float)sin(th);
        }
    memcpy(y, x, (size_t)(n * d) * 4);
    kernel_rope(pool, y, d, 48, n, 2, 8, cs);
    memcpy(expect, x, (size_t)(n * d) * 4);
    for (int64_t r = 0; r < n; r++)
        for (int h = 0; h < 2; h++)
            for (int p = 0; p < 8; p++) {
                const float *src = x + r * d + h * 48;
                double c = cs[(r * 8 + p) * 2], s = cs[(r * 8 + p) * 2 + 1];
                expect[r * d + h * 48 + p] = (float)(src[p] * c - src[p + 8] * s);
                expect[r * d + h * 48 + p + 8] = (float)(src[p] * s + src[p + 8] * c);
            }
    close_or_fail("rope", y, expect, n * d, 1e-6);
    free(x), free(w), free(y), free(expect), free(cs);
}

/* ---- KV pages and attention ----------------------------------------------------------- */

struct kv_fixture {
    struct splash_kv_pages kv;
    void *pages[8];
};

static void kv_init(struct kv_fixture *f, int32_t format, int32_t page_tokens, int32_t n_kv,
                    int32_t hd, int64_t n_tokens)
{
    memset(f, 0, sizeof *f);
    f->kv.format = format;
    f->kv.page_tokens = page_tokens;
    f->kv.n_kv_heads = n_kv;
    f->kv.head_dim = hd;
    f->kv.n_pages = (n_tokens + page_tokens - 1) / page_tokens;
    assert_true(f->kv.n_pages <= 8);
    size_t bytes = kernel_kv_page_bytes(format, page_tokens, n_kv, hd);
    for (int64_t p = 0; p < f->kv.n_pages; p++)
        assert_non_null(f->pages[p] = malloc(bytes));
    f->kv.pages = f->pages;
}

static void kv_free(struct kv_fixture *f)
{
    for (int64_t p = 0; p < f->kv.n_pages; p++)
        free(f->pages[p]);
}

/* add_bias: one bias for every row, or each row its expert's (a negative id untouched). */
static void test_add_bias(void **state)
{
    const int64_t n = 5, d = 7;
    float y[5 * 9], b[3 * 7];
    for (int i = 0; i < 5 * 9; i++)
        y[i] = (float)i;
    for (int i = 0; i < 3 * 7; i++)
        b[i] = 100.0f * (float)(i / 7 + 1) + (float)(i % 7);
    const int32_t ids[5] = {2, -1, 0, 1, 2};
    kernel_add_bias(pool, y, 9, n, d, b, ids, 7);
    for (int64_t r = 0; r < n; r++)
        for (int64_t i = 0; i < 9; i++) {
            float want = (float)(r * 9 + i);
            if (i < d && ids[r] >= 0)
                want += b[ids[r] * 7 + i];
            assert_true(y[r * 9 + i] == want);
        }
    kernel_add_bias(pool, y, 9, 1, d, b, NULL, 0);
    assert_true(y[3] == 2.0f * 9 * 0 + 3.0f + b[2 * 7 + 3] + b[3]);
}

/* rope_table against YaRN in double: correction dims from beta fast/slow, the ramp between
 * interpolated and original frequencies, the magnitude 1 + 0.1 ln(factor); plain tables
 * without scaling; members past a short size read as 0 (attn factor 1, betas 32 and 1). */
static void test_rope_table_yarn(void **state)
{
    const int32_t dims = 32, pairs = 16, n = 5;
    const int64_t pos0 = 1000;
    struct splash_rope_args a = {.size = sizeof a, .n_dims = dims, .freq_base = 150000.0f,
                                 .freq_scale = 1.0f / 32.0f, .ext_factor = 1.0f,
                                 .attn_factor = 1.0f, .beta_fast = 32.0f, .beta_slow = 1.0f,
                                 .n_ctx_orig = 4096};
    float cs[5 * 16 * 2];
    kernel_rope_table(&a, pos0, n, cs);
    double corr[2], beta[2] = {32.0, 1.0};
    for (int k = 0; k < 2; k++)
        corr[k] = dims * log(4096.0 / (beta[k] * 2 * M_PI)) / (2 * log(150000.0));
    double lo = fmax(0, floor(corr[0])), hi = fmin(dims - 1, ceil(corr[1]));
    assert_true(lo == 4 && hi == 9);
    double mscale = 1.0 + 0.1 * log(32.0);
    for (int t = 0; t < n; t++)
        for (int i = 0; i < pairs; i++) {
            double extrap = (double)(pos0 + t) * pow(150000.0, -2.0 * i / dims);
            double ramp = 1.0 - fmin(1.0, fmax(0.0, (i - lo) / fmax(0.001, hi - lo)));
            double th = extrap / 32.0 * (1 - ramp) + extrap * ramp;
            /* float angles of ~1000 radians carry ~1e-4 of absolute error */
            assert_true(fabs(cs[(t * pairs + i) * 2] - cos(th) * mscale) < 2e-3);
            assert_true(fabs(cs[(t * pairs + i) * 2 + 1] - sin(th) * mscale) < 2e-3);
        }
    /* no scaling: plain NeoX frequencies, magnitude 1 */
    struct splash_rope_args plain = {.size = offsetof(struct splash_rope_args, freq_scale),
                                     .n_dims = dims, .freq_base = 10000.0f};
    kernel_rope_table(&plain, 3, 1, cs);
    for (int i = 0; i < pairs; i++) {
        double th = 3.0 * pow(10000.0, -2.0 * i / dims);
        assert_true(fabs(cs[2 * i] - cos(th)) < 1e-5 && fabs(cs[2 * i + 1] - sin(th)) < 1e-5);
    }
}

static void test_hybrid_kv_store_roundtrip(void **state)
{
    const int32_t n_kv = 2, hd = 64;
    const int64_t n = 45;
    float *k = rand_vec(n * n_kv * hd, 2), *v = rand_vec(n * n_kv * hd, 2);
    float row[64];
    for (int format = 0; format < 4; format++) { /* int8, bf16, f16, f32 */
        struct kv_fixture f;
        kv_init(&f, format, 16, n_kv, hd, n);
        /* in two calls, across page boundaries */
        kernel_kv_store(pool, &f.kv, 0, 20, k, n_kv * hd, v, n_kv * hd);
        kernel_kv_store(pool, &f.kv, 20, n - 20, k + 20 * n_kv * hd, n_kv * hd, v + 20 * n_kv * hd,
                        n_kv * hd);
        for (int64_t t = 0; t < n; t++)
            for (int32_t h = 0; h < n_kv; h++)
                for (int which = 0; which < 2; which++) {
                    const float *src = (which ? v : k) + (t * n_kv + h) * hd;
                    kernel_kv_read_row(&f.kv, which, t, h, row);
                    float amax = 0;
                    for (int i = 0; i < hd; i++)
                        amax = fmaxf(amax, fabsf(src[i]));
                    for (int i = 0; i < hd; i++) {
                        /* bf16: half an ulp of 8 bits, f16 of 11 (and its subnormal
                         * step), f32 exact; int8: half a step of amax / 127 */
                        double tol = format == SPLASH_KV_BF16  ? fabs(src[i]) / 256.0
                                     : format == SPLASH_KV_F16 ? fabs(src[i]) / 2048.0 + 3e-8
                                     : format == SPLASH_KV_F32 ? 0.0
                                                               : amax / 127.0 * 0.5001;
                        if (fabs(row[i] - src[i]) > tol)
                            fail_msg("kv format %d token %lld head %d %c[%d]: %g vs %g", format,
                                     (long long)t, h, which ? 'V' : 'K', i, row[i], src[i]);
                    }
                }
        kv_free(&f);
    }
    free(k), free(v);
}

/* attention over the KV rows as stored (read back), in double */
static void attention_naive(const struct splash_kv_pages *kv, const float *q, int64_t n_q,
                            int32_t n_head, int64_t pos0, float scale, float *out)
{
    int32_t hd = kv->head_dim, group = n_head / kv->n_kv_heads;
    float *krow = malloc((size_t)hd * 4), *vrow = malloc((size_t)hd * 4);
    double *s = malloc((size_t)(pos0 + n_q) * sizeof *s), *acc = malloc((size_t)hd * sizeof *acc);
    for (int64_t i = 0; i < n_q; i++)
        for (int32_t h = 0; h < n_head; h++) {
            int64_t n_kv = pos0 + i + 1;
            const float *qh = q + (i * n_head + h) * hd;
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < n_kv; j++) {
                kernel_kv_read_row(kv, 0, j, h / group, krow);
                double d = 0;
                for (int t = 0; t < hd; t++)
                    d += (double)qh[t] * krow[t];
                s[j] = d * scale;
                mx = fmax(mx, s[j]);
            }
            memset(acc, 0, (size_t)hd * sizeof *acc);
            for (int64_t j = 0; j < n_kv; j++) {
                double p = exp(s[j] - mx);
                sum += p;
                kernel_kv_read_row(kv, 1, j, h / group, vrow);
                for (int t = 0; t < hd; t++)
                    acc[t] += p * vrow[t];
            }
            for (int t = 0; t < hd; t++)
                out[(i * n_head + h) * hd + t] = (float)(acc[t] / sum);
        }
    free(krow), free(vrow), free(s), free(acc);
}

/* An f16 cache as llama.cpp's CPU flash attention computes over one (ggml's one-chunk
 * path): the query rounded to f16, exact scores, then key by key an f16 output vector
 * rescaled on a new maximum and added the value times its weight, each step rounded to
 * f16; divided by the sum at the end. */
static void attention_ggml_f16(const struct splash_kv_pages *kv, const float *q, int64_t n_q,
                               int32_t n_head, int64_t pos0, float scale, float *out)
{
    int32_t hd = kv->head_dim, group = n_head / kv->n_kv_heads;
    float *krow = malloc((size_t)hd * 4), *vrow = malloc((size_t)hd * 4),
          *qh = malloc((size_t)hd * 4), *acc = malloc((size_t)hd * 4);
    for (int64_t i = 0; i < n_q; i++)
        for (int32_t h = 0; h < n_head; h++) {
            for (int t = 0; t < hd; t++) {
                qh[t] = splash_fp16_to_fp32(splash_fp32_to_fp16(q[(i * n_head + h) * hd + t]));
                acc[t] = 0.0f;
            }
            float mx = -INFINITY, sum = 0.0f;
            for (int64_t j = 0; j < pos0 + i + 1; j++) {
                kernel_kv_read_row(kv, 0, j, h / group, krow);
                kernel_kv_read_row(kv, 1, j, h / group, vrow);
                double d = 0;
                for (int t = 0; t < hd; t++)
                    d += (double)qh[t] * krow[t];
                float sc = (float)d * scale, grow = 1.0f, w = 1.0f;
                if (sc > mx) {
                    grow = expf(mx - sc);
                    mx = sc;
                } else {
                    w = expf(sc - mx);
                }
                for (int t = 0; t < hd; t++) {
                    if (grow != 1.0f)
                        acc[t] = splash_fp16_to_fp32(splash_fp32_to_fp16(acc[t] * grow));
                    acc[t] = splash_fp16_to_fp32(splash_fp32_to_fp16(fmaf(vrow[t], w, acc[t])));
                }
                sum = sum * grow + w;
            }
            for (int t = 0; t < hd; t++)
                out[(i * n_head + h) * hd + t] = acc[t] * (1.0f / sum);
        }
    free(krow), free(vrow), free(qh), free(acc);
}

static void test_hybrid_attention_matches_naive(void **state)
{
    /* short batches take the row form; 16 rows and more the blocked form (whole and
     * partial query blocks, KV blocks split at pages); an f16 cache takes llama.cpp's
     * arithmetic at any length */
    const int64_t cases[][2] = {{37, 11}, {0, 33}, {5, 40}, {21, 16}};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const int32_t n_kv = 2, n_head = 6, hd = 64;
        const int64_t pos0 = cases[ci][0], n_q = cases[ci][1], n = pos0 + n_q;
        float *k = rand_vec(n * n_kv * hd, 2), *v = rand_vec(n * n_kv * hd, 1);
        float *q = rand_vec(n_q * n_head * hd, 1);
        float *out = malloc((size_t)(n_q * n_head * hd) * 4),
              *expect = malloc((size_t)(n_q * n_head * hd) * 4);
        for (int format = 0; format < 4; format++) { /* int8, bf16, f16, f32 */
            struct kv_fixture f;
            kv_init(&f, format, 16, n_kv, hd, n);
            kernel_kv_store(pool, &f.kv, 0, n, k, n_kv * hd, v, n_kv * hd);
            if (format == SPLASH_KV_F16)
                attention_ggml_f16(&f.kv, q, n_q, n_head, pos0, 0.125f, expect);
            else
                attention_naive(&f.kv, q, n_q, n_head, pos0, 0.125f, expect);
            for (size_t t = 0; kernel_vec_tables[t]; t++) {
                if (!supported(kernel_vec_tables[t]))
                    continue;
                kernel_attention_with(kernel_vec_tables[t], pool, &f.kv, q, n_head * hd, n_q,
                                      n_head, pos0, 0.125f, out, n_head * hd);
                char what[96];
                snprintf(what, sizeof what, "attention %s kv %d pos0 %lld n %lld",
                         kernel_vec_tables[t]->isa, format, (long long)pos0, (long long)n_q);
                close_or_fail(what, out, expect, n_q * n_head * hd, 2e-5);
            }
            kv_free(&f);
        }
        free(k), free(v), free(q), free(out), free(expect);
    }
}

/* A batched step's lanes in one attention_lanes call give each lane exactly what kv_store
 * and attention give it alone: lanes at different positions and lengths (decode rows, a
 * few rows, an empty lane, a lane of 40 rows in the blocked form, a lane whose rows are
 * stored already), each with its own pages, strided rows and output. The store items
 * outnumber their grain, so the pool's second share starts inside a lane. */
static void test_hybrid_attention_lanes_match_alone(void **state)
{
    enum { LANES = 6 };
    const int32_t n_kv = 2, n_head = 6, hd = 64, pt = 16;
    const int64_t pos0[LANES] = {37, 5, 0, 21, 60, 12}, n_q[LANES] = {1, 3, 1, 40, 0, 2};
    const int64_t qs = n_head * hd + 8, kvs = n_kv * hd + 4, os = n_head * hd + 16;
    const int stored[LANES] = {0, 0, 0, 0, 0, 1}; /* lane 5: pages filled, k NULL */
    const float scale = 0.125f;
    for (int format = 0; format < 2; format++) {
        for (size_t ti = 0; kernel_vec_tables[ti]; ti++) {
            const struct kernel_vec *vec = kernel_vec_tables[ti];
            if (!supported(vec))
                continue;
            struct kv_fixture f[2][LANES];
            struct splash_attn_lane ln[LANES];
            float *k[LANES], *v[LANES], *q[LANES], *out[2][LANES];
            for (int l = 0; l < LANES; l++) {
                int64_t n = pos0[l] + n_q[l];
                k[l] = rand_vec((n > 0 ? n : 1) * kvs, 2);
                v[l] = rand_vec((n > 0 ? n : 1) * kvs, 1);
                q[l] = rand_vec((n_q[l] > 0 ? n_q[l] : 1) * qs, 1);
                for (int m = 0; m < 2; m++) {
                    kv_init(&f[m][l], format, pt, n_kv, hd, n > 0 ? n : 1);
                    size_t bytes = kernel_kv_page_bytes(format, pt, n_kv, hd);
                    for (int64_t p = 0; p < f[m][l].kv.n_pages; p++)
                        memset(f[m][l].pages[p], 0, bytes);
                    /* the tokens before the step (and lane 5's rows) */
                    int64_t before = stored[l] ? n : pos0[l];
                    kernel_kv_store(pool, &f[m][l].kv, 0, before, k[l], kvs, v[l], kvs);
                    out[m][l] = malloc((size_t)((n_q[l] > 0 ? n_q[l] : 1) * os) * 4);
                    for (int64_t i = 0; i < (n_q[l] > 0 ? n_q[l] : 1) * os; i++)
                        out[m][l][i] = -7.0f;
                }
            }
            /* alone: each lane's store and attention */
            for (int l = 0; l < LANES; l++) {
                if (!stored[l])
                    kernel_kv_store(pool, &f[0][l].kv, pos0[l], n_q[l], k[l] + pos0[l] * kvs, kvs,
                                    v[l] + pos0[l] * kvs, kvs);
                kernel_attention_with(vec, pool, &f[0][l].kv, q[l], qs, n_q[l], n_head, pos0[l],
                                      scale, out[0][l], os);
            }
            /* together */
            for (int l = 0; l < LANES; l++)
                ln[l] = (struct splash_attn_lane){.kv = f[1][l].kv,
                                                  .pos0 = pos0[l],
                                                  .n_q = n_q[l],
                                                  .q = q[l],
                                                  .q_stride = qs,
                                                  .out = out[1][l],
                                                  .out_stride = os,
                                                  .k = stored[l] ? NULL : k[l] + pos0[l] * kvs,
                                                  .v = stored[l] ? NULL : v[l] + pos0[l] * kvs,
                                                  .k_stride = kvs,
                                                  .v_stride = kvs};
            kernel_attention_lanes_with(vec, pool, ln, LANES, n_head, scale);
            size_t bytes = kernel_kv_page_bytes(format, pt, n_kv, hd);
            for (int l = 0; l < LANES; l++) {
                for (int64_t i = 0; i < n_q[l] * os; i++)
                    if (memcmp(&out[0][l][i], &out[1][l][i], 4))
                        fail_msg("attention lanes %s kv %d lane %d row %lld col %lld: %.9g, "
                                 "alone %.9g",
                                 vec->isa, format, l, (long long)(i / os), (long long)(i % os),
                                 (double)out[1][l][i], (double)out[0][l][i]);
                for (int64_t p = 0; p < f[0][l].kv.n_pages; p++)
                    assert_memory_equal(f[0][l].pages[p], f[1][l].pages[p], bytes);
                /* and the step did something */
                if (n_q[l] > 0)
                    assert_true(out[1][l][0] != -7.0f);
                free(k[l]), free(v[l]), free(q[l]);
                for (int m = 0; m < 2; m++) {
                    kv_free(&f[m][l]);
                    free(out[m][l]);
                }
            }
        }
    }
}

/* attention_naive with a sliding window (row at p sees keys p - window + 1 .. p; 0: all)
 * and per-head sink logits (NULL: none) joining each softmax with no value */
static void attention_naive_ws(const struct splash_kv_pages *kv, const float *q, int64_t n_q,
                               int32_t n_head, int64_t pos0, float scale, int32_t window,
                               const float *sinks, float *out)
{
    int32_t hd = kv->head_dim, group = n_head / kv->n_kv_heads;
    float *krow = malloc((size_t)hd * 4), *vrow = malloc((size_t)hd * 4);
    double *s = malloc((size_t)(pos0 + n_q) * sizeof *s), *acc = malloc((size_t)hd * sizeof *acc);
    for (int64_t i = 0; i < n_q; i++)
        for (int32_t h = 0; h < n_head; h++) {
            int64_t last = pos0 + i, first = window > 0 ? last - window + 1 : 0;
            if (first < 0)
                first = 0;
            const float *qh = q + (i * n_head + h) * hd;
            double mx = sinks ? sinks[h] : -INFINITY, sum = 0;
            for (int64_t j = first; j <= last; j++) {
                kernel_kv_read_row(kv, 0, j, h / group, krow);
                double d = 0;
                for (int t = 0; t < hd; t++)
                    d += (double)qh[t] * krow[t];
                s[j] = d * scale;
                mx = fmax(mx, s[j]);
            }
            memset(acc, 0, (size_t)hd * sizeof *acc);
            for (int64_t j = first; j <= last; j++) {
                double p = exp(s[j] - mx);
                sum += p;
                kernel_kv_read_row(kv, 1, j, h / group, vrow);
                for (int t = 0; t < hd; t++)
                    acc[t] += p * vrow[t];
            }
            if (sinks)
                sum += exp(sinks[h] - mx);
            for (int t = 0; t < hd; t++)
                out[(i * n_head + h) * hd + t] = (float)(acc[t] / sum);
        }
    free(krow), free(vrow), free(s), free(acc);
}

/* attend with a sliding window and sinks, in the row form (short batches) and the blocked
 * form (16 rows and more), against the naive softmax: windows inside a page, across pages,
 * longer than the context; sinks large enough to take most of a head's weight. */
static void test_attention_window_sinks_matches_naive(void **state)
{
    /* pos0, n_q, window, sinks */
    const int64_t cases[][4] = {{37, 1, 8, 1},  {37, 11, 20, 0}, {0, 33, 5, 1},
                                {5, 40, 17, 1}, {21, 16, 64, 1}, {50, 3, 0, 1},
                                {60, 2, 1, 0}};
    const int32_t n_kv = 2, n_head = 6, hd = 64;
    float sinks[6];
    for (int h = 0; h < n_head; h++)
        sinks[h] = 3.0f * frand();
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const int64_t pos0 = cases[ci][0], n_q = cases[ci][1], n = pos0 + n_q;
        const int32_t window = (int32_t)cases[ci][2];
        const float *sk = cases[ci][3] ? sinks : NULL;
        float *k = rand_vec(n * n_kv * hd, 2), *v = rand_vec(n * n_kv * hd, 1);
        float *q = rand_vec(n_q * n_head * hd, 1);
        float *out = malloc((size_t)(n_q * n_head * hd) * 4),
              *expect = malloc((size_t)(n_q * n_head * hd) * 4);
        for (int format = 0; format < 2; format++) {
            struct kv_fixture f;
            kv_init(&f, format, 16, n_kv, hd, n);
            kernel_kv_store(pool, &f.kv, 0, n, k, n_kv * hd, v, n_kv * hd);
            attention_naive_ws(&f.kv, q, n_q, n_head, pos0, 0.125f, window, sk, expect);
            for (size_t t = 0; kernel_vec_tables[t]; t++) {
                if (!supported(kernel_vec_tables[t]))
                    continue;
                struct splash_attn_args a = {.size = sizeof a, .kv = &f.kv, .q = q,
                                             .q_stride = n_head * hd, .n_q = n_q,
                                             .n_head = n_head, .pos0 = pos0, .scale = 0.125f,
                                             .out = out, .out_stride = n_head * hd,
                                             .window = window, .sinks = sk};
                kernel_attend_with(kernel_vec_tables[t], pool, &a);
                char what[128];
                snprintf(what, sizeof what, "attend %s kv %d pos0 %lld n %lld window %d sinks %d",
                         kernel_vec_tables[t]->isa, format, (long long)pos0, (long long)n_q,
                         window, sk != NULL);
                close_or_fail(what, out, expect, n_q * n_head * hd, 2e-5);
            }
            kv_free(&f);
        }
        free(k), free(v), free(q), free(out), free(expect);
    }
}

/* An f16 cache's attention (llama.cpp's arithmetic) gives the scalar row's bits in every
 * SIMD row: head sizes of whole and partial vectors, decode and prefill rows, a window
 * across pages and sinks. */
static void test_attention_f16_simd_equals_scalar(void **state)
{
    /* head_dim, pos0, n_q, window, sinks */
    const int64_t cases[][5] = {{64, 200, 1, 0, 1},  {64, 0, 130, 0, 0}, {128, 90, 40, 33, 1},
                                {40, 17, 5, 0, 1},   {200, 300, 2, 0, 0}, {8, 60, 70, 9, 1}};
    const int32_t n_kv = 2, n_head = 8;
    float sinks[8];
    for (int h = 0; h < n_head; h++)
        sinks[h] = 2.0f * frand();
    int compared = 0;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const int32_t hd = (int32_t)cases[ci][0];
        const int64_t pos0 = cases[ci][1], n_q = cases[ci][2], n = pos0 + n_q;
        float *k = rand_vec(n * n_kv * hd, 2), *v = rand_vec(n * n_kv * hd, 1);
        float *q = rand_vec(n_q * n_head * hd, 1);
        float *out = malloc((size_t)(n_q * n_head * hd) * 4),
              *expect = malloc((size_t)(n_q * n_head * hd) * 4);
        struct kv_fixture f;
        kv_init(&f, SPLASH_KV_F16, 64, n_kv, hd, n);
        kernel_kv_store(pool, &f.kv, 0, n, k, n_kv * hd, v, n_kv * hd);
        struct splash_attn_args a = {.size = sizeof a, .kv = &f.kv, .q = q,
                                     .q_stride = n_head * hd, .n_q = n_q, .n_head = n_head,
                                     .pos0 = pos0, .scale = 1.0f / sqrtf((float)hd),
                                     .out = expect, .out_stride = n_head * hd,
                                     .window = (int32_t)cases[ci][3],
                                     .sinks = cases[ci][4] ? sinks : NULL};
        kernel_attend_with(&kernel_vec_ref, pool, &a);
        a.out = out;
        for (size_t t = 0; kernel_vec_tables[t]; t++) {
            if (kernel_vec_tables[t] == &kernel_vec_ref || !supported(kernel_vec_tables[t]))
                continue;
            kernel_attend_with(kernel_vec_tables[t], pool, &a);
            for (int64_t i = 0; i < n_q * n_head * hd; i++)
                if (memcmp(&out[i], &expect[i], sizeof *out))
                    fail_msg("f16 attention %s hd %d pos0 %lld n %lld: element %lld %.9g, the "
                             "scalar %.9g", kernel_vec_tables[t]->isa, hd, (long long)pos0,
                             (long long)n_q, (long long)i, out[i], expect[i]);
            compared++;
        }
        kv_free(&f);
        free(k), free(v), free(q), free(out), free(expect);
    }
    printf("  f16 attention: %d SIMD runs equal the scalar bit for bit\n", compared);
    /* what the rows save: 256 prefill rows over 512 keys, head 64, one thread's CPU time,
     * the scalar and each SIMD row in turn (printed, not held to a bound) */
    const int32_t hd = 64;
    const int64_t pos0 = 256, n_q = 256, n = pos0 + n_q;
    float *k = rand_vec(n * n_kv * hd, 2), *v = rand_vec(n * n_kv * hd, 1);
    float *q = rand_vec(n_q * n_head * hd, 1), *out = malloc((size_t)(n_q * n_head * hd) * 4);
    struct kv_fixture f;
    kv_init(&f, SPLASH_KV_F16, 64, n_kv, hd, n);
    kernel_kv_store(pool, &f.kv, 0, n, k, n_kv * hd, v, n_kv * hd);
    struct splash_attn_args a = {.size = sizeof a, .kv = &f.kv, .q = q, .q_stride = n_head * hd,
                                 .n_q = n_q, .n_head = n_head, .pos0 = pos0, .scale = 0.125f,
                                 .out = out, .out_stride = n_head * hd};
    double ms[4] = {0};
    for (int rep = 0; rep < 2; rep++)
        for (size_t t = 0; kernel_vec_tables[t] && t < 4; t++) {
            if (!supported(kernel_vec_tables[t]))
                continue;
            struct timespec t0, t1;
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
            kernel_attend_with(kernel_vec_tables[t], NULL, &a);
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
            ms[t] += ((t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6) / 2;
        }
    for (size_t t = 0; kernel_vec_tables[t] && t < 4; t++)
        if (supported(kernel_vec_tables[t]))
            printf("  f16 attention, %lld rows over %lld keys: %s %.1f ms\n", (long long)n_q,
                   (long long)n, kernel_vec_tables[t]->isa, ms[t]);
    kv_free(&f);
    free(k), free(v), free(q), free(out);
}

/* attend_lanes walks lanes by the caller's element size (lanes inside larger structs) and
 * gives each lane, window and sinks included, exactly what attend gives it alone. */
static void test_attend_lanes_element_size_window_sinks(void **state)
{
    enum { LANES = 4 };
    struct wide_lane {
        struct splash_attn_lane lane;
        double caller_data[3]; /* the caller's own members after the lane */
    };
    const int32_t n_kv = 2, n_head = 6, hd = 64, pt = 16, window = 12;
    const int64_t pos0[LANES] = {37, 5, 0, 21}, n_q[LANES] = {1, 3, 20, 2};
    const int64_t st = n_head * hd, kvs = n_kv * hd;
    float sinks[6];
    for (int h = 0; h < n_head; h++)
        sinks[h] = 2.0f * frand();
    const struct kernel_vec *vec = kernel_vec_get();
    struct kv_fixture f[2][LANES];
    struct wide_lane wl[LANES];
    float *k[LANES], *v[LANES], *q[LANES], *out[2][LANES];
    for (int l = 0; l < LANES; l++) {
        int64_t n = pos0[l] + n_q[l];
        k[l] = rand_vec(n * kvs, 2);
        v[l] = rand_vec(n * kvs, 1);
        q[l] = rand_vec(n_q[l] * st, 1);
        for (int m = 0; m < 2; m++) {
            kv_init(&f[m][l], SPLASH_KV_BF16, pt, n_kv, hd, n);
            kernel_kv_store(pool, &f[m][l].kv, 0, pos0[l], k[l], kvs, v[l], kvs);
            out[m][l] = calloc((size_t)(n_q[l] * st), 4);
        }
        kernel_kv_store(pool, &f[0][l].kv, pos0[l], n_q[l], k[l] + pos0[l] * kvs, kvs,
                        v[l] + pos0[l] * kvs, kvs);
        struct splash_attn_args a = {.size = sizeof a, .kv = &f[0][l].kv, .q = q[l],
                                     .q_stride = st, .n_q = n_q[l], .n_head = n_head,
                                     .pos0 = pos0[l], .scale = 0.125f, .out = out[0][l],
                                     .out_stride = st, .window = window, .sinks = sinks};
        kernel_attend_with(vec, pool, &a);
        wl[l] = (struct wide_lane){.lane = {.kv = f[1][l].kv, .pos0 = pos0[l], .n_q = n_q[l],
                                            .q = q[l], .q_stride = st, .out = out[1][l],
                                            .out_stride = st, .k = k[l] + pos0[l] * kvs,
                                            .v = v[l] + pos0[l] * kvs, .k_stride = kvs,
                                            .v_stride = kvs},
                                   .caller_data = {1e300, -1e300, 1e300}};
    }
    struct splash_attn_lanes_args la = {.size = sizeof la, .lanes = wl, .lane_size = sizeof wl[0],
                                        .n_lanes = LANES, .n_head = n_head, .scale = 0.125f,
                                        .window = window, .sinks = sinks};
    kernel_attend_lanes_with(vec, pool, &la);
    for (int l = 0; l < LANES; l++) {
        assert_memory_equal(out[0][l], out[1][l], (size_t)(n_q[l] * st) * 4);
        free(k[l]), free(v[l]), free(q[l]);
        for (int m = 0; m < 2; m++) {
            kv_free(&f[m][l]);
            free(out[m][l]);
        }
    }
}

/* ---- Gated DeltaNet ---------------------------------------------------------------------- */

static void test_hybrid_gdn_conv_matches_naive(void **state)
{
    const int64_t ch = 40, n = 9;
    const int32_t kw = 4;
    float *x = rand_vec(n * ch, 1), *w = rand_vec(ch * kw, 1), *st0 = rand_vec((kw - 1) * ch, 1);
    float *st = malloc((size_t)((kw - 1) * ch) * 4), *out = malloc((size_t)(n * ch) * 4);
    float *expect = malloc((size_t)(n * ch) * 4);
    memcpy(st, st0, (size_t)((kw - 1) * ch) * 4);
    /* in two calls (5 + 4 tokens): the rolling state carries over */
    kernel_gdn_conv(pool, x, ch, 5, ch, w, kw, st, out);
    kernel_gdn_conv(pool, x + 5 * ch, ch, n - 5, ch, w, kw, st, out + 5 * ch);
    for (int64_t c = 0; c < ch; c++)
        for (int64_t i = 0; i < n; i++) {
            double s = 0;
            for (int j = 0; j < kw; j++) {
                int64_t src = i + j - (kw - 1);
                double xv = src < 0 ? st0[(src + kw - 1) * ch + c] : x[src * ch + c];
                s += w[c * kw + j] * xv;
            }
            expect[i * ch + c] = (float)(s / (1 + exp(-s)));
        }
    close_or_fail("gdn_conv", out, expect, n * ch, 1e-5);
    for (int j = 0; j < kw - 1; j++)
        close_or_fail("gdn_conv state", st + j * ch, x + (n - (kw - 1) + j) * ch, ch, 0);
    free(x), free(w), free(st0), free(st), free(out), free(expect);
}

struct gdn_case {
    int32_t n_tokens, n_k, n_v, dk, dv, grouped;
};

/* The recurrence exactly as the contract states it, in double. */
static void gdn_naive(const struct gdn_case *c, const float *q, const float *k, const float *v,
                      const float *g, const float *beta, double *S, float *out)
{
    int64_t qk = (int64_t)c->n_k * c->dk, vs = (int64_t)c->n_v * c->dv;
    for (int32_t t = 0; t < c->n_tokens; t++)
        for (int32_t h = 0; h < c->n_v; h++) {
            int32_t m = c->grouped ? h / (c->n_v / c->n_k) : h % c->n_k;
            const float *kt = k + t * qk + m * c->dk, *qt = q + t * qk + m * c->dk;
            double *Sh = S + (size_t)h * c->dv * c->dk;
            double a = exp(g[t * c->n_v + h]), b = beta[t * c->n_v + h];
            for (int32_t j = 0; j < c->dv; j++) {
                double *row = Sh + (size_t)j * c->dk, sk = 0, o = 0;
                for (int32_t i = 0; i < c->dk; i++) {
                    row[i] *= a;
                    sk += row[i] * kt[i];
                }
                double u = b * (v[t * vs + h * c->dv + j] - sk);
                for (int32_t i = 0; i < c->dk; i++) {
                    row[i] += u * kt[i];
                    o += row[i] * qt[i];
                }
                out[t * vs + h * c->dv + j] = (float)o;
            }
        }
}

static void l2rows(float *x, int64_t rows, int32_t d, float scale)
{
    for (int64_t r = 0; r < rows; r++) {
        double ss = 0;
        for (int32_t i = 0; i < d; i++)
            ss += (double)x[r * d + i] * x[r * d + i];
        for (int32_t i = 0; i < d; i++)
            x[r * d + i] = (float)(x[r * d + i] * scale / sqrt(ss));
    }
}

static void gdn_case_run(const struct gdn_case *c, int state_bf16)
{
    int64_t qk = (int64_t)c->n_k * c->dk, vs = (int64_t)c->n_v * c->dv;
    size_t se = (size_t)c->n_v * c->dv * c->dk;
    float *q = rand_vec(c->n_tokens * qk, 1), *k = rand_vec(c->n_tokens * qk, 1);
    float *v = rand_vec(c->n_tokens * vs, 1);
    float *g = rand_vec(c->n_tokens * c->n_v, 1), *beta = rand_vec(c->n_tokens * c->n_v, 1);
    l2rows(q, (int64_t)c->n_tokens * c->n_k, c->dk, 1.0f / sqrtf((float)c->dk));
    l2rows(k, (int64_t)c->n_tokens * c->n_k, c->dk, 1.0f);
    for (int64_t i = 0; i < (int64_t)c->n_tokens * c->n_v; i++) {
        g[i] = -2.0f * fabsf(g[i]);      /* decays in (e^-2, 1] */
        beta[i] = 0.5f + 0.5f * beta[i]; /* in [0, 1) */
    }
    /* a nonzero state entering, as after earlier tokens */
    float *s0 = rand_vec((int64_t)se, 0.5f);
    double *S = malloc(se * sizeof *S);
    for (size_t i = 0; i < se; i++) {
        if (state_bf16)
            s0[i] = splash_bf16_to_fp32(splash_fp32_to_bf16(s0[i]));
        S[i] = s0[i];
    }
    float *expect = malloc((size_t)(c->n_tokens * vs) * 4),
          *out = malloc((size_t)(c->n_tokens * vs) * 4);
    gdn_naive(c, q, k, v, g, beta, S, expect);
    void *state = malloc(se * 4);
    for (size_t t = 0; kernel_vec_tables[t]; t++) {
        const struct kernel_vec *vec = kernel_vec_tables[t];
        if (!supported(vec))
            continue;
        for (int chunked = 0; chunked < 2; chunked++) {
            for (size_t i = 0; i < se; i++) {
                if (state_bf16)
                    ((uint16_t *)state)[i] = splash_fp32_to_bf16(s0[i]);
                else
                    ((float *)state)[i] = s0[i];
            }
            struct splash_gdn_args a = {.n_tokens = c->n_tokens,
                                        .n_k_heads = c->n_k,
                                        .n_v_heads = c->n_v,
                                        .d_k = c->dk,
                                        .d_v = c->dv,
                                        .grouped = c->grouped,
                                        .chunk = 16,
                                        .q = q,
                                        .k = k,
                                        .qk_stride = qk,
                                        .v = v,
                                        .v_stride = vs,
                                        .g = g,
                                        .beta = beta,
                                        .state = state,
                                        .state_bf16 = state_bf16,
                                        .out = out,
                                        .out_stride = vs};
            if (chunked)
                kernel_gdn_chunked_with(vec, pool, &a);
            else
                kernel_gdn_recurrent_with(vec, pool, &a);
            char what[128];
            snprintf(what, sizeof what, "gdn %s %s n=%d k%d v%d %s%s", vec->isa,
                     chunked ? "chunked" : "recurrent", c->n_tokens, c->n_k, c->n_v,
                     c->grouped ? "grouped" : "tiled", state_bf16 ? " bf16" : "");
            /* a bf16 state is rounded after every token: a SIMD order that lands one entry
             * a bf16 step (2^-8 of it) from the reference moves the outputs after it by up
             * to |q| times that step (NEON: 2.1e-4 at 70 tokens) */
            close_or_fail(what, out, expect, c->n_tokens * vs, state_bf16 ? 1e-3 : 2e-4);
            /* the state leaving */
            float *sf = malloc(se * 4), *sx = malloc(se * 4);
            for (size_t i = 0; i < se; i++) {
                sf[i] =
                    state_bf16 ? splash_bf16_to_fp32(((uint16_t *)state)[i]) : ((float *)state)[i];
                sx[i] = (float)S[i];
            }
            strncat(what, " state", sizeof what - strlen(what) - 1);
            close_or_fail(what, sf, sx, (int64_t)se, state_bf16 ? 8e-3 : 2e-4);
            free(sf), free(sx);
        }
    }
    free(q), free(k), free(v), free(g), free(beta), free(s0), free(S), free(expect), free(out);
    free(state);
}

static void test_hybrid_gdn_matches_naive(void **state)
{
    const struct gdn_case cases[] = {
        {1, 2, 4, 64, 64, 0},  {5, 2, 4, 64, 64, 0},  {16, 2, 4, 64, 64, 1}, {37, 2, 4, 64, 64, 0},
        {37, 2, 4, 64, 64, 1}, {50, 1, 3, 24, 40, 0}, {70, 4, 4, 32, 32, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int bf16 = 0; bf16 < 2; bf16++)
            gdn_case_run(&cases[i], bf16);
}

/* A batched step's lanes in one call give each lane exactly what it gets alone: three
 * sequences of 1, 3 and 2 tokens, each with its own state, rows and output. */
static void test_hybrid_gdn_lanes_match_alone(void **state)
{
    enum { LANES = 3 };
    const int32_t nk = 2, nv = 4, dk = 32, dv = 24, kw = 4, tokens[LANES] = {1, 3, 2};
    const int64_t qk = (int64_t)nk * dk, vs = (int64_t)nv * dv, ch = 2 * qk + vs;
    const size_t se = (size_t)nv * dv * dk;
    float *wconv = rand_vec(ch * kw, 1);
    struct splash_gdn_args a[LANES];
    struct splash_conv_lane cl[LANES];
    float *x[LANES], *g[LANES], *beta[LANES], *st0[LANES], *cst0[LANES];
    float *out[2][LANES], *conv_out[2][LANES], *states[2][LANES], *cstates[2][LANES];
    for (int l = 0; l < LANES; l++) {
        int n = tokens[l];
        x[l] = rand_vec(n * ch, 1);
        l2rows(x[l], (int64_t)n * 2 * nk, dk, 1.0f); /* q and k rows, as the family leaves them */
        g[l] = rand_vec(n * nv, 1);
        beta[l] = rand_vec(n * nv, 1);
        for (int i = 0; i < n * nv; i++) {
            g[l][i] = -fabsf(g[l][i]);
            beta[l][i] = 0.5f + 0.5f * beta[l][i];
        }
        st0[l] = rand_vec((int64_t)se, 0.5f);
        cst0[l] = rand_vec((kw - 1) * ch, 1);
        for (int m = 0; m < 2; m++) {
            out[m][l] = calloc((size_t)(n * vs), 4);
            conv_out[m][l] = calloc((size_t)(n * ch), 4);
            states[m][l] = malloc(se * 4);
            memcpy(states[m][l], st0[l], se * 4);
            cstates[m][l] = malloc((size_t)((kw - 1) * ch) * 4);
            memcpy(cstates[m][l], cst0[l], (size_t)((kw - 1) * ch) * 4);
        }
    }
    for (int m = 0; m < 2; m++) {
        for (int l = 0; l < LANES; l++) {
            cl[l] = (struct splash_conv_lane){
                .x = x[l], .n = tokens[l], .state = cstates[m][l], .out = conv_out[m][l]};
            const float *cv = conv_out[m][l];
            a[l] = (struct splash_gdn_args){.n_tokens = tokens[l],
                                            .n_k_heads = nk,
                                            .n_v_heads = nv,
                                            .d_k = dk,
                                            .d_v = dv,
                                            .q = cv,
                                            .k = cv + qk,
                                            .qk_stride = ch,
                                            .v = cv + 2 * qk,
                                            .v_stride = ch,
                                            .g = g[l],
                                            .beta = beta[l],
                                            .state = states[m][l],
                                            .out = out[m][l],
                                            .out_stride = vs};
        }
        if (m == 0) {
            for (int l = 0; l < LANES; l++) {
                kernel_gdn_conv(pool, cl[l].x, ch, cl[l].n, ch, wconv, kw, cl[l].state, cl[l].out);
                kernel_gdn_recurrent(pool, &a[l]);
            }
        } else {
            kernel_gdn_conv_lanes(pool, cl, LANES, ch, ch, wconv, kw);
            kernel_gdn_recurrent_lanes(pool, a, LANES);
        }
    }
    for (int l = 0; l < LANES; l++) {
        assert_memory_equal(conv_out[0][l], conv_out[1][l], (size_t)(tokens[l] * ch) * 4);
        assert_memory_equal(cstates[0][l], cstates[1][l], (size_t)((kw - 1) * ch) * 4);
        assert_memory_equal(out[0][l], out[1][l], (size_t)(tokens[l] * vs) * 4);
        assert_memory_equal(states[0][l], states[1][l], se * 4);
        /* and the step did something */
        assert_memory_not_equal(states[1][l], st0[l], se * 4);
        free(x[l]), free(g[l]), free(beta[l]), free(st0[l]), free(cst0[l]);
        for (int m = 0; m < 2; m++)
            free(out[m][l]), free(conv_out[m][l]), free(states[m][l]), free(cstates[m][l]);
    }
    free(wconv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_runs_every_index_once),
        cmocka_unit_test(test_hybrid_vec_tables_match_reference),
        cmocka_unit_test(test_hybrid_gdn_row_tokens_match_row_calls),
        cmocka_unit_test(test_hybrid_rmsnorm_l2norm_rope),
        cmocka_unit_test(test_add_bias),
        cmocka_unit_test(test_rope_table_yarn),
        cmocka_unit_test(test_hybrid_kv_store_roundtrip),
        cmocka_unit_test(test_hybrid_attention_matches_naive),
        cmocka_unit_test(test_hybrid_attention_lanes_match_alone),
        cmocka_unit_test(test_attention_window_sinks_matches_naive),
        cmocka_unit_test(test_attention_f16_simd_equals_scalar),
        cmocka_unit_test(test_attend_lanes_element_size_window_sinks),
        cmocka_unit_test(test_hybrid_gdn_conv_matches_naive),
        cmocka_unit_test(test_hybrid_gdn_matches_naive),
        cmocka_unit_test(test_hybrid_gdn_lanes_match_alone),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
