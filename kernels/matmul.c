/* Matrix products over a format's kernel rows: activations are quantized to
 * the weight's act_type once per row (by a SIMD quantizer giving the format's own
 * bytes where kernels/matmul_act.h has one), then weight rows are split over the
 * pool and each piece reads its weight rows once for every activation row. */
#include <math.h>
#include <stdio.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/file_map.h"
#include "core/format_links.h"
#include "core/import_mem.h"
#include "core/host_impl.h"
#include "core/load_progress.h"
#include "core/threadpool.h"
#include "kernels/ops.h"
#include "kernels/kernels_impl.h"
#include "kernels/matmul_act.h"

struct splash_weight {
    struct splash_tensor_info t;
    const struct splash_format_type *fmt;
    const struct splash_format_type *act; /* NULL: activations stay F32 */
    const struct splash_kernel_row *row;
    int64_t n_in, n_out, n_experts;
    size_t row_bytes;      /* bytes of one weight row */
    size_t act_row_bytes;  /* bytes of one quantized activation row */
    /* a faster quantizer giving act->from_float's bytes, or NULL */
    void (*act_fast)(const float *x, void *blocks, int64_t n);
    /* activation rows per input row: 2 for a SPLASH_FORMAT_FINE_ACT format (a split Q8_0
     * row, kernels/act_split.c, whose two products are added), else 1 */
    int act_rows;
    /* Load-time repack (format ABI 1.1): the same bytes in the layout the kernels read
     * fastest, made from the mapped rows, whose pages are then dropped. */
    const struct splash_format_type *packed_fmt; /* NULL: the rows are read as stored */
    const struct splash_kernel_row *packed_row;
    _Atomic(void *) packed; /* the image; NULL while released (made again on use) */
    int64_t unit;           /* pieces of the rows start at multiples of this */
    struct splash_weight *next_packed, *prev_packed;
    int refs; /* users of a repacked weight (a draft's head shares its target's), under
                 packed_lock */
    float *scales; /* per expert: the products' per-tensor scale (weight_set_scale); NULL: 1 */
    int streamed;  /* expert_weight_create: rows stay in the file, read through `at` tables */
};

/* Bytes of w's rows (all experts): its mapped tensor's, and its image's. */
static size_t weight_bytes(const struct splash_weight *w)
{
    return w->row_bytes * (size_t)w->n_out * (size_t)w->n_experts;
}

/* Every weight with a repacked image, for splash_matmul_release_images. */
static pthread_mutex_t packed_lock = PTHREAD_MUTEX_INITIALIZER;
static struct splash_weight *packed_list;

/* The repacked format w's rows go to, when its kernels have a SIMD row for this CPU (a
 * scalar-only repack would only cost memory traffic); NULL otherwise. */
static const struct splash_format_type *repack_target(const struct splash_format_type *fmt,
                                                      const struct splash_kernel_row **row)
{
    if (!fmt->repack_to || !fmt->repack || getenv("SPLASH_NO_REPACK"))
        return NULL;
    const struct splash_format_type *to = splash_format_links_of(fmt)->repack;
    if (!to || !(to->flags & SPLASH_FORMAT_REPACKED) || !to->row_group)
        return NULL;
    *row = splash_format_pick_row(to, splash_cpu_features());
    if (!*row || *row == &to->rows[to->n_rows - 1] || !(*row)->mul_rows)
        return NULL;
    return to;
}

/* Repacks run on a pool of their own (weights are made before the engine's pool runs
 * anything), created on the first large one; its idle workers sleep. */
static pthread_once_t repack_pool_once = PTHREAD_ONCE_INIT;
static struct splash_pool *repack_pool;

static void repack_pool_create(void)
{
    repack_pool = splash_pool_create(0);
}

/* Weights below this repack on the calling thread. */
#define REPACK_PARALLEL_BYTES (4u << 20)

struct repack_task {
    const struct splash_weight *w;
    char *img;
    size_t expert_bytes;
    int64_t groups; /* per expert, the last one maybe partial */
};

/* Pieces of whole row groups: the image keeps each group's bytes where the plain rows
 * were, so any run of groups (with the tail at an expert's end) repacks on its own. */
static void repack_groups(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct repack_task *t = ctx;
    const struct splash_weight *w = t->w;
    const int64_t rg = w->packed_fmt->row_group;
    for (int64_t u = begin; u < end;) {
        const int64_t e = u / t->groups, g0 = u % t->groups;
        const int64_t g1 = end - e * t->groups < t->groups ? end - e * t->groups : t->groups;
        const int64_t r0 = g0 * rg, r1 = g1 * rg < w->n_out ? g1 * rg : w->n_out;
        const size_t off = (size_t)e * t->expert_bytes + (size_t)r0 * w->row_bytes;
        w->fmt->repack(w->n_in, (const char *)w->t.data + off, r1 - r0, t->img + off);
        u = e * t->groups + g1;
    }
}

