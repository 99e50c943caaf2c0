/* Installation (server.md "Revisions", "Model storage", "Files Splash writes"):
 * OWNER/REPO[:VARIANT] at a revision becomes an assembly directory of links into the
 * Hugging Face cache, DATA/models/INSTALLATION/COMMIT/{target/,model.json}, with
 * DATA/models/INSTALLATION/current naming the one a start serves.
 *
 * Each start asks the Hub once (at most 5 s) for the revision's commit and file list; the
 * installed commit starts without a download; a new commit downloads only the files whose
 * blobs the cache lacks, after the engine's model-check passed on their headers, read with
 * range requests. A 40-hex revision, --offline and HF_HUB_OFFLINE make no request. When the
 * Hub does not answer, or a new commit cannot be installed, the installed model starts with
 * a line naming why; a missing or damaged installation is rebuilt from the cache. */
#ifndef SPLASH_HUB_INSTALL_H
#define SPLASH_HUB_INSTALL_H

#include <limits.h>

#include "server/hub/progress.h"
#include "splash/status.h"

struct splash_registry;

struct splash_install_request {
    const char *model;         /* OWNER/REPO or OWNER/REPO:VARIANT */
    const char *revision;      /* a branch, tag or commit; NULL: main */
    int offline;               /* --offline; HF_HUB_OFFLINE counts too */
    int language_only;         /* a separate installation (models.md) */
    const char *draft_model;   /* NULL: the family's draft; "none"; OWNER/REPO; a directory */
    const char *models_dir;    /* NULL: $XDG_DATA_HOME/splash/models */
    const struct splash_registry *registry; /* model-check's plugins */
    splash_hub_line_fn line;   /* status lines ("Downloading · ...", "Hub · ...") */
    int tty;                   /* progress bars on stderr rather than lines */
};

struct splash_installed {
    char dir[PATH_MAX];        /* the assembly directory */
    char target[PATH_MAX];     /* the GGUF (first part) or model directory in it */
    char commit[41];           /* the target's */
    char name[41];             /* the assembly's folder (the commit when there is no draft) */
    int kind;                  /* enum splash_target_kind */
    char draft_repo[256];      /* the draft's repository, "" when none or a directory */
    char draft_commit[41];     /* its commit, "" when none */
    char draft_dir[PATH_MAX];  /* a local draft directory, "" when none */
    char mmproj[PATH_MAX];     /* the projector's link in the assembly, "" when none */
};

enum splash_status splash_install(const struct splash_install_request *req,
                                  struct splash_installed *out, struct splash_err *err);

/* The installation lock of models_dir (a descriptor to close), waiting for another holder
 * with a line; -1 on failure. */
int splash_install_lock(const char *models_dir, splash_hub_line_fn line, struct splash_err *err);

/* Does a safetensors target need this repository file (config, tokenizer, index, shards)? */
int splash_install_wants_file(const char *path, int language_only);

/* DATA/models, made when missing. */
enum splash_status splash_install_models_dir(char *out, size_t size, struct splash_err *err);

#endif
