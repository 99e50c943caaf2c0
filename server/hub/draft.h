/* A target's DFlash2 draft (models.md "Drafts"): the repository its family names, or one
 * --draft-model names, installed into the Hugging Face cache as the target is and followed
 * the same way (its default branch's commit asked once a start), or a local directory.
 * Only config.json, model.safetensors.index.json and the root's .safetensors files are
 * taken, and only when config.json describes a DFlash2 draft the target can carry. The
 * assembly links them under draft/. */
#ifndef SPLASH_HUB_DRAFT_H
#define SPLASH_HUB_DRAFT_H

#include <limits.h>
#include <stdint.h>

#include "server/hub/api.h"
#include "server/hub/assembly.h"
#include "server/hub/env.h"
#include "server/hub/progress.h"

#define SPLASH_DRAFT_MAX_FILES 16

struct splash_hub_draft {
    char repo_id[256];      /* OWNER/REPO; "" for a local directory */
    char local_dir[PATH_MAX];
    char commit[41];        /* the repository's commit ("" for a local directory) */
    char repo_dir[PATH_MAX]; /* its Hugging Face cache folder ("" for a local directory) */
    size_t n;
    struct splash_assembly_file files[SPLASH_DRAFT_MAX_FILES];
    char path[SPLASH_DRAFT_MAX_FILES][256];
    char link[SPLASH_DRAFT_MAX_FILES][300];
    char source[SPLASH_DRAFT_MAX_FILES][PATH_MAX];
    char blob[SPLASH_DRAFT_MAX_FILES][65];
};

/* Does a draft repository need this file? */
int splash_hub_draft_wants_file(const char *path);

struct splash_registry;

/* The draft in draft_dir held to the target at target_path by the core's model-check
 * (splash_model_check_draft_flags, whose draft plugin names the key at fault); flags
 * SPLASH_CHECK_DRAFT_CONFIG_ONLY: its config.json alone. Errors read "draft NAME: ...". */
enum splash_status splash_hub_draft_check(const struct splash_registry *r, const char *target_path,
                                          const char *draft_dir, unsigned flags,
                                          struct splash_err *err);

/* Installs revision `rev` of repo_id (asked already) into the cache: config.json first and
 * checked against the target, then the weights the cache lacks, the snapshot links,
 * refs/main and the pin refs/splash/PIN. Fills out. */
enum splash_status splash_hub_draft_install(const struct splash_hub_env *env, const char *repo_id,
                                            const struct splash_hub_revision *rev,
                                            const char *pin, const struct splash_registry *r,
                                            const char *target_path, splash_hub_line_fn line,
                                            int tty, struct splash_hub_draft *out,
                                            struct splash_err *err);

/* A local draft directory, checked whole against the target. */
enum splash_status splash_hub_draft_local(const char *dir, const struct splash_registry *r,
                                          const char *target_path, struct splash_hub_draft *out,
                                          struct splash_err *err);

/* The snapshot of repo_id (OWNER/REPO) that the Hugging Face cache under `cache` holds at
 * refs/main, with its config.json, into dir (a local model's family draft, taken without
 * asking the Hub); dir "" when the cache has none. */
enum splash_status splash_hub_draft_cached(const char *cache, const char *repo_id, char *dir,
                                           size_t size, struct splash_err *err);

#endif
