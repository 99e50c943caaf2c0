/* host->bind_tensors: a family's declaration list turned into the weights of its model, as
 * llama.cpp's create_tensor does. Each declaration's tensor is checked (present, decodable,
 * of the declared shape, mapped), then bound where the declaration points (dst), by the
 * host's kernels. The accept masks are model-check's, which runs before a load. */
#include "core/tensor_bind.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/import_mem.h"
#include "core/memory_plan.h"
#include "core/meta.h"
#include "core/model_check.h"
#include "splash/format.h"
#include "splash/kernels.h"

/* The import regions (a safetensors import's converted blocks, core/import_mem.h) of
 * tensors bound only as weights the kernels repacked give their pages back as each is
 * bound, as a mapped file's are dropped after the repack, so the model holds one copy of
 * each even while it loads. A tensor the list also binds by reference (the token table a
 * tied head shares) or as streamed experts is read as stored later, and stays. */
struct give_back {
    const void **keep; /* data of tensors read as stored after the bind */
    size_t n_keep, cap_keep;
    int off; /* no memory for the list: nothing is given back */
    const struct splash_host *host;
    const struct splash_meta *m;
};

static void keep_one(void *ctx, const struct splash_tensor_decl *d)
{
    struct give_back *g = ctx;
    if (g->off || !d->dst || (d->bind != SPLASH_BIND_TENSOR && d->bind != SPLASH_BIND_EXPERTS))
        return;
    const struct splash_tensor_info *t = g->host->meta->tensor_find(g->m, d->name);
    if (!t || !t->data)
        return;
    if (g->n_keep == g->cap_keep) {
        size_t cap = g->cap_keep ? 2 * g->cap_keep : 16;
        const void **grown = realloc(g->keep, cap * sizeof *grown);
        if (!grown) {
            g->off = 1;
            return;
        }
        g->keep = grown;
        g->cap_keep = cap;
    }
    g->keep[g->n_keep++] = t->data;
}

static void give_back_start(struct give_back *g, const struct splash_host *host,
                            const struct splash_meta *m, splash_declare_fn declare, void *model)
{
    *g = (struct give_back){.host = host, .m = m};
    struct splash_err ignored;
    if (declare(host, m, model, keep_one, g, &ignored))
        g->off = 1;
}

/* Before t's weight is made: its region is read by that weight alone, whose kernels give
 * it back once they hold its repacked image (kernels/matmul.c). */
static void give_back_weight(const struct give_back *g, const struct splash_tensor_info *t)
{
    if (g->off)
        return;
    for (size_t i = 0; i < g->n_keep; i++)
        if (g->keep[i] == t->data)
            return;
    splash_import_hand_over(t->data);
}

struct bind_ctx {
    const struct splash_host *host;
    const struct splash_meta *m;
    const struct give_back *give_back; /* NULL when unbinding */
    int unbind;
    uint64_t bytes;
    enum splash_status st;
    struct splash_err *err;
};

/* NAME.scale beside NAME.weight (llama.cpp's NVFP4): its values for a format that takes a
 * per-tensor scale (*scales NULL and *n 0 when there is none); refused beside any other. */
static enum splash_status tensor_scale(struct bind_ctx *b, const struct splash_tensor_info *t,
                                       float **scales, int64_t *n)
{
    const struct splash_meta_api *api = b->host->meta;
    const char *path = api->path(b->m);
    size_t base = strlen(t->name);
    if (base > 7 && !strcmp(t->name + base - 7, ".weight"))
        base -= 7;
    char name[160], input_name[160];
    snprintf(name, sizeof name, "%.*s.scale", (int)base, t->name);
    snprintf(input_name, sizeof input_name, "%.*s.input_scale", (int)base, t->name);
    const struct splash_tensor_info *sc = api->tensor_find(b->m, name);
    const struct splash_tensor_info *in = api->tensor_find(b->m, input_name);
    *scales = NULL;
    *n = 0;
    if (!sc && !in)
        return SPLASH_OK;
    const struct splash_format_type *f = t->format;
    if (!f || !(f->flags & SPLASH_FORMAT_TENSOR_SCALE))
        return splash_err_set(b->err, SPLASH_ERR_UNSUPPORTED,
                              "%s: %s beside a %s weight is refused: only NVFP4 rows take a "
                              "per-tensor scale",
                              path, sc ? name : input_name, f ? f->name : "?");
    if (!sc)
        return SPLASH_OK; /* NVIDIA's activation scale alone plays no part */
    int64_t count = 1, experts = t->n_dims >= 3 ? t->ne[2] : 1;
    for (int32_t d = 0; d < sc->n_dims; d++)
        count *= sc->ne[d];
    const struct splash_format_type *sf = sc->format;
    if (!sf || sc->dtype != SPLASH_DTYPE_F32 || !sc->data || (count != 1 && count != experts))
        return splash_err_set(b->err, SPLASH_ERR_INVALID,
                              "%s: %s must be F32 with 1 value or one per expert (%lld), not "
                              "%lld %s values",
                              path, name, (long long)experts, (long long)count,
                              sf ? sf->name : "?");
    float *v = malloc((size_t)count * sizeof *v);
    if (!v)
        return splash_err_set(b->err, SPLASH_ERR_NOMEM, "out of memory");
    b->host->kernels->to_float(sc, v);
    *scales = v;
    *n = count;
    return SPLASH_OK;
}

