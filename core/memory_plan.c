/* Memory budget from MemAvailable and the cgroup limit, and the context plan. */
#include "core/memory_plan.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GIB (1024.0 * 1024.0 * 1024.0)

static int read_u64_file(const char *path, uint64_t *out)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char buf[64];
    int ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    if (!ok)
        return -1;
    if (!strncmp(buf, "max", 3)) {
        *out = UINT64_MAX;
        return 0;
    }
    char *end;
    unsigned long long v = strtoull(buf, &end, 10);
    if (end == buf)
        return -1;
    *out = v;
    return 0;
}

static int read_meminfo(const char *path, uint64_t *available)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[256];
    int found = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long long kb;
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
            *available = (uint64_t)kb * 1024;
            found = 0;
            break;
        }
    }
    fclose(f);
    return found;
}

/* The process's own group in self_cgroup's lines: the v2 one ("0::/path", v1 0) or the
 * v1 memory controller's ("N:...memory...:/path", v1 1). Returns 0 and the path, or -1. */
static int own_group(const char *self_cgroup, int v1, char *path, size_t size)
{
    FILE *f = fopen(self_cgroup, "r");
    if (!f)
        return -1;
    char line[1024];
    int found = -1;
    while (found && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2 || c2[1] != '/')
            continue;
        *c1 = *c2 = 0; /* line: the hierarchy's number; c1 + 1: its controllers */
        int match = 0;
        if (!v1) {
            match = !strcmp(line, "0") && c1 + 1 == c2;
        } else {
            for (char *tok = strtok(c1 + 1, ","); tok && !match; tok = strtok(NULL, ","))
                match = !strcmp(tok, "memory");
        }
        if (match && strlen(c2 + 1) < size) {
            snprintf(path, size, "%s", c2 + 1);
            found = 0;
        }
    }
    fclose(f);
    return found;
}

