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
 * which is the same recurrence written as small matrix products and one triangular
 * solve by forward substitution. The state is held transposed while a head's chunks
 * run, so every product is a gemm_nn whose vectors run along d_v or the chunk. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/threadpool.h"
#include "kernels/ops.h"
#include "splash/fp.h"

#define GDN_MAX_DK 1024 /* row buffer for a bf16 state; families check d_k at load */

/* ---- convolution -------------------------------------------------------- */

#define CONV_BLOCK 64 /* channels per item */

struct conv_task {
    const struct kernel_vec *vec;
    const struct splash_conv_lane *lanes;
    int64_t x_stride, channels, blocks; /* blocks per lane */
    const float *w;
    int32_t kw;
};

static void conv_blocks(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct conv_task *t = ctx;
    int32_t kw = t->kw;
    for (int64_t it = begin; it < end; it++) {
        const struct splash_conv_lane *ln = &t->lanes[it / t->blocks];
        int64_t c0 = it % t->blocks * CONV_BLOCK;
        int64_t nc = t->channels - c0 < CONV_BLOCK ? t->channels - c0 : CONV_BLOCK;
        t->vec->conv_silu(ln->n, nc, ln->x + c0, t->x_stride, ln->state + c0, t->channels,
                          t->w + c0 * kw, kw, ln->out + c0, t->channels);
        /* the state becomes the last kw - 1 rows of (state, x); row j reads row n + j > j,
         * so ascending j never reads a row it overwrote */
        for (int32_t j = 0; j < kw - 1; j++) {
            int64_t r = ln->n + j - (kw - 1);
            const float *src =
                r >= 0 ? ln->x + r * t->x_stride : ln->state + (kw - 1 + r) * t->channels;
            memmove(ln->state + (int64_t)j * t->channels + c0, src + c0,
                    (size_t)nc * sizeof(float));
        }
    }
}

void kernel_gdn_conv_lanes(struct splash_pool *pool, const struct splash_conv_lane *lanes,
                           int32_t n_lanes, int64_t x_stride, int64_t channels, const float *w,
                           int32_t kw)
{
    if (kw < 1 || kw > 16 || n_lanes <= 0)
        return; /* families check the kernel width at load */
    int64_t max_n = 0;
    for (int32_t l = 0; l < n_lanes; l++)
        if (lanes[l].n > max_n)
            max_n = lanes[l].n;
    if (max_n <= 0)
        return;
    struct conv_task t = {.vec = kernel_vec_get(),
                          .lanes = lanes,
                          .x_stride = x_stride,
                          .channels = channels,
                          .blocks = (channels + CONV_BLOCK - 1) / CONV_BLOCK,
                          .w = w,
                          .kw = kw};
    /* items of at least ~16k multiply-adds */
    int64_t work = max_n * kw * CONV_BLOCK;
    int64_t grain = work >= 16384 ? 1 : 16384 / work;
    splash_pool_parallel_for(pool, t.blocks * n_lanes, grain, conv_blocks, &t);
}

void kernel_gdn_conv(struct splash_pool *pool, const float *x, int64_t x_stride, int64_t n,
                     int64_t channels, const float *w, int32_t kw, float *state, float *out)
{
    if (n <= 0)
        return;
    struct splash_conv_lane lane = {.x = x, .n = n, .state = state, .out = out};
    kernel_gdn_conv_lanes(pool, &lane, 1, x_stride, channels, w, kw);
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

/* Tokens whose decays rec_rows takes at once (exp of each token's g, computed once per
 * head rather than once per state row: the same value for every row). */
#define REC_TOKENS 64

/* Rows j0..j1 of value head h of one sequence, carried through all its tokens. */
static void rec_rows(const struct kernel_vec *vec, const struct splash_gdn_args *a, int32_t h,
                     int32_t j0, int32_t j1, float *buf)
{
    int32_t m = key_head(a, h);
    if (!a->state_bf16 && vec->gdn_row_tokens) {
        /* float32 state: each row through a block of tokens in registers */
        float decay[REC_TOKENS];
        for (int32_t t0 = 0; t0 < a->n_tokens; t0 += REC_TOKENS) {
            int32_t nt = a->n_tokens - t0 < REC_TOKENS ? a->n_tokens - t0 : REC_TOKENS;
            for (int32_t t = 0; t < nt; t++)
                decay[t] = expf(a->g[(int64_t)(t0 + t) * a->n_v_heads + h]);
            const float *k = a->k + t0 * a->qk_stride + (int64_t)m * a->d_k;
            const float *q = a->q + t0 * a->qk_stride + (int64_t)m * a->d_k;
            for (int32_t j = j0; j < j1; j++)
                vec->gdn_row_tokens(a->d_k,
                                    (float *)a->state + (size_t)h * head_elems(a) +
                                        (size_t)j * (size_t)a->d_k,
                                    nt, decay, k, q, a->qk_stride,
                                    a->v + t0 * a->v_stride + (int64_t)h * a->d_v + j, a->v_stride,
                                    a->beta + (int64_t)t0 * a->n_v_heads + h, a->n_v_heads,
                                    a->out + t0 * a->out_stride + (int64_t)h * a->d_v + j,
                                    a->out_stride);
        }
        return;
    }
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
            /* a bf16 state is rounded after every token, so n tokens in one call give the
             * bits of n calls of one (a verify pass's rows, a decode step's) */
            if (a->state_bf16 && tk + 1 < a->n_tokens)
                for (int32_t i = 0; i < a->d_k; i++)
                    buf[i] = splash_bf16_to_fp32(splash_fp32_to_bf16(buf[i]));
        }
        if (a->state_bf16) {
            uint16_t *b = (uint16_t *)a->state + off;
            for (int32_t i = 0; i < a->d_k; i++)
                b[i] = splash_fp32_to_bf16(buf[i]);
        }
    }
}

