/* Shared helpers of the kquants plugin: block layouts, validation, the
 * rounding and scale-search routines the reference quantizers are built on.
 * Everything here is static inline so each file (scalar or SIMD) takes what
 * it needs and no symbol can clash with another plugin. */
#ifndef SPLASH_KQUANTS_COMMON_H
#define SPLASH_KQUANTS_COMMON_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "splash/act.h"
#include "splash/format.h"
#include "splash/fp.h"
#include "splash/status.h"

#define KQ_QK4_0 32
#define KQ_QK4_1 32
#define KQ_QK5_0 32
#define KQ_QK5_1 32
#define KQ_K_SCALE_SIZE 12

#define KQ_MIN(a, b) ((a) < (b) ? (a) : (b))
#define KQ_MAX(a, b) ((a) > (b) ? (a) : (b))

/* ---- block layouts (GGML's, byte for byte) ------------------------------ */

struct q4_0_block {
    uint16_t d;                /* fp16 scale */
    uint8_t qs[KQ_QK4_0 / 2]; /* element j in the low nibble of qs[j], j+16 in the high */
};
_Static_assert(sizeof(struct q4_0_block) == 18, "q4_0 block is 18 bytes");

struct q4_1_block {
    uint16_t d, m; /* fp16 scale and minimum */
    uint8_t qs[KQ_QK4_1 / 2];
};
_Static_assert(sizeof(struct q4_1_block) == 20, "q4_1 block is 20 bytes");

struct q5_0_block {
    uint16_t d;
    uint8_t qh[4]; /* fifth bits, element j at bit j (little-endian u32) */
    uint8_t qs[KQ_QK5_0 / 2];
};
_Static_assert(sizeof(struct q5_0_block) == 22, "q5_0 block is 22 bytes");

struct q5_1_block {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[KQ_QK5_1 / 2];
};
_Static_assert(sizeof(struct q5_1_block) == 24, "q5_1 block is 24 bytes");

struct q2_k_block {
    uint8_t scales[SPLASH_QK_K / 16]; /* low nibble scale, high nibble min, per 16 */
    uint8_t qs[SPLASH_QK_K / 4];
    uint16_t d, dmin; /* fp16 super-block scales */
};
_Static_assert(sizeof(struct q2_k_block) == 84, "q2_K block is 84 bytes");

struct q3_k_block {
    uint8_t hmask[SPLASH_QK_K / 8]; /* high bits */
    uint8_t qs[SPLASH_QK_K / 4];    /* low 2 bits */
    uint8_t scales[12];         /* 16 6-bit scales */
    uint16_t d;
};
_Static_assert(sizeof(struct q3_k_block) == 110, "q3_K block is 110 bytes");

struct q4_k_block {
    uint16_t d, dmin;
    uint8_t scales[KQ_K_SCALE_SIZE]; /* 8 6-bit scales and 8 6-bit mins */
    uint8_t qs[SPLASH_QK_K / 2];
};
_Static_assert(sizeof(struct q4_k_block) == 144, "q4_K block is 144 bytes");

struct q5_k_block {
    uint16_t d, dmin;
    uint8_t scales[KQ_K_SCALE_SIZE];
    uint8_t qh[SPLASH_QK_K / 8];
    uint8_t qs[SPLASH_QK_K / 2];
};
_Static_assert(sizeof(struct q5_k_block) == 176, "q5_K block is 176 bytes");

struct q6_k_block {
    uint8_t ql[SPLASH_QK_K / 2];
    uint8_t qh[SPLASH_QK_K / 4];
    int8_t scales[SPLASH_QK_K / 16];
    uint16_t d;
};
_Static_assert(sizeof(struct q6_k_block) == 210, "q6_K block is 210 bytes");

/* ---- fp16 ----------------------------------------------------------------- */

static inline float kq_h2f(uint16_t h)
{
    return splash_fp16_to_fp32(h);
}

static inline uint16_t kq_f2h(float f)
{
    return splash_fp32_to_fp16(f);
}

static inline uint16_t kq_load_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

/* ---- validation ----------------------------------------------------------- */

/* One scale field of a block that must be finite. */
struct kq_scale_field {
    uint16_t offset; /* byte offset inside the block */
    uint8_t is_f32;  /* 0: fp16, 1: float32 */
    const char *name;
};