/* Makes w's image if it has none; the source pages of a file mapping, or of an import
 * region handed over to this weight alone, are given back after. */
static void *packed_image(struct splash_weight *w)
{
    void *img = atomic_load_explicit(&w->packed, memory_order_acquire);
    if (img || !w->packed_fmt)
        return img;
    pthread_mutex_lock(&packed_lock);
    img = atomic_load_explicit(&w->packed, memory_order_relaxed);
    if (!img) {
        const size_t expert_bytes = w->row_bytes * (size_t)w->n_out;
        const size_t total = weight_bytes(w);
        img = splash_alloc_aligned(64, total);
        if (img) {
            const int64_t rg = w->packed_fmt->row_group;
            struct repack_task t = {.w = w, .img = img, .expert_bytes = expert_bytes,
                                    .groups = (w->n_out + rg - 1) / rg};
            const int64_t units = t.groups * w->n_experts;
            if (total >= REPACK_PARALLEL_BYTES)
                pthread_once(&repack_pool_once, repack_pool_create);
            if (repack_pool && total >= REPACK_PARALLEL_BYTES)
                splash_pool_parallel_for(repack_pool, units, 1, repack_groups, &t);
            else
                repack_groups(&t, 0, units, 0);
            splash_file_map_drop(w->t.data, total);
            splash_import_drop(w->t.data, total); /* when tensor_bind handed it over */
            atomic_store_explicit(&w->packed, img, memory_order_release);
        }
    }
    pthread_mutex_unlock(&packed_lock);
    return img;
}

size_t splash_matmul_release_images(void)
{
    size_t released = 0;
    pthread_mutex_lock(&packed_lock);
    for (struct splash_weight *w = packed_list; w; w = w->next_packed) {
        /* an import's rows whose pages were given back cannot make the image again */
        if (splash_import_dropped(w->t.data, weight_bytes(w)))
            continue;
        void *img = atomic_exchange(&w->packed, NULL);
        if (img) {
            splash_free_aligned(img);
            released += weight_bytes(w);
        }
    }
    pthread_mutex_unlock(&packed_lock);
    return released;
}

static void (*fast_quantizer(const struct splash_format_type *act))(const float *, void *, int64_t)
{
#if defined(__x86_64__)
    const uint64_t avx512 = SPLASH_CPU_AVX512F | SPLASH_CPU_AVX512BW | SPLASH_CPU_AVX512VL |
                            SPLASH_CPU_AVX512DQ;
    if (act->gguf_type == MATMUL_Q8K_GGUF_TYPE && act->block_elems == 256 &&
        act->block_bytes == MATMUL_Q8K_BYTES && (splash_cpu_features() & avx512) == avx512)
        return splash_act_q8k_avx512;
#elif defined(__aarch64__)
    if (act->gguf_type == MATMUL_Q8K_GGUF_TYPE && act->block_elems == 256 &&
        act->block_bytes == MATMUL_Q8K_BYTES && (splash_cpu_features() & SPLASH_CPU_NEON))
        return splash_act_q8k_neon;
    if (act->gguf_type == MATMUL_Q80_GGUF_TYPE && act->block_elems == 32 &&
        act->block_bytes == MATMUL_Q80_BYTES && (splash_cpu_features() & SPLASH_CPU_NEON))
        return splash_act_q8_0_neon;
#else
    (void)act;
#endif
    return NULL;
}

/* Layers whose SPLASH_FORMAT_FINE_ACT weights take split activations: the first ones,
 * whose rounding every later layer amplifies (the random MoE checkpoint: Q8_0 in every
 * layer 51/64 argmax, F32 activations in layers 0-1 alone 62/64), at a small share of a
 * deep model's products (split ones in every layer cost 2x: prefill 0.48x of Q4_0's). */
#define FINE_ACT_LAYERS 2

static int fine_act_layer(const char *name)
{
    int il;
    return name && sscanf(name, "blk.%d.", &il) == 1 && il >= 0 && il < FINE_ACT_LAYERS;
}

