/* A safetensors target as a GGUF-shaped meta (core/st_target.h): the shards stay mapped,
 * quantized modules are imported into their format's blocks (their source pages dropped
 * after), small tensors become F32, and float matrices are used where they lie. */
#include "core/st_target.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checkpoint_rules.h"
#include "core/family.h"
#include "core/file_map.h"
#include "core/gguf.h"
#include "core/gguf_write.h"
#include "core/import_mem.h"
#include "core/meta.h"
#include "core/model_check.h"
#include "core/registry.h"
#include "core/safetensors.h"
#include "splash/fp.h"

struct st_tensor {
    struct splash_tensor_info info;
    char name[96];
    void *buf; /* converted bytes (aligned), or NULL when info.data lies in a shard */
    int region; /* buf is an import region (core/import_mem.h): a matrix the kernels may
                   repack, whose pages tensor_bind then gives back */
    /* stacked experts imported from planes (MLX switch_mlp): the planes, for streaming */
    const struct splash_tensor_info *plane[3]; /* codes, scales, biases (or NULL) */
    int64_t plane_rows;                        /* one expert's rows */
    double plane_g;                            /* the planes' global scale */
    int deferred; /* the planes are imported when bound as a weight (SPLASH_ST_DEFER_EXPERTS) */
    const char *why_not_planes; /* imported experts that cannot be read alone: why */
};

/* A matrix's converted bytes in a region of their own. */
static void *region_alloc(struct st_tensor *t)
{
    t->buf = splash_import_alloc(t->info.n_bytes);
    t->region = t->buf != NULL;
    return t->buf;
}

static void buf_free(struct st_tensor *t)
{
    if (t->region)
        splash_import_free(t->buf);
    else
        free(t->buf);
    t->buf = NULL;
    t->region = 0;
}

struct st_owner {
    struct splash_meta *src; /* config.json and the shards, mapped */
    struct st_tensor **t;
    size_t n, cap;
};

struct build {
    const struct splash_registry *r;
    const struct splash_meta_api *api;
    unsigned flags;
    struct splash_meta *src;
    const json_t *text;  /* the text model's config */
    const json_t *quant; /* MLX's quantization block, or NULL */
    int kind;            /* enum splash_checkpoint_kind */
    const char *prefix;
    int zero_centred; /* GGUF's norms hold 1 + the checkpoint's */
    int64_t n_layers, hk, hv, dk, dv, n_experts;
    struct st_owner *own;
    struct splash_meta *out;
};

static void owner_free(void *p)
{
    struct st_owner *o = p;
    if (!o)
        return;
    for (size_t i = 0; i < o->n; i++) {
        buf_free(o->t[i]);
        free(o->t[i]);
    }
    free(o->t);
    splash_meta_close(o->src);
    free(o);
}

static const char *shard(const struct build *b, const struct splash_tensor_info *t)
{
    return splash_safetensors_shard_name(b->src, t);
}

static const struct splash_tensor_info *src_find(const struct build *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static const struct splash_tensor_info *src_find(const struct build *b, const char *fmt, ...)
{
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof name)
        return NULL;
    return b->api->tensor_find(b->src, name);
}

static int64_t elems(const struct splash_tensor_info *t)
{
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

static struct st_tensor *new_tensor(struct build *b, const char *name, struct splash_err *err)
{
    struct st_owner *o = b->own;
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 256;
        void *grown = realloc(o->t, cap * sizeof *o->t);
        if (!grown)
            return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory"), NULL;
        o->t = grown;
        o->cap = cap;
    }
    struct st_tensor *t = calloc(1, sizeof *t);
    if (!t)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory"), NULL;
    o->t[o->n++] = t;
    snprintf(t->name, sizeof t->name, "%s", name);
    t->info.name = t->name;
    return t;
}

static enum splash_status add(struct build *b, struct st_tensor *t, struct splash_err *err)
{
    return splash_meta_add_tensor(b->out, &t->info, err);
}

/* ---- value heads: the checkpoints' grouped order to GGUF's tiled order ----------- */

/* Value head g = k r + j (key head k, r = hv / hk) moves to t = j hk + k; blk bytes a head. */
static void tile_heads(uint8_t *dst, const uint8_t *src, size_t blk, int64_t hv, int64_t hk)
{
    int64_t r = hv / hk;
    for (int64_t g = 0; g < hv; g++) {
        int64_t k = g / r, j = g % r;
        memcpy(dst + (size_t)(j * hk + k) * blk, src + (size_t)g * blk, blk);
    }
}

/* A plane of `rows` rows of row_bytes, reordered by perm: ROWS (all rows, hv heads),
 * ROWS_V (rows from v_row on, hv heads), COLS (the first hv * head_bytes of every row). */
static void *permute_plane(const struct build *b, const void *src, int64_t rows, size_t row_bytes,
                           int perm, int64_t v_row, size_t head_bytes)
{
    size_t size = (size_t)rows * row_bytes;
    uint8_t *dst = malloc(size ? size : 1);
    if (!dst)
        return NULL;
    memcpy(dst, src, size);
    const uint8_t *s = src;
    if (perm == ST_PERM_ROWS || perm == ST_PERM_ROWS_V) {
        int64_t first = perm == ST_PERM_ROWS ? 0 : v_row;
        size_t blk = (size_t)(rows - first) / (size_t)b->hv * row_bytes;
        tile_heads(dst + (size_t)first * row_bytes, s + (size_t)first * row_bytes, blk, b->hv,
                   b->hk);
    } else if (perm == ST_PERM_COLS) {
        for (int64_t i = 0; i < rows; i++)
            tile_heads(dst + (size_t)i * row_bytes, s + (size_t)i * row_bytes, head_bytes, b->hv,
                       b->hk);
    }
    return dst;
}

