/* The host table: everything a plugin may reach of the core.
 *
 * Plugins never link against core symbols; they call through this table,
 * which the core passes to splash_plugin_entry_v1 and which stays valid for
 * the life of the process. Members are append-only (ABI 1.0 unless marked). */
#ifndef SPLASH_HOST_H
#define SPLASH_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "splash/status.h"

struct splash_format_type;
struct splash_kernels;
struct splash_ssm_kernels;
struct splash_pool;
struct splash_meta;

enum splash_log_level {
    SPLASH_LOG_ERROR = 0,
    SPLASH_LOG_WARN = 1,
    SPLASH_LOG_INFO = 2,
    SPLASH_LOG_DEBUG = 3,
};

/* CPU feature bits reported by host->cpu_features(). */
#define SPLASH_CPU_AVX2 (1ull << 0)
#define SPLASH_CPU_FMA (1ull << 1)
#define SPLASH_CPU_F16C (1ull << 2)
#define SPLASH_CPU_AVX512F (1ull << 3)
#define SPLASH_CPU_AVX512BW (1ull << 4)
#define SPLASH_CPU_AVX512VL (1ull << 5)
#define SPLASH_CPU_AVX512DQ (1ull << 6)
#define SPLASH_CPU_AVX512VNNI (1ull << 7)
#define SPLASH_CPU_AVX512BF16 (1ull << 8)
#define SPLASH_CPU_AVXVNNI (1ull << 9)
#define SPLASH_CPU_AVX512VBMI (1ull << 10)
#define SPLASH_CPU_NEON (1ull << 16)
#define SPLASH_CPU_NEON_DOTPROD (1ull << 17) /* sdot/udot (asimddp) */
#define SPLASH_CPU_NEON_I8MM (1ull << 18)    /* smmla/ummla/usdot */
#define SPLASH_CPU_NEON_BF16 (1ull << 19)    /* bfdot/bfmmla */
#define SPLASH_CPU_SVE (1ull << 20)          /* reported only: no row needs it */

/* Where model metadata came from. */
enum splash_meta_source {
    SPLASH_META_GGUF = 1,   /* keys as the GGUF writes them: "qwen35.block_count" */
    SPLASH_META_CONFIG = 2, /* config.json, dotted paths: "text_config.hidden_size" */
};

/* Element types of tensors as files store them. GGUF tensors carry their GGUF
 * type id (>= 0); safetensors dtypes use the negative ids below. */
enum splash_dtype {
    SPLASH_DTYPE_F32 = 0,
    SPLASH_DTYPE_F16 = 1,
    SPLASH_DTYPE_Q8_0 = 8,
    SPLASH_DTYPE_BF16 = 30,
    SPLASH_DTYPE_ST_F64 = -1,
    SPLASH_DTYPE_ST_I64 = -2,
    SPLASH_DTYPE_ST_I32 = -3,
    SPLASH_DTYPE_ST_I16 = -4,
    SPLASH_DTYPE_ST_I8 = -5,
    SPLASH_DTYPE_ST_U8 = -6,
    SPLASH_DTYPE_ST_U32 = -7,
    SPLASH_DTYPE_ST_U16 = -8,
    SPLASH_DTYPE_ST_U64 = -9,
    SPLASH_DTYPE_ST_BOOL = -10,
    SPLASH_DTYPE_ST_F8_E4M3 = -11,
    SPLASH_DTYPE_ST_F8_E5M2 = -12,
};

/* One tensor as the model files describe it. ne[0] is the fastest-moving
 * dimension (GGUF order: ne[0] = columns of a weight matrix). */
struct splash_tensor_info {
    const char *name;
    int32_t dtype;                  /* enum splash_dtype or a GGUF type id */
    const char *type_name;          /* "Q4_K", "F32", "BF16", "F8_E4M3" */
    int32_t n_dims;
    int64_t ne[4];                  /* unused dims are 1 */
    uint64_t n_bytes;
    const void *data;               /* mapped bytes; NULL when only headers were read */
    const struct splash_format_type *format; /* the format that decodes it, or NULL */
};

/* Read-only access to a model's metadata and tensor directory. Getters return
 * SPLASH_ERR_NOT_FOUND for a missing key and SPLASH_ERR_INVALID for a type
 * mismatch, with err naming the file and key. Integers read from any GGUF
 * integer type that fits; floats from F32/F64 (and integers). */