static enum splash_status weight_make(const struct splash_tensor_info *t, int streamed,
                                      struct splash_weight **out, struct splash_err *err)
{
    const struct splash_format_type *fmt = t->format;
    if (!fmt)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: no format plugin decodes %s",
                              t->name, t->type_name ? t->type_name : "its type");
    if (!fmt->rows || !fmt->n_rows)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED, "%s: format %s has no kernel rows", t->name,
                              fmt->name);
    /* streamed experts' rows are read from their files (an import's never made) */
    if (!t->data && !streamed)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: tensor data is not mapped", t->name);
    /* an import's rows given back after their repack (tensor_bind): only a weight sharing
     * that image may still stand over them */
    const int gone = splash_import_dropped(t->data, t->n_bytes);
    struct splash_weight *w = calloc(1, sizeof *w);
    if (!w)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory", t->name);
    w->t = *t;
    w->fmt = fmt;
    w->n_in = t->ne[0];
    w->n_out = t->ne[1];
    w->n_experts = t->n_dims >= 3 ? t->ne[2] : 1;
    w->row_bytes = splash_format_row_bytes(fmt, w->n_in);
    w->row = splash_format_pick_row(fmt, splash_cpu_features());
    if (fmt->act_type && strcmp(fmt->act_type, "F32") != 0) {
        w->act = splash_format_links_of(fmt)->act;
        if (!w->act || !w->act->from_float) {
            free(w);
            return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                                  "%s: activation format %s for %s is not available", t->name,
                                  fmt->act_type, fmt->name);
        }
        w->act_row_bytes = splash_format_row_bytes(w->act, w->n_in);
        w->act_fast = fast_quantizer(w->act);
        if ((fmt->flags & SPLASH_FORMAT_FINE_ACT) && fine_act_layer(t->name) &&
            w->act->gguf_type == MATMUL_Q80_GGUF_TYPE &&
            w->act->block_elems == SPLASH_QK8_0 && w->act->block_bytes == MATMUL_Q80_BYTES)
            w->act_rows = 2;
    } else {
        w->act_row_bytes = (size_t)w->n_in * sizeof(float);
    }
    if (!w->row_bytes || !w->act_row_bytes) {
        free(w);
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: %lld inputs are not whole %s blocks",
                              t->name, (long long)t->ne[0], fmt->name);
    }
    if (!w->act_rows)
        w->act_rows = 1;
    w->unit = 1;
    w->packed_fmt = repack_target(fmt, &w->packed_row);
    w->streamed = streamed;
    if (gone && (streamed || !w->packed_fmt)) {
        free(w);
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: its rows were given back after their repack; only the "
                              "repacked weight over them can be used",
                              t->name);
    }
    if (streamed) {
        /* no image: expert_pack writes each expert's into the slot that holds it */
        if (w->packed_fmt)
            w->unit = w->packed_fmt->row_group;
        *out = w;
        return SPLASH_OK;
    }
    splash_load_progress_add(t->n_bytes);
    if (w->packed_fmt) {
        /* a second weight over the same mapped rows (the draft's head over its target's)
         * shares the first one's image instead of repacking a copy; one with a per-tensor
         * scale is its owner's alone */
        pthread_mutex_lock(&packed_lock);
        for (struct splash_weight *s = packed_list; s; s = s->next_packed)
            if (s->t.data == t->data && s->fmt == fmt && s->packed_fmt == w->packed_fmt &&
                s->n_in == w->n_in && s->n_out == w->n_out && s->n_experts == w->n_experts &&
                !s->scales) {
                s->refs++;
                pthread_mutex_unlock(&packed_lock);
                free(w);
                *out = s;
                return SPLASH_OK;
            }
        pthread_mutex_unlock(&packed_lock);
        if (gone) {
            free(w);
            return splash_err_set(err, SPLASH_ERR_INVALID,
                                  "%s: its rows were given back after their repack, and no "
                                  "weight of this shape holds their image",
                                  t->name);
        }
        w->unit = w->packed_fmt->row_group;
        if (!packed_image(w)) {
            free(w);
            return splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory repacking %s",
                                  t->name, fmt->name);
        }
        pthread_mutex_lock(&packed_lock);
        w->refs = 1;
        w->next_packed = packed_list;
        if (packed_list)
            packed_list->prev_packed = w;
        packed_list = w;
        pthread_mutex_unlock(&packed_lock);
    }
    *out = w;
    return SPLASH_OK;
}

enum splash_status kernel_weight_create(const struct splash_tensor_info *t,
                                        struct splash_weight **out, struct splash_err *err)
{
    return weight_make(t, 0, out, err);
}

