/* Gated DeltaNet: the causal depthwise convolution and the delta rule, in its
 * recurrent form (decode, short batches) and its chunked form (prefill).
 *
 * Each row j of a head's state S (d_v x d_k) evolves on its own given the
 * token's k, q, v[j], decay and beta, so the recurrent form runs row-outer:
 * a row is loaded once, carried through every token, and stored once; rows of
 * all heads are the parallel items.
 *
 * The chunked form (per head, chunks of C tokens, G the cumulative log decay
 * inside the chunk, gamma = exp(G), S0 the state entering the chunk):
 *   (I + A) U = diag(beta) (V - diag(gamma) K S0^T),  A[s][r] = beta_s e^(G_s-G_r) k_s.k_r (r < s)
 *   O = diag(gamma) Q S0^T + M U,                     M[t][s] = e^(G_t-G_s) q_t.k_s      (s <= t)
 *   S = gamma_last S0 + sum_s e^(G_last-G_s) u_s k_s^T
 * which is the same recurrence written as small matrix products (gemm_nt) and one
 * triangular solve by forward substitution. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/threadpool.h"
#include "kernels/hybrid.h"
#include "splash/fp.h"

#define GDN_MAX_DK 1024 /* row buffer for a bf16 state; families check d_k at load */

/* ---- convolution -------------------------------------------------------- */

struct conv_task {
    const float *x;
    int64_t x_stride, n, channels;
    const float *w;
    int32_t kw;
    float *state, *out;
};

static void conv_channels(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct conv_task *t = ctx;
    int32_t kw = t->kw;
    float win[16]; /* the kw - 1 previous inputs and the current one */
    for (int64_t c = begin; c < end; c++) {
        const float *w = t->w + c * kw;
        for (int32_t j = 0; j < kw - 1; j++)
            win[j] = t->state[(int64_t)j * t->channels + c];
        for (int64_t i = 0; i < t->n; i++) {
            win[kw - 1] = t->x[i * t->x_stride + c];
            float s = 0.0f;
            for (int32_t j = 0; j < kw; j++)
                s += w[j] * win[j];
            t->out[i * t->channels + c] = s / (1.0f + expf(-s));
            for (int32_t j = 0; j < kw - 1; j++)
                win[j] = win[j + 1];
        }
        for (int32_t j = 0; j < kw - 1; j++)
            t->state[(int64_t)j * t->channels + c] = win[j];
    }
}

void hybrid_gdn_conv(struct splash_pool *pool, const float *x, int64_t x_stride, int64_t n,
                     int64_t channels, const float *w, int32_t kw, float *state, float *out)
{
    if (kw < 1 || kw > 16)
        return; /* families check the kernel width at load */
    struct conv_task t = {.x = x,
                          .x_stride = x_stride,
                          .n = n,
                          .channels = channels,
                          .w = w,
                          .kw = kw,
                          .state = state,
                          .out = out};
    int64_t grain = 8192 / (n * kw > 0 ? n * kw : 1);
    splash_pool_parallel_for(pool, channels, grain < 16 ? 16 : grain, conv_channels, &t);
}

/* ---- shared --------------------------------------------------------------- */

static int32_t key_head(const struct splash_gdn_args *a, int32_t h)
{
    return a->grouped ? h / (a->n_v_heads / a->n_k_heads) : h % a->n_k_heads;
}

static size_t head_elems(const struct splash_gdn_args *a)
{
    return (size_t)a->d_v * (size_t)a->d_k;
}

/* ---- recurrent form --------------------------------------------------------- */

#define ROWS_PER_ITEM 8

struct rec_task {
    const struct hybrid_vec *vec;
    const struct splash_gdn_args *a;
    int64_t items_per_head;
};

static void rec_items(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct rec_task *t = ctx;
    const struct splash_gdn_args *a = t->a;
    const struct hybrid_vec *vec = t->vec;
    float buf[GDN_MAX_DK];
    for (int64_t it = begin; it < end; it++) {
        int32_t h = (int32_t)(it / t->items_per_head);
        int32_t j0 = (int32_t)(it % t->items_per_head) * ROWS_PER_ITEM;
        int32_t j1 = j0 + ROWS_PER_ITEM < a->d_v ? j0 + ROWS_PER_ITEM : a->d_v;
        int32_t m = key_head(a, h);
        for (int32_t j = j0; j < j1; j++) {
            size_t off = (size_t)h * head_elems(a) + (size_t)j * (size_t)a->d_k;
            float *s;
            if (a->state_bf16) {
                const uint16_t *b = (const uint16_t *)a->state + off;
                for (int32_t i = 0; i < a->d_k; i++)
                    buf[i] = splash_bf16_to_fp32(b[i]);
                s = buf;
            } else {
                s = (float *)a->state + off;
            }
            for (int32_t tk = 0; tk < a->n_tokens; tk++) {
                const float *k = a->k + tk * a->qk_stride + (int64_t)m * a->d_k;
                const float *q = a->q + tk * a->qk_stride + (int64_t)m * a->d_k;
                float vj = a->v[tk * a->v_stride + (int64_t)h * a->d_v + j];
                float g = a->g[(int64_t)tk * a->n_v_heads + h];
                float beta = a->beta[(int64_t)tk * a->n_v_heads + h];
                a->out[tk * a->out_stride + (int64_t)h * a->d_v + j] =
                    vec->gdn_row(a->d_k, s, expf(g), k, q, vj, beta);
            }
            if (a->state_bf16) {
                uint16_t *b = (uint16_t *)a->state + off;
                for (int32_t i = 0; i < a->d_k; i++)
                    b[i] = splash_fp32_to_bf16(buf[i]);
            }
        }
    }
}

