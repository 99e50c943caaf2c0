/* The plugin registry: loads plugins, holds their descriptors, answers claims. */
#ifndef SPLASH_CORE_REGISTRY_H
#define SPLASH_CORE_REGISTRY_H

#include "splash/draft.h"
#include "splash/family.h"
#include "splash/format.h"
#include "splash/plugin.h"

struct splash_registry;

/* One plugin the registry saw: loaded (refusal[0] == 0) or refused (the reason). */
struct splash_plugin_record {
    char origin[512];   /* file path, or "builtin" */
    char name[64];
    char version[32];
    uint32_t kind;
    char refusal[256];  /* empty when loaded */
};

struct splash_registry *splash_registry_create(void);
/* Never unloads plugin code (threads may still run it); frees bookkeeping only. */
void splash_registry_destroy(struct splash_registry *r);

/* Registers the descriptor an entry returns. A refusal is logged once, recorded,
 * and returned with err naming origin and reason. */
enum splash_status splash_registry_add_entry(struct splash_registry *r, splash_plugin_entry_fn entry,
                                             const char *origin, struct splash_err *err);
/* dlopens one plugin file and registers it. */
enum splash_status splash_registry_load_file(struct splash_registry *r, const char *path,
                                             struct splash_err *err);
/* Loads every libsplash-*.so in dir (sorted); refusals are recorded, not fatal. */
void splash_registry_load_dir(struct splash_registry *r, const char *dir);
/* The default search (core/plugin_search.h): each of extra_dirs (may be NULL),
 * $SPLASH_PLUGIN_PATH (colon-separated), then <exe>/../lib/splash, or the build tree's
 * lib/splash for a binary in one. The first directory holding a plugin of a given name
 * wins; world-writable directories and files are refused (recorded). */
void splash_registry_load_default(struct splash_registry *r, const char *const *extra_dirs,
                                  size_t n_extra);
/* Registers every plugin linked statically (tests, static builds). */
void splash_registry_add_builtins(struct splash_registry *r, const splash_plugin_entry_fn *entries);

size_t splash_registry_n_records(const struct splash_registry *r);
const struct splash_plugin_record *splash_registry_record(const struct splash_registry *r, size_t i);

size_t splash_registry_n_formats(const struct splash_registry *r);
const struct splash_format_plugin *splash_registry_format(const struct splash_registry *r, size_t i);
size_t splash_registry_n_families(const struct splash_registry *r);
const struct splash_family_plugin *splash_registry_family(const struct splash_registry *r, size_t i);
size_t splash_registry_n_drafts(const struct splash_registry *r);
const struct splash_draft_plugin *splash_registry_draft(const struct splash_registry *r, size_t i);

const struct splash_format_type *splash_registry_format_by_gguf(const struct splash_registry *r,
                                                                int32_t gguf_type);
const struct splash_format_type *splash_registry_format_by_name(const struct splash_registry *r,
                                                                const char *name);

/* The host table this registry hands its plugins (valid while r lives). */
const struct splash_host *splash_registry_host(const struct splash_registry *r);

/* The process's registry, for the programs (created on first use, never destroyed). */
struct splash_registry *splash_registry_global(void);

#endif