enum splash_status kernel_expert_weight_create(const struct splash_tensor_info *t,
                                               struct splash_weight **out, struct splash_err *err)
{
    if (t->n_dims < 3)
        return splash_err_set(err, SPLASH_ERR_INVALID, "%s: not an expert stack (%d dims)",
                              t->name, t->n_dims);
    return weight_make(t, 1, out, err);
}

void kernel_expert_pack(const struct splash_weight *w, const void *src, void *dst)
{
    const size_t expert_bytes = w->row_bytes * (size_t)w->n_out;
    if (!w->packed_fmt) {
        memcpy(dst, src, expert_bytes);
        return;
    }
    /* one call over the expert's rows, as the image's repack gives a piece of whole
     * groups (the last maybe partial) */
    w->fmt->repack(w->n_in, src, w->n_out, dst);
}

void kernel_weight_destroy(struct splash_weight *w)
{
    if (!w)
        return;
    if (w->packed_fmt && !w->streamed) {
        pthread_mutex_lock(&packed_lock);
        if (--w->refs > 0) { /* another user holds it */
            pthread_mutex_unlock(&packed_lock);
            return;
        }
        if (w->prev_packed)
            w->prev_packed->next_packed = w->next_packed;
        else
            packed_list = w->next_packed;
        if (w->next_packed)
            w->next_packed->prev_packed = w->prev_packed;
        pthread_mutex_unlock(&packed_lock);
        splash_free_aligned(atomic_load(&w->packed));
    }
    free(w->scales);
    free(w);
}

enum splash_status kernel_weight_set_scale(struct splash_weight *w, const float *scales, int64_t n,
                                           struct splash_err *err)
{
    if (w->packed_fmt && w->refs > 1)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: its repacked rows are shared by another weight over the same "
                              "tensor; a scale would apply to both",
                              w->t.name);
    if (n != 1 && n != w->n_experts)
        return splash_err_set(err, SPLASH_ERR_INVALID,
                              "%s: %lld scale values for %lld experts (1 or one per expert)",
                              w->t.name, (long long)n, (long long)w->n_experts);
    float *s = malloc((size_t)w->n_experts * sizeof *s);
    if (!s)
        return splash_err_set(err, SPLASH_ERR_NOMEM, "%s: out of memory", w->t.name);
    for (int64_t e = 0; e < w->n_experts; e++) {
        s[e] = scales[n == 1 ? 0 : e];
        if (!isfinite(s[e])) {
            free(s);
            return splash_err_set(err, SPLASH_ERR_INVALID, "%s: scale %lld is not finite",
                                  w->t.name, (long long)(n == 1 ? 0 : e));
        }
    }
    free(w->scales);
    w->scales = s;
    return SPLASH_OK;
}

/* Per-thread scratch for quantized activations, grown on demand. */
static _Thread_local void *scratch;
static _Thread_local size_t scratch_size;

/* Per-thread products of split activation rows before their pairs are added. */
static _Thread_local void *split_out;
static _Thread_local size_t split_out_size;

/* The calling thread's expert buffers, grown on demand. */
static _Thread_local struct {
    void *order, *xs, *ys, *groups;
    size_t order_size, xs_size, ys_size, groups_size;
} expert_bufs;

/* A thread's buffers go with it: the key's destructor runs as the thread ends (its
 * thread-local variables still readable), since an ended thread's buffers are lost. */
static pthread_key_t thread_bufs_key;
static pthread_once_t thread_bufs_once = PTHREAD_ONCE_INIT;

static void thread_bufs_free(void *unused)
{
    (void)unused;
    splash_free_aligned(scratch);
    splash_free_aligned(split_out);
    split_out = NULL;
    split_out_size = 0;
    splash_free_aligned(expert_bufs.order);
    splash_free_aligned(expert_bufs.xs);
    splash_free_aligned(expert_bufs.ys);
    splash_free_aligned(expert_bufs.groups);
    scratch = NULL;
    scratch_size = 0;
    memset(&expert_bufs, 0, sizeof expert_bufs);
}

static void thread_bufs_key_make(void)
{
    pthread_key_create(&thread_bufs_key, thread_bufs_free);
}

/* Registers the calling thread's buffers for freeing when it ends (once per thread). */
static void thread_bufs_held(void)
{
    static _Thread_local int held;
    if (held)
        return;
    pthread_once(&thread_bufs_once, thread_bufs_key_make);
    held = pthread_setspecific(thread_bufs_key, &held) == 0;
}

static void *scratch_get(size_t size)
{
    thread_bufs_held();
    if (size > scratch_size) {
        splash_free_aligned(scratch);
        scratch = splash_alloc_aligned(64, size);
        scratch_size = scratch ? size : 0;
    }
    return scratch;
}