/* Sequences of one layer (same head counts and dims), their rows as one list of items:
 * a batched decode step streams every lane's state in one parallel section. */
struct rec_task {
    const struct kernel_vec *vec;
    const struct splash_gdn_args *a;
    int64_t items_per_head, items_per_lane;
};

static void rec_items(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct rec_task *t = ctx;
    float buf[GDN_MAX_DK];
    unsigned csr = kernel_ftz_begin();
    for (int64_t it = begin; it < end; it++) {
        const struct splash_gdn_args *a = &t->a[it / t->items_per_lane];
        int64_t in_lane = it % t->items_per_lane;
        int32_t h = (int32_t)(in_lane / t->items_per_head);
        int32_t j0 = (int32_t)(in_lane % t->items_per_head) * ROWS_PER_ITEM;
        int32_t j1 = j0 + ROWS_PER_ITEM < a->d_v ? j0 + ROWS_PER_ITEM : a->d_v;
        rec_rows(t->vec, a, h, j0, j1, buf);
    }
    kernel_ftz_end(csr);
}

static int same_shape(const struct splash_gdn_args *a, const struct splash_gdn_args *b)
{
    return a->n_v_heads == b->n_v_heads && a->d_k == b->d_k && a->d_v == b->d_v;
}

void kernel_gdn_recurrent_lanes_with(const struct kernel_vec *vec, struct splash_pool *pool,
                                     const struct splash_gdn_args *a, int32_t n_lanes)
{
    if (n_lanes <= 0)
        return;
    int32_t max_tokens = 0;
    for (int32_t l = 0; l < n_lanes; l++) {
        if (!same_shape(&a[0], &a[l]) || a[l].n_tokens < 0 || a[l].d_k > GDN_MAX_DK) {
            /* not one layer's sequences: each on its own */
            for (int32_t i = 0; i < n_lanes; i++)
                kernel_gdn_recurrent_with(vec, pool, &a[i]);
            return;
        }
        if (a[l].n_tokens > max_tokens)
            max_tokens = a[l].n_tokens;
    }
    if (max_tokens == 0)
        return;
    int64_t per_head = (a->d_v + ROWS_PER_ITEM - 1) / ROWS_PER_ITEM;
    struct rec_task t = {
        .vec = vec, .a = a, .items_per_head = per_head, .items_per_lane = per_head * a->n_v_heads};
    /* items of at least ~64k multiply-adds: a small model's decode step stays here */
    int64_t work = 4 * (int64_t)ROWS_PER_ITEM * max_tokens * a->d_k;
    int64_t grain = work >= 65536 ? 1 : 65536 / work;
    splash_pool_parallel_for(pool, t.items_per_lane * n_lanes, grain, rec_items, &t);
}

void kernel_gdn_recurrent_with(const struct kernel_vec *vec, struct splash_pool *pool,
                               const struct splash_gdn_args *a)
{
    if (a->n_tokens <= 0 || a->d_k > GDN_MAX_DK)
        return;
    kernel_gdn_recurrent_lanes_with(vec, pool, a, 1);
}

void kernel_gdn_recurrent_lanes(struct splash_pool *pool, const struct splash_gdn_args *a,
                                int32_t n_lanes)
{
    kernel_gdn_recurrent_lanes_with(kernel_vec_get(), pool, a, n_lanes);
}

