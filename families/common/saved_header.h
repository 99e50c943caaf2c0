/* The header a family's saved sequence (family ABI 1.3 seq_save / seq_load) opens with:
 * an 8-byte magic naming the family's layout, the token count, then the layout's sizes
 * (page size, layer counts, state sizes...), so a blob is only read back by a model of
 * the same layout. Shared by the hybrid trunk, gpt_oss and flint; names are prefixed
 * saved_header_ because the static plugin archive links every plugin together. */
#ifndef SPLASH_FAMILIES_SAVED_HEADER_H
#define SPLASH_FAMILIES_SAVED_HEADER_H

#include <stddef.h>
#include <stdint.h>

#include "splash/status.h"

#define SAVED_HEADER_MAX_FIELDS 8

/* A model's layout as its saved sequences state it. */
struct saved_layout {
    char magic[8];    /* not NUL-terminated when 8 long */
    int32_t n_fields; /* up to SAVED_HEADER_MAX_FIELDS */
    int64_t fields[SAVED_HEADER_MAX_FIELDS];
};

/* The header's bytes: the magic, the token count and the fields, 8 bytes each. */
size_t saved_header_bytes(const struct saved_layout *l);

/* Hands the header of a sequence of n_tokens to write; write's result (0: go on). */
int saved_header_write(const struct saved_layout *l, int64_t n_tokens,
                       int (*write)(void *ctx, const void *bytes, size_t n), void *ctx);

/* Checks buf (size bytes) against the layout: its magic and fields, a token count from 0
 * to max_tokens, and size == bytes(model, n_tokens), the whole blob for that count. Sets
 * *n_tokens and *payload (the bytes after the header). SPLASH_ERR_INVALID names what is
 * wrong; nothing is read past size. */
enum splash_status saved_header_read(const struct saved_layout *l, const void *buf, uint64_t size,
                                     int64_t max_tokens,
                                     uint64_t (*bytes)(const void *model, int64_t n_tokens),
                                     const void *model, int64_t *n_tokens, const char **payload,
                                     struct splash_err *err);

/* saved_header_read for a rest (family ABI 1.6 seq_load_parts), then its pages: n_pages
 * must be the whole pages of its tokens (n_tokens / page_tokens), each present. */
enum splash_status saved_header_read_parts(const struct saved_layout *l, const void *rest,
                                           uint64_t rest_size, int64_t max_tokens,
                                           uint64_t (*bytes)(const void *model, int64_t n_tokens),
                                           const void *model, int64_t page_tokens,
                                           const void *const *pages, int64_t n_pages,
                                           int64_t *n_tokens, const char **payload,
                                           struct splash_err *err);

#endif