/* Can perm apply to a tensor of `rows` rows and `cols` columns? */
static int perm_fits(const struct build *b, int perm, int64_t rows, int64_t cols)
{
    switch (perm) {
    case ST_PERM_ROWS: return rows % b->hv == 0;
    case ST_PERM_ROWS_V: return rows == 2 * b->hk * b->dk + b->hv * b->dv;
    case ST_PERM_COLS: return cols == b->hv * b->dv;
    default: return 1;
    }
}

/* ---- formats -------------------------------------------------------------------- */

static const struct splash_format_type *format_where(const struct build *b, const char *mode,
                                                     int bits, int group, const char *name)
{
    for (size_t i = 0; i < splash_registry_n_formats(b->r); i++) {
        const struct splash_format_plugin *p = splash_registry_format(b->r, i);
        for (uint32_t k = 0; k < p->n_types; k++) {
            const struct splash_format_type *f = p->types[k];
            if (name ? !strcmp(f->name, name)
                     : f->mlx_mode && !strcmp(f->mlx_mode, mode) && f->mlx_bits == bits &&
                           f->mlx_group_size == group && f->import_planes)
                return f;
        }
    }
    return NULL;
}

/* MLX's quantization of one module: its override, else the block's values (unless the
 * override names another mode), else the mode's defaults (as mlx-lm and the checkpoint
 * rules take them: affine 4-bit/64, mxfp4 4/32, nvfp4 4/16). */
static enum splash_status mlx_params(const struct build *b, const char *module, const char **mode,
                                     int *bits, int *group, struct splash_err *err)
{
    const json_t *q = b->quant, *o = json_object_get(q, module);
    const json_t *m = json_object_get(o, "mode");
    const json_t *from = m ? NULL : q; /* an override of another mode takes that mode's defaults */
    if (!m)
        m = json_object_get(q, "mode");
    *mode = m && !json_is_null(m) ? json_string_value(m) : "affine";
    if (!*mode)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "config.json: quantization of %s: mode must be a string", module);
    int def_group = !strcmp(*mode, "mxfp4") ? 32 : !strcmp(*mode, "nvfp4") ? 16 : 64;
    const json_t *bi = json_object_get(o, "bits"), *g = json_object_get(o, "group_size");
    if (!bi)
        bi = json_object_get(from, "bits");
    if (!g)
        g = json_object_get(from, "group_size");
    if ((bi && !json_is_integer(bi)) || (g && !json_is_integer(g)))
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "config.json: quantization of %s: bits and group_size must be "
                              "integers",
                              module);
    *bits = bi ? (int)json_integer_value(bi) : 4;
    *group = g ? (int)json_integer_value(g) : def_group;
    return SPLASH_OK;
}

/* ---- one quantized or float matrix ------------------------------------------------ */

struct planes_src {
    const struct splash_tensor_info *w, *scales, *biases;
    const struct splash_format_type *f;
    int64_t rows, cols; /* all rows (experts stacked), logical columns */
    int64_t experts;    /* the leading dimension of a stacked weight, else 1 */
    size_t code_row, scale_row, bias_row; /* plane bytes per row */
    double g;
    float *row_scales; /* FP8 per channel */
};

static enum splash_status disagree(const struct build *b, const struct splash_tensor_info *t,
                                   const char *what, struct splash_err *err)
{
    return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: %s", shard(b, t), t->name, what);
}

static int64_t rows_of(const struct splash_tensor_info *t)
{
    return t->ne[1] * t->ne[2] * t->ne[3];
}

/* One F32 value of a scalar (or one-element) F32 tensor. */
static enum splash_status scalar_f32(const struct build *b, const struct splash_tensor_info *t,
                                     double *out, struct splash_err *err)
{
    if (t->dtype != SPLASH_DTYPE_F32 || elems(t) != 1)
        return disagree(b, t, "must be one F32 value", err);
    if (t->data) {
        float v;
        memcpy(&v, t->data, sizeof v);
        *out = v;
    } else {
        *out = 1.0;
    }
    return SPLASH_OK;
}

static enum splash_status to_f32(const struct build *b, const struct splash_tensor_info *s,
                                 float *out, struct splash_err *err);

/* Which planes and format a module's tensors are (MLX, Model Optimizer, compressed-tensors,
 * or a float matrix with f NULL). NOT_FOUND when the module is absent. */
