/* Memory planning (server.md "Memory and context", PLATFORM.md): the memory the
 * host gives the process, and the context and KV capacity that fit in it. */
#ifndef SPLASH_CORE_MEMORY_PLAN_H
#define SPLASH_CORE_MEMORY_PLAN_H

#include <stdint.h>

#include "splash/family.h"
#include "splash/status.h"

#define SPLASH_MEMORY_MARGIN (1ull << 30) /* kept free for the system */

struct splash_memory_budget {
    uint64_t mem_available;  /* /proc/meminfo MemAvailable */
    uint64_t cgroup_room;    /* memory.max - memory.current (its inactive page cache left
                              * out), UINT64_MAX when unlimited */
    uint64_t max_memory;     /* --max-memory, 0 = auto */
    uint64_t usable;         /* what the plan may take, margin removed */
    const char *bound;       /* "MemAvailable", "cgroup memory.max" or "--max-memory" */
};

struct splash_memory_plan {
    int64_t context;         /* tokens a request may hold */
    int64_t kv_capacity;     /* tokens of KV all lanes share */
    int32_t lanes;
    double yarn_factor;      /* 1 when within the native window */
    uint64_t weights, kv_bytes, state_bytes, total;
};

/* Reads MemAvailable and the cgroup v2 (or v1) limit; max_memory only lowers them.
 * meminfo_path / cgroup_dir may be NULL for the system's own (tests pass files). */
enum splash_status splash_memory_budget_read(uint64_t max_memory, const char *meminfo_path,
                                             const char *cgroup_dir,
                                             struct splash_memory_budget *b,
                                             struct splash_err *err);
/* The same with the process's cgroup membership read from self_cgroup (NULL:
 * /proc/self/cgroup): the limit of its own group and of each ancestor counts, the least
 * room they leave, so a systemd unit's MemoryMax= or a container's limit is found below
 * the hierarchy's root. */
enum splash_status splash_memory_budget_read_at(uint64_t max_memory, const char *meminfo_path,
                                                const char *cgroup_dir, const char *self_cgroup,
                                                struct splash_memory_budget *b,
                                                struct splash_err *err);

/* Plans the context: requested 0 = the native window. Past the native window YaRN
 * scales by requested / native, up to model_limit (0: the family's info->n_ctx_max, or
 * four times the window where the plugin reports none); more
 * is refused naming --max-context. A context that does not fit the budget is refused
 * with what it needs and what is available. */
enum splash_status splash_memory_plan_make(const struct splash_memory_budget *b,
                                           const struct splash_model_info *info,
                                           int64_t requested, int64_t model_limit, int32_t lanes,
                                           struct splash_memory_plan *plan,
                                           struct splash_err *err);
/* A restarted engine's plan (server.md "Engine restarts"): the context asked for,
 * or, once the budget no longer holds it, as much of it as the budget holds
 * (plan->context < requested); refused only as splash_memory_plan_make refuses
 * a context of 256 tokens. */
enum splash_status splash_memory_plan_fit(const struct splash_memory_budget *b,
                                          const struct splash_model_info *info, int64_t requested,
                                          int64_t model_limit, int32_t lanes,
                                          struct splash_memory_plan *plan, struct splash_err *err);

#endif