/* Sizes first (a whole number of blocks for n_elems, exactly n_bytes), then every
 * listed scale of every block: NaN or Inf is refused, naming the block index. */
static inline enum splash_status kq_validate_blocks(const char *type, const void *data,
                                                    size_t n_bytes, int64_t n_elems,
                                                    uint32_t block_elems, uint32_t block_bytes,
                                                    const struct kq_scale_field *fields,
                                                    size_t n_fields, struct splash_err *err)
{
    if (n_elems < 0 || n_elems % block_elems)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: %lld elements is not a multiple of the %u-element block", type,
                              (long long)n_elems, block_elems);
    uint64_t n_blocks = (uint64_t)n_elems / block_elems;
    uint64_t want = n_blocks * block_bytes;
    if ((uint64_t)n_bytes != want)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: %zu bytes for %lld elements, expected %llu (%llu blocks of %u)",
                              type, n_bytes, (long long)n_elems, (unsigned long long)want,
                              (unsigned long long)n_blocks, block_bytes);
    if (n_blocks && !data)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: no data", type);
    const uint8_t *p = data;
    for (uint64_t b = 0; b < n_blocks; b++, p += block_bytes) {
        for (size_t f = 0; f < n_fields; f++) {
            const uint8_t *q = p + fields[f].offset;
            int bad; /* 1 NaN, 2 Inf */
            if (fields[f].is_f32) {
                uint32_t u = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 |
                             (uint32_t)q[3] << 24;
                bad = (u & 0x7f800000u) != 0x7f800000u ? 0 : (u & 0x7fffffu) ? 1 : 2;
            } else {
                uint16_t h = kq_load_u16(q);
                bad = (h & 0x7c00u) != 0x7c00u ? 0 : (h & 0x3ffu) ? 1 : 2;
            }
            if (bad)
                return splash_err_set(err, SPLASH_ERR_INVALID, "%s block %llu: scale %s is %s",
                                      type, (unsigned long long)b, fields[f].name,
                                      bad == 1 ? "NaN" : "Inf");
        }
    }
    return SPLASH_OK;
}

/* ---- rounding and scale search (the reference quantizers' arithmetic) ----- */

/* Round to nearest, ties to even, for |x| < 2^22: adding 1.5 * 2^23 leaves the
 * integer in the low mantissa bits. The reference files were made this way. */