void kernel_gdn_recurrent(struct splash_pool *pool, const struct splash_gdn_args *a)
{
    kernel_gdn_recurrent_with(kernel_vec_get(), pool, a);
}

/* ---- chunked form ------------------------------------------------------------ */

/* Per thread, for one head at a time. The state is held transposed (St = S^T, d_k x d_v)
 * so every product is a gemm_nn vectorised over d_v or the chunk: no reductions. */
struct chunk_scratch {
    float *kt;       /* d_k x C: the chunk's k rows, transposed */
    float *u;        /* C x d_v: K S0^T, then the right-hand side, then U */
    float *ue;       /* C x d_v: U scaled by e^(G_last - G_s) */
    float *kk, *qk;  /* C x C: -A (strictly lower), decayed Q K^T (lower, zeros above) */
    float *gc, *gam; /* C: cumulative log decay, its exp */
    float *bet;      /* C: beta */
    float *ngc, *dec; /* C: -G, and a row of decays e^(G_t - G_s) */
    float *st;       /* d_k x d_v: the head's state, transposed, float32 */
};

static size_t chunk_scratch_floats(const struct splash_gdn_args *a, int32_t c)
{
    return (size_t)c * (size_t)a->d_k + 2 * (size_t)c * (size_t)a->d_v +
           2 * (size_t)c * (size_t)c + 5 * (size_t)c + head_elems(a) + 64;
}

static struct chunk_scratch chunk_scratch_at(const struct splash_gdn_args *a, int32_t c, float *p)
{
    struct chunk_scratch s;
    size_t ck = (size_t)c * (size_t)a->d_k, cv = (size_t)c * (size_t)a->d_v;
    s.kt = p, p += ck;
    s.u = p, p += cv;
    s.ue = p, p += cv;
    s.kk = p, p += (size_t)c * (size_t)c;
    s.qk = p, p += (size_t)c * (size_t)c;
    s.gc = p, p += (size_t)c;
    s.gam = p, p += (size_t)c;
    s.bet = p, p += (size_t)c;
    s.ngc = p, p += (size_t)c;
    s.dec = p, p += (size_t)c;
    s.st = p;
    return s;
}

struct chunk_task {
    const struct kernel_vec *vec;
    const struct splash_gdn_args *a;
    int32_t c;
    float *scratch;
    size_t per_thread;
};

static void chunk_one(const struct chunk_task *t, int32_t h, const struct chunk_scratch *sc,
                      int32_t t0, int32_t len)
{
    const struct splash_gdn_args *a = t->a;
    const struct kernel_vec *vec = t->vec;
    int32_t dk = a->d_k, dv = a->d_v, m = key_head(a, h);
    int64_t ld = a->qk_stride;
    float *st = sc->st;
    /* the chunk's k and q rows in place (rows ld apart), and its outputs */
    const float *kc = a->k + (int64_t)t0 * ld + (int64_t)m * dk;
    const float *qc = a->q + (int64_t)t0 * ld + (int64_t)m * dk;
    float *out = a->out + (int64_t)t0 * a->out_stride + (int64_t)h * dv;

    for (int32_t s = 0; s < len; s++) {
        int64_t tk = t0 + s;
        const float *k = kc + s * ld;
        for (int32_t i = 0; i < dk; i++)
            sc->kt[(size_t)i * len + s] = k[i];
        sc->gc[s] = (s ? sc->gc[s - 1] : 0.0f) + a->g[tk * a->n_v_heads + h];
        sc->gam[s] = expf(sc->gc[s]);
        sc->bet[s] = a->beta[tk * a->n_v_heads + h];
        sc->ngc[s] = -sc->gc[s];
    }
    /* right-hand side: beta_s (v_s - gamma_s S0 k_s) */
    vec->gemm_nn(len, dv, dk, kc, ld, st, dv, sc->u, dv, 0);
    for (int32_t s = 0; s < len; s++) {
        float *u = sc->u + (size_t)s * dv;
        vec->scale(dv, -sc->gam[s] * sc->bet[s], u);
        vec->axpy(dv, sc->bet[s], a->v + (int64_t)(t0 + s) * a->v_stride + (int64_t)h * dv, u);
    }
    /* K K^T and Q K^T, then -A = -beta_s e^(G_s - G_r) k_s.k_r below the diagonal and
     * M = e^(G_t - G_s) q_t.k_s on and below it */
    vec->gemm_nn(len, len, dk, kc, ld, sc->kt, len, sc->kk, len, 0);
    vec->gemm_nn(len, len, dk, qc, ld, sc->kt, len, sc->qk, len, 0);
    for (int32_t tt = 0; tt < len; tt++) {
        float *kk = sc->kk + (size_t)tt * len, *qk = sc->qk + (size_t)tt * len;
        /* dec[s] = e^(G_t - G_s) for s <= t */
        vec->exp_sum(tt + 1, sc->ngc, sc->ngc[tt], sc->dec);
        vec->scale_mul(tt + 1, qk, 1.0f, sc->dec, qk);
        vec->scale_mul(tt + 1, kk, -sc->bet[tt], sc->dec, kk);
        memset(qk + tt + 1, 0, (size_t)(len - tt - 1) * sizeof(float));
    }
    /* forward substitution through (I + A): u_s += sum_{r < s} (-A)[s][r] u_r */
    for (int32_t s = 1; s < len; s++)
        vec->gemm_nn(1, dv, s, sc->kk + (size_t)s * len, len, sc->u, dv, sc->u + (size_t)s * dv,
                     dv, 1);
    /* output: gamma_t S0 q_t + sum_{s <= t} M[t][s] u_s, straight into the out rows */
    vec->gemm_nn(len, dv, dk, qc, ld, st, dv, out, a->out_stride, 0);
    for (int32_t tt = 0; tt < len; tt++)
        vec->scale(dv, sc->gam[tt], out + (int64_t)tt * a->out_stride);
    vec->gemm_nn(len, dv, len, sc->qk, len, sc->u, dv, out, a->out_stride, 1);
    /* state: gamma_last S0 + K^T (U scaled by e^(G_last - G_s)) */
    float glast = sc->gc[len - 1];
    for (int32_t s = 0; s < len; s++)
        vec->scale_mul(dv, sc->u + (size_t)s * dv, expf(glast - sc->gc[s]), NULL,
                       sc->ue + (size_t)s * dv);
    vec->scale((int64_t)dk * dv, sc->gam[len - 1], st);
    vec->gemm_nn(dk, dv, len, sc->kt, len, sc->ue, dv, st, dv, 1);
}

