/* Sizing the streamed experts' store at the engine's start (see expert_memory.h). */
#include "server/engine/expert_memory.h"

#include <stdio.h>

#include "core/family.h"

#define MIB (1024.0 * 1024.0)

static enum splash_status load(const struct splash_registry *reg, const char *path,
                               const struct splash_model_opts *mo, int n_threads, uint64_t bytes,
                               int elastic, struct splash_loaded_model **out,
                               struct splash_err *err)
{
    struct splash_model_opts o = *mo;
    o.expert_memory = bytes;
    o.expert_elastic = elastic;
    return splash_model_load(reg, path, &o, n_threads, out, err);
}

static void store_line(const struct splash_loaded_model *lm, const char *why, char *line,
                       size_t size)
{
    const struct splash_model_info *i = &lm->info;
    if (!i->routed_expert_bytes)
        snprintf(line, size, "%s", "");
    else if (!i->expert_store_bytes)
        snprintf(line, size, "Experts · %.1f MiB of routed experts load whole (%s)",
                 (double)i->routed_expert_bytes / MIB, why);
    else {
        struct splash_expert_stats s;
        char floor[96] = "";
        if (splash_family_expert_stats(lm->family, lm->model, &s) && s.floor_bytes < s.cap_bytes)
            snprintf(floor, sizeof floor, ", its floor %.1f MiB; the chunks above it elastic",
                     (double)s.floor_bytes / MIB);
        snprintf(line, size,
                 "Experts · streamed: a store of %.1f MiB%s for %.1f MiB of routed experts (%s; "
                 "the smallest is %.1f MiB)",
                 (double)i->expert_store_bytes / MIB, floor, (double)i->routed_expert_bytes / MIB,
                 why, (double)i->expert_store_min_bytes / MIB);
    }
}

enum splash_status splash_expert_memory_load(const struct splash_registry *reg, const char *path,
                                             const struct splash_model_opts *mo, int n_threads,
                                             uint64_t expert_memory, int64_t max_context,
                                             int32_t lanes, const struct splash_memory_budget *b,
                                             struct splash_loaded_model **out, char *line,
                                             size_t line_size, struct splash_err *err)
{
    enum splash_status st;
    if (expert_memory == UINT64_MAX || expert_memory) {
        int off = expert_memory == UINT64_MAX;
        if ((st = load(reg, path, mo, n_threads, off ? 0 : expert_memory, 0, out, err)))
            return st;
        store_line(*out, off ? "--expert-memory off" : "--expert-memory", line, line_size);
        if (!off && !(*out)->info.routed_expert_bytes)
            snprintf(line, line_size,
                     "Note · --expert-memory: this model has no routed experts; it does nothing");
        return SPLASH_OK;
    }
    /* auto: the model's sizes from its smallest store */
    struct splash_loaded_model *lm;
    if ((st = load(reg, path, mo, n_threads, SPLASH_EXPERTS_SMALLEST, 0, &lm, err)))
        return st;
    const struct splash_model_info i = lm->info;
    if (!i.routed_expert_bytes || !i.expert_store_bytes) {
        /* no routed experts, or none that can stream: this load is the one */
        store_line(lm, "auto", line, line_size);
        *out = lm;
        return SPLASH_OK;
    }
    int64_t context = max_context > 0 ? max_context : i.n_ctx_train;
    if (max_context <= 0 && context > SPLASH_EXPERT_AUTO_CONTEXT)
        context = SPLASH_EXPERT_AUTO_CONTEXT;
    uint64_t others = i.weight_bytes - i.expert_store_bytes;
    uint64_t beside = others + (uint64_t)context * i.kv_bytes_per_token +
                      i.state_bytes_per_seq * (uint64_t)lanes;
    uint64_t bytes;
    const char *why;
    if (beside + i.routed_expert_bytes <= b->usable) {
        bytes = 0;
        why = "auto: the memory plan holds them";
    } else if (b->usable > beside && b->usable - beside > i.expert_store_min_bytes) {
        bytes = b->usable - beside;
        why = "auto: what the memory plan leaves beside the context";
    } else {
        store_line(lm, "auto: the smallest store; the context takes what is left", line,
                   line_size);
        *out = lm;
        return SPLASH_OK;
    }
    splash_model_unload(lm);
    /* an automatic store is elastic: it starts at its floor (elastic_start takes the rest) */
    if ((st = load(reg, path, mo, n_threads, bytes, 1, out, err)))
        return st;
    store_line(*out, why, line, line_size);
    return SPLASH_OK;
}