static inline int kq_nearest_int(float x)
{
    float v = x + 12582912.0f;
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

#define KQ_GROUP_MAX_EPS 1e-15f

/* Symmetric levels in [-nmax, nmax) for n values; L gets level + nmax. With
 * rmse_type 1 the scale is refit by weighted least squares (weight x^2) over 18
 * trial inverse scales around nmax/max. Returns the scale. */
static inline float kq_make_qx_quants(int n, int nmax, const float *x, int8_t *L, int rmse_type)
{
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < KQ_GROUP_MAX_EPS) {
        for (int i = 0; i < n; i++)
            L[i] = 0;
        return 0.0f;
    }
    float iscale = -nmax / max;
    if (rmse_type == 0) {
        for (int i = 0; i < n; i++) {
            int l = kq_nearest_int(iscale * x[i]);
            L[i] = (int8_t)(nmax + KQ_MAX(-nmax, KQ_MIN(nmax - 1, l)));
        }
        return 1 / iscale;
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = kq_nearest_int(iscale * x[i]);
        l = KQ_MAX(-nmax, KQ_MIN(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0)
            continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = kq_nearest_int(iscale * x[i]);
            l = KQ_MAX(-nmax, KQ_MIN(nmax - 1, l));
            float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) {
                int l = kq_nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + KQ_MAX(-nmax, KQ_MIN(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Q3_K's sub-block search: start from nmax/max, then move single levels while the
 * x^2-weighted fit improves (at most 5 sweeps). L gets level + nmax. */
static inline float kq_make_q3_quants(int n, int nmax, const float *x, int8_t *L)
{
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < KQ_GROUP_MAX_EPS) {
        for (int i = 0; i < n; i++)
            L[i] = 0;
        return 0.0f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = kq_nearest_int(iscale * x[i]);
        l = KQ_MAX(-nmax, KQ_MIN(nmax - 1, l));
        L[i] = (int8_t)l;
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * L[i] * L[i];
                int new_l = kq_nearest_int(x[i] * sl2 / slx);
                new_l = KQ_MAX(-nmax, KQ_MIN(nmax - 1, new_l));
                if (new_l != L[i]) {
                    slx += w * x[i] * new_l;
                    sl2 += w * new_l * new_l;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed++;
                    }
                }
            }
        }
        if (!n_changed)
            break;
    }
    for (int i = 0; i < n; i++)
        L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Asymmetric levels 0..nmax with a minimum <= 0: the weighted least-squares fit
 * of (scale, min) for nstep + 1 trial inverse scales from (nmax + rmin)/range in
 * steps of rdelta/range; keeps the lowest weighted error (absolute with use_mad,
 * squared otherwise). *the_min gets -min (>= 0). Returns the scale. */
static inline float kq_make_qkx2_quants(int n, int nmax, const float *x, const float *weights,
                                        uint8_t *L, float *the_min, uint8_t *Laux, float rmin,
                                        float rdelta, int nstep, bool use_mad)
{
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min)
            min = x[i];
        if (x[i] > max)
            max = x[i];
        float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0)
        min = 0;
    if (max == min) {
        for (int i = 0; i < n; i++)
            L[i] = 0;
        *the_min = -min;
        return 0.0f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        int l = kq_nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)KQ_MAX(0, KQ_MIN(nmax, l));
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_error += weights[i] * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = kq_nearest_int(iscale * (x[i] - min));
            l = KQ_MAX(0, KQ_MIN(nmax, l));
            Laux[i] = (uint8_t)l;
            float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                cur_error += weights[i] * diff;
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; i++)
                    L[i] = Laux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* Q4_K/Q5_K pack 8 6-bit scales and 8 6-bit mins into 12 bytes: sub-blocks 0..3
 * in the low 6 bits of bytes 0..3 (scales) and 4..7 (mins); 4..7 as nibbles of
 * bytes 8..11 with their top two bits in the spare bits of bytes 0..7. */
static inline void kq_get_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m)
{
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

static inline void kq_set_scale_min_k4(int j, uint8_t *q, uint8_t ls, uint8_t lm)
{
    if (j < 4) {
        q[j] = ls;
        q[j + 4] = lm;
    } else {
        q[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
        q[j - 4] |= (uint8_t)((ls >> 4) << 6);
        q[j - 0] |= (uint8_t)((lm >> 4) << 6);
    }
}

/* All 8 scales (out[0..7]) and 8 mins (out[8..15]) of a Q4_K/Q5_K block at once,
 * branch-free on 32-bit words (same values as kq_get_scale_min_k4). */
static inline void kq_k4_unpack(const uint8_t *q, uint8_t out[16])
{
    uint32_t u[3], r[4];
    memcpy(u, q, 12);
    r[0] = u[0] & 0x3f3f3f3fu;
    r[1] = (u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4);
    r[2] = u[1] & 0x3f3f3f3fu;
    r[3] = ((u[2] >> 4) & 0x0f0f0f0fu) | (((u[1] >> 6) & 0x03030303u) << 4);
    memcpy(out, r, 16);
}

/* Q3_K's 16 6-bit scales (biased by 32) from the 12 packed bytes. */
static inline void kq_q3k_unpack_scales(const uint8_t *s, int8_t out[16])
{
    /* low nibbles: bytes 0..7 (j < 8) then their high nibbles (j >= 8); the top
     * two bits of scale j sit in byte 8 + j % 4 at bit 2 * (j / 4) */
    uint32_t u[3], r[4];
    memcpy(u, s, 12);
    r[0] = (u[0] & 0x0f0f0f0fu) | (((u[2] >> 0) & 0x03030303u) << 4);
    r[1] = (u[1] & 0x0f0f0f0fu) | (((u[2] >> 2) & 0x03030303u) << 4);
    r[2] = ((u[0] >> 4) & 0x0f0f0f0fu) | (((u[2] >> 4) & 0x03030303u) << 4);
    r[3] = ((u[1] >> 4) & 0x0f0f0f0fu) | (((u[2] >> 6) & 0x03030303u) << 4);
    uint8_t b[16];
    memcpy(b, r, 16);
    for (int j = 0; j < 16; j++)
        out[j] = (int8_t)(b[j] - 32);
}

#endif