static enum splash_status bind_weight(struct bind_ctx *b, const struct splash_tensor_info *t,
                                      struct splash_weight **dst)
{
    const struct splash_kernels *k = b->host->kernels;
    give_back_weight(b->give_back, t);
    enum splash_status st = k->weight_create(t, dst, b->err);
    if (st)
        return st;
    float *scales;
    int64_t n;
    if ((st = tensor_scale(b, t, &scales, &n)) || !scales)
        return st;
    st = k->weight_set_scale(*dst, scales, n, b->err);
    free(scales);
    return st;
}

static enum splash_status bind_experts(struct bind_ctx *b, const struct splash_tensor_info *t,
                                       struct splash_weight **dst)
{
    const struct splash_kernels *k = b->host->kernels;
    enum splash_status st = k->expert_weight_create(t, dst, b->err);
    if (st)
        return st;
    float *scales;
    int64_t n;
    if ((st = tensor_scale(b, t, &scales, &n)) || !scales)
        return st;
    st = k->weight_set_scale(*dst, scales, n, b->err);
    free(scales);
    return st;
}

static enum splash_status bind_floats(struct bind_ctx *b, const struct splash_tensor_info *t,
                                      float **dst)
{
    int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v)
        return splash_err_set(b->err, SPLASH_ERR_NOMEM, "%s: out of memory", t->name);
    b->host->kernels->to_float(t, v);
    *dst = v;
    return SPLASH_OK;
}

static enum splash_status bind_ref(struct bind_ctx *b, const struct splash_tensor_info *t,
                                   struct splash_tensor_ref *dst)
{
    float *scales;
    int64_t n;
    enum splash_status st = tensor_scale(b, t, &scales, &n);
    if (st)
        return st;
    dst->t = t;
    dst->scale = scales ? scales[0] : 1.0f;
    free(scales);
    if (scales && (n != 1 || !isfinite(dst->scale)))
        return splash_err_set(b->err, SPLASH_ERR_INVALID, "%s: %s.scale must be one finite value",
                              b->host->meta->path(b->m), t->name);
    return SPLASH_OK;
}

static void unbind_one(struct bind_ctx *b, const struct splash_tensor_decl *d)
{
    switch (d->bind) {
    case SPLASH_BIND_WEIGHT:
    case SPLASH_BIND_EXPERTS: {
        struct splash_weight **w = d->dst;
        b->host->kernels->weight_destroy(*w);
        *w = NULL;
        break;
    }
    case SPLASH_BIND_FLOATS: {
        float **v = d->dst;
        free(*v);
        *v = NULL;
        break;
    }
    case SPLASH_BIND_TENSOR:
        memset(d->dst, 0, sizeof(struct splash_tensor_ref));
        break;
    }
}