static void chunk_heads(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct chunk_task *t = ctx;
    const struct splash_gdn_args *a = t->a;
    struct chunk_scratch sc =
        chunk_scratch_at(a, t->c, t->scratch + (size_t)thread * t->per_thread);
    size_t n = head_elems(a);
    int32_t dk = a->d_k, dv = a->d_v;
    unsigned csr = kernel_ftz_begin();
    for (int64_t h = begin; h < end; h++) {
        /* S (d_v x d_k, row-major) into St (d_k x d_v) */
        if (a->state_bf16) {
            const uint16_t *b = (const uint16_t *)a->state + (size_t)h * n;
            for (int32_t j = 0; j < dv; j++)
                for (int32_t i = 0; i < dk; i++)
                    sc.st[(size_t)i * dv + j] = splash_bf16_to_fp32(b[(size_t)j * dk + i]);
        } else {
            const float *f = (const float *)a->state + (size_t)h * n;
            for (int32_t j = 0; j < dv; j++)
                for (int32_t i = 0; i < dk; i++)
                    sc.st[(size_t)i * dv + j] = f[(size_t)j * dk + i];
        }
        for (int32_t t0 = 0; t0 < a->n_tokens; t0 += t->c) {
            int32_t len = a->n_tokens - t0 < t->c ? a->n_tokens - t0 : t->c;
            chunk_one(t, (int32_t)h, &sc, t0, len);
        }
        if (a->state_bf16) {
            uint16_t *b = (uint16_t *)a->state + (size_t)h * n;
            for (int32_t j = 0; j < dv; j++)
                for (int32_t i = 0; i < dk; i++)
                    b[(size_t)j * dk + i] = splash_fp32_to_bf16(sc.st[(size_t)i * dv + j]);
        } else {
            float *f = (float *)a->state + (size_t)h * n;
            for (int32_t j = 0; j < dv; j++)
                for (int32_t i = 0; i < dk; i++)
                    f[(size_t)j * dk + i] = sc.st[(size_t)i * dv + j];
        }
    }
    kernel_ftz_end(csr);
}

void kernel_gdn_chunked_with(const struct kernel_vec *vec, struct splash_pool *pool,
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
        kernel_gdn_recurrent_with(vec, pool, a);
        return;
    }
    struct chunk_task t = {
        .vec = vec, .a = a, .c = c, .scratch = scratch, .per_thread = per_thread};
    splash_pool_parallel_for(pool, a->n_v_heads, 1, chunk_heads, &t);
    free(scratch);
}

void kernel_gdn_chunked(struct splash_pool *pool, const struct splash_gdn_args *a)
{
    kernel_gdn_chunked_with(kernel_vec_get(), pool, a);
}
