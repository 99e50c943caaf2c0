/* Small float encodings every format needs: IEEE half, bfloat16, FP8 E4M3,
 * E8M0 scales and E2M1 codes. Header-only so plugins need no core symbols. */
#ifndef SPLASH_FP_H
#define SPLASH_FP_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float splash_fp32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t splash_fp32_to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* IEEE binary16 -> binary32, exact for every input (subnormals, Inf, NaN). */
static inline float splash_fp16_to_fp32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f)
        return splash_fp32_from_bits(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (man == 0)
            return splash_fp32_from_bits(sign);
        /* subnormal: man * 2^-24 */
        float v = (float)man * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return splash_fp32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
}

/* binary32 -> binary16, round to nearest even, overflow to Inf, NaN kept quiet. */
static inline uint16_t splash_fp32_to_fp16(float f)
{
    uint32_t x = splash_fp32_to_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u);
    if (ax >= 0x477ff000u) /* rounds to >= 65520: Inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
        float v = splash_fp32_from_bits(ax) * 16777216.0f; /* scale by 2^24 */
        uint32_t m = (uint32_t)lrintf(v);                  /* ties to even in default mode */
        return (uint16_t)(sign | m);
    }
    uint32_t exp = (ax >> 23) - 112u;
    uint32_t man = ax & 0x7fffffu;
    uint32_t h = (exp << 10) | (man >> 13);
    uint32_t rest = man & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

static inline float splash_bf16_to_fp32(uint16_t b)
{
    return splash_fp32_from_bits((uint32_t)b << 16);
}

/* binary32 -> bfloat16, round to nearest even, NaN kept quiet. */
static inline uint16_t splash_fp32_to_bf16(float f)
{
    uint32_t x = splash_fp32_to_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

/* FP8 E4M3 (OCP "fn": no Inf, 0x7f/0xff are NaN). */
static inline float splash_e4m3_to_fp32(uint8_t v)
{
    uint32_t sign = v >> 7, exp = (v >> 3) & 0xfu, man = v & 0x7u;
    float r;
    if (exp == 0xf && man == 0x7)
        r = NAN;
    else if (exp == 0)
        r = ldexpf((float)man, -9); /* subnormal: man/8 * 2^-6 */
    else
        r = ldexpf(1.0f + (float)man / 8.0f, (int)exp - 7);
    return sign ? -r : r;
}

/* E8M0: a power of two 2^(v - 127); 0xff is NaN. */
static inline float splash_e8m0_to_fp32(uint8_t v)
{
    if (v == 0xff)
        return NAN;
    if (v == 0)
        return splash_fp32_from_bits(0x00400000u); /* 2^-127, a float32 subnormal */
    return splash_fp32_from_bits((uint32_t)v << 23);
}

/* E2M1 code (low 4 bits) -> value: 0, .5, 1, 1.5, 2, 3, 4, 6 and negatives. */
static inline float splash_e2m1_to_fp32(uint8_t code)
{
    static const float values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                     -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
    return values[code & 0xfu];
}

#endif
