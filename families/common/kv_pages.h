/* KV pages counted by reference, so sequences share a prefix's pages copy-on-write: a
 * page's rows never change once written, so a shared page is read by every holder and
 * written by none (a sequence appending into a shared page copies it first). A page
 * table holds n_layers rows of cap slots, layer i's page p at [i * cap + p].
 * Family-neutral (the hybrid trunk, gpt_oss and flint use them); names are prefixed kv_
 * because the static plugin archive links every plugin together. */
#ifndef SPLASH_FAMILIES_KV_PAGES_H
#define SPLASH_FAMILIES_KV_PAGES_H

#include <stddef.h>
#include <stdint.h>

#include "splash/host.h"

/* Where a family's pages come from and are counted. */
struct kv_pages {
    const struct splash_host *host;
    size_t page_bytes;     /* one page of one layer */
    uint64_t *cache_bytes; /* grows and shrinks by every page's bytes, header included */
};

/* A page holding one reference; NULL when out of memory. */
void *kv_page_alloc(const struct kv_pages *kp);
/* Drops one reference (NULL: nothing), freeing the page with its last. */
void kv_page_unref(const struct kv_pages *kp, void *page);

/* Page p of every layer the table's holder's own: a shared one is copied. */
enum splash_status kv_pages_own(const struct kv_pages *kp, void **table, int64_t cap,
                                int64_t n_layers, int64_t p, struct splash_err *err);
/* A fresh page p in every layer; on failure none (the slots are left NULL). */
enum splash_status kv_pages_add(const struct kv_pages *kp, void **table, int64_t cap,
                                int64_t n_layers, int64_t p, struct splash_err *err);
/* dst's first n_pages pages of every layer = src's, each one more reference (a NULL
 * slot, a page let go of, stays NULL). */
void kv_pages_share(void **dst, int64_t dst_cap, void *const *src, int64_t src_cap,
                    int64_t n_layers, int64_t n_pages);

#endif
