/* NEON scans of the sampler (sampling_scan.h): 16 logits per step, exact (comparisons,
 * minimum, maximum and counts round nothing). */
#include <arm_neon.h>

#include "server/engine/sampling_scan.h"

int32_t splash_argmax_neon(const float *x, int64_t n)
{
    if (n <= 0 || x[0] != x[0])
        return 0;
    /* the largest non-NaN value (fmaxnm skips NaN), then its first index */
    float32x4_t m = vdupq_n_f32(x[0]);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        m = vmaxnmq_f32(m, vld1q_f32(x + i));
    float best = vmaxnmvq_f32(m);
    for (; i < n; i++)
        best = x[i] > best ? x[i] : best;
    const float32x4_t vb = vdupq_n_f32(best);
    for (i = 0; i + 4 <= n; i += 4)
        if (vmaxvq_u32(vceqq_f32(vld1q_f32(x + i), vb)))
            break;
    for (; i < n; i++)
        if (x[i] == best)
            return (int32_t)i;
    return 0;
}

int splash_logit_range_neon(const float *x, int32_t n, float *lo, float *hi)
{
    /* fmin/fmax carry a NaN through: the result says whether there was one */
    float32x4_t mn = vdupq_n_f32(x[0]), mx = mn;
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = vld1q_f32(x + i);
        mn = vminq_f32(mn, v);
        mx = vmaxq_f32(mx, v);
    }
    float l = vminvq_f32(mn), h = vmaxvq_f32(mx);
    for (; i < n; i++) {
        if (x[i] != x[i])
            return 0;
        l = x[i] < l ? x[i] : l;
        h = x[i] > h ? x[i] : h;
    }
    if (l != l || h != h)
        return 0;
    *lo = l;
    *hi = h;
    return 1;
}

int32_t splash_count_at_least_neon(const float *x, int32_t n, float thr, int32_t stop)
{
    const float32x4_t t = vdupq_n_f32(thr);
    int32_t cnt = 0, i = 0;
    for (; i + 16 <= n && cnt < stop; i += 16) {
        /* each lane of a comparison is 0 or -1: minus their sum counts them */
        int32x4_t c = vreinterpretq_s32_u32(vcgeq_f32(vld1q_f32(x + i), t));
        c = vaddq_s32(c, vreinterpretq_s32_u32(vcgeq_f32(vld1q_f32(x + i + 4), t)));
        c = vaddq_s32(c, vreinterpretq_s32_u32(vcgeq_f32(vld1q_f32(x + i + 8), t)));
        c = vaddq_s32(c, vreinterpretq_s32_u32(vcgeq_f32(vld1q_f32(x + i + 12), t)));
        cnt -= vaddvq_s32(c);
    }
    for (; i < n && cnt < stop; i++)
        cnt += x[i] >= thr;
    return cnt;
}