void hybrid_gdn_recurrent_with(const struct hybrid_vec *vec, struct splash_pool *pool,
                               const struct splash_gdn_args *a)
{
    if (a->n_tokens <= 0 || a->d_k > GDN_MAX_DK)
        return;
    struct rec_task t = {
        .vec = vec, .a = a, .items_per_head = (a->d_v + ROWS_PER_ITEM - 1) / ROWS_PER_ITEM};
    /* items of at least ~64k multiply-adds: a small model's decode step stays here */
    int64_t work = 4 * (int64_t)ROWS_PER_ITEM * a->n_tokens * a->d_k;
    int64_t grain = work >= 65536 ? 1 : 65536 / work;
    splash_pool_parallel_for(pool, t.items_per_head * a->n_v_heads, grain, rec_items, &t);
}

void hybrid_gdn_recurrent(struct splash_pool *pool, const struct splash_gdn_args *a)
{
    hybrid_gdn_recurrent_with(hybrid_vec_get(), pool, a);
}

/* ---- chunked form ------------------------------------------------------------ */

struct chunk_scratch {
    float *kc, *qc;  /* C x d_k: the chunk's k and q rows, dense */
    float *kt;       /* d_k x C: kc transposed */
    float *u;        /* C x d_v: right-hand side, then U */
    float *o;        /* C x d_v: output rows */
    float *ut;       /* d_v x C: U scaled by e^(G_last - G_s), transposed */
    float *kk, *qk;  /* C x C */
    float *gc, *gam; /* C: cumulative log decay, its exp */
    float *s0;       /* d_v x d_k: the head's state in float32 (bf16 states) */
};

static size_t chunk_scratch_floats(const struct splash_gdn_args *a, int32_t c)
{
    return 3 * (size_t)c * (size_t)a->d_k + 3 * (size_t)c * (size_t)a->d_v +
           2 * (size_t)c * (size_t)c + 2 * (size_t)c + head_elems(a) + 64;
}

static struct chunk_scratch chunk_scratch_at(const struct splash_gdn_args *a, int32_t c, float *p)
{
    struct chunk_scratch s;
    size_t ck = (size_t)c * (size_t)a->d_k, cv = (size_t)c * (size_t)a->d_v;
    s.kc = p, p += ck;
    s.qc = p, p += ck;
    s.kt = p, p += ck;
    s.u = p, p += cv;
    s.o = p, p += cv;
    s.ut = p, p += cv;
    s.kk = p, p += (size_t)c * (size_t)c;
    s.qk = p, p += (size_t)c * (size_t)c;
    s.gc = p, p += (size_t)c;
    s.gam = p, p += (size_t)c;
    s.s0 = p;
    return s;
}

struct chunk_task {
    const struct hybrid_vec *vec;
    const struct splash_gdn_args *a;
    int32_t c;
    float *scratch;
    size_t per_thread;
};

