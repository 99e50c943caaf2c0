/* Q5_K_R16: the load-time layout of Q5_K the AVX-512 VNNI kernels read fastest
 * (q5k_r16.h). This file holds the descriptor, the repack, to_float, validate and the
 * scalar reference kernel; the SIMD kernel is in q5k_r16_avx512.c. */
#include "formats/kquants/q5k_r16.h"
#include "formats/kquants/kq_common.h"
#include "formats/kquants/kq_kernels.h"
#include "formats/kquants/kq_types.h"

/* ---- layout ------------------------------------------------------------------ */

/* Level of value v (0..255) of a plain Q5_K block (q5_k.c's element map: value
 * 64p + 32h + l takes nibble h of qs[32p + l] and bit 2p + h of qh[l]). */
static int q5k_r16_plain_level(const struct q5_k_block *x, int v)
{
    const int p = v / 64, h = v / 32 % 2, l = v % 32;
    return (x->qs[32 * p + l] >> (4 * h) & 0xF) | (x->qh[l] >> (2 * p + h) & 1) << 4;
}

/* Row r of a Q5_K_R16 block as its plain Q5_K block (the repack's inverse). */
static void q5k_r16_unpack_row(const struct q5k_r16_block *b, int r, struct q5_k_block *o)
{
    o->d = b->d[r];
    o->dmin = b->dmin[r];
    for (int k = 0; k < KQ_K_SCALE_SIZE / 4; k++)
        memcpy(o->scales + 4 * k, &b->scales[k][4 * r], 4);
    memset(o->qs, 0, sizeof o->qs);
    memset(o->qh, 0, sizeof o->qh);
    for (int v = 0; v < SPLASH_QK_K; v++) {
        const int u = q5k_r16_level(b, r, v), p = v / 64, h = v / 32 % 2, l = v % 32;
        o->qs[32 * p + l] |= (uint8_t)((u & 0xF) << (4 * h));
        o->qh[l] |= (uint8_t)((u >> 4) << (2 * p + h));
    }
}

/* Row r of block i of a group from its plain block x. */
static void q5k_r16_pack_row(const struct q5_k_block *x, int r, struct q5k_r16_block *o)
{
    o->d[r] = x->d;
    o->dmin[r] = x->dmin;
    for (int k = 0; k < KQ_K_SCALE_SIZE / 4; k++)
        memcpy(&o->scales[k][4 * r], x->scales + 4 * k, 4);
    for (int j = 0; j < SPLASH_QK_K / 32; j++)
        for (int c = 0; c < 4; c++) {
            /* the levels of the sub-block's 8 quads at this lane byte */
            int u[8];
            for (int t = 0; t < 8; t++)
                u[t] = q5k_r16_plain_level(x, 32 * j + 4 * t + c);
            const unsigned e = (unsigned)(u[5] | u[6] << 5 | u[7] << 10);
            for (int k = 0; k < Q5K_R16_VECS; k++)
                o->qs[j][k][4 * r + c] = (uint8_t)(u[k] << 3 | (e >> (3 * k) & 7));
        }
}

void q5k_r16_repack(int64_t n, const void *src, int64_t n_rows, void *dst)
{
    const int64_t nb = n / SPLASH_QK_K;
    const size_t row_bytes = (size_t)nb * sizeof(struct q5_k_block);
    const int64_t n_groups = n_rows / Q5K_R16_ROWS;
    for (int64_t g = 0; g < n_groups; g++) {
        const char *rows = (const char *)src + (size_t)g * Q5K_R16_ROWS * row_bytes;
        struct q5k_r16_block *o =
            (struct q5k_r16_block *)((char *)dst + (size_t)g * Q5K_R16_ROWS * row_bytes);
        for (int64_t i = 0; i < nb; i++, o++)
            for (int r = 0; r < Q5K_R16_ROWS; r++)
                q5k_r16_pack_row((const struct q5_k_block *)(rows + r * row_bytes) + i, r, o);
    }
    /* the rows after the last whole group stay as they are */
    const size_t done = (size_t)n_groups * Q5K_R16_ROWS * row_bytes;
    memcpy((char *)dst + done, (const char *)src + done,
           (size_t)(n_rows - n_groups * Q5K_R16_ROWS) * row_bytes);
}

/* ---- descriptor members ---------------------------------------------------------- */

/* A repacked image has the plain rows' size; where its groups end depends on the row
 * length, which validate is not given, so only the size is checked here: the image is
 * made at load from rows the plain Q5_K validate has accepted (finite d and dmin). */
