/* model-check: the rules every start applies, on metadata alone. */
#ifndef SPLASH_CORE_MODEL_CHECK_H
#define SPLASH_CORE_MODEL_CHECK_H

#include <stddef.h>

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
};

/* Checks a GGUF (whole, split part, or header copy), a config.json, or a directory
 * of either. Fills res (free with splash_check_result_free). Returns SPLASH_OK when
 * the model passes, else the first failure's status with err summarising it. */
enum splash_status splash_model_check(const struct splash_registry *r, const char *path,
                                      struct splash_check_result *res, struct splash_err *err);
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

/* Does a tensor of GGUF type `type_name`, decoded by format f (NULL: none loaded), suit
 * `role` (models.md "GGUF targets")? Quantized linear means a format flagged
 * SPLASH_FORMAT_LINEAR. */
int splash_role_accepts(uint32_t role, const struct splash_format_type *f,
                        const char *type_name);

#endif
