/* The IQ4 reference quantizer. Reproduces, operation for operation, the search GGUF
 * producers run (7 scale trials around the block maximum, weighted least squares, then
 * 6-bit sub-scales for IQ4_XS), so that from_float writes the same bytes they do. */
#include "formats/kquants/iq4_quant.h"

#include <math.h>
#include <string.h>

#include "formats/kquants/iq_grids.h"
#include "splash/fp.h"

#define IQ4_SUB 32
#define IQ4_NTRY 7
#define IQ4_EPS 1e-15f

int kq_iq4_nearest(float v)
{
    const int8_t *lv = kq_iq4nl_values;
    if (v <= lv[0])
        return 0;
    if (v >= lv[15])
        return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (v < lv[mid])
            hi = mid;
        else
            lo = mid;
    }
    return v - lv[hi - 1] < lv[hi] - v ? hi - 1 : hi;
}

/* Weighted least-squares scale of one 32-value sub-block; levels into L. */
static float iq4_sub_scale(const float *x, const float *w, uint8_t *L)
{
    float amax = 0, max = 0;
    for (int j = 0; j < IQ4_SUB; j++) {
        float ax = fabsf(x[j]);
        if (ax > amax) {
            amax = ax;
            max = x[j];
        }
    }
    if (amax < IQ4_EPS)
        return 0;
    float d = -max / kq_iq4nl_values[0];
    float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < IQ4_SUB; j++) {
        int l = kq_iq4_nearest(id * x[j]);
        L[j] = (uint8_t)l;
        float q = kq_iq4nl_values[l];
        sumqx += w[j] * q * x[j];
        sumq2 += w[j] * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int t = -IQ4_NTRY; t <= IQ4_NTRY; t++) {
        id = (t + kq_iq4nl_values[0]) / max;
        sumqx = sumq2 = 0;
        for (int j = 0; j < IQ4_SUB; j++) {
            float q = kq_iq4nl_values[kq_iq4_nearest(id * x[j])];
            sumqx += w[j] * q * x[j];
            sumq2 += w[j] * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

void kq_iq4_quantize(int n, const float *x, const float *imatrix, uint16_t *d, uint8_t *q4,
                     uint16_t *scales_h, uint8_t *scales_l)
{
    uint8_t L[256];
    float w[IQ4_SUB];
    float scales[256 / IQ4_SUB];
    int nsub = n / IQ4_SUB;

    float sigma2 = 0;
    for (int j = 0; j < n; j++)
        sigma2 += x[j] * x[j];
    sigma2 *= 2.f / n;

    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < nsub; ib++) {
        const float *xb = x + ib * IQ4_SUB;
        for (int j = 0; j < IQ4_SUB; j++)
            w[j] = imatrix ? imatrix[ib * IQ4_SUB + j] * sqrtf(sigma2 + xb[j] * xb[j])
                           : xb[j] * xb[j];
        scales[ib] = iq4_sub_scale(xb, w, L + ib * IQ4_SUB);
        float ad = fabsf(scales[ib]);
        if (ad > amax_scale) {
            amax_scale = ad;
            max_scale = scales[ib];
        }
    }

    if (nsub > 1) {
        /* 6-bit signed sub-scales of a shared scale; levels recomputed for the rounded scale */
        float ds = -max_scale / 32;
        *d = splash_fp32_to_fp16(ds);
        float id = ds ? 1 / ds : 0.f;
        *scales_h = 0;
        for (int ib = 0; ib < nsub; ib++) {
            int l = (int)lrintf(id * scales[ib]);
            l = l < -32 ? -32 : l > 31 ? 31 : l;
            float dl = ds * l;
            float idl = dl ? 1 / dl : 0.f;
            for (int j = 0; j < IQ4_SUB; j++)
                L[ib * IQ4_SUB + j] = (uint8_t)kq_iq4_nearest(idl * x[ib * IQ4_SUB + j]);
            l += 32;
            if (ib % 2 == 0)
                scales_l[ib / 2] = (uint8_t)(l & 0xf);
            else
                scales_l[ib / 2] |= (uint8_t)((l & 0xf) << 4);
            *scales_h |= (uint16_t)((l >> 4) << 2 * ib);
        }
    } else {
        *d = splash_fp32_to_fp16(scales[0]);
        float id = scales[0] ? 1 / scales[0] : 0;
        for (int j = 0; j < n; j++)
            L[j] = (uint8_t)kq_iq4_nearest(id * x[j]);
    }

    for (int i = 0; i < n / 32; i++)
        for (int j = 0; j < 16; j++)
            q4[16 * i + j] = (uint8_t)(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}