struct splash_meta_api {
    int (*source)(const struct splash_meta *m);           /* enum splash_meta_source */
    const char *(*path)(const struct splash_meta *m);     /* for messages */
    int (*has)(const struct splash_meta *m, const char *key);
    enum splash_status (*get_i64)(const struct splash_meta *m, const char *key, int64_t *out,
                                  struct splash_err *err);
    enum splash_status (*get_f64)(const struct splash_meta *m, const char *key, double *out,
                                  struct splash_err *err);
    enum splash_status (*get_bool)(const struct splash_meta *m, const char *key, int *out,
                                   struct splash_err *err);
    /* The string stays valid while the model is open. */
    enum splash_status (*get_str)(const struct splash_meta *m, const char *key, const char **out,
                                  struct splash_err *err);
    enum splash_status (*arr_len)(const struct splash_meta *m, const char *key, size_t *out,
                                  struct splash_err *err);
    enum splash_status (*arr_i64)(const struct splash_meta *m, const char *key, size_t i,
                                  int64_t *out, struct splash_err *err);
    enum splash_status (*arr_f64)(const struct splash_meta *m, const char *key, size_t i,
                                  double *out, struct splash_err *err);
    enum splash_status (*arr_str)(const struct splash_meta *m, const char *key, size_t i,
                                  const char **out, struct splash_err *err);
    size_t (*n_tensors)(const struct splash_meta *m);
    /* Index order is the files' order. */
    const struct splash_tensor_info *(*tensor_at)(const struct splash_meta *m, size_t i);
    /* NULL when absent. */
    const struct splash_tensor_info *(*tensor_find)(const struct splash_meta *m, const char *name);

    /* ---- ABI 1.2 ---- */
    /* sizeof(struct splash_meta_api) as the core knows it: a member appended after this
     * one exists when size covers it. */
    uint32_t size;
};

struct splash_host;
struct splash_tensor_decl;

/* A family's declaration list (splash/family.h) hands each entry to emit. */
typedef void (*splash_decl_emit_fn)(void *ctx, const struct splash_tensor_decl *decl);
/* The declaration list itself: every tensor of the model m describes, each emitted once in
 * a fixed order. model NULL: for checking (dst NULL); else the family's model being built,
 * each entry's dst pointing into it. */
typedef enum splash_status (*splash_declare_fn)(const struct splash_host *host,
                                                 const struct splash_meta *m, void *model,
                                                 splash_decl_emit_fn emit, void *ctx,
                                                 struct splash_err *err);

/* (ABI 1.6) A stack of experts as an import reads it (host->expert_planes): expert e's
 * bytes of plane i are expert_bytes[i] bytes at off[i] + e * expert_bytes[i] of path[i].
 * The fields after name[] are the core's recipe for host->expert_import. Fixed for 1.6: a
 * later minor adds an entry point rather than grow it. */
#define SPLASH_EXPERT_MAX_PLANES 3
struct splash_expert_planes {
    int32_t n_planes;
    int64_t experts;
    char path[SPLASH_EXPERT_MAX_PLANES][1024];
    uint64_t off[SPLASH_EXPERT_MAX_PLANES];
    uint64_t expert_bytes[SPLASH_EXPERT_MAX_PLANES];
    const char *name[SPLASH_EXPERT_MAX_PLANES]; /* the planes' tensors (for messages) */
    /* the recipe */
    const struct splash_format_type *format;
    int64_t rows, cols; /* one expert's */
    int32_t dtype[SPLASH_EXPERT_MAX_PLANES];
    double global_scale;
};

/* A range task for the worker pool: process items [begin, end) on thread `thread`. */
typedef void (*splash_range_fn)(void *ctx, int64_t begin, int64_t end, int thread);

struct splash_host {
    uint16_t abi_major;
    uint16_t abi_minor;
    uint32_t size;