static void chunk_one(const struct chunk_task *t, int32_t h, const struct chunk_scratch *sc,
                      float *s0, int32_t t0, int32_t len)
{
    const struct splash_gdn_args *a = t->a;
    const struct hybrid_vec *vec = t->vec;
    int32_t dk = a->d_k, dv = a->d_v, m = key_head(a, h);

    for (int32_t s = 0; s < len; s++) {
        int64_t tk = t0 + s;
        memcpy(sc->kc + (size_t)s * dk, a->k + tk * a->qk_stride + (int64_t)m * dk,
               (size_t)dk * sizeof(float));
        memcpy(sc->qc + (size_t)s * dk, a->q + tk * a->qk_stride + (int64_t)m * dk,
               (size_t)dk * sizeof(float));
        float g = a->g[tk * a->n_v_heads + h];
        sc->gc[s] = (s ? sc->gc[s - 1] : 0.0f) + g;
        sc->gam[s] = expf(sc->gc[s]);
    }
    /* right-hand side: beta_s (v_s - gamma_s S0 k_s) */
    vec->gemm_nt(len, dv, dk, sc->kc, dk, s0, dk, sc->u, dv, 0);
    for (int32_t s = 0; s < len; s++) {
        int64_t tk = t0 + s;
        float beta = a->beta[tk * a->n_v_heads + h];
        const float *v = a->v + tk * a->v_stride + (int64_t)h * dv;
        float *u = sc->u + (size_t)s * dv;
        for (int32_t j = 0; j < dv; j++)
            u[j] = beta * (v[j] - sc->gam[s] * u[j]);
    }
    /* forward substitution through (I + A) */
    vec->gemm_nt(len, len, dk, sc->kc, dk, sc->kc, dk, sc->kk, len, 0);
    for (int32_t s = 1; s < len; s++) {
        float beta = a->beta[(int64_t)(t0 + s) * a->n_v_heads + h];
        float *us = sc->u + (size_t)s * dv;
        for (int32_t r = 0; r < s; r++) {
            float coef = beta * expf(sc->gc[s] - sc->gc[r]) * sc->kk[(size_t)s * len + r];
            vec->axpy(dv, -coef, sc->u + (size_t)r * dv, us);
        }
    }
    /* output: gamma_t S0 q_t + sum_{s <= t} e^(G_t - G_s) (q_t . k_s) u_s */
    vec->gemm_nt(len, dv, dk, sc->qc, dk, s0, dk, sc->o, dv, 0);
    vec->gemm_nt(len, len, dk, sc->qc, dk, sc->kc, dk, sc->qk, len, 0);
    for (int32_t tt = 0; tt < len; tt++) {
        float *o = sc->o + (size_t)tt * dv;
        vec->scale(dv, sc->gam[tt], o);
        for (int32_t s = 0; s <= tt; s++)
            vec->axpy(dv, expf(sc->gc[tt] - sc->gc[s]) * sc->qk[(size_t)tt * len + s],
                      sc->u + (size_t)s * dv, o);
        memcpy(a->out + (int64_t)(t0 + tt) * a->out_stride + (int64_t)h * dv, o,
               (size_t)dv * sizeof(float));
    }
    /* state: gamma_last S0 + (U e)^T K */
    float glast = sc->gc[len - 1];
    for (int32_t s = 0; s < len; s++) {
        float e = expf(glast - sc->gc[s]);
        for (int32_t j = 0; j < dv; j++)
            sc->ut[(size_t)j * len + s] = sc->u[(size_t)s * dv + j] * e;
        for (int32_t i = 0; i < dk; i++)
            sc->kt[(size_t)i * len + s] = sc->kc[(size_t)s * dk + i];
    }
    vec->scale((int64_t)dv * dk, sc->gam[len - 1], s0);
    vec->gemm_nt(dv, dk, len, sc->ut, len, sc->kt, len, s0, dk, 1);
}

static void chunk_heads(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct chunk_task *t = ctx;
    const struct splash_gdn_args *a = t->a;
    struct chunk_scratch sc =
        chunk_scratch_at(a, t->c, t->scratch + (size_t)thread * t->per_thread);
    size_t n = head_elems(a);
    for (int64_t h = begin; h < end; h++) {
        float *s0;
        if (a->state_bf16) {
            const uint16_t *b = (const uint16_t *)a->state + (size_t)h * n;
            for (size_t i = 0; i < n; i++)
                sc.s0[i] = splash_bf16_to_fp32(b[i]);
            s0 = sc.s0;
        } else {
            s0 = (float *)a->state + (size_t)h * n;
        }
        for (int32_t t0 = 0; t0 < a->n_tokens; t0 += t->c) {
            int32_t len = a->n_tokens - t0 < t->c ? a->n_tokens - t0 : t->c;
            chunk_one(t, (int32_t)h, &sc, s0, t0, len);
        }
        if (a->state_bf16) {
            uint16_t *b = (uint16_t *)a->state + (size_t)h * n;
            for (size_t i = 0; i < n; i++)
                b[i] = splash_fp32_to_bf16(sc.s0[i]);
        }
    }
}

void hybrid_gdn_chunked_with(const struct hybrid_vec *vec, struct splash_pool *pool,
                             const struct splash_gdn_args *a)
{
    if (a->n_tokens <= 0)
        return;
    int32_t c = a->chunk > 0 ? a->chunk : 64;
    int n_threads = pool ? splash_pool_threads(pool) : 1;
    size_t per_thread = chunk_scratch_floats(a, c);
    float *scratch = malloc((size_t)n_threads * per_thread * sizeof(float));
    if (!scratch) {
        /* the recurrent form needs no scratch and gives the same values */
        hybrid_gdn_recurrent_with(vec, pool, a);
        return;
    }
    struct chunk_task t = {
        .vec = vec, .a = a, .c = c, .scratch = scratch, .per_thread = per_thread};
    splash_pool_parallel_for(pool, a->n_v_heads, 1, chunk_heads, &t);
    free(scratch);
}

void hybrid_gdn_chunked(struct splash_pool *pool, const struct splash_gdn_args *a)
{
    hybrid_gdn_chunked_with(hybrid_vec_get(), pool, a);
}