static enum splash_status planes_of(const struct build *b, const char *module,
                                    struct planes_src *p, struct splash_err *err)
{
    memset(p, 0, sizeof *p);
    p->g = 1.0;
    const struct splash_tensor_info *w = src_find(b, "%s.weight", module);
    const struct splash_tensor_info *packed = src_find(b, "%s.weight_packed", module);
    if (!w)
        w = packed;
    if (!w)
        return SPLASH_ERR_NOT_FOUND;
    p->w = w;
    p->experts = w->n_dims >= 3 ? w->ne[2] * w->ne[3] : 1;
    p->rows = rows_of(w);
    const struct splash_tensor_info *sc = src_find(b, "%s.scales", module);
    const struct splash_tensor_info *ws = src_find(b, "%s.weight_scale", module);
    char msg[200];
    if (sc) { /* MLX */
        const char *mode = "affine";
        int bits = 0, group = 0;
        enum splash_status st = mlx_params(b, module, &mode, &bits, &group, err);
        if (st)
            return st;
        if (!(p->f = format_where(b, mode, bits, group, NULL)))
            return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                  "config.json: %s is %s %d-bit in groups of %d: no format plugin "
                                  "imports it",
                                  module, mode, bits, group);
        if (w->dtype != SPLASH_DTYPE_ST_U32) {
            snprintf(msg, sizeof msg, "%s, expected U32 codes (config.json: %s %d-bit)",
                     w->type_name, mode, bits);
            return disagree(b, w, msg, err);
        }
        if ((w->ne[0] * 32) % bits) {
            snprintf(msg, sizeof msg, "%lld words a row do not hold whole %d-bit codes",
                     (long long)w->ne[0], bits);
            return disagree(b, w, msg, err);
        }
        p->cols = w->ne[0] * 32 / bits;
        p->code_row = (size_t)w->ne[0] * 4;
        p->scales = sc;
        if (p->cols % group || sc->ne[0] != p->cols / group || rows_of(sc) != p->rows) {
            snprintf(msg, sizeof msg,
                     "shape disagrees with %s.weight at %d bits in groups of %d (%lld rows x "
                     "%lld groups expected)",
                     module, bits, group, (long long)p->rows, (long long)(p->cols / group));
            return disagree(b, sc, msg, err);
        }
        p->scale_row = (size_t)sc->ne[0] * (sc->n_bytes / (uint64_t)elems(sc));
        if (!strcmp(mode, "affine")) {
            p->biases = src_find(b, "%s.biases", module);
            if (!p->biases)
                return splash_err_set(err, SPLASH_ERR_INVALID,
                                      "%s: %s.biases is missing (affine %d-bit needs them)",
                                      shard(b, w), module, bits);
            if (p->biases->ne[0] != sc->ne[0] || rows_of(p->biases) != p->rows)
                return disagree(b, p->biases, "shape disagrees with its .scales", err);
            p->bias_row = (size_t)sc->ne[0] * (p->biases->n_bytes / (uint64_t)elems(p->biases));
        }
        return SPLASH_OK;
    }
    if (w->dtype == SPLASH_DTYPE_ST_U8 && ws) { /* NVFP4: Model Optimizer, compressed-tensors */
        if (!(p->f = format_where(b, "nvfp4", 4, 16, NULL)))
            return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                  "%s: no format plugin imports NVFP4", module);
        p->cols = w->ne[0] * 2;
        p->code_row = (size_t)w->ne[0];
        if (ws->dtype != SPLASH_DTYPE_ST_F8_E4M3 || ws->ne[0] != p->cols / 16 ||
            rows_of(ws) != p->rows)
            return disagree(b, ws, "must be F8_E4M3, one per 16 weights of each row", err);
        p->scales = ws;
        p->scale_row = (size_t)ws->ne[0];
        const struct splash_tensor_info *g2 = src_find(b, "%s.weight_scale_2", module);
        const struct splash_tensor_info *gg = src_find(b, "%s.weight_global_scale", module);
        enum splash_status st;
        if (g2) {
            if ((st = scalar_f32(b, g2, &p->g, err)))
                return st;
        } else if (gg) {
            double v;
            if ((st = scalar_f32(b, gg, &v, err)))
                return st;
            if (!(v > 0.0) || !isfinite(v))
                return disagree(b, gg, "must be positive and finite", err);
            p->g = 1.0 / v;
        } else {
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "%s: %s.weight_scale_2 (or .weight_global_scale) is missing",
                                  shard(b, w), module);
        }
        return SPLASH_OK;
    }
    if (w->dtype == SPLASH_DTYPE_ST_F8_E4M3) { /* FP8 per tensor or per channel */
        if (!(p->f = format_where(b, NULL, 0, 0, "FP8_E4M3")))
            return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: no format plugin imports FP8",
                                  module);
        p->cols = w->ne[0];
        p->code_row = (size_t)w->ne[0];
        if (!ws)
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "%s: %s.weight_scale is missing (FP8 weights need it)",
                                  shard(b, w), module);
        if ((ws->dtype != SPLASH_DTYPE_F32 && ws->dtype != SPLASH_DTYPE_BF16) ||
            (elems(ws) != 1 && elems(ws) != p->rows))
            return disagree(b, ws, "must be F32 or BF16, one value or one per row", err);
        float one = 1.0f;
        if (!ws->data) /* headers only: the values are not read */
            return SPLASH_OK;
        if (elems(ws) == 1) {
            if (ws->dtype == SPLASH_DTYPE_F32)
                memcpy(&one, ws->data, 4);
            else
                one = splash_bf16_to_fp32((uint16_t)(((const uint8_t *)ws->data)[0] |
                                                     ((const uint8_t *)ws->data)[1] << 8));
            p->g = one;
            return SPLASH_OK;
        }
        if (!(p->row_scales = malloc((size_t)p->rows * sizeof *p->row_scales)))
            return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
        return to_f32(b, ws, p->row_scales, err);
    }
    if (w->dtype == SPLASH_DTYPE_BF16 || w->dtype == SPLASH_DTYPE_F16 ||
        w->dtype == SPLASH_DTYPE_F32) {
        p->cols = w->ne[0];
        p->code_row = (size_t)(w->n_bytes / (uint64_t)p->rows);
        return SPLASH_OK;
    }
    snprintf(msg, sizeof msg, "%s weights without .scales (a quantized module needs its scales)",
             w->type_name);
    return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %s: %s", shard(b, w), w->name, msg);
}

static void drop_planes(const struct planes_src *p)
{
    const struct splash_tensor_info *t[3] = {p->w, p->scales, p->biases};
    for (int i = 0; i < 3; i++)
        if (t[i] && t[i]->data)
            splash_file_map_drop(t[i]->data, t[i]->n_bytes);
}

