/* Target selection (models.md "GGUF targets", "Local model files"): which files of a
 * local directory, a GGUF file or a split part a model is served from, and the
 * OWNER/REPO[:VARIANT] model IDs that name them.
 *
 * A GGUF target is a root-level NAME.gguf (lower-case extension), the parts
 * NAME-0000K-of-0000N.gguf of a split GGUF at the root, or such parts in a folder
 * (FOLDER/NAME-0000K-of-0000N.gguf). Files whose name holds "mmproj" are projectors,
 * never targets. A directory holding config.json and safetensors weights is an MLX
 * (safetensors) target and wins over GGUF files beside it. */
#ifndef SPLASH_CORE_TARGET_H
#define SPLASH_CORE_TARGET_H

#include <limits.h>
#include <stddef.h>

#include "splash/status.h"

#define SPLASH_MODEL_ID_MAX 96

struct splash_model_id {
    char owner[SPLASH_MODEL_ID_MAX + 1];
    char repo[SPLASH_MODEL_ID_MAX + 1];
    char variant[SPLASH_MODEL_ID_MAX + 1]; /* "" when none */
};

/* "OWNER/REPO" or "OWNER/REPO:VARIANT"; names of letters, digits, '-', '_' and '.'
 * (no leading '-' or '.', no "..", "--" allowed as the Hub allows). */
enum splash_status splash_model_id_parse(const char *text, struct splash_model_id *out,
                                         struct splash_err *err);

enum splash_target_kind {
    SPLASH_TARGET_GGUF = 1,        /* one whole file */
    SPLASH_TARGET_GGUF_SPLIT = 2,  /* parts 1..n_parts, all present */
    SPLASH_TARGET_SAFETENSORS = 3, /* an MLX / safetensors model directory */
};

struct splash_target {
    int kind;                  /* enum splash_target_kind */
    char dir[PATH_MAX];        /* the directory holding the file(s) */
    char name[256];            /* GGUF: NAME without .gguf or the -0000K-of-0000N suffix */
    int n_parts;               /* 1 for a whole file */
    char path[PATH_MAX];       /* the file, the first part, or the model directory */
};

/* Selects the target at `path` (a directory, a .gguf file or any part of a split GGUF)
 * for an optional variant (NULL or ""). In a directory the variant names, in this
 * order: the root target named MODEL-VARIANT, MODEL the name the root targets share;
 * the folder named VARIANT in any case; the only root target whose name ends in
 * -VARIANT. Without a variant the directory's only target name is selected. A whole
 * file is selected before split parts of its name. Errors list what was found. */
enum splash_status splash_target_select(const char *path, const char *variant,
                                        struct splash_target *out, struct splash_err *err);

/* The same selection over a listing of paths relative to a repository's root (the
 * Hub's file list): out->dir is "" or the folder, out->path the first part's path
 * relative to the root; a safetensors target leaves both empty. */
enum splash_status splash_target_select_listing(const char *const *paths, size_t n_paths,
                                                const char *variant, struct splash_target *out,
                                                struct splash_err *err);

/* The path of part k (1-based) of a target: the file itself for a whole file. */
int splash_target_part_path(const struct splash_target *t, int k, char *buf, size_t size);

#endif
