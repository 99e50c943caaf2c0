/* The host table handed to every plugin. */
#include "core/host.h"

#include <string.h>

#include "core/file_map.h"
#include "core/host_impl.h"
#include "core/import_mem.h"
#include "core/meta.h"
#include "core/st_target.h"
#include "core/tensor_bind.h"
#include "core/threadpool.h"

static int host_pool_threads(const struct splash_pool *pool)
{
    return splash_pool_threads(pool);
}

static enum splash_status host_expert_planes(const struct splash_meta *m,
                                             const struct splash_tensor_info *t,
                                             struct splash_expert_planes *out,
                                             struct splash_err *err)
{
    return splash_st_expert_planes(m, t->name, out, err);
}

void splash_host_init(struct splash_host *h, const struct splash_host_formats *formats)
{
    memset(h, 0, sizeof *h);
    h->abi_major = SPLASH_ABI_MAJOR;
    h->abi_minor = SPLASH_ABI_MINOR;
    h->size = sizeof(struct splash_host);
    h->log = splash_log;
    h->alloc_aligned = splash_alloc_aligned;
    h->free_aligned = splash_free_aligned;
    h->cpu_features = splash_cpu_features;
    h->parallel_for = splash_pool_parallel_for;
    h->pool_threads = host_pool_threads;
    h->meta = splash_meta_api_get();
    h->format_by_gguf_type = formats->by_gguf;
    h->format_by_name = formats->by_name;
    h->kernels = splash_kernels_get();
    h->ssm = splash_ssm_kernels_get();
    h->format_find_gguf = formats->find_gguf;
    h->format_find_name = formats->find_name;
    h->bind_tensors = splash_tensors_bind;
    h->unbind_tensors = splash_tensors_unbind;
    h->locate_bytes = splash_file_map_locate;
    h->weight_rows_alloc = splash_import_alloc;
    h->weight_rows_hand_over = splash_import_hand_over;
    h->weight_rows_free = splash_import_free;
    h->expert_planes = host_expert_planes;
    h->expert_import = splash_st_expert_import;
}