/* Imports rows [row0, row0 + p->rows) of dst from p (permuted by perm). */
static enum splash_status import_into(const struct build *b, const struct planes_src *p,
                                      int perm, void *dst, struct splash_err *err)
{
    const void *codes = p->w->data, *scales = p->scales ? p->scales->data : NULL,
               *biases = p->biases ? p->biases->data : NULL;
    void *tmp[3] = {NULL, NULL, NULL};
    enum splash_status st = SPLASH_OK;
    if (perm != ST_PERM_NONE) {
        int64_t v_row = 2 * b->hk * b->dk, heads_cols = b->hv * b->dv;
        size_t rb[3] = {p->code_row, p->scale_row, p->bias_row};
        const void *in[3] = {codes, scales, biases};
        for (int i = 0; i < 3; i++) {
            if (!in[i])
                continue;
            size_t head = perm == ST_PERM_COLS ? rb[i] * (size_t)b->dv / (size_t)p->cols : 0;
            if (perm == ST_PERM_COLS && (rb[i] * (size_t)b->dv % (size_t)p->cols ||
                                         (int64_t)(head * (size_t)b->hv) > (int64_t)rb[i] ||
                                         heads_cols != p->cols)) {
                st = splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                    "%s: %s: value heads of %lld columns do not fall on its "
                                    "quantization groups",
                                    shard(b, p->w), p->w->name, (long long)b->dv);
                goto out;
            }
            if (!(tmp[i] = permute_plane(b, in[i], p->rows, rb[i], perm, v_row, head))) {
                st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
                goto out;
            }
        }
        codes = tmp[0];
        scales = tmp[1] ? tmp[1] : scales;
        biases = tmp[2] ? tmp[2] : biases;
    }
    if (!p->f) {
        memcpy(dst, codes, (size_t)p->rows * p->code_row);
        goto out;
    }
    struct splash_planes pl = {
        .rows = p->rows,
        .cols = p->cols,
        .codes = codes,
        .codes_dtype = p->w->dtype,
        .scales = scales,
        .scales_dtype = p->scales ? p->scales->dtype : 0,
        .biases = biases,
        .biases_dtype = p->biases ? p->biases->dtype : 0,
        .global_scale = p->g,
        .row_scales = p->row_scales,
    };
    struct splash_err why = {{0}}; /* not err itself: the message is printed into it */
    if ((st = p->f->import_planes(&pl, dst, &why)))
        st = splash_err_set(err, st, "%s: %s: %s", shard(b, p->w), p->w->name, why.msg);
out:
    for (int i = 0; i < 3; i++)
        free(tmp[i]);
    return st;
}

static enum splash_status set_format(struct build *b, struct st_tensor *t,
                                     const struct splash_format_type *f, int32_t float_dtype)
{
    if (f) {
        t->info.dtype = f->gguf_type >= 0 ? f->gguf_type : SPLASH_DTYPE_ST_U8;
        t->info.type_name = f->name;
        t->info.format = f;
    } else {
        t->info.dtype = float_dtype;
        t->info.format = splash_registry_format_by_gguf(b->r, float_dtype);
        t->info.type_name = float_dtype == SPLASH_DTYPE_F32   ? "F32"
                            : float_dtype == SPLASH_DTYPE_F16 ? "F16"
                                                              : "BF16";
    }
    return SPLASH_OK;
}

/* A Linear module (or a stack of experts, MLX's switch_mlp) as one GGUF matrix. */
static enum splash_status linear(struct build *b, const char *module, const char *name, int perm,
                                 struct splash_err *err)
{
    struct planes_src p;
    enum splash_status st = planes_of(b, module, &p, err);
    if (st == SPLASH_ERR_NOT_FOUND)
        return SPLASH_OK; /* the family's declarations say whether it was needed */
    if (st)
        goto out;
    int64_t rows1 = p.rows / p.experts;
    if (!perm_fits(b, perm, rows1, p.cols)) {
        st = disagree(b, p.w, "its shape disagrees with config.json's value heads", err);
        goto out;
    }
    struct st_tensor *t = new_tensor(b, name, err);
    if (!t) {
        st = SPLASH_ERR_NOMEM;
        goto out;
    }
    set_format(b, t, p.f, p.w->dtype);
    t->info.n_dims = p.experts > 1 || p.w->n_dims >= 3 ? 3 : 2;
    t->info.ne[0] = p.cols;
    t->info.ne[1] = rows1;
    t->info.ne[2] = p.experts;
    t->info.ne[3] = 1;
    size_t row_bytes = p.f ? splash_format_row_bytes(p.f, p.cols) : p.code_row;
    if (p.f && !row_bytes) {
        st = splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                            "%s: %s: %lld columns are not whole %s blocks of %u", shard(b, p.w),
                            p.w->name, (long long)p.cols, p.f->name, p.f->block_elems);
        goto out;
    }
    t->info.n_bytes = (uint64_t)p.rows * row_bytes;
    if (p.f && p.experts > 1 && perm == ST_PERM_NONE && p.scales && !p.row_scales) {
        t->plane[0] = p.w;
        t->plane[1] = p.scales;
        t->plane[2] = p.biases;
        t->plane_rows = rows1;
        t->plane_g = p.g;
        /* imported when bound as a weight; never when its experts stream */
        t->deferred = (b->flags & SPLASH_ST_DEFER_EXPERTS) && !(b->flags & SPLASH_ST_DECODE_F32);
    } else if (p.experts > 1 && p.f) {
        t->why_not_planes = perm != ST_PERM_NONE ? "its rows are reordered on import"
                                                 : "its scales are not a plane of their own (FP8 "
                                                   "with one scale a tensor or a row)";
    }
    if (!(b->flags & SPLASH_ST_HEADERS_ONLY) && !t->deferred) {
        if (!p.f && perm == ST_PERM_NONE) {
            t->info.data = p.w->data; /* a float matrix is used where it lies */
        } else {
            if (!region_alloc(t)) {
                st = splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for %s", name);
                goto out;
            }
            if ((st = import_into(b, &p, perm, t->buf, err)))
                goto out;
            t->info.data = t->buf;
            if (p.f)
                drop_planes(&p);
        }
    }
    st = add(b, t, err);
out:
    free(p.row_scales);
    return st;
}

