/* Header keys named "<arch>.<suffix>", read and held to a range (meta_keys.h). */
#include "families/common/meta_keys.h"

#include <stdio.h>

const char *meta_key(char *buf, size_t size, const char *arch, const char *suffix)
{
    snprintf(buf, size, "%s.%s", arch, suffix);
    return buf;
}

enum splash_status meta_get_int(const struct splash_meta_api *api, const struct splash_meta *m,
                                const char *arch, const char *suffix, int optional, int64_t lo,
                                int64_t hi, int64_t *out, struct splash_err *err)
{
    char k[128];
    meta_key(k, sizeof k, arch, suffix);
    if (optional && !api->has(m, k))
        return SPLASH_OK;
    enum splash_status st = api->get_i64(m, k, out, err);
    if (st)
        return st;
    if (*out < lo || *out > hi)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: %s: %lld (%lld to %lld served)",
                              api->path(m), k, (long long)*out, (long long)lo, (long long)hi);
    return SPLASH_OK;
}

enum splash_status meta_get_float(const struct splash_meta_api *api, const struct splash_meta *m,
                                  const char *arch, const char *suffix, int optional, int zero_ok,
                                  float *out, struct splash_err *err)
{
    char k[128];
    meta_key(k, sizeof k, arch, suffix);
    if (optional && !api->has(m, k))
        return SPLASH_OK;
    double v;
    enum splash_status st = api->get_f64(m, k, &v, err);
    if (st)
        return st;
    if (!(v > 0.0 || (zero_ok && v == 0.0)) || v > 1e30)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: %g", api->path(m), k, v);
    *out = (float)v;
    return SPLASH_OK;
}

enum splash_status meta_get_ints(const struct splash_meta_api *api, const struct splash_meta *m,
                                 const char *arch, const struct meta_int_key *keys, size_t n,
                                 int64_t *v, struct splash_err *err)
{
    enum splash_status st;
    for (size_t i = 0; i < n; i++)
        if ((st =
                 meta_get_int(api, m, arch, keys[i].suffix, 0, keys[i].lo, keys[i].hi, &v[i], err)))
            return st;
    return SPLASH_OK;
}

enum splash_status meta_check_shapes(const char *path, const char *arch, int64_t key_length,
                                     int64_t value_length, int32_t n_head, int32_t n_head_kv,
                                     int32_t n_expert, int32_t n_used, struct splash_err *err)
{
    char k[128];
    if (value_length != key_length)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: %s: %lld, key_length is %lld", path,
                              meta_key(k, sizeof k, arch, "attention.value_length"),
                              (long long)value_length, (long long)key_length);
    if (n_head % n_head_kv)
        return splash_err_set(
            err, SPLASH_ERR_UNSUPPORTED, "%s: %s: %d query heads are not a multiple of %d KV heads",
            path, meta_key(k, sizeof k, arch, "attention.head_count"), n_head, n_head_kv);
    if (n_used > n_expert)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: %s: %d experts, but each token takes %d", path,
                              meta_key(k, sizeof k, arch, "expert_count"), n_expert, n_used);
    return SPLASH_OK;
}
