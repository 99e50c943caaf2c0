/* KV pages counted by reference (kv_pages.h). */
#include "families/common/kv_pages.h"

#include <string.h>

/* The reference count sits in a 64-byte header before the page, so the page itself
 * keeps the alignment and layout the kernels read. */
#define PAGE_HEADER 64

static int32_t *page_refs(void *page)
{
    return (int32_t *)((char *)page - PAGE_HEADER);
}

void *kv_page_alloc(const struct kv_pages *kp)
{
    char *base = kp->host->alloc_aligned(64, PAGE_HEADER + kp->page_bytes);
    if (!base)
        return NULL;
    *(int32_t *)base = 1;
    *kp->cache_bytes += PAGE_HEADER + kp->page_bytes;
    return base + PAGE_HEADER;
}

void kv_page_unref(const struct kv_pages *kp, void *page)
{
    if (!page || --*page_refs(page) > 0)
        return;
    *kp->cache_bytes -= PAGE_HEADER + kp->page_bytes;
    kp->host->free_aligned((char *)page - PAGE_HEADER);
}

enum splash_status kv_pages_own(const struct kv_pages *kp, void **table, int64_t cap,
                                int64_t n_layers, int64_t p, struct splash_err *err)
{
    for (int64_t il = 0; il < n_layers; il++) {
        void **slot = &table[il * cap + p];
        if (*page_refs(*slot) == 1)
            continue;
        void *copy = kv_page_alloc(kp);
        if (!copy)
            return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory copying a shared KV page");
        memcpy(copy, *slot, kp->page_bytes);
        kv_page_unref(kp, *slot);
        *slot = copy;
    }
    return SPLASH_OK;
}

enum splash_status kv_pages_add(const struct kv_pages *kp, void **table, int64_t cap,
                                int64_t n_layers, int64_t p, struct splash_err *err)
{
    for (int64_t il = 0; il < n_layers; il++) {
        void *page = kv_page_alloc(kp);
        if (!page) {
            while (il-- > 0) {
                kv_page_unref(kp, table[il * cap + p]);
                table[il * cap + p] = NULL;
            }
            return splash_err_set(err, SPLASH_ERR_NOMEM, "out of memory for KV pages");
        }
        table[il * cap + p] = page;
    }
    return SPLASH_OK;
}

void kv_pages_share(void **dst, int64_t dst_cap, void *const *src, int64_t src_cap,
                    int64_t n_layers, int64_t n_pages)
{
    for (int64_t il = 0; il < n_layers; il++)
        for (int64_t p = 0; p < n_pages; p++) {
            void *page = src[il * src_cap + p];
            if (page)
                ++*page_refs(page);
            dst[il * dst_cap + p] = page;
        }
}