/* Experts stored one module each (experts.<e>.<proj>): stacked into one GGUF matrix. */
static enum splash_status experts_each(struct build *b, const char *base, const char *proj,
                                       const char *name, struct splash_err *err)
{
    struct planes_src p0;
    char module[300];
    if ((size_t)snprintf(module, sizeof module, "%s.0.%s", base, proj) >= sizeof module)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: name too long", base);
    enum splash_status st = planes_of(b, module, &p0, err);
    if (st == SPLASH_ERR_NOT_FOUND)
        return SPLASH_OK;
    free(p0.row_scales);
    if (st)
        return st;
    int64_t E = b->n_experts;
    if (E < 1)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "config.json: num_experts is missing beside %s", module);
    struct st_tensor *t = new_tensor(b, name, err);
    if (!t)
        return SPLASH_ERR_NOMEM;
    set_format(b, t, p0.f, p0.w->dtype);
    size_t row_bytes = p0.f ? splash_format_row_bytes(p0.f, p0.cols) : p0.code_row;
    if (p0.f && !row_bytes)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "%s: %s: %lld columns are not whole %s blocks", shard(b, p0.w),
                              p0.w->name, (long long)p0.cols, p0.f->name);
    t->info.n_dims = 3;
    t->info.ne[0] = p0.cols;
    t->info.ne[1] = p0.rows;
    t->info.ne[2] = E;
    t->info.ne[3] = 1;
    t->info.n_bytes = (uint64_t)E * (uint64_t)p0.rows * row_bytes;
    t->why_not_planes = "its experts are imported one module each (experts.<e>.*, as Model "
                        "Optimizer and compressed-tensors store them), not from one stack of "
                        "planes";
    int convert = !(b->flags & SPLASH_ST_HEADERS_ONLY);
    if (convert && !region_alloc(t))
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for %s", name);
    for (int64_t e = 0; e < E; e++) {
        struct planes_src p;
        if ((size_t)snprintf(module, sizeof module, "%s.%lld.%s", base, (long long)e, proj) >=
            sizeof module)
            return splash_err_set(err, SPLASH_ERR_INVALID, "%s: name too long", base);
        st = planes_of(b, module, &p, err);
        if (st == SPLASH_ERR_NOT_FOUND)
            return splash_err_set(err, SPLASH_ERR_NOT_FOUND,
                                  "%s.weight is missing (config.json: %lld experts)", module,
                                  (long long)E);
        if (!st && (p.f != p0.f || p.rows != p0.rows || p.cols != p0.cols))
            st = disagree(b, p.w, "its format or shape differs from expert 0's", err);
        if (!st && convert) {
            st = import_into(b, &p, ST_PERM_NONE,
                             (uint8_t *)t->buf + (size_t)e * (size_t)p0.rows * row_bytes, err);
            if (!st && p.f)
                drop_planes(&p);
        }
        free(p.row_scales);
        if (st)
            return st;
    }
    t->info.data = t->buf;
    return add(b, t, err);
}

static int64_t text_int(const json_t *text, const char *key)
{
    const json_t *v = json_object_get(text, key);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

/* transformers 5's fused experts: mlp.experts.gate_up_proj [E, 2F, H] (each expert's gate
 * rows, then its up rows: the product's chunk(2) halves) and mlp.experts.down_proj [E, H, F],
 * float parameters with no .weight. half 0 / 1 takes the gate / up rows of every expert into
 * one stacked matrix; half -1 (down_proj) is used where it lies. */
static enum splash_status experts_fused(struct build *b, const struct splash_tensor_info *src,
                                        int half, const char *name, struct splash_err *err)
{
    const int64_t E = src->ne[2], rows = src->ne[1], cols = src->ne[0];
    const int64_t want_e = b->n_experts, want_f = text_int(b->text, "moe_intermediate_size");
    char msg[200];
    if (src->dtype != SPLASH_DTYPE_F32 && src->dtype != SPLASH_DTYPE_BF16 &&
        src->dtype != SPLASH_DTYPE_F16)
        return disagree(b, src, "fused experts must be F32, BF16 or F16", err);
    if (src->n_dims != 3 || src->ne[3] != 1 || (want_e > 0 && E != want_e) ||
        (half >= 0 && rows % 2) ||
        (want_f > 0 && (half >= 0 ? rows != 2 * want_f : cols != want_f))) {
        snprintf(msg, sizeof msg,
                 "shape [%lld, %lld, %lld] disagrees with config.json (num_experts %lld, "
                 "moe_intermediate_size %lld: %s)",
                 (long long)E, (long long)rows, (long long)cols, (long long)want_e,
                 (long long)want_f,
                 half >= 0 ? "[experts, 2 x ff, hidden] expected" : "[experts, hidden, ff] expected");
        return disagree(b, src, msg, err);
    }
    const int64_t out_rows = half >= 0 ? rows / 2 : rows;
    const size_t es = src->dtype == SPLASH_DTYPE_F32 ? 4 : 2, row_bytes = (size_t)cols * es;
    struct st_tensor *t = new_tensor(b, name, err);
    if (!t)
        return SPLASH_ERR_NOMEM;
    set_format(b, t, NULL, src->dtype);
    t->info.n_dims = 3;
    t->info.ne[0] = cols;
    t->info.ne[1] = out_rows;
    t->info.ne[2] = E;
    t->info.ne[3] = 1;
    t->info.n_bytes = (uint64_t)E * (uint64_t)out_rows * row_bytes;
    if (!(b->flags & SPLASH_ST_HEADERS_ONLY)) {
        if (half < 0) {
            t->info.data = src->data;
        } else {
            t->why_not_planes = "its gate and up rows are split from one fused stack on import";
            if (!region_alloc(t))
                return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for %s", name);
            const size_t part = (size_t)out_rows * row_bytes;
            for (int64_t e = 0; e < E; e++)
                memcpy((uint8_t *)t->buf + (size_t)e * part,
                       (const uint8_t *)src->data + (size_t)(2 * e + half) * part, part);
            t->info.data = t->buf;
            splash_file_map_drop(src->data, src->n_bytes);
        }
    }
    return add(b, t, err);
}

static enum splash_status owner_realize(void *owner_data, const struct splash_tensor_info *info,
                                        struct splash_err *err);

/* ---- small tensors as F32 ------------------------------------------------------------ */

static enum splash_status to_f32(const struct build *b, const struct splash_tensor_info *s,
                                 float *out, struct splash_err *err)
{
    int64_t n = elems(s);
    const uint8_t *p = s->data;
    for (int64_t i = 0; i < n; i++) {
        switch (s->dtype) {
        case SPLASH_DTYPE_F32: memcpy(&out[i], p + 4 * i, 4); break;
        case SPLASH_DTYPE_BF16: out[i] = splash_bf16_to_fp32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8)); break;
        case SPLASH_DTYPE_F16: out[i] = splash_fp16_to_fp32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8)); break;
        default: return disagree(b, s, "must be F32, BF16 or F16", err);
        }
    }
    return SPLASH_OK;
}

