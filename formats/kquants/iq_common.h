/* Helpers shared by the i-quant and Q1_0 files: size and scale validation, loads. */
#ifndef SPLASH_KQUANTS_IQ_COMMON_H
#define SPLASH_KQUANTS_IQ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "splash/format.h"
#include "splash/fp.h"
#include "splash/status.h"

static inline uint32_t kq_load_u32(const void *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Checks that n_elems fills whole blocks and n_bytes holds exactly those blocks. */
static inline enum splash_status kq_iq_check_size(const struct splash_format_type *f,
                                                  size_t n_bytes, int64_t n_elems,
                                                  struct splash_err *err)
{
    if (n_elems < 0 || n_elems % f->block_elems)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: %lld values do not fill whole %u-value blocks", f->name,
                              (long long)n_elems, f->block_elems);
    size_t want = (size_t)(n_elems / f->block_elems) * f->block_bytes;
    if (n_bytes != want)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: %zu bytes for %lld values, want %zu (%lld blocks of %u bytes)",
                              f->name, n_bytes, (long long)n_elems, want,
                              (long long)(n_elems / f->block_elems), f->block_bytes);
    return SPLASH_OK;
}

/* Refuses an fp16 scale that is NaN or infinite, naming the block. */
static inline enum splash_status kq_iq_check_fp16(const struct splash_format_type *f,
                                                  uint16_t h, int64_t block,
                                                  struct splash_err *err)
{
    if ((h & 0x7c00u) != 0x7c00u)
        return SPLASH_OK;
    return splash_err_set(err, SPLASH_ERR_INVALID, "%s: block %lld: scale d is %s (0x%04x)",
                          f->name, (long long)block, (h & 0x3ffu) ? "NaN" : "Inf", h);
}

/* The common validate: whole blocks, then each block's fp16 scale at byte offset d_off. */
static inline enum splash_status kq_iq_validate_d(const struct splash_format_type *f,
                                                  const void *data, size_t n_bytes,
                                                  int64_t n_elems, size_t d_off,
                                                  struct splash_err *err)
{
    enum splash_status st = kq_iq_check_size(f, n_bytes, n_elems, err);
    if (st != SPLASH_OK)
        return st;
    const uint8_t *p = data;
    int64_t nb = n_elems / f->block_elems;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *d = p + (size_t)i * f->block_bytes + d_off;
        st = kq_iq_check_fp16(f, (uint16_t)(d[0] | (d[1] << 8)), i, err);
        if (st != SPLASH_OK)
            return st;
    }
    return SPLASH_OK;
}

#endif
