/* KV pages and causal grouped-query attention over them.
 *
 * A page holds page_tokens positions of every KV head of one layer:
 *   K rows  [n_kv_heads][page_tokens][head_dim]  int8, bf16, f16 or f32
 *   V rows  [n_kv_heads][page_tokens][head_dim]
 *   (INT8)  K scales [n_kv_heads][page_tokens], V scales likewise, float32
 * so one head's rows of a page are contiguous for the attention loop, and a
 * page is a self-contained block that can be copied, shared or written out. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/threadpool.h"
#include "kernels/ops.h"
#include "splash/family.h"
#include "splash/fp.h"

static size_t elem_bytes(int32_t format)
{
    return format == SPLASH_KV_F32 ? 4 : format == SPLASH_KV_INT8 ? 1 : 2;
}

/* Element i of a row of a float format (bf16, f16, f32). */
static float float_elem(int32_t format, const void *row, int64_t i)
{
    if (format == SPLASH_KV_BF16)
        return splash_bf16_to_fp32(((const uint16_t *)row)[i]);
    if (format == SPLASH_KV_F16)
        return splash_fp16_to_fp32(((const uint16_t *)row)[i]);
    return ((const float *)row)[i];
}

static size_t data_bytes(int32_t format, int32_t page_tokens, int32_t n_kv_heads, int32_t head_dim)
{
    size_t b = 2 * (size_t)n_kv_heads * (size_t)page_tokens * (size_t)head_dim * elem_bytes(format);
    return (b + 63) & ~(size_t)63;
}

size_t kernel_kv_page_bytes(int32_t format, int32_t page_tokens, int32_t n_kv_heads,
                            int32_t head_dim)
{
    size_t b = data_bytes(format, page_tokens, n_kv_heads, head_dim);
    if (format == SPLASH_KV_INT8)
        b += 2 * (size_t)n_kv_heads * (size_t)page_tokens * sizeof(float);
    return (b + 63) & ~(size_t)63;
}

/* Row `which` (0 K, 1 V) of head h at position pos: its bytes and (INT8) its scale. */
static void *kv_row(const struct splash_kv_pages *kv, int which, int64_t pos, int32_t h,
                    float **scale)
{
    char *page = kv->pages[pos / kv->page_tokens];
    int64_t t = pos % kv->page_tokens;
    size_t block = ((size_t)which * (size_t)kv->n_kv_heads + (size_t)h) * (size_t)kv->page_tokens;
    if (scale)
        *scale = kv->format == SPLASH_KV_INT8
                     ? (float *)(page + data_bytes(kv->format, kv->page_tokens, kv->n_kv_heads,
                                                   kv->head_dim)) +
                           block + (size_t)t
                     : NULL;
    return page + (block + (size_t)t) * (size_t)kv->head_dim * elem_bytes(kv->format);
}