static enum splash_status small(struct build *b, const struct st_rule *rule, const char *hf,
                                const char *name, struct splash_err *err)
{
    const struct splash_tensor_info *s = b->api->tensor_find(b->src, hf);
    if (!s)
        return SPLASH_OK;
    if (s->dtype != SPLASH_DTYPE_F32 && s->dtype != SPLASH_DTYPE_BF16 &&
        s->dtype != SPLASH_DTYPE_F16)
        return disagree(b, s, "must be F32, BF16 or F16", err);
    int64_t n = elems(s), k = 1;
    if (rule->kind == ST_CONV) {
        /* [C, 1, K] (transformers) or [C, K, 1] (mlx-lm): C rows of K taps either way */
        if (s->n_dims != 3 || (s->ne[0] != 1 && s->ne[1] != 1))
            return disagree(b, s, "must be [channels, 1, kernel] or [channels, kernel, 1]", err);
        k = s->ne[0] * s->ne[1];
    }
    int64_t rows = n / k;
    if (!perm_fits(b, rule->perm, rows, 1))
        return disagree(b, s, "its shape disagrees with config.json's value heads", err);
    struct st_tensor *t = new_tensor(b, name, err);
    if (!t)
        return SPLASH_ERR_NOMEM;
    set_format(b, t, NULL, SPLASH_DTYPE_F32);
    t->info.n_dims = rule->kind == ST_CONV ? 2 : 1;
    t->info.ne[0] = rule->kind == ST_CONV ? k : n;
    t->info.ne[1] = rule->kind == ST_CONV ? rows : 1;
    t->info.ne[2] = t->info.ne[3] = 1;
    t->info.n_bytes = (uint64_t)n * 4;
    if (b->flags & SPLASH_ST_HEADERS_ONLY)
        return add(b, t, err);
    float *v = malloc((size_t)n * sizeof *v);
    if (!v)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    enum splash_status st = to_f32(b, s, v, err);
    if (!st && rule->kind == ST_NORM_ZC && b->zero_centred)
        for (int64_t i = 0; i < n; i++)
            v[i] += 1.0f;
    if (!st && rule->kind == ST_A_LOG)
        for (int64_t i = 0; i < n; i++)
            v[i] = -expf(v[i]);
    if (!st && rule->perm != ST_PERM_NONE) {
        t->buf = permute_plane(b, v, rows, (size_t)k * 4, rule->perm, 2 * b->hk * b->dk, 0);
        free(v);
        if (!t->buf)
            return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    } else {
        t->buf = v;
    }
    if (st)
        return st;
    t->info.data = t->buf;
    return add(b, t, err);
}

/* ---- the whole model ----------------------------------------------------------------- */

static enum splash_status apply_rule(struct build *b, const struct st_rule *rule, int64_t layer,
                                     struct splash_err *err)
{
    char hf[256], name[96], base[200];
    if (layer >= 0) {
        snprintf(base, sizeof base, "%slayers.%lld.", b->prefix, (long long)layer);
        snprintf(name, sizeof name, "blk.%lld.%s", (long long)layer, rule->gguf);
    } else {
        snprintf(base, sizeof base, "%s", b->prefix);
        snprintf(name, sizeof name, "%s", rule->gguf);
    }
    snprintf(hf, sizeof hf, "%s%s", base, rule->hf);
    switch (rule->kind) {
    case ST_LINEAR: return linear(b, hf, name, rule->perm, err);
    case ST_EXPERTS: {
        char stacked[256];
        snprintf(stacked, sizeof stacked, "%smlp.switch_mlp.%s", base, rule->hf);
        if (src_find(b, "%s.weight", stacked))
            return linear(b, stacked, name, ST_PERM_NONE, err);
        const int down = !strcmp(rule->hf, "down_proj");
        const struct splash_tensor_info *fused =
            src_find(b, "%smlp.experts.%s", base, down ? "down_proj" : "gate_up_proj");
        if (fused)
            return experts_fused(b, fused, down ? -1 : !strcmp(rule->hf, "up_proj"), name, err);
        snprintf(stacked, sizeof stacked, "%smlp.experts", base);
        return experts_each(b, stacked, rule->hf, name, err);
    }
    default: return small(b, rule, hf, name, err);
    }
}