static void bind_one(void *ctx, const struct splash_tensor_decl *d)
{
    struct bind_ctx *b = ctx;
    if (!d->dst || d->bind == SPLASH_BIND_NONE) {
        if (d->bind != SPLASH_BIND_NONE || d->dst) {
            if (!b->unbind && !b->st)
                b->st =
                    splash_err_set(b->err, SPLASH_ERR_INVALID,
                                   "tensor %s: declared to bind without a destination", d->name);
        }
        return;
    }
    if (b->unbind) {
        unbind_one(b, d);
        return;
    }
    if (b->st)
        return;
    const char *path = b->host->meta->path(b->m);
    const struct splash_tensor_info *t = b->host->meta->tensor_find(b->m, d->name);
    if (!t) {
        if (!(d->flags & SPLASH_DECL_OPTIONAL))
            b->st = splash_err_set(b->err, SPLASH_ERR_NOT_FOUND, "%s: tensor %s is missing", path,
                                   d->name);
        return;
    }
    char kind[16], detail[128];
    /* the types are model-check's to hold (a loader may hand a decoded F32 reference) */
    if (splash_decl_problem(d, t, 0, kind, sizeof kind, detail, sizeof detail)) {
        b->st = splash_err_set(b->err, SPLASH_ERR_UNSUPPORTED, "%s: tensor %s: %s (%s)", path,
                               d->name, !strcmp(kind, "shape") ? "wrong shape" : kind, detail);
        return;
    }
    /* an import deferred to the bind (core/st_target.h) is made now, unless its experts
     * stream: those are read alone from the files, the whole never made */
    const int stays_deferred =
        d->bind == SPLASH_BIND_EXPERTS && splash_meta_tensor_deferred(b->m, t);
    if (!stays_deferred && (b->st = splash_meta_tensor_realize(b->m, t, b->err)))
        return;
    if (!t->data && !stays_deferred) {
        b->st = splash_err_set(b->err, SPLASH_ERR_INVALID, "%s: tensor %s is not mapped", path,
                               d->name);
        return;
    }
    /* streamed experts stay in their file: the family counts their store instead */
    if (!(d->flags & SPLASH_DECL_AGAIN) && d->bind != SPLASH_BIND_EXPERTS)
        b->bytes += t->n_bytes;
    switch (d->bind) {
    case SPLASH_BIND_EXPERTS:
        b->st = bind_experts(b, t, d->dst);
        break;
    case SPLASH_BIND_WEIGHT:
        b->st = bind_weight(b, t, d->dst);
        break;
    case SPLASH_BIND_FLOATS:
        b->st = bind_floats(b, t, d->dst);
        break;
    case SPLASH_BIND_TENSOR:
        b->st = bind_ref(b, t, d->dst);
        break;
    default:
        b->st =
            splash_err_set(b->err, SPLASH_ERR_INVALID, "tensor %s: bind kind %u", d->name, d->bind);
    }
}

void splash_tensors_unbind(const struct splash_host *host, const struct splash_meta *m,
                           splash_declare_fn declare, void *model)
{
    struct bind_ctx b = {.host = host, .m = m, .unbind = 1};
    struct splash_err ignored;
    b.err = &ignored;
    declare(host, m, model, bind_one, &b, &ignored);
}

struct load_need {
    const struct splash_host *host;
    const struct splash_meta *m;
    uint64_t bytes;
};

/* The bytes bind_one will count for d (streamed experts stay in their file). */
static void need_one(void *ctx, const struct splash_tensor_decl *d)
{
    struct load_need *n = ctx;
    if (!d->dst || d->bind == SPLASH_BIND_NONE || d->bind == SPLASH_BIND_EXPERTS ||
        (d->flags & SPLASH_DECL_AGAIN))
        return;
    const struct splash_tensor_info *t = n->host->meta->tensor_find(n->m, d->name);
    if (t)
        n->bytes += t->n_bytes;
}

/* Weights more than the memory the host has free (MemAvailable, the cgroup's room) are
 * refused before any is read: loading them would end in the kernel's OOM killer (a cgroup
 * limit kills the process at its limit) or in swap, and the memory plan, whose budget is
 * that room less its margin, would refuse them once loaded anyway. */
static enum splash_status check_room(const struct splash_host *host, const struct splash_meta *m,
                                     splash_declare_fn declare, void *model,
                                     struct splash_err *err)
{
    struct load_need n = {.host = host, .m = m};
    struct splash_memory_budget b;
    struct splash_err ignored;
    if (declare(host, m, model, need_one, &n, &ignored) ||
        splash_memory_budget_read(0, NULL, NULL, &b, &ignored))
        return SPLASH_OK; /* the bind reports a bad list; no meminfo: nothing to hold it to */
    int cgroup = b.cgroup_room < b.mem_available;
    uint64_t room = cgroup ? b.cgroup_room : b.mem_available;
    if (n.bytes <= room)
        return SPLASH_OK;
    return splash_err_set(err, SPLASH_ERR_NOMEM,
                          "%s: the weights to load (%.2f GiB) need more than the %.2f GiB of "
                          "memory free (%s)",
                          host->meta->path(m), (double)n.bytes / (1024.0 * 1024.0 * 1024.0),
                          (double)room / (1024.0 * 1024.0 * 1024.0),
                          cgroup ? "cgroup memory.max" : "MemAvailable");
}

enum splash_status splash_tensors_bind(const struct splash_host *host, const struct splash_meta *m,
                                       splash_declare_fn declare, void *model, uint64_t *bytes,
                                       struct splash_err *err)
{
    enum splash_status room = check_room(host, m, declare, model, err);
    if (room)
        return room;
    struct give_back g;
    give_back_start(&g, host, m, declare, model);
    struct bind_ctx b = {.host = host, .m = m, .give_back = &g, .err = err};
    enum splash_status st = declare(host, m, model, bind_one, &b, err);
    free(g.keep);
    if (!st)
        st = b.st;
    if (st) {
        splash_tensors_unbind(host, m, declare, model);
        return st;
    }
    if (bytes)
        *bytes = b.bytes;
    return SPLASH_OK;
}