struct quant_task {
    const struct splash_weight *w;
    const float *x;
    void *act;
};

static void quantize_rows(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct quant_task *q = ctx;
    const struct splash_weight *w = q->w;
    for (int64_t r = begin; r < end; r++) {
        const float *x = q->x + r * w->n_in;
        void *out = (char *)q->act + r * w->act_rows * w->act_row_bytes;
        if (w->act_rows == 2)
            splash_act_q8_0_split(x, out, (char *)out + w->act_row_bytes, w->n_in);
        else if (w->act_fast)
            w->act_fast(x, out, w->n_in);
        else
            w->act->from_float(x, out, w->n_in, NULL);
    }
}

/* Activation values below which the rows are quantized on the calling thread: a few
 * microseconds of work, less than handing a section to the pool costs (a worker's
 * wake-up; on a busy machine its time slice). A verify pass's 8 rows stay here. */
#define ACT_PARALLEL_MIN_VALUES 65536

/* Quantizes n activation rows (or points at the floats) for weight w: w->act_rows
 * quantized rows each. */
static const void *prepare_act(struct splash_pool *pool, const struct splash_weight *w,
                               const float *x, int64_t n)
{
    if (!w->act)
        return x;
    void *act = scratch_get(w->act_row_bytes * (size_t)w->act_rows * (size_t)n);
    struct quant_task q = {.w = w, .x = x, .act = act};
    if (n >= 4 && n * w->n_in >= ACT_PARALLEL_MIN_VALUES)
        splash_pool_parallel_for(pool, n, 1, quantize_rows, &q);
    else
        quantize_rows(&q, 0, n, 0);
    return act;
}

struct mm_task {
    const struct splash_weight *w;
    const char *wdata;    /* first row of the matrix (expert) */
    const char *act;
    int64_t n_act;
    float *y;
    size_t y_stride;
    float scale; /* the products' per-tensor scale (0 taken as 1) */
};

#define ACT_TILE 8
/* bytes of weight rows every activation tile passes over before the next rows: they
 * stay in L1/L2 between tiles instead of streaming from memory once per tile */
#define WEIGHT_BLOCK_BYTES (32 << 10)

/* Activation rows a repacked kernel takes per call: they stay in L2 while it walks the
 * weight rows once, one interleaved group at a time from L1. */
#define PACKED_ACT_BLOCK 128

/* Rows [r0, r1) of every activation row's products times the per-tensor scale. */
static void scale_piece(const struct mm_task *m, int64_t r0, int64_t r1)
{
    if (m->scale == 0.0f || m->scale == 1.0f)
        return;
    for (int64_t j = 0; j < m->n_act; j++) {
        float *y = m->y + (size_t)j * m->y_stride;
        for (int64_t r = r0; r < r1; r++)
            y[r] *= m->scale;
    }
}

static void mm_rows(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct mm_task *m = ctx;
    const struct splash_weight *w = m->w;
    if (w->packed_fmt) {
        /* pieces count groups of w->unit rows */
        begin *= w->unit;
        end = end * w->unit < w->n_out ? end * w->unit : w->n_out;
        for (int64_t j = 0; j < m->n_act; j += PACKED_ACT_BLOCK) {
            int64_t nj = m->n_act - j < PACKED_ACT_BLOCK ? m->n_act - j : PACKED_ACT_BLOCK;
            w->packed_row->mul_rows(w->n_in, m->wdata + (size_t)begin * w->row_bytes,
                                    w->row_bytes, end - begin,
                                    m->act + (size_t)j * w->act_row_bytes, w->act_row_bytes, nj,
                                    m->y + (size_t)j * m->y_stride + (size_t)begin, m->y_stride);
        }
        scale_piece(m, begin, end);
        return;
    }
    int64_t block = end - begin;
    if (m->n_act > ACT_TILE) {
        block = (int64_t)(WEIGHT_BLOCK_BYTES / w->row_bytes) & ~(int64_t)3;
        if (block < 4)
            block = 4;
    }
    for (int64_t r0 = begin; r0 < end; r0 += block) {
        int64_t nr = end - r0 < block ? end - r0 : block;
        for (int64_t j = 0; j < m->n_act; j += ACT_TILE) {
            int64_t nj = m->n_act - j < ACT_TILE ? m->n_act - j : ACT_TILE;
            splash_format_mul_rows(w->row, w->n_in, m->wdata + (size_t)r0 * w->row_bytes,
                                   w->row_bytes, nr, m->act + (size_t)j * w->act_row_bytes,
                                   w->act_row_bytes, nj, m->y + (size_t)j * m->y_stride + (size_t)r0,
                                   m->y_stride);
        }
    }
    scale_piece(m, begin, end);
}

