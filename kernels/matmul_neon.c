/* NEON activation quantizers for the matrix products (kernels/matmul.c): the same bytes
 * as the activation format's reference from_float, faster. Armv8.0 Advanced SIMD. */
#include <arm_neon.h>
#include <string.h>

#include "kernels/matmul_act.h"
#include "splash/fp.h"

/* Q8_K (GGUF type 15): per 256 values, d = max / -127 where max is the first value of
 * largest magnitude, qs = min(127, round_even(x * (-127 / max))) (fcvtns: ties to even,
 * as the reference's magic-number rounding), bsums = sums of 16 qs. */
void splash_act_q8k_neon(const float *x, void *blocks, int64_t n)
{
    unsigned char *b = blocks;
    for (int64_t i = 0; i < n / 256; i++, x += 256, b += MATMUL_Q8K_BYTES) {
        float32x4_t amax = vdupq_n_f32(0.0f);
        for (int k = 0; k < 64; k++)
            amax = vmaxq_f32(amax, vabsq_f32(vld1q_f32(x + 4 * k)));
        const float am = vmaxvq_f32(amax);
        if (!(am > 0.0f)) {
            memset(b, 0, MATMUL_Q8K_BYTES);
            continue;
        }
        /* the first value whose magnitude is the largest, with its sign */
        float max = 0.0f;
        for (int j = 0; j < 256; j++)
            if (__builtin_fabsf(x[j]) == am) {
                max = x[j];
                break;
            }
        const float iscale = -127.0f / max;
        const int32x4_t top = vdupq_n_s32(127);
        int16_t bsums[16];
        for (int k = 0; k < 16; k++) {
            int32x4_t q[4];
            for (int l = 0; l < 4; l++)
                q[l] = vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + 16 * k + 4 * l), iscale)),
                                 top);
            const int16x8_t h0 = vcombine_s16(vmovn_s32(q[0]), vmovn_s32(q[1]));
            const int16x8_t h1 = vcombine_s16(vmovn_s32(q[2]), vmovn_s32(q[3]));
            vst1q_s8((int8_t *)(b + 4 + 16 * k), vcombine_s8(vmovn_s16(h0), vmovn_s16(h1)));
            bsums[k] = (int16_t)vaddvq_s32(vaddq_s32(vaddq_s32(q[0], q[1]), vaddq_s32(q[2], q[3])));
        }
        const float d = 1.0f / iscale;
        memcpy(b, &d, sizeof d);
        memcpy(b + 4 + 256, bsums, sizeof bsums);
    }
}

/* Q8_0 (GGUF type 8): per 32 values, d = amax / 127 stored as fp16, qs = round half away
 * from zero (fcvtas, as roundf) of x * (1 / d), 0 when d is 0. */
void splash_act_q8_0_neon(const float *x, void *blocks, int64_t n)
{
    unsigned char *b = blocks;
    for (int64_t i = 0; i < n / 32; i++, x += 32, b += MATMUL_Q80_BYTES) {
        float32x4_t v[8], amax = vdupq_n_f32(0.0f);
        for (int k = 0; k < 8; k++) {
            v[k] = vld1q_f32(x + 4 * k);
            amax = vmaxq_f32(amax, vabsq_f32(v[k]));
        }
        const float d = vmaxvq_f32(amax) / 127;
        const float id = d ? 1.0f / d : 0.0f;
        const uint16_t dh = splash_fp32_to_fp16(d);
        memcpy(b, &dh, sizeof dh);
        for (int k = 0; k < 8; k += 4) {
            const int16x8_t h0 = vcombine_s16(vmovn_s32(vcvtaq_s32_f32(vmulq_n_f32(v[k], id))),
                                              vmovn_s32(vcvtaq_s32_f32(vmulq_n_f32(v[k + 1], id))));
            const int16x8_t h1 = vcombine_s16(vmovn_s32(vcvtaq_s32_f32(vmulq_n_f32(v[k + 2], id))),
                                              vmovn_s32(vcvtaq_s32_f32(vmulq_n_f32(v[k + 3], id))));
            vst1q_s8((int8_t *)(b + 2 + 4 * k), vcombine_s8(vmovn_s16(h0), vmovn_s16(h1)));
        }
    }
}
