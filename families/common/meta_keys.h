/* Header keys named "<arch>.<suffix>" (GGUF's convention), read and held to a range; the
 * errors name the file and the full key. Family-neutral (flint and gpt_oss use them);
 * names are prefixed meta_ because the static plugin archive links every plugin together. */
#ifndef SPLASH_FAMILIES_META_KEYS_H
#define SPLASH_FAMILIES_META_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "splash/host.h"

/* "<arch>.<suffix>" into buf; returns buf. */
const char *meta_key(char *buf, size_t size, const char *arch, const char *suffix);

/* An integer key in [lo, hi]; optional keys absent leave *out as is. */
enum splash_status meta_get_int(const struct splash_meta_api *api, const struct splash_meta *m,
                                const char *arch, const char *suffix, int optional, int64_t lo,
                                int64_t hi, int64_t *out, struct splash_err *err);

/* A float key, finite and > 0 (or 0 when zero_ok); optional keys absent leave *out as
 * is. */
enum splash_status meta_get_float(const struct splash_meta_api *api, const struct splash_meta *m,
                                  const char *arch, const char *suffix, int optional, int zero_ok,
                                  float *out, struct splash_err *err);

/* An integer key of a table: its suffix and the range served. */
struct meta_int_key {
    const char *suffix;
    int64_t lo, hi;
};
/* v[i] = the required key keys[i], each in its range; stops at the first error. */
enum splash_status meta_get_ints(const struct splash_meta_api *api, const struct splash_meta *m,
                                 const char *arch, const struct meta_int_key *keys, size_t n,
                                 int64_t *v, struct splash_err *err);

/* The attention and expert shapes read that every family holds to: value_length equal to
 * key_length, query heads a multiple of the KV heads, no more experts per token than there
 * are; errors name the file (path) and the key. */
enum splash_status meta_check_shapes(const char *path, const char *arch, int64_t key_length,
                                     int64_t value_length, int32_t n_head, int32_t n_head_kv,
                                     int32_t n_expert, int32_t n_used, struct splash_err *err);

#endif