/* w read as stored, for a call that could not make its image again. The view lives in
 * the calling thread while its parallel section runs. */
static const struct splash_weight *plain_view(const struct splash_weight *w)
{
    static _Thread_local struct splash_weight view;
    memcpy(&view, w, sizeof view);
    view.packed_fmt = NULL;
    view.packed_row = NULL;
    view.unit = 1;
    return &view;
}

/* Room for the 2 n rows of products of n split activation rows (a thread's buffer). */
static float *split_products(int64_t n, int64_t n_out)
{
    thread_bufs_held();
    const size_t need = 2 * (size_t)n * (size_t)n_out * sizeof(float);
    if (need > split_out_size) {
        splash_free_aligned(split_out);
        split_out = splash_alloc_aligned(64, need);
        split_out_size = split_out ? need : 0;
    }
    if (!split_out)
        splash_log(SPLASH_LOG_ERROR, "kernels", "out of memory for %lld split products",
                   (long long)n);
    return split_out;
}

/* y row j = the high row's products + the low row's (rows 2j, 2j + 1 of ys); y may be ys. */
static void split_add(const float *ys, int64_t n, int64_t n_out, float *y)
{
    for (int64_t j = 0; j < n; j++) {
        const float *hi = ys + 2 * j * n_out, *lo = hi + n_out;
        float *o = y + j * n_out;
        for (int64_t r = 0; r < n_out; r++)
            o[r] = hi[r] + lo[r];
    }
}

void kernel_matmul(struct splash_pool *pool, const struct splash_weight *w, const float *x,
                   int64_t n, float *y)
{
    if (n <= 0)
        return;
    const void *act = prepare_act(pool, w, x, n);
    const void *wdata = w->packed_fmt ? packed_image((struct splash_weight *)w) : w->t.data;
    if (!wdata) /* out of memory making the image again: read the rows as stored */
        wdata = w->t.data, w = plain_view(w);
    float *ys = w->act_rows == 1 ? y : split_products(n, w->n_out);
    if (!ys)
        return;
    struct mm_task m = {.w = w, .wdata = wdata, .act = act, .n_act = n * w->act_rows, .y = ys,
                        .y_stride = (size_t)w->n_out, .scale = w->scales ? w->scales[0] : 1.0f};
    /* chunks of at least ~64k multiply-adds, so a small product is not split into tasks
     * that cost more to hand out than to run */
    int64_t macs = w->n_in * n;
    int64_t grain = macs >= 4096 ? 16 : 65536 / (macs > 0 ? macs : 1);
    int64_t units = (w->n_out + w->unit - 1) / w->unit;
    grain = (grain + w->unit - 1) / w->unit;
    splash_pool_parallel_for(pool, units, grain, mm_rows, &m);
    if (ys != y)
        split_add(ys, n, w->n_out, y);
}

/* Weights one matmul_many section takes; more are run in several sections. */
#define MANY_MAX 8

struct many_task {
    int n_w;
    struct mm_task m[MANY_MAX];
    int64_t first[MANY_MAX + 1]; /* weight i's pieces are [first[i], first[i + 1]) */
};

static void many_rows(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct many_task *t = ctx;
    for (int i = 0; i < t->n_w; i++) {
        int64_t b = begin > t->first[i] ? begin : t->first[i];
        int64_t e = end < t->first[i + 1] ? end : t->first[i + 1];
        if (b < e)
            mm_rows((void *)&t->m[i], b - t->first[i], e - t->first[i], thread);
    }
}

