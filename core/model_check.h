/* model-check: the rules every start applies, on metadata alone. */
#ifndef SPLASH_CORE_MODEL_CHECK_H
#define SPLASH_CORE_MODEL_CHECK_H

#include <stddef.h>

#include "splash/draft.h"
#include "splash/family.h"
#include "splash/status.h"

struct splash_registry;
struct splash_meta;

struct splash_check_result {
    int ok;
    char file[256];                  /* the file the verdict is about */
    char family[64];                 /* the plugin that claimed it */
    struct splash_family_verdict verdict;
    size_t n_tensors;
    char *problems;                  /* malloc'ed multi-line reasons when !ok, else NULL */
    char loads[256];                 /* when ok: "60 af4g64, 46 F32 (3.2 MiB)", what would load */
    /* with a draft (splash_model_check_draft) */
    int draft_checked;
    char draft_file[256];            /* the draft directory's name */
    char draft_plugin[64];           /* the draft plugin that accepted it */
    struct splash_draft_verdict draft_verdict;
};

/* Checks a GGUF (whole, split part, or header copy), a config.json, or a directory
 * of either. Fills res (free with splash_check_result_free). Returns SPLASH_OK when
 * the model passes, else the first failure's status with err summarising it. */
enum splash_status splash_model_check(const struct splash_registry *r, const char *path,
                                      struct splash_check_result *res, struct splash_err *err);
/* splash_model_check, then (when it passes and draft_dir is not NULL) the DFlash2 draft in
 * draft_dir against that target: its draft plugin's check (models.md "Drafts"), whose
 * refusal names the key; res->draft_* say what accepted it. */
enum splash_status splash_model_check_draft(const struct splash_registry *r, const char *path,
                                            const char *draft_dir,
                                            struct splash_check_result *res,
                                            struct splash_err *err);
/* splash_model_check_draft with flags: SPLASH_CHECK_DRAFT_CONFIG_ONLY reads draft_dir's
 * config.json alone (an installer's check before the draft's weights move): the draft
 * plugin holds the config to the target, its tensors unseen. */
#define SPLASH_CHECK_DRAFT_CONFIG_ONLY (1u << 1)
enum splash_status splash_model_check_draft_flags(const struct splash_registry *r,
                                                  const char *path, const char *draft_dir,
                                                  unsigned flags, struct splash_check_result *res,
                                                  struct splash_err *err);
/* Installers refuse mostly-unquantized GGUFs before any download
 * (gguf.require_quantized); the native loader does not. */
#define SPLASH_CHECK_REQUIRE_QUANTIZED (1u << 0)

/* The same on an open meta (the loader calls it before every start, without
 * SPLASH_CHECK_REQUIRE_QUANTIZED). */
enum splash_status splash_model_check_meta(const struct splash_registry *r,
                                           const struct splash_meta *m, unsigned flags,
                                           const struct splash_family_plugin **family,
                                           struct splash_check_result *res,
                                           struct splash_err *err);
void splash_check_result_free(struct splash_check_result *res);

/* Does a tensor of element type `dtype` (a GGUF type id), decoded by format f (NULL: none
 * loaded), suit the accept mask (SPLASH_ACCEPT_*)? QUANT means a format flagged
 * SPLASH_FORMAT_LINEAR. */
int splash_decl_accepts(uint32_t accept, const struct splash_format_type *f, int32_t dtype);
/* What is wrong with tensor t for declaration d, if anything: 1 with kind "unsupported" (no
 * format plugin decodes it, or, with `types`, the accept mask refuses its type) or "shape",
 * and a detail ("Q8_1"; "256x256, expected 256x512"); 0 when t suits d. */
int splash_decl_problem(const struct splash_tensor_decl *d, const struct splash_tensor_info *t,
                        int types, char *kind, size_t kind_size, char *detail,
                        size_t detail_size);

#endif
