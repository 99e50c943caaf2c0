/* Transfers: a byte range of a file (headers before any weight moves), and parallel,
 * resumable downloads into NAME.incomplete with HTTP Range, retries with backoff and the
 * digest checked before the file takes its name. */
#ifndef SPLASH_HUB_FETCH_H
#define SPLASH_HUB_FETCH_H

#include <stddef.h>
#include <stdint.h>

#include "server/hub/env.h"
#include "server/hub/progress.h"

/* Reads bytes [offset, offset + len) of url into buf; *got is what came (less at the end of
 * the file). A server that ignores Range is read from its start and cut. */
enum splash_status splash_hub_read_range(const struct splash_hub_env *env, const char *url,
                                         uint64_t offset, size_t len, void *buf, size_t *got,
                                         struct splash_err *err);

struct splash_hub_job {
    const char *name;   /* the repository path, for messages */
    char url[4096];
    char dest[4096];    /* the blob's path; the transfer writes dest + ".incomplete" */
    uint64_t size;      /* from the listing: more or fewer bytes are an error */
    char digest[65];    /* SHA-256 (lfs) or the git blob SHA-1 */
    int lfs;
    enum splash_status st;
    char error[256];
};

/* Runs the jobs, up to `parallel` at once, drawing progress; returns the first failure
 * (each job keeps its own). Seconds without a byte before a transfer counts as stalled:
 * SPLASH_HUB_STALL_SECONDS, default 30; retries of a stalled or broken transfer:
 * SPLASH_HUB_RETRIES, default 5. */
enum splash_status splash_hub_download(const struct splash_hub_env *env,
                                       struct splash_hub_job *jobs, size_t n, int parallel,
                                       struct splash_hub_progress *progress,
                                       struct splash_err *err);

/* The file's digest as the listing gives it: SHA-256 of its bytes, or with git_blob the
 * SHA-1 of "blob SIZE\0" and its bytes; hex into out[65]. */
enum splash_status splash_hub_file_digest(const char *path, int git_blob, char out[65],
                                          struct splash_err *err);

#endif