void kernel_matmul_many(struct splash_pool *pool, const struct splash_weight *const *ws, int n_w,
                        const float *x, int64_t n, float *const *y)
{
    if (n <= 0)
        return;
    /* one quantization serves weights of the same activation format and width (and a
     * weight whose image cannot be made again takes matmul's way round) */
    for (int i = 0; i < n_w; i++)
        if (ws[i]->act != ws[0]->act || ws[i]->n_in != ws[0]->n_in ||
            ws[i]->act_fast != ws[0]->act_fast || ws[i]->act_rows != ws[0]->act_rows ||
            (ws[i]->packed_fmt && !packed_image((struct splash_weight *)ws[i]))) {
            for (int j = 0; j < n_w; j++)
                kernel_matmul(pool, ws[j], x, n, y[j]);
            return;
        }
    for (int i0 = 0; i0 < n_w; i0 += MANY_MAX) {
        struct many_task t = {.n_w = n_w - i0 < MANY_MAX ? n_w - i0 : MANY_MAX};
        const void *act = prepare_act(pool, ws[i0], x, n);
        const int k = ws[i0]->act_rows;
        float *ys = NULL;
        if (k > 1) { /* one buffer for every weight's split products */
            int64_t rows = 0;
            for (int i = 0; i < t.n_w; i++)
                rows += ws[i0 + i]->n_out;
            if (!(ys = split_products(n, rows)))
                return;
        }
        int64_t grain = 1;
        for (int i = 0; i < t.n_w; i++) {
            const struct splash_weight *w = ws[i0 + i];
            const void *wdata = w->packed_fmt ? atomic_load(&w->packed) : w->t.data;
            t.m[i] = (struct mm_task){.w = w, .wdata = wdata, .act = act, .n_act = n * k,
                                      .y = k > 1 ? ys : y[i0 + i], .y_stride = (size_t)w->n_out,
                                      .scale = w->scales ? w->scales[0] : 1.0f};
            t.first[i + 1] = t.first[i] + (w->n_out + w->unit - 1) / w->unit;
            int64_t macs = w->n_in * n;
            int64_t g = macs >= 4096 ? 16 : 65536 / (macs > 0 ? macs : 1);
            g = (g + w->unit - 1) / w->unit;
            if (g > grain)
                grain = g;
            if (k > 1)
                ys += 2 * n * w->n_out;
        }
        splash_pool_parallel_for(pool, t.first[t.n_w], grain, many_rows, &t);
        for (int i = 0; k > 1 && i < t.n_w; i++)
            split_add(t.m[i].y, n, ws[i0 + i]->n_out, y[i0 + i]);
    }
}

static int cmp_by_expert(const void *a, const void *b, void *ctx)
{
    const int32_t *expert = ctx;
    int32_t ea = expert[*(const int64_t *)a], eb = expert[*(const int64_t *)b];
    return ea < eb ? -1 : ea > eb;
}

#define EXPERT_BLOCK_ROWS 64

struct expert_group {
    int32_t expert;
    int64_t first, n;    /* its rows in the sorted activations */
};

struct experts_task {
    const struct splash_weight *w;
    const char *wdata; /* the stack's rows: the repacked image or as stored */
    const void *const *at; /* or each expert's rows where it lies (matmul_experts_at) */
    const char *act;
    float *ys;
    const struct expert_group *groups;
    int64_t n_groups, block, blocks_per_group;
};

static void expert_pieces(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct experts_task *t = ctx;
    const struct splash_weight *w = t->w;
    size_t expert_bytes = w->row_bytes * (size_t)w->n_out;
    for (int64_t p = begin; p < end; p++) {
        const struct expert_group *g = &t->groups[p / t->blocks_per_group];
        int64_t row0 = (p % t->blocks_per_group) * t->block;
        int64_t row1 = row0 + t->block < w->n_out ? row0 + t->block : w->n_out;
        struct mm_task m = {.w = w,
                            .wdata = t->at ? (const char *)t->at[g->expert]
                                           : t->wdata + (size_t)g->expert * expert_bytes,
                            .act = t->act + (size_t)(g->first * w->act_rows) * w->act_row_bytes,
                            .n_act = g->n * w->act_rows,
                            .y = t->ys + g->first * w->act_rows * w->n_out,
                            .y_stride = (size_t)w->n_out,
                            .scale = w->scales ? w->scales[g->expert] : 1.0f};
        /* block is a multiple of w->unit, the unit mm_rows counts in */
        mm_rows(&m, row0 / w->unit, (row1 + w->unit - 1) / w->unit, thread);
    }
}

static void *grow(void **buf, size_t *size, size_t need)
{
    thread_bufs_held();
    if (need > *size) {
        splash_free_aligned(*buf);
        *buf = splash_alloc_aligned(64, need);
        *size = *buf ? need : 0;
    }
    return *buf;
}

