/* Memory of weights a loader made itself (a safetensors import's converted blocks): each
 * in an anonymous mapping of its own, remembered so that once the kernels hold a repacked
 * image of the rows, and nothing else reads them, the pages can be given back
 * (splash_import_hand_over, splash_import_drop) instead of keeping two copies of the weight. A mapped file's pages
 * are dropped the same way (core/file_map.h); those the kernel reads back on access,
 * while an import's are gone: a dropped region is made unreadable, so a reader missed
 * faults at once instead of reading zeros. */
#ifndef SPLASH_CORE_IMPORT_MEM_H
#define SPLASH_CORE_IMPORT_MEM_H

#include <stddef.h>

/* A page-aligned, zeroed region of size bytes (anonymous mmap); NULL on failure. */
void *splash_import_alloc(size_t size);
/* Unmaps a region splash_import_alloc made (NULL: nothing). */
void splash_import_free(void *p);
/* Lets the region starting at p give its pages back once its rows are repacked: its
 * bytes are read by one weight alone (tensor_bind says so). */
void splash_import_hand_over(const void *p);
/* Gives back the pages of the region [p, p + n) starts at, when it was handed over and
 * [p, p + n) covers its bytes (the kernels, after the repack); returns the bytes given back
 * (0 otherwise, or when they were given back already). */
size_t splash_import_drop(const void *p, size_t n);
/* 1 if [p, p + n) lies in a region whose pages were given back. */
int splash_import_dropped(const void *p, size_t n);
/* Bytes of the regions still held (not given back): the import's resident weight bytes. */
size_t splash_import_held(void);

#endif