    /* Thread-safe; `plugin` names the caller in the line. */
    void (*log)(enum splash_log_level level, const char *plugin, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
    /* align is a power of two >= sizeof(void *); memory is not zeroed. */
    void *(*alloc_aligned)(size_t align, size_t size);
    void (*free_aligned)(void *p);
    /* SPLASH_CPU_* bits this process may use (SPLASH_FORCE_ISA already applied). */
    uint64_t (*cpu_features)(void);

    /* Splits [0, n) into chunks of at least `grain` items over the pool's threads and
     * returns when all are done. Must not be called from inside a pool task. */
    void (*parallel_for)(struct splash_pool *pool, int64_t n, int64_t grain, splash_range_fn fn,
                         void *ctx);
    int (*pool_threads)(const struct splash_pool *pool);

    const struct splash_meta_api *meta;

    /* Registered formats by GGUF type id or by name ("Q4_K", "af4g64"); NULL when none. */
    const struct splash_format_type *(*format_by_gguf_type)(int32_t gguf_type);
    const struct splash_format_type *(*format_by_name)(const char *name);

    /* Shared compute (kernels/): see splash/kernels.h. */
    const struct splash_kernels *kernels;

    /* ---- ABI 1.2 ---- */
    /* The state-space kernels (Gated DeltaNet): see splash/kernels.h. */
    const struct splash_ssm_kernels *ssm;
    /* Registered formats of the registry that handed this host table out, by GGUF type id
     * or by name; NULL when none. (format_by_gguf_type and format_by_name, which take no
     * host, answer from the process's first registry.) */
    const struct splash_format_type *(*format_find_gguf)(const struct splash_host *host,
                                                         int32_t gguf_type);
    const struct splash_format_type *(*format_find_name)(const struct splash_host *host,
                                                         const char *name);

    /* ---- ABI 1.3 ---- */
    /* A family's model_create binds its weights here, as llama.cpp's create_tensor does:
     * declare(host, m, model, ...) is walked and each entry's tensor checked (present unless
     * optional, a format decodes it, the declared shape, mapped; the accept masks are
     * model-check's, which runs before a load), then bound
     * into its dst; *bytes (may be NULL) gets the bytes of the tensors bound, each once. The
     * first problem stops it with an error naming the file and tensor, and what was bound
     * is unbound. */
    enum splash_status (*bind_tensors)(const struct splash_host *host,
                                       const struct splash_meta *m, splash_declare_fn declare,
                                       void *model, uint64_t *bytes, struct splash_err *err);
    /* Frees what bind_tensors put in each dst of the list and clears it (model_destroy). */
    void (*unbind_tensors)(const struct splash_host *host, const struct splash_meta *m,
                           splash_declare_fn declare, void *model);

    /* ---- ABI 1.4 ---- */
    /* Where n mapped bytes at p lie in their file (a tensor's data, for reading it with
     * pread): its path (copied into path) and the offset of p. SPLASH_ERR_NOT_FOUND when
     * the bytes are not one file mapping's (a weight imported into memory). */
    enum splash_status (*locate_bytes)(const void *p, size_t n, char *path, size_t path_size,
                                       uint64_t *offset);

    /* ---- ABI 1.5 ---- */
    /* Rows a plugin makes itself (a draft's load-time quantization) in memory the kernels
     * may give back: a zeroed, page-aligned region of its own (NULL on failure), freed with
     * weight_rows_free. weight_rows_hand_over(p), before the one weight over the region is
     * made, lets the kernels give its pages back once they hold that weight's repacked
     * image; the region is then unreadable (read the rows through the weight alone). */
    void *(*weight_rows_alloc)(size_t size);
    void (*weight_rows_hand_over)(const void *p);
    void (*weight_rows_free)(void *p);

    /* ---- ABI 1.6 ---- */
    /* Streamed experts of a stack an import makes (an MLX checkpoint's switch_mlp planes:
     * codes, scales, biases): where each expert's planes lie in their files, and the
     * recipe that turns them into the expert's rows in the tensor's format. NOT_FOUND for
     * a tensor whose file stores it as it is (locate_bytes places those), UNSUPPORTED,
     * naming the tensor and why, for an import whose experts cannot be read alone. */
    enum splash_status (*expert_planes)(const struct splash_meta *m,
                                        const struct splash_tensor_info *t,
                                        struct splash_expert_planes *out, struct splash_err *err);
    /* One expert's planes (planes[i]: p->expert_bytes[i] bytes read from plane i) imported
     * into its rows at dst (t->n_bytes / t->ne[2] bytes: what the whole import gives that
     * expert). Thread-safe; errors name the tensor. */
    enum splash_status (*expert_import)(const struct splash_expert_planes *p,
                                        const void *const *planes, void *dst,
                                        struct splash_err *err);
};

#endif