/* The GGUF architecture of the family that claims the config's model_type. */
static enum splash_status arch_of(const struct build *b, const json_t *config, const char **arch,
                                  struct splash_err *err)
{
    const char *types[2] = {json_string_value(json_object_get(b->text, "model_type")),
                            json_string_value(json_object_get(config, "model_type"))};
    for (int k = 0; k < 2; k++) {
        if (!types[k])
            continue;
        for (size_t i = 0; i < splash_registry_n_families(b->r); i++) {
            const struct splash_family_plugin *f = splash_registry_family(b->r, i);
            for (const char *const *t = f->model_types; t && *t; t++)
                if (!strcmp(*t, types[k]) && f->gguf_architectures && f->gguf_architectures[0]) {
                    *arch = f->gguf_architectures[0];
                    return SPLASH_OK;
                }
        }
    }
    return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                          "config.json: model_type %s: no family plugin serves it",
                          types[0] ? types[0] : types[1] ? types[1] : "(missing)");
}

/* Tensors whose declaration's accept mask takes no quantized format (the shared-expert gate mlx-lm
 * stores 8-bit) are decoded to F32, and so is the router, as GGUF keeps it: its top-k
 * must not move with the activations' quantization. A few values each. */
static void fit_roles(void *ctx, const struct splash_tensor_decl *d)
{
    struct build *b = ctx;
    const struct splash_format_type *f32 = splash_registry_format_by_gguf(b->r, SPLASH_DTYPE_F32);
    for (size_t i = 0; i < b->own->n; i++) {
        struct st_tensor *t = b->own->t[i];
        /* the router: a matrix the family takes quantized but never in F16 */
        int router = (d->accept & SPLASH_ACCEPT_QUANT) && !(d->accept & SPLASH_ACCEPT_F16);
        if (strcmp(t->name, d->name) || !t->info.format || !t->info.format->to_float ||
            (t->info.format->flags & SPLASH_FORMAT_FLOAT) ||
            (!(b->flags & SPLASH_ST_DECODE_F32) &&
             !splash_decl_accepts(d->accept, f32, SPLASH_DTYPE_F32)))
            continue;
        if (!(b->flags & SPLASH_ST_DECODE_F32) && !router &&
            splash_decl_accepts(d->accept, t->info.format, t->info.dtype))
            continue;
        int64_t n = elems(&t->info);
        float *v = NULL;
        struct splash_err ignored;
        if (t->deferred && owner_realize(b->own, &t->info, &ignored))
            return; /* model-check then names the type */
        if (t->info.data) {
            if (!(v = malloc((size_t)n * sizeof *v)))
                return; /* model-check then names the type */
            t->info.format->to_float(t->info.data, v, n);
        }
        buf_free(t);
        t->buf = v;
        t->info.data = v;
        t->info.n_bytes = (uint64_t)n * 4;
        set_format(b, t, NULL, SPLASH_DTYPE_F32);
    }
}

static enum splash_status build_tensors(struct build *b, struct splash_err *err)
{
    const struct splash_meta_api *api = b->api;
    b->prefix = NULL;
    for (const char *const *p = st_model_prefixes; *p && !b->prefix; p++)
        if (src_find(b, "%sembed_tokens.weight", *p))
            b->prefix = *p;
    if (!b->prefix)
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND,
                              "%s: no embed_tokens.weight under any model prefix (%s...)",
                              api->path(b->src), st_model_prefixes[0]);
    enum splash_status st;
    for (size_t i = 0; i < st_n_global_rules; i++)
        if ((st = apply_rule(b, &st_global_rules[i], -1, err)))
            return st;
    for (const char *const *h = st_head_names; *h; h++)
        if (src_find(b, "%s.weight", *h)) {
            if ((st = linear(b, *h, "output.weight", ST_PERM_NONE, err)))
                return st;
            break;
        }
    for (int64_t il = 0; il < b->n_layers; il++)
        for (size_t i = 0; i < st_n_layer_rules; i++)
            if ((st = apply_rule(b, &st_layer_rules[i], il, err)))
                return st;
    return SPLASH_OK;
}

static enum splash_status open_keys(struct build *b, const char *dir, const json_t *config,
                                    struct splash_err *err)
{
    const char *arch = NULL;
    enum splash_status st = arch_of(b, config, &arch, err);
    if (st)
        return st;
    struct splash_gguf_writer *w = splash_gguf_writer_create();
    if (!w)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    void *image = NULL;
    size_t size = 0;
    struct splash_gguf *g = NULL;
    if (!(st = st_config_keys(b->text, arch, dir, w, err)) &&
        !(st = splash_gguf_writer_write_buffer(w, &image, &size, err)) &&
        !(st = splash_gguf_parse_buffer(image, size, dir, SPLASH_GGUF_HEADERS_ONLY, &g, err)))
        st = splash_meta_from_gguf(g, dir, &b->out, err);
    free(image);
    splash_gguf_writer_destroy(w);
    return st;
}

/* ---- stacked experts imported when bound ---------------------------------------------- */

static struct st_tensor *owned(const struct st_owner *o, const struct splash_tensor_info *info)
{
    for (size_t i = 0; i < o->n; i++)
        if (&o->t[i]->info == info)
            return o->t[i];
    return NULL;
}

static int owner_deferred(void *owner_data, const struct splash_tensor_info *info)
{
    const struct st_tensor *t = owned(owner_data, info);
    return t && t->deferred && !t->info.data;
}

/* The whole stack imported from its planes into a region of its own (as the open would
 * have), their source pages dropped after. */
