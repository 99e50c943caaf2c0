/* An installation's assembly: DIR/COMMIT/target/ holds a link per file into the Hugging
 * Face cache and DIR/COMMIT/model.json its sources, sizes, digests and times. A new one is
 * built beside the others and renamed into place, then DIR/current is swapped to it, so a
 * reader sees the old assembly or the new one, never half of one. */
#ifndef SPLASH_HUB_ASSEMBLY_H
#define SPLASH_HUB_ASSEMBLY_H

#include <stddef.h>
#include <stdint.h>

#include "server/hub/install.h"

struct splash_assembly_file {
    const char *path;    /* in the repository */
    const char *source;  /* the snapshot path the link names */
    uint64_t size;
    const char *blob;    /* SHA-256 (lfs) or git blob id */
    int lfs;
    const char *link;    /* where in the assembly; NULL: target/ and the file's name */
    const char *role;    /* NULL: the target's; "draft" or "mmproj" */
};

struct splash_assembly {
    const char *model, *repo_id, *variant, *revision, *commit, *endpoint, *cache_repo_dir;
    int kind;            /* enum splash_target_kind */
    const char *family;  /* model-check's verdict, "" when unknown */
    const struct splash_assembly_file *files;
    size_t n_files;      /* a GGUF's parts come first, in order */
    const char *name;    /* the assembly's folder, 40 hex digits; NULL: commit */
    /* the draft's source: a repository at a commit in its cache folder, or a directory */
    const char *draft_repo, *draft_commit, *draft_cache, *draft_dir;
};

/* The folder name of a target commit with a draft commit (or a local draft's key): the
 * SHA-1 of both, so a draft that moves makes a new assembly beside the one a server holds. */
void splash_assembly_name(const char *commit, const char *draft_key, char out[41]);

/* Builds and publishes the assembly in inst_dir (made when missing); fills out. */
enum splash_status splash_assembly_publish(const char *inst_dir, const struct splash_assembly *a,
                                           struct splash_installed *out, struct splash_err *err);

/* The assembly inst_dir/current names, checked: every link resolves to a file of the size
 * model.json records. SPLASH_ERR_NOT_FOUND when none is installed; another status names the
 * damage. */
enum splash_status splash_assembly_current(const char *inst_dir, struct splash_installed *out,
                                           struct splash_err *err);

#endif
