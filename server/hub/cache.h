/* The Hugging Face cache layout, shared with huggingface_hub and `hf download`:
 *   HF_HUB_CACHE/models--OWNER--REPO/blobs/BLOB          the bytes, named by digest
 *   HF_HUB_CACHE/models--OWNER--REPO/snapshots/COMMIT/PATH  relative links to ../../blobs/BLOB
 *   HF_HUB_CACHE/models--OWNER--REPO/refs/BRANCH          the branch's commit (refs/main)
 * Splash pins the commit an installation uses as refs/splash/INSTALLATION, so pruning the
 * cache (which keeps what refs name) keeps an installed model's files. */
#ifndef SPLASH_HUB_CACHE_H
#define SPLASH_HUB_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "splash/status.h"

int splash_hub_cache_repo_dir(const char *cache, const char *owner, const char *repo, char *out,
                              size_t size);
int splash_hub_cache_blob_path(const char *repo_dir, const char *blob, char *out, size_t size);
int splash_hub_cache_snapshot_path(const char *repo_dir, const char *commit, const char *path,
                                   char *out, size_t size);

/* The commit refs/REF records, into commit[41]; SPLASH_ERR_NOT_FOUND when none. */
enum splash_status splash_hub_cache_read_ref(const char *repo_dir, const char *ref,
                                             char commit[41], struct splash_err *err);
/* Writes refs/REF atomically (REF may hold '/', never a ".." segment). */
enum splash_status splash_hub_cache_write_ref(const char *repo_dir, const char *ref,
                                              const char *commit, struct splash_err *err);

/* Does blobs/BLOB hold exactly size bytes? */
int splash_hub_cache_has_blob(const char *repo_dir, const char *blob, uint64_t size);

/* Makes snapshots/COMMIT/PATH a relative link to ../../blobs/BLOB (replacing what was there). */
enum splash_status splash_hub_cache_link(const char *repo_dir, const char *commit,
                                         const char *path, const char *blob,
                                         struct splash_err *err);

/* The snapshot's file PATH: a regular file in the snapshot or a link resolving inside the
 * repository's blobs (anything else escapes the cache). Its real path into out and its size. */
enum splash_status splash_hub_cache_resolve(const char *repo_dir, const char *commit,
                                            const char *path, char *out, size_t size,
                                            uint64_t *bytes, struct splash_err *err);

/* Every regular file or link under snapshots/COMMIT, as repository paths (malloc'ed). */
enum splash_status splash_hub_cache_list_snapshot(const char *repo_dir, const char *commit,
                                                  char ***paths, size_t *n,
                                                  struct splash_err *err);
void splash_hub_free_paths(char **paths, size_t n);

#endif