/* The value of key in a group's memory.stat ("key value" lines), or 0. */
static uint64_t stat_value(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[256];
    size_t len = strlen(key);
    uint64_t v = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, len) && line[len] == ' ') {
            v = strtoull(line + len + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

/* The least room the limits leave along the process's group and its ancestors, under the
 * hierarchy at base (limit_file/usage_file in each group; limits of 2^60 or more are
 * none). A group's usage counts the page cache its processes brought in, a model file
 * read or downloaded among it; the kernel reclaims the inactive part of that before it
 * refuses memory, as MemAvailable counts it free, so the room leaves it out (stat_key:
 * its line in memory.stat, of the group and its children). Returns 1 when some level has
 * a limit. */
static int group_room(const char *base, const char *group, const char *limit_file,
                      const char *usage_file, const char *stat_key, uint64_t *room)
{
    char g[1024], path[1600];
    snprintf(g, sizeof g, "%s", group);
    int limited = 0;
    for (;;) {
        size_t len = strlen(g);
        while (len > 1 && g[len - 1] == '/')
            g[--len] = 0;
        uint64_t limit, usage;
        snprintf(path, sizeof path, "%s%s/%s", base, len > 1 ? g : "", limit_file);
        if (read_u64_file(path, &limit) == 0 && limit < (1ull << 60)) {
            snprintf(path, sizeof path, "%s%s/%s", base, len > 1 ? g : "", usage_file);
            if (read_u64_file(path, &usage) != 0)
                usage = 0;
            snprintf(path, sizeof path, "%s%s/memory.stat", base, len > 1 ? g : "");
            uint64_t cache = stat_value(path, stat_key);
            usage -= cache < usage ? cache : usage;
            uint64_t r = limit > usage ? limit - usage : 0;
            if (!limited || r < *room)
                *room = r;
            limited = 1;
        }
        char *slash = strrchr(g, '/');
        if (len <= 1 || !slash)
            return limited;
        slash[slash == g ? 1 : 0] = 0; /* the parent; "/" is the last */
    }
}

enum splash_status splash_memory_budget_read(uint64_t max_memory, const char *meminfo_path,
                                             const char *cgroup_dir,
                                             struct splash_memory_budget *b,
                                             struct splash_err *err)
{
    return splash_memory_budget_read_at(max_memory, meminfo_path, cgroup_dir, NULL, b, err);
}

enum splash_status splash_memory_budget_read_at(uint64_t max_memory, const char *meminfo_path,
                                                const char *cgroup_dir, const char *self_cgroup,
                                                struct splash_memory_budget *b,
                                                struct splash_err *err)
{
    memset(b, 0, sizeof *b);
    b->max_memory = max_memory;
    if (read_meminfo(meminfo_path ? meminfo_path : "/proc/meminfo", &b->mem_available))
        return splash_err_set(err, SPLASH_ERR_IO, "%s: no MemAvailable line",
                              meminfo_path ? meminfo_path : "/proc/meminfo");
    b->cgroup_room = UINT64_MAX;
    /* the process's own group and its ancestors (a unit's MemoryMax=, a container's
     * limit), v2 first, then v1's memory controller; the hierarchy's root where the
     * process's group is not known */
    const char *dir = cgroup_dir ? cgroup_dir : "/sys/fs/cgroup";
    const char *self = self_cgroup ? self_cgroup : "/proc/self/cgroup";
    char group[1024], v1_base[600];
    uint64_t left;
    if (group_room(dir, own_group(self, 0, group, sizeof group) ? "/" : group, "memory.max",
                   "memory.current", "inactive_file", &left)) {
        b->cgroup_room = left;
    } else {
        snprintf(v1_base, sizeof v1_base, "%s/memory", dir);
        if (group_room(v1_base, own_group(self, 1, group, sizeof group) ? "/" : group,
                       "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file", &left))
            b->cgroup_room = left;
    }
    uint64_t room = b->mem_available;
    b->bound = "MemAvailable";
    if (b->cgroup_room < room) {
        room = b->cgroup_room;
        b->bound = "cgroup memory.max";
    }
    b->usable = room > SPLASH_MEMORY_MARGIN ? room - SPLASH_MEMORY_MARGIN : 0;
    if (max_memory && max_memory < b->usable) {
        b->usable = max_memory;
        b->bound = "--max-memory";
    }
    return SPLASH_OK;
}

enum splash_status splash_memory_plan_make(const struct splash_memory_budget *b,
                                           const struct splash_model_info *info,
                                           int64_t requested, int64_t model_limit, int32_t lanes,
                                           struct splash_memory_plan *plan,
                                           struct splash_err *err)
{
    memset(plan, 0, sizeof *plan);
    int64_t native = info->n_ctx_train;
    /* the family's ceiling; a plugin from before ABI 1.3 reports none */
    if (!model_limit)
        model_limit = info->n_ctx_max > 0 ? info->n_ctx_max : native * 4;
    int64_t context = requested > 0 ? requested : native;
    if (context > model_limit)
        return splash_err_set(err, SPLASH_ERR_UNSUPPORTED,
                              "--max-context: %" PRId64 " tokens is past this model's limit of %" PRId64,
                              context, model_limit);
    plan->yarn_factor = context > native ? (double)context / (double)native : 1.0;
    plan->lanes = lanes;
    plan->weights = info->weight_bytes;
    plan->state_bytes = info->state_bytes_per_seq * (uint64_t)lanes;
    uint64_t fixed = plan->weights + plan->state_bytes;
    if (fixed > b->usable)
        return splash_err_set(err, SPLASH_ERR_NOMEM,
                              "the weights (%.2f GiB) and %d lanes of recurrent state (%.2f GiB) need "
                              "more than the %.2f GiB available (%s)",
                              (double)plan->weights / GIB, lanes, (double)plan->state_bytes / GIB,
                              (double)b->usable / GIB, b->bound);
    uint64_t kv_room = b->usable - fixed;
    int64_t capacity = info->kv_bytes_per_token ? (int64_t)(kv_room / info->kv_bytes_per_token)
                                                : INT64_MAX / 2;
    if (capacity < context) {
        if (requested > 0)
            return splash_err_set(err, SPLASH_ERR_NOMEM,
                                  "--max-context: %" PRId64 " tokens need %.2f GiB of KV cache, %.2f "
                                  "GiB is available (%s): at most %" PRId64 " tokens fit",
                                  context, (double)context * (double)info->kv_bytes_per_token / GIB,
                                  (double)kv_room / GIB, b->bound, capacity);
        context = capacity; /* auto: as much of the native window as fits */
        if (context < 256)
            return splash_err_set(err, SPLASH_ERR_NOMEM,
                                  "only %" PRId64 " tokens of KV cache fit in %.2f GiB (%s)", context,
                                  (double)kv_room / GIB, b->bound);
    }
    /* lanes share one pool: at most every lane at full context */
    int64_t pool = context * (int64_t)lanes;
    plan->kv_capacity = pool < capacity ? pool : capacity;
    plan->context = context;
    plan->kv_bytes = (uint64_t)plan->kv_capacity * info->kv_bytes_per_token;
    plan->total = fixed + plan->kv_bytes;
    return SPLASH_OK;
}

enum splash_status splash_memory_plan_fit(const struct splash_memory_budget *b,
                                          const struct splash_model_info *info, int64_t requested,
                                          int64_t model_limit, int32_t lanes,
                                          struct splash_memory_plan *plan, struct splash_err *err)
{
    enum splash_status st = splash_memory_plan_make(b, info, requested, model_limit, lanes, plan, err);
    if (st != SPLASH_ERR_NOMEM || requested <= 0)
        return st;
    uint64_t fixed = info->weight_bytes + info->state_bytes_per_seq * (uint64_t)lanes;
    if (fixed > b->usable || !info->kv_bytes_per_token)
        return st;
    int64_t capacity = (int64_t)((b->usable - fixed) / info->kv_bytes_per_token);
    if (capacity < 256)
        return st;
    return splash_memory_plan_make(b, info, capacity, model_limit, lanes, plan, err);
}
