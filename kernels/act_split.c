/* Split activations for formats whose reference multiplies float activations
 * (SPLASH_FORMAT_FINE_ACT): each 32-value block becomes two Q8_0 blocks whose values add up
 * to a 15-bit quantization of the block, so the format's own Q8_0 kernels compute the
 * product with 128 times finer activations. */
#include <math.h>

#include "kernels/matmul_act.h"
#include "splash/fp.h"

/* The largest step whose high block's 128 x step is still a finite fp16. */
#define SPLIT_MAX_STEP (65504.0f / 128.0f)

void splash_act_q8_0_split(const float *x, void *hi_blocks, void *lo_blocks, int64_t n)
{
    struct splash_q8_0_block *hi = hi_blocks, *lo = lo_blocks;
    for (int64_t i = 0; i < n / SPLASH_QK8_0; i++, x += SPLASH_QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < SPLASH_QK8_0; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        /* the step: the smallest fp16 at or above amax / 16383, so 128 x step is an
         * fp16 too (a power-of-two multiple, subnormals included) */
        float step = fminf(amax / ACT_SPLIT_LEVELS, SPLIT_MAX_STEP);
        uint16_t h = splash_fp32_to_fp16(step);
        if (splash_fp16_to_fp32(h) < step)
            h++;
        step = splash_fp16_to_fp32(h);
        const float inv = step > 0.0f ? 1.0f / step : 0.0f;
        hi[i].d = splash_fp32_to_fp16(128.0f * step);
        lo[i].d = h;
        for (int j = 0; j < SPLASH_QK8_0; j++) {
            float q = roundf(x[j] * inv);
            q = fminf(fmaxf(q, -ACT_SPLIT_LEVELS), ACT_SPLIT_LEVELS);
            const int v = (int)q, l = v & 127; /* v = 128 h + l, l in [0, 127] */
            hi[i].qs[j] = (int8_t)((v - l) / 128);
            lo[i].qs[j] = (int8_t)l;
        }
    }
}