static void experts_run(struct splash_pool *pool, const struct splash_weight *w,
                        const void *const *at, const float *x, const int32_t *expert, int64_t n,
                        float *y)
{
    if (n <= 0)
        return;
    /* order rows by expert, gather them, run each expert's rows as one matmul; the
     * buffers are kept between calls (a prefill chunk's are tens of MB, and fresh ones
     * would be faulted in page by page every layer) */
    int64_t *order = grow(&expert_bufs.order, &expert_bufs.order_size, (size_t)n * sizeof *order);
    float *xs = grow(&expert_bufs.xs, &expert_bufs.xs_size,
                     (size_t)n * (size_t)w->n_in * sizeof *xs);
    float *ys = grow(&expert_bufs.ys, &expert_bufs.ys_size,
                     (size_t)n * (size_t)w->act_rows * (size_t)w->n_out * sizeof *ys);
    struct expert_group *groups =
        grow(&expert_bufs.groups, &expert_bufs.groups_size, (size_t)n * sizeof *groups);
    if (!order || !xs || !ys || !groups)
        return;
    int64_t m = 0;
    for (int64_t r = 0; r < n; r++)
        if (expert[r] >= 0 && expert[r] < w->n_experts && (!at || at[expert[r]]))
            order[m++] = r;
    qsort_r(order, (size_t)m, sizeof *order, cmp_by_expert, (void *)expert);
    for (int64_t i = 0; i < m; i++)
        memcpy(xs + i * w->n_in, x + order[i] * w->n_in, (size_t)w->n_in * sizeof *xs);
    const void *act = prepare_act(pool, w, xs, m);
    /* one parallel section over (expert, block of weight rows) pieces: a prefill step
     * routes to hundreds of experts, and a section each would cost more to hand out than
     * the small products take */
    int64_t n_groups = 0, pieces = 0;
    const void *wdata = NULL;
    if (!at) {
        wdata = w->packed_fmt && !w->streamed ? packed_image((struct splash_weight *)w)
                                              : w->t.data;
        if (!wdata || w->streamed) /* no image: read the rows as stored */
            wdata = w->t.data, w = plain_view(w);
    }
    int64_t block = (EXPERT_BLOCK_ROWS + w->unit - 1) / w->unit * w->unit;
    if (block > w->n_out)
        block = w->n_out;
    int64_t blocks_per_group = (w->n_out + block - 1) / block;
    for (int64_t i = 0; i < m;) {
        int32_t e = expert[order[i]];
        int64_t j = i;
        while (j < m && expert[order[j]] == e)
            j++;
        groups[n_groups++] = (struct expert_group){.expert = e, .first = i, .n = j - i};
        pieces += blocks_per_group;
        i = j;
    }
    struct experts_task t = {.w = w, .wdata = wdata, .at = at, .act = act, .ys = ys, .groups = groups, .n_groups = n_groups,
                             .block = block, .blocks_per_group = blocks_per_group};
    splash_pool_parallel_for(pool, pieces, 1, expert_pieces, &t);
    if (w->act_rows == 2) /* in place: row i is written after rows 2i, 2i + 1 are read */
        split_add(ys, m, w->n_out, ys);
    for (int64_t i = 0; i < m; i++)
        memcpy(y + order[i] * w->n_out, ys + i * w->n_out, (size_t)w->n_out * sizeof *ys);
}

void kernel_matmul_experts(struct splash_pool *pool, const struct splash_weight *w, const float *x,
                           const int32_t *expert, int64_t n, float *y)
{
    experts_run(pool, w, NULL, x, expert, n, y);
}

void kernel_matmul_experts_at(struct splash_pool *pool, const struct splash_weight *w,
                              const void *const *at, const float *x, const int32_t *expert,
                              int64_t n, float *y)
{
    experts_run(pool, w, at, x, expert, n, y);
}

/* The format bound to t (model-check refuses a model with a tensor no format decodes,
 * so a missing one is a caller's bug: logged, and the rows read as zeros). */
static const struct splash_format_type *tensor_format(const struct splash_tensor_info *t)
{
    if (!t->format)
        splash_log(SPLASH_LOG_ERROR, "kernels", "%s: no format is bound to this tensor", t->name);
    return t->format;
}

void kernel_embed_rows(const struct splash_tensor_info *t, const int32_t *ids, int64_t n, float *out)
{
    const struct splash_format_type *f = tensor_format(t);
    if (!f) {
        memset(out, 0, (size_t)n * (size_t)t->ne[0] * sizeof *out);
        return;
    }
    size_t row_bytes = splash_format_row_bytes(f, t->ne[0]);
    for (int64_t i = 0; i < n; i++)
        f->to_float((const char *)t->data + (size_t)ids[i] * row_bytes, out + i * t->ne[0], t->ne[0]);
}

void kernel_to_float(const struct splash_tensor_info *t, float *out)
{
    const struct splash_format_type *f = tensor_format(t);
    int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    if (!f) {
        memset(out, 0, (size_t)n * sizeof *out);
        return;
    }
    f->to_float(t->data, out, n);
}