static enum splash_status owner_realize(void *owner_data, const struct splash_tensor_info *info,
                                        struct splash_err *err)
{
    struct st_owner *o = owner_data;
    struct st_tensor *t = owned(o, info);
    if (!t || !t->deferred || t->info.data)
        return SPLASH_OK;
    const struct splash_tensor_info *const *pl = t->plane;
    if (!region_alloc(t))
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for %s", t->name);
    struct splash_planes planes = {
        .rows = t->plane_rows * t->info.ne[2],
        .cols = t->info.ne[0],
        .codes = pl[0]->data,
        .codes_dtype = pl[0]->dtype,
        .scales = pl[1] ? pl[1]->data : NULL,
        .scales_dtype = pl[1] ? pl[1]->dtype : 0,
        .biases = pl[2] ? pl[2]->data : NULL,
        .biases_dtype = pl[2] ? pl[2]->dtype : 0,
        .global_scale = t->plane_g,
    };
    struct splash_err why = {{0}}; /* not err itself: the message is printed into it */
    enum splash_status st = t->info.format->import_planes(&planes, t->buf, &why);
    if (st) {
        buf_free(t);
        return splash_err_set(err, st, "%s: %s: %s", splash_safetensors_shard_name(o->src, pl[0]),
                              pl[0]->name, why.msg);
    }
    for (int i = 0; i < 3; i++)
        if (pl[i] && pl[i]->data)
            splash_file_map_drop(pl[i]->data, pl[i]->n_bytes);
    t->info.data = t->buf;
    return SPLASH_OK;
}

enum splash_status splash_st_target_open(const struct splash_registry *r, const char *dir,
                                         unsigned flags, struct splash_meta **out,
                                         struct splash_err *err)
{
    struct build b = {.r = r, .api = splash_meta_api_get(), .flags = flags};
    int kind = 0;
    /* the quantization rules model-check applies, then the shards (headers checked) */
    enum splash_status st = splash_check_checkpoint(dir, &kind, err);
    if (st)
        return st;
    b.kind = kind;
    if ((st = splash_safetensors_open_model(
             dir, flags & SPLASH_ST_HEADERS_ONLY ? SPLASH_SAFETENSORS_HEADERS_ONLY : 0, &b.src,
             err)))
        return st;
    const json_t *config = b.src->config;
    b.text = json_object_get(config, "text_config");
    if (!json_is_object(b.text))
        b.text = config;
    b.quant = json_object_get(config, "quantization");
    if (!b.quant)
        b.quant = json_object_get(config, "quantization_config");
    /* mlx-lm bakes the +1 into zero-centred norms; transformers' exports (Model Optimizer,
     * compressed-tensors) keep them 1 below. Zero-centred norms come with the Gated DeltaNet
     * trunk (its config names value heads). */
    b.zero_centred = kind != SPLASH_CHECKPOINT_MLX && json_object_get(b.text, "linear_num_value_heads");
    b.n_layers = text_int(b.text, "num_hidden_layers");
    b.hk = text_int(b.text, "linear_num_key_heads");
    b.hv = text_int(b.text, "linear_num_value_heads");
    b.dk = text_int(b.text, "linear_key_head_dim");
    b.dv = text_int(b.text, "linear_value_head_dim");
    b.n_experts = text_int(b.text, "num_experts");
    if (b.hk < 1 || b.hv < 1 || b.hv % b.hk)
        b.hk = b.hv = 1; /* no value heads to reorder (the family checks the sizes) */
    if (b.n_layers < 0 || b.n_layers > 4096) {
        splash_meta_close(b.src);
        return splash_err_set(err, SPLASH_ERR_INVALID, "config.json: num_hidden_layers %lld",
                              (long long)b.n_layers);
    }
    if ((st = open_keys(&b, dir, config, err))) {
        splash_meta_close(b.src);
        return st;
    }
    if (!(b.own = calloc(1, sizeof *b.own))) {
        splash_meta_close(b.src);
        splash_meta_close(b.out);
        return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory");
    }
    b.own->src = b.src;
    b.out->owner_data = b.own;
    b.out->owner_free = owner_free;
    b.out->deferred = owner_deferred;
    b.out->realize = owner_realize;
    if ((st = build_tensors(&b, err)))
        goto fail;
    const struct splash_family_plugin *f;
    struct splash_family_verdict v;
    struct splash_err ignored;
    /* a config the family refuses is model-check's to report, with the family's words */
    if (splash_family_select(r, b.out, &f, &v, &ignored) == SPLASH_OK &&
        (st = splash_family_declare_tensors(r, f, b.out, fit_roles, &b, err)))
        goto fail;
    *out = b.out;
    return SPLASH_OK;
fail:
    splash_meta_close(b.out);
    return st;
}

enum splash_status splash_st_expert_planes(const struct splash_meta *m, const char *name,
                                           struct splash_expert_planes *out, struct splash_err *err)
{
    memset(out, 0, sizeof *out);
    const struct st_tensor *t = NULL;
    if (m->owner_free == owner_free) {
        const struct st_owner *o = m->owner_data;
        for (size_t i = 0; i < o->n && !t; i++)
            if (!strcmp(o->t[i]->name, name))
                t = o->t[i];
    }
    if (!t)
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND,
                              "%s: not a tensor imported from a safetensors checkpoint", name);
    if (t->why_not_planes)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: %s", name, t->why_not_planes);
    if (!t->plane[0])
        return splash_err_set(err, SPLASH_ERR_NOT_FOUND,
                              "%s: not stacked experts imported from quantized planes (MLX "
                              "switch_mlp)",
                              name);
    out->format = t->info.format;
    out->experts = t->info.ne[2];
    out->rows = t->plane_rows;
    out->cols = t->info.ne[0];
    out->global_scale = t->plane_g;
    for (int i = 0; i < 3 && t->plane[i]; i++) {
        const struct splash_tensor_info *pl = t->plane[i];
        if (!pl->data || splash_file_map_locate(pl->data, pl->n_bytes, out->path[i],
                                                sizeof out->path[i], &out->off[i]))
            return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                  "%s: its plane %s is not mapped from its shard", name,
                                  pl->name);
        out->name[i] = pl->name;
        out->dtype[i] = pl->dtype;
        out->expert_bytes[i] = pl->n_bytes / (uint64_t)out->experts;
        out->n_planes = i + 1;
    }
    return SPLASH_OK;
}