static void store_row(const struct splash_kv_pages *kv, int which, int64_t pos, int32_t h,
                      const float *x)
{
    float *scale;
    void *row = kv_row(kv, which, pos, h, &scale);
    if (kv->format == SPLASH_KV_BF16 || kv->format == SPLASH_KV_F16) {
        uint16_t *b = row;
        for (int32_t i = 0; i < kv->head_dim; i++)
            b[i] = kv->format == SPLASH_KV_BF16 ? splash_fp32_to_bf16(x[i])
                                                : splash_fp32_to_fp16(x[i]);
        return;
    }
    if (kv->format == SPLASH_KV_F32) {
        memcpy(row, x, (size_t)kv->head_dim * sizeof(float));
        return;
    }
    float amax = 0.0f;
    for (int32_t i = 0; i < kv->head_dim; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
    int8_t *q = row;
    for (int32_t i = 0; i < kv->head_dim; i++)
        q[i] = (int8_t)lrintf(x[i] * id);
    *scale = d;
}

void kernel_kv_read_row(const struct splash_kv_pages *kv, int which, int64_t pos, int32_t head,
                        float *out)
{
    float *scale;
    const void *row = kv_row(kv, which, pos, head, &scale);
    for (int32_t i = 0; i < kv->head_dim; i++)
        out[i] = kv->format == SPLASH_KV_INT8 ? *scale * (float)((const int8_t *)row)[i]
                                              : float_elem(kv->format, row, i);
}

struct store_task {
    const struct splash_kv_pages *kv;
    int64_t pos0;
    const float *k, *v;
    int64_t k_stride, v_stride;
};

static void store_rows(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct store_task *t = ctx;
    int32_t nh = t->kv->n_kv_heads, hd = t->kv->head_dim;
    for (int64_t it = begin; it < end; it++) {
        int64_t i = it / nh;
        int32_t h = (int32_t)(it % nh);
        store_row(t->kv, 0, t->pos0 + i, h, t->k + i * t->k_stride + (int64_t)h * hd);
        store_row(t->kv, 1, t->pos0 + i, h, t->v + i * t->v_stride + (int64_t)h * hd);
    }
}

void kernel_kv_store(struct splash_pool *pool, const struct splash_kv_pages *kv, int64_t pos0,
                     int64_t n, const float *k, int64_t k_stride, const float *v, int64_t v_stride)
{
    struct store_task t = {
        .kv = kv, .pos0 = pos0, .k = k, .v = v, .k_stride = k_stride, .v_stride = v_stride};
    int64_t grain = 4096 / (kv->head_dim > 0 ? kv->head_dim : 1);
    splash_pool_parallel_for(pool, n * kv->n_kv_heads, grain < 1 ? 1 : grain, store_rows, &t);
}

/* ---- attention ------------------------------------------------------------ */

#define ATTN_SCRATCH 4096 /* floats of block scores per item, on the stack */
#define ATTN_MAX_GROUP 64
#define ATTN_QB 16 /* query rows per item of the blocked form (below) */

struct attn_task {
    const struct kernel_vec *vec;
    const struct splash_kv_pages *kv;
    const float *q;
    int64_t q_stride;
    int32_t n_head, group;
    int64_t pos0;
    float scale;
    float *out;
    int64_t out_stride;
    int32_t window;      /* > 0: row at p sees keys p - window + 1 .. p */
    const float *sinks;  /* NULL, or a logit per query head joining its softmax */
};

/* The first key the query at position pos sees. */
static int64_t first_key(int32_t window, int64_t pos)
{
    return window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
}

/* A sink logit joins the softmax of a head's (running max, sum, unnormalised output)
 * with no value of its own: the sum grows, the output does not. */
static void add_sink(const struct kernel_vec *vec, int32_t hd, float sink, float *mx, float *sum,
                     float *o)
{
    if (sink > *mx) {
        float r = expf(*mx - sink); /* 0 when no key was seen */
        *sum *= r;
        vec->scale(hd, r, o);
        *mx = sink;
    }
    *sum += expf(sink - *mx);
}

/* f16 and f32 rows (exact comparisons with references that keep such a cache): f32 rows
 * are read in place, f16 rows widened first. */
static float dot_float(const struct kernel_vec *vec, const struct splash_kv_pages *kv,
                       const float *q, const void *rows, int64_t j)
{
    int32_t hd = kv->head_dim;
    if (kv->format == SPLASH_KV_F32)
        return vec->dot(hd, q, (const float *)rows + j * hd);
    float s = 0.0f;
    for (int32_t d = 0; d < hd; d++)
        s += q[d] * splash_fp16_to_fp32(((const uint16_t *)rows)[j * hd + d]);
    return s;
}

static void axpy_float(const struct kernel_vec *vec, const struct splash_kv_pages *kv, float p,
                       const void *rows, int64_t j, float *o)
{
    int32_t hd = kv->head_dim;
    if (kv->format == SPLASH_KV_F32) {
        vec->axpy(hd, p, (const float *)rows + j * hd, o);
        return;
    }
    for (int32_t d = 0; d < hd; d++)
        o[d] += p * splash_fp16_to_fp32(((const uint16_t *)rows)[j * hd + d]);
}

/* An f16 cache follows llama.cpp's CPU flash attention over an f16 cache (ggml's
 * one-chunk path): the query rounded to f16, each score the exact sum of its f16 products
 * (ggml sums them in double for heads of fewer than 64 dims; a wider head's SIMD order
 * differs by an ulp), and the output accumulated key by key in an f16 vector rounded
 * after every rescale and every added value; the sink joins after the keys. ggml takes
 * f32 tiles for batches of 64 rows or more; this form serves every batch, so a sequence's
 * logits do not depend on how it was cut into steps. The gpt-oss oracle's nets turn the
 * f16 accumulator's rounding into different expert choices: an f32 accumulator agrees
 * with it on argmax for 80-85 of 87 rows, this form on 85-87. The table's round_f16,
 * dot_f16 and acc_f16 rows do the per-key work (F16C conversions in the AVX2 and AVX-512
 * rows), each giving the scalar row's bits; a table without them takes the reference's. */
#define ATTN_F16_MAX_HD 1024 /* head sizes the f16 form holds on the stack */

static void attn_head_f16(const struct attn_task *t, const float *q, int32_t g, int64_t first,
                          int64_t n_kv, float sink, int has_sink, float *o)
{
    const struct splash_kv_pages *kv = t->kv;
    /* a table without the f16 rows (NEON) takes the reference's */
    const struct kernel_vec *vec = t->vec->round_f16 ? t->vec : &kernel_vec_ref;
    int32_t hd = kv->head_dim;
    float qh[ATTN_F16_MAX_HD];
    uint16_t acc[ATTN_F16_MAX_HD];
    vec->round_f16(hd, q, qh);
    memset(acc, 0, (size_t)hd * sizeof *acc);
    float mx = -INFINITY, sum = 0.0f;
    for (int64_t p = first; p < n_kv; p++) {
        const uint16_t *k = kv_row(kv, 0, p, g, NULL), *v = kv_row(kv, 1, p, g, NULL);
        float s = (float)vec->dot_f16(hd, qh, k) * t->scale;
        float ms = 1.0f, vs = 1.0f;
        if (s > mx) {
            ms = expf(mx - s); /* 0 at the first key */
            mx = s;
        } else {
            vs = expf(s - mx);
        }
        vec->acc_f16(hd, acc, v, ms, vs);
        sum = sum * ms + vs;
    }
    for (int32_t d = 0; d < hd; d++)
        o[d] = splash_fp16_to_fp32(acc[d]);
    if (has_sink) {
        float ms = 1.0f, vs = 1.0f;
        if (sink > mx) {
            ms = expf(mx - sink);
            for (int32_t d = 0; d < hd; d++)
                o[d] *= ms;
        } else {
            vs = expf(sink - mx);
        }
        sum = sum * ms + vs;
    }
    float inv = sum == 0.0f ? 0.0f : 1.0f / sum;
    for (int32_t d = 0; d < hd; d++)
        o[d] *= inv;
}

/* Query rows from which a lane of this cache runs the blocked form (never for the f16
 * form above). */
static int64_t blocked_from(const struct splash_kv_pages *kv)
{
    return kv->format == SPLASH_KV_F16 && kv->head_dim <= ATTN_F16_MAX_HD ? INT64_MAX : ATTN_QB;
}

/* One query row and one KV head: the `group` query heads that read it, with an
 * online softmax over blocks of KV rows (no allocation, any context length). */
static void attn_item(const struct attn_task *t, int64_t i, int32_t g)
{
    const struct splash_kv_pages *kv = t->kv;
    const struct kernel_vec *vec = t->vec;
    int32_t hd = kv->head_dim, group = t->group;
    int64_t n_kv = t->pos0 + i + 1;
    const float *q0 = t->q + i * t->q_stride + (int64_t)g * group * hd;
    float *o0 = t->out + i * t->out_stride + (int64_t)g * group * hd;
    if (kv->format == SPLASH_KV_F16 && hd <= ATTN_F16_MAX_HD) {
        for (int32_t m = 0; m < group; m++)
            attn_head_f16(t, q0 + (int64_t)m * hd, g, first_key(t->window, t->pos0 + i), n_kv,
                          t->sinks ? t->sinks[(int64_t)g * group + m] : 0.0f, t->sinks != NULL,
                          o0 + (int64_t)m * hd);
        return;
    }
    float scores[ATTN_SCRATCH];
    float mx[ATTN_MAX_GROUP], sum[ATTN_MAX_GROUP];
    int64_t block = ATTN_SCRATCH / group;

    for (int32_t m = 0; m < group; m++) {
        mx[m] = -INFINITY;
        sum[m] = 0.0f;
        memset(o0 + (int64_t)m * hd, 0, (size_t)hd * sizeof(float));
    }
    for (int64_t p0 = first_key(t->window, t->pos0 + i); p0 < n_kv;) {
        /* a block of rows inside one page */
        int64_t in_page = kv->page_tokens - p0 % kv->page_tokens;
        int64_t nb = n_kv - p0;
        if (nb > in_page)
            nb = in_page;
        if (nb > block)
            nb = block;
        float *ks, *vs;
        const void *krow = kv_row(kv, 0, p0, g, &ks);
        const void *vrow = kv_row(kv, 1, p0, g, &vs);
        for (int64_t j = 0; j < nb; j++) {
            for (int32_t m = 0; m < group; m++) {
                const float *q = q0 + (int64_t)m * hd;
                float s;
                if (kv->format == SPLASH_KV_BF16)
                    s = vec->dot_bf16(hd, q, (const uint16_t *)krow + j * hd);
                else if (kv->format == SPLASH_KV_INT8)
                    s = vec->dot_i8(hd, q, (const int8_t *)krow + j * hd) * ks[j];
                else
                    s = dot_float(vec, kv, q, krow, j);
                scores[(int64_t)m * nb + j] = s * t->scale;
            }
        }
        for (int32_t m = 0; m < group; m++) {
            float *s = scores + (int64_t)m * nb;
            float *o = o0 + (int64_t)m * hd;
            float bmax = mx[m];
            for (int64_t j = 0; j < nb; j++)
                bmax = fmaxf(bmax, s[j]);
            if (bmax > mx[m]) {
                float r = expf(mx[m] - bmax); /* 0 on the first block */
                sum[m] *= r;
                vec->scale(hd, r, o);
                mx[m] = bmax;
            }
            for (int64_t j = 0; j < nb; j++) {
                float p = expf(s[j] - mx[m]);
                sum[m] += p;
                if (kv->format == SPLASH_KV_BF16)
                    vec->axpy_bf16(hd, p, (const uint16_t *)vrow + j * hd, o);
                else if (kv->format == SPLASH_KV_INT8)
                    vec->axpy_i8(hd, p * vs[j], (const int8_t *)vrow + j * hd, o);
                else
                    axpy_float(vec, kv, p, vrow, j, o);
            }
        }
        p0 += nb;
    }
    if (t->sinks)
        for (int32_t m = 0; m < group; m++)
            add_sink(vec, hd, t->sinks[(int64_t)g * group + m], &mx[m], &sum[m],
                     o0 + (int64_t)m * hd);
    for (int32_t m = 0; m < group; m++)
        vec->scale(hd, 1.0f / sum[m], o0 + (int64_t)m * hd);
}

static void attn_items(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct attn_task *t = ctx;
    int32_t n_kv_heads = t->kv->n_kv_heads;
    for (int64_t it = begin; it < end; it++)
        attn_item(t, it / n_kv_heads, (int32_t)(it % n_kv_heads));
}

/* ---- blocked form (prefill) ------------------------------------------------------
 *
 * QB query rows of one KV head's group form a matrix Q (QB * group rows of head_dim);
 * each block of KV rows inside a page is dequantized once to floats, K transposed, and
 * S = Q K^T and O += P V run as gemm_nn with an online softmax between them. */


struct attn_block_scratch {
    float *q;  /* M x hd: the item's query vectors, scaled (M = ATTN_QB * group) */
    float *o;  /* M x hd */
    float *kt; /* hd x page_tokens: a block of K, dequantized and transposed */
    float *v;  /* page_tokens x hd */
    float *s;  /* M x page_tokens: scores, then probabilities */
    float *mx, *sum; /* M */
};

static size_t attn_block_floats(int32_t group, int32_t hd, int32_t page_tokens)
{
    size_t m = (size_t)ATTN_QB * (size_t)group;
    return 2 * m * (size_t)hd + 2 * (size_t)hd * (size_t)page_tokens + m * (size_t)page_tokens +
           2 * m + 64;
}

struct attn_block_task {
    const struct attn_task *t;
    int64_t n_q, n_blocks;
    float *scratch;
    size_t per_thread;
};

#define DEQUANT_ROWS 8 /* K rows transposed together: each column's 8 floats land at once */

/* INT8 rows to floats, each the same product as the general loop below: the format's
 * test out of the inner loops (a cached turn's rows see its whole context: this ran
 * once per element, a fifth of such a turn's time). */
static void dequant_i8(const int8_t *q, const float *scales, int64_t nb, int32_t hd, float *out,
                       int64_t ld, int transpose)
{
    int64_t j = 0;
    if (transpose)
        for (; j + DEQUANT_ROWS <= nb; j += DEQUANT_ROWS) {
            const int8_t *r = q + j * hd;
            float sc[DEQUANT_ROWS];
            for (int k = 0; k < DEQUANT_ROWS; k++)
                sc[k] = scales[j + k];
            for (int32_t d = 0; d < hd; d++) {
                float *o = out + (int64_t)d * ld + j;
                for (int k = 0; k < DEQUANT_ROWS; k++)
                    o[k] = sc[k] * (float)r[(int64_t)k * hd + d];
            }
        }
    for (; j < nb; j++) {
        const int8_t *r = q + j * hd;
        float sc = scales[j];
        if (transpose)
            for (int32_t d = 0; d < hd; d++)
                out[(int64_t)d * ld + j] = sc * (float)r[d];
        else
            for (int32_t d = 0; d < hd; d++)
                out[j * ld + d] = sc * (float)r[d];
    }
}

/* bf16 rows likewise (widening is exact). */
static void dequant_bf16(const uint16_t *b, int64_t nb, int32_t hd, float *out, int64_t ld,
                         int transpose)
{
    int64_t j = 0;
    if (transpose)
        for (; j + DEQUANT_ROWS <= nb; j += DEQUANT_ROWS) {
            const uint16_t *r = b + j * hd;
            for (int32_t d = 0; d < hd; d++) {
                float *o = out + (int64_t)d * ld + j;
                for (int k = 0; k < DEQUANT_ROWS; k++)
                    o[k] = splash_bf16_to_fp32(r[(int64_t)k * hd + d]);
            }
        }
    for (; j < nb; j++)
        for (int32_t d = 0; d < hd; d++)
            out[transpose ? (int64_t)d * ld + j : j * ld + d] = splash_bf16_to_fp32(b[j * hd + d]);
}

static void dequant_rows(const struct splash_kv_pages *kv, const void *rows, const float *scales,
                         int64_t nb, float *out, int64_t ld, int transpose)
{
    int32_t hd = kv->head_dim;
    if (kv->format == SPLASH_KV_INT8) {
        dequant_i8(rows, scales, nb, hd, out, ld, transpose);
        return;
    }
    if (kv->format == SPLASH_KV_BF16) {
        dequant_bf16(rows, nb, hd, out, ld, transpose);
        return;
    }
    for (int64_t j = 0; j < nb; j++)
        for (int32_t d = 0; d < hd; d++) {
            float x = kv->format == SPLASH_KV_INT8
                          ? scales[j] * (float)((const int8_t *)rows)[j * hd + d]
                          : float_elem(kv->format, rows, j * hd + d);
            if (transpose)
                out[(int64_t)d * ld + j] = x;
            else
                out[j * ld + d] = x;
        }
}

static void attn_block_item(const struct attn_block_task *bt, int64_t qb, int32_t g,
                            const struct attn_block_scratch *sc)
{
    const struct attn_task *t = bt->t;
    const struct splash_kv_pages *kv = t->kv;
    const struct kernel_vec *vec = t->vec;
    int32_t hd = kv->head_dim, group = t->group, pt = kv->page_tokens;
    int64_t i0 = qb * ATTN_QB, rows = bt->n_q - i0 < ATTN_QB ? bt->n_q - i0 : ATTN_QB;
    int64_t M = rows * group;
    /* Q rows (i, m) at r = i * group + m, scaled */
    for (int64_t i = 0; i < rows; i++)
        for (int32_t m = 0; m < group; m++) {
            const float *q = t->q + (i0 + i) * t->q_stride + ((int64_t)g * group + m) * hd;
            float *dst = sc->q + (i * group + m) * hd;
            for (int32_t d = 0; d < hd; d++)
                dst[d] = q[d] * t->scale;
        }
    memset(sc->o, 0, (size_t)M * (size_t)hd * sizeof(float));
    for (int64_t r = 0; r < M; r++) {
        sc->mx[r] = -INFINITY;
        sc->sum[r] = 0.0f;
    }
    int64_t n_kv = t->pos0 + i0 + rows; /* keys the last row sees */
    for (int64_t p0 = first_key(t->window, t->pos0 + i0); p0 < n_kv;) {
        int64_t nb = pt - p0 % pt;
        if (nb > n_kv - p0)
            nb = n_kv - p0;
        float *ks, *vs;
        const void *krow = kv_row(kv, 0, p0, g, &ks);
        const void *vrow = kv_row(kv, 1, p0, g, &vs);
        dequant_rows(kv, krow, ks, nb, sc->kt, pt, 1);
        dequant_rows(kv, vrow, vs, nb, sc->v, hd, 0);
        /* S = Q K^T */
        vec->gemm_nn(M, nb, hd, sc->q, hd, sc->kt, pt, sc->s, pt, 0);
        for (int64_t r = 0; r < M; r++) {
            float *srow = sc->s + r * pt;
            /* row i sees keys up to pos0 + i0 + i */
            int64_t last = t->pos0 + i0 + r / group - p0; /* last visible key in the block */
            int64_t vis = last + 1 < nb ? last + 1 : nb;
            /* and keys from its window's first on */
            int64_t from = first_key(t->window, t->pos0 + i0 + r / group) - p0;
            if (vis <= 0 || from >= vis) {
                memset(srow, 0, (size_t)nb * sizeof(float));
                continue;
            }
            for (int64_t j = 0; j < from; j++)
                srow[j] = -INFINITY;
            for (int64_t j = vis; j < nb; j++)
                srow[j] = -INFINITY;
            float bmax = sc->mx[r];
            for (int64_t j = 0; j < vis; j++)
                bmax = fmaxf(bmax, srow[j]);
            if (bmax > sc->mx[r]) {
                float rs = expf(sc->mx[r] - bmax); /* 0 on the first block */
                sc->sum[r] *= rs;
                vec->scale(hd, rs, sc->o + r * hd);
                sc->mx[r] = bmax;
            }
            sc->sum[r] += vec->exp_sum(nb, srow, sc->mx[r], srow);
        }
        /* O += P V */
        vec->gemm_nn(M, hd, nb, sc->s, pt, sc->v, hd, sc->o, hd, 1);
        p0 += nb;
    }
    if (t->sinks)
        for (int64_t r = 0; r < M; r++)
            add_sink(vec, hd, t->sinks[(int64_t)g * group + r % group], &sc->mx[r], &sc->sum[r],
                     sc->o + r * hd);
    for (int64_t i = 0; i < rows; i++)
        for (int32_t m = 0; m < group; m++) {
            int64_t r = i * group + m;
            float *o = t->out + (i0 + i) * t->out_stride + ((int64_t)g * group + m) * hd;
            float inv = 1.0f / sc->sum[r];
            for (int32_t d = 0; d < hd; d++)
                o[d] = sc->o[r * hd + d] * inv;
        }
}

static void attn_block_items(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct attn_block_task *bt = ctx;
    int32_t n_kv_heads = bt->t->kv->n_kv_heads, group = bt->t->group;
    size_t m = (size_t)ATTN_QB * (size_t)group, hd = (size_t)bt->t->kv->head_dim,
           pt = (size_t)bt->t->kv->page_tokens;
    float *p = bt->scratch + (size_t)thread * bt->per_thread;
    struct attn_block_scratch sc;
    sc.q = p, p += m * hd;
    sc.o = p, p += m * hd;
    sc.kt = p, p += hd * pt;
    sc.v = p, p += pt * hd;
    sc.s = p, p += m * pt;
    sc.mx = p, p += m;
    sc.sum = p;
    unsigned csr = kernel_ftz_begin();
    /* the last query blocks see the most keys: they go first, so the pool's shrinking
     * pieces at the end are the cheap blocks */
    for (int64_t it = begin; it < end; it++)
        attn_block_item(bt, bt->n_blocks - 1 - it / n_kv_heads, (int32_t)(it % n_kv_heads), &sc);
    kernel_ftz_end(csr);
}

/* The arguments as this build knows them: members a caller's older struct lacks are 0. */
static struct splash_attn_args attn_args_of(const struct splash_attn_args *a)
{
    struct splash_attn_args full;
    memset(&full, 0, sizeof full);
    memcpy(&full, a, a->size < sizeof full ? a->size : sizeof full);
    return full;
}

void kernel_attend_with(const struct kernel_vec *vec, struct splash_pool *pool,
                        const struct splash_attn_args *args)
{
    const struct splash_attn_args a = attn_args_of(args);
    const struct splash_kv_pages *kv = a.kv;
    int64_t n_q = a.n_q, pos0 = a.pos0;
    int32_t n_head = a.n_head;
    if (n_q <= 0)
        return;
    int32_t group = n_head / kv->n_kv_heads;
    if (group < 1 || group > ATTN_MAX_GROUP)
        return; /* the family checks n_head / n_kv_heads at load */
    struct attn_task t = {.vec = vec,
                          .kv = kv,
                          .q = a.q,
                          .q_stride = a.q_stride,
                          .n_head = n_head,
                          .group = group,
                          .pos0 = pos0,
                          .scale = a.scale,
                          .out = a.out,
                          .out_stride = a.out_stride,
                          .window = a.window > 0 ? a.window : 0,
                          .sinks = a.sinks};
    if (n_q >= blocked_from(kv)) {
        int n_threads = pool ? splash_pool_threads(pool) : 1;
        size_t per_thread = attn_block_floats(group, kv->head_dim, kv->page_tokens);
        float *scratch = malloc((size_t)n_threads * per_thread * sizeof(float));
        if (scratch) {
            struct attn_block_task bt = {.t = &t,
                                         .n_q = n_q,
                                         .n_blocks = (n_q + ATTN_QB - 1) / ATTN_QB,
                                         .scratch = scratch,
                                         .per_thread = per_thread};
            splash_pool_parallel_for(pool, bt.n_blocks * kv->n_kv_heads, 1, attn_block_items,
                                     &bt);
            free(scratch);
            return;
        }
        /* no memory for the blocks: the row form below needs none */
    }
    /* later query rows see more keys: items of the same row are adjacent, and the
     * pool's small dynamic chunks balance the causal triangle */
    /* items of at least ~64k multiply-adds: short decode steps stay on this thread */
    int64_t work = 2 * (int64_t)group * kv->head_dim * (pos0 + 1);
    int64_t grain = work >= 65536 ? 1 : 65536 / (work > 0 ? work : 1);
    splash_pool_parallel_for(pool, n_q * kv->n_kv_heads, grain, attn_items, &t);
}

void kernel_attention_with(const struct kernel_vec *vec, struct splash_pool *pool,
                           const struct splash_kv_pages *kv, const float *q, int64_t q_stride,
                           int64_t n_q, int32_t n_head, int64_t pos0, float scale, float *out,
                           int64_t out_stride)
{
    struct splash_attn_args a = {.size = sizeof a, .kv = kv, .q = q, .q_stride = q_stride,
                                 .n_q = n_q, .n_head = n_head, .pos0 = pos0, .scale = scale,
                                 .out = out, .out_stride = out_stride};
    kernel_attend_with(vec, pool, &a);
}

void kernel_attention(struct splash_pool *pool, const struct splash_kv_pages *kv, const float *q,
                      int64_t q_stride, int64_t n_q, int32_t n_head, int64_t pos0, float scale,
                      float *out, int64_t out_stride)
{
    kernel_attention_with(kernel_vec_get(), pool, kv, q, q_stride, n_q, n_head, pos0, scale, out,
                          out_stride);
}

void kernel_attend(struct splash_pool *pool, const struct splash_attn_args *a)
{
    kernel_attend_with(kernel_vec_get(), pool, a);
}

/* ---- lanes: a batched step's sequences in one section ------------------------------------
 *
 * Items are listed lane by lane (a lane's count may be 0); a range of them finds its lanes
 * by walking the counts from the first lane. Each item computes what the per-lane call computes for
 * it, so the lanes' results do not depend on what shares the section. */

/* Store items of a lane: its rows times KV heads. */
static int64_t lane_store_items(const struct splash_attn_lane *ln)
{
    return ln->k && ln->n_q > 0 ? ln->n_q * ln->kv.n_kv_heads : 0;
}

/* Row-form attention items of a lane: a lane of fewer than blocked_from rows, its rows times KV
 * heads (longer lanes run the blocked form on their own). */
static int64_t lane_attn_items(const struct splash_attn_lane *ln, int32_t n_head)
{
    int32_t group = ln->kv.n_kv_heads > 0 ? n_head / ln->kv.n_kv_heads : 0;
    if (ln->n_q <= 0 || ln->n_q >= blocked_from(&ln->kv) || group < 1 || group > ATTN_MAX_GROUP)
        return 0;
    return ln->n_q * ln->kv.n_kv_heads;
}

struct lanes_task {
    const struct kernel_vec *vec;
    const char *lanes;  /* lane l at lanes + l * lane_size */
    size_t lane_size;
    int32_t n_lanes, n_head;
    float scale;
    int32_t window;
    const float *sinks;
};

static const struct splash_attn_lane *lane_at(const struct lanes_task *t, int32_t l)
{
    return (const struct splash_attn_lane *)(t->lanes + (size_t)l * t->lane_size);
}

static void store_lane_rows(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct lanes_task *t = ctx;
    int32_t l = 0;
    int64_t base = 0; /* first item of lane l */
    for (int64_t it = begin; it < end; it++) {
        while (it - base >= lane_store_items(lane_at(t, l)))
            base += lane_store_items(lane_at(t, l++));
        const struct splash_attn_lane *ln = lane_at(t, l);
        int32_t nh = ln->kv.n_kv_heads, hd = ln->kv.head_dim;
        int64_t i = (it - base) / nh;
        int32_t h = (int32_t)((it - base) % nh);
        store_row(&ln->kv, 0, ln->pos0 + i, h, ln->k + i * ln->k_stride + (int64_t)h * hd);
        store_row(&ln->kv, 1, ln->pos0 + i, h, ln->v + i * ln->v_stride + (int64_t)h * hd);
    }
}

/* The per-lane call's task for lane ln. */
static struct attn_task lane_task(const struct lanes_task *t, const struct splash_attn_lane *ln)
{
    return (struct attn_task){.vec = t->vec,
                              .kv = &ln->kv,
                              .q = ln->q,
                              .q_stride = ln->q_stride,
                              .n_head = t->n_head,
                              .group = t->n_head / ln->kv.n_kv_heads,
                              .pos0 = ln->pos0,
                              .scale = t->scale,
                              .out = ln->out,
                              .out_stride = ln->out_stride,
                              .window = t->window,
                              .sinks = t->sinks};
}

static void attn_lane_items(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct lanes_task *t = ctx;
    int32_t l = 0;
    int64_t base = 0; /* first item of lane l */
    const struct splash_attn_lane *ln = NULL;
    struct attn_task at = {0};
    for (int64_t it = begin; it < end; it++) {
        while (it - base >= lane_attn_items(lane_at(t, l), t->n_head))
            base += lane_attn_items(lane_at(t, l++), t->n_head);
        if (ln != lane_at(t, l)) {
            ln = lane_at(t, l);
            at = lane_task(t, ln);
        }
        int32_t nh = ln->kv.n_kv_heads;
        attn_item(&at, (it - base) / nh, (int32_t)((it - base) % nh));
    }
}

/* The lanes' arguments as this build knows them (see attn_args_of). */
static struct splash_attn_lanes_args lanes_args_of(const struct splash_attn_lanes_args *a)
{
    struct splash_attn_lanes_args full;
    memset(&full, 0, sizeof full);
    memcpy(&full, a, a->size < sizeof full ? a->size : sizeof full);
    return full;
}

void kernel_attend_lanes_with(const struct kernel_vec *vec, struct splash_pool *pool,
                              const struct splash_attn_lanes_args *args)
{
    const struct splash_attn_lanes_args a = lanes_args_of(args);
    int32_t n_lanes = a.n_lanes, n_head = a.n_head;
    struct lanes_task t = {.vec = vec,
                           .lanes = a.lanes,
                           .lane_size = a.lane_size,
                           .n_lanes = n_lanes,
                           .n_head = n_head,
                           .scale = a.scale,
                           .window = a.window > 0 ? a.window : 0,
                           .sinks = a.sinks};
    if (n_lanes <= 0 || a.lane_size < sizeof(struct splash_attn_lane))
        return;
    /* every lane's keys and values first: a lane's rows read each other's */
    int64_t n_store = 0, n_items = 0, work = 0;
    for (int32_t l = 0; l < n_lanes; l++)
        n_store += lane_store_items(lane_at(&t, l));
    if (n_store > 0) {
        int64_t grain = 4096 / (lane_at(&t, 0)->kv.head_dim > 0 ? lane_at(&t, 0)->kv.head_dim : 1);
        splash_pool_parallel_for(pool, n_store, grain < 1 ? 1 : grain, store_lane_rows, &t);
    }
    for (int32_t l = 0; l < n_lanes; l++) {
        const struct splash_attn_lane *ln = lane_at(&t, l);
        int64_t items = lane_attn_items(ln, n_head);
        if (!items) {
            /* long lanes in the blocked form (lanes of no rows or a bad head count: none) */
            struct splash_attn_args one = {.size = sizeof one, .kv = &ln->kv, .q = ln->q,
                                           .q_stride = ln->q_stride, .n_q = ln->n_q,
                                           .n_head = n_head, .pos0 = ln->pos0, .scale = a.scale,
                                           .out = ln->out, .out_stride = ln->out_stride,
                                           .window = t.window, .sinks = t.sinks};
            kernel_attend_with(vec, pool, &one);
            continue;
        }
        n_items += items;
        /* multiply-adds of the lane's items */
        for (int64_t i = 0; i < ln->n_q; i++)
            work += 2 * (int64_t)n_head * ln->kv.head_dim * (ln->pos0 + i + 1);
    }
    if (!n_items)
        return;
    /* items of at least ~64k multiply-adds on average, as attention's row form asks */
    int64_t mean = work / n_items;
    int64_t grain = mean >= 65536 ? 1 : 65536 / (mean > 0 ? mean : 1);
    splash_pool_parallel_for(pool, n_items, grain, attn_lane_items, &t);
}

void kernel_attention_lanes_with(const struct kernel_vec *vec, struct splash_pool *pool,
                                 const struct splash_attn_lane *lanes, int32_t n_lanes,
                                 int32_t n_head, float scale)
{
    struct splash_attn_lanes_args a = {.size = sizeof a, .lanes = lanes, .lane_size = sizeof *lanes,
                                       .n_lanes = n_lanes, .n_head = n_head, .scale = scale};
    kernel_attend_lanes_with(vec, pool, &a);
}

void kernel_attention_lanes(struct splash_pool *pool, const struct splash_attn_lane *lanes,
                            int32_t n_lanes, int32_t n_head, float scale)
{
    kernel_attention_lanes_with(kernel_vec_get(), pool, lanes, n_lanes, n_head, scale);
}

void kernel_attend_lanes(struct splash_pool *pool, const struct splash_attn_lanes_args *a)
{
    kernel_attend_lanes_with(kernel_vec_get(), pool, a);
}