static enum splash_status q5k_r16_validate(const void *data, size_t n_bytes, int64_t n_elems,
                                           struct splash_err *err)
{
    if (n_elems < 0 || n_elems % SPLASH_QK_K)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "Q5_K_R16: %lld elements is not a multiple of the %d-element row "
                              "block",
                              (long long)n_elems, SPLASH_QK_K);
    const uint64_t want = (uint64_t)(n_elems / SPLASH_QK_K) * sizeof(struct q5_k_block);
    if ((uint64_t)n_bytes != want)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "Q5_K_R16: %zu bytes for %lld elements, expected %llu", n_bytes,
                              (long long)n_elems, (unsigned long long)want);
    if (want && !data)
        return splash_err_set(err, SPLASH_ERR_INVALID, "Q5_K_R16: no data");
    return SPLASH_OK;
}

/* Block by block, each the 16 rows' 256 values row by row, with Q5_K's arithmetic. */
static void q5k_r16_to_float(const void *blocks, float *out, int64_t n)
{
    const struct q5k_r16_block *b = blocks;
    for (int64_t i = 0; i < n / (Q5K_R16_ROWS * SPLASH_QK_K); i++)
        for (int r = 0; r < Q5K_R16_ROWS; r++) {
            const float d = kq_h2f(b[i].d[r]), min = kq_h2f(b[i].dmin[r]);
            uint8_t sc[KQ_K_SCALE_SIZE];
            for (int k = 0; k < KQ_K_SCALE_SIZE / 4; k++)
                memcpy(sc + 4 * k, &b[i].scales[k][4 * r], 4);
            for (int j = 0; j < SPLASH_QK_K / 32; j++) {
                uint8_t s, m;
                kq_get_scale_min_k4(j, sc, &s, &m);
                const float dj = d * s, mj = min * m;
                for (int l = 0; l < 32; l++)
                    *out++ = dj * q5k_r16_level(&b[i], r, 32 * j + l) - mj;
            }
        }
}

/* ---- scalar reference kernel ------------------------------------------------------ */

/* The reference: every (weight row, activation row) pair summed super-block by
 * super-block by the plain Q5_K reference, so it gives its bits. */
void q5k_r16_mul_q8k_ref(int64_t n, const void *w, size_t w_stride, int64_t n_w, const void *act,
                         size_t act_stride, int64_t n_act, float *out, size_t out_stride)
{
    const int64_t nb = n / SPLASH_QK_K;
    const int64_t n_full = n_w / Q5K_R16_ROWS * Q5K_R16_ROWS;
    for (int64_t g = 0; g < n_full; g += Q5K_R16_ROWS) {
        const struct q5k_r16_block *b =
            (const struct q5k_r16_block *)((const char *)w + (size_t)g * w_stride);
        for (int64_t j = 0; j < n_act; j++) {
            const struct splash_q8_k_block *y =
                (const struct splash_q8_k_block *)((const char *)act + (size_t)j * act_stride);
            for (int r = 0; r < Q5K_R16_ROWS; r++) {
                float sum = 0;
                for (int64_t i = 0; i < nb; i++) {
                    struct q5_k_block x;
                    float s;
                    q5k_r16_unpack_row(&b[i], r, &x);
                    q5k_dot_q8k_ref(SPLASH_QK_K, &s, &x, &y[i]);
                    sum += s;
                }
                out[(size_t)j * out_stride + (size_t)(g + r)] = sum;
            }
        }
    }
    for (int64_t i = n_full; i < n_w; i++)
        for (int64_t j = 0; j < n_act; j++)
            q5k_dot_q8k_ref(n, &out[(size_t)j * out_stride + (size_t)i],
                            (const char *)w + (size_t)i * w_stride,
                            (const char *)act + (size_t)j * act_stride);
}

static const struct splash_kernel_row q5k_r16_rows[] = {
#if defined(__x86_64__)
    {KQ_CPU_AVX512_ROW, "avx512vnni", NULL, q5k_r16_mul_q8k_avx512},
#endif
    {0, "scalar", NULL, q5k_r16_mul_q8k_ref},
};

const struct splash_format_type kq_q5_k_r16_type = {
    .name = "Q5_K_R16",
    .gguf_type = -1,
    .block_elems = Q5K_R16_ROWS * SPLASH_QK_K,
    .block_bytes = sizeof(struct q5k_r16_block),
    .bits_per_weight = 5.5f,
    .act_type = "Q8_K",
    .flags = SPLASH_FORMAT_REPACKED,
    .validate = q5k_r16_validate,
    .to_float = q5k_r16_to_float,
    .rows = q5k_r16_rows,
    .n_rows = sizeof q5k_r16_rows / sizeof q5k_r16_rows[0],
    .row_group = Q5K_R16_ROWS,
};
