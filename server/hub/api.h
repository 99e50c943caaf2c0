/* The Hub's model API: a revision's commit and its files with sizes and digests
 * (GET /api/models/OWNER/REPO/revision/REV?blobs=true, as huggingface_hub's
 * model_info(files_metadata=True) asks), and the URLs of its files. */
#ifndef SPLASH_HUB_API_H
#define SPLASH_HUB_API_H

#include <stddef.h>
#include <stdint.h>

#include "server/hub/env.h"

struct splash_hub_file {
    char *path;      /* relative to the repository root, checked: no "..", no leading '/' */
    uint64_t size;
    char blob[65];   /* the cache's blob name: the LFS SHA-256, else the git blob id */
    int lfs;         /* blob is a SHA-256 of the content; else a git blob SHA-1 */
};

struct splash_hub_revision {
    char commit[41];
    struct splash_hub_file *files;
    size_t n_files;
};

/* Parses the revision endpoint's JSON. Errors name the field and the entry. */
enum splash_status splash_hub_revision_parse(const char *json, size_t len,
                                             struct splash_hub_revision *out,
                                             struct splash_err *err);
void splash_hub_revision_free(struct splash_hub_revision *rev);
const struct splash_hub_file *splash_hub_revision_find(const struct splash_hub_revision *rev,
                                                       const char *path);

/* Asks the Hub once, within timeout_s, for repo_id's revision. SPLASH_ERR_IO when the Hub
 * did not answer; other statuses are its refusals in one line (missing, private, gated,
 * no such revision). */
enum splash_status splash_hub_revision_fetch(const struct splash_hub_env *env,
                                             const char *repo_id, const char *revision,
                                             double timeout_s, struct splash_hub_revision *out,
                                             struct splash_err *err);

/* ENDPOINT/REPO/resolve/COMMIT/PATH, the path's bytes percent-encoded but for '/'. */
int splash_hub_file_url(const struct splash_hub_env *env, const char *repo_id, const char *commit,
                        const char *path, char *buf, size_t size);

int splash_hub_is_commit(const char *s); /* 40 lower-case hex digits */

#endif
