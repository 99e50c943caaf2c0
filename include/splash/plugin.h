/* The plugin boundary: one exported entry per plugin, a common descriptor header.
 *
 * A plugin exports exactly one symbol, splash_plugin_entry_v1, which returns a
 * const descriptor that opens with struct splash_plugin_header. The loader
 * checks abi_major equal, abi_minor no newer than its own, size at least the
 * kind's minimum, then the kind and a unique name. Descriptors are copied once
 * into a zeroed full-size struct (min(size, sizeof) bytes), so members a plugin
 * predates read as NULL. Vtables are append-only: never reorder or remove. */
#ifndef SPLASH_PLUGIN_H
#define SPLASH_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#define SPLASH_ABI_MAJOR 1
#define SPLASH_ABI_MINOR 6

struct splash_host;

enum splash_plugin_kind {
    SPLASH_PLUGIN_FORMAT = 1,
    SPLASH_PLUGIN_FAMILY = 2,
    SPLASH_PLUGIN_DRAFT = 3, /* ABI 1.3: splash/draft.h */
};

struct splash_plugin_header {
    uint16_t abi_major;  /* SPLASH_ABI_MAJOR the plugin was built against */
    uint16_t abi_minor;  /* SPLASH_ABI_MINOR the plugin was built against */
    uint32_t size;       /* sizeof the full descriptor as the plugin knows it */
    uint32_t kind;       /* enum splash_plugin_kind */
    const char *name;    /* unique among loaded plugins: "kquants", "qwen_hybrid" */
    const char *version; /* the plugin's own version string */
};

/* Called once per process with the host table (valid for the process lifetime).
 * Returns the plugin's descriptor (static storage) or NULL to decline. */
typedef const struct splash_plugin_header *(*splash_plugin_entry_fn)(const struct splash_host *host);

#define SPLASH_PLUGIN_ENTRY_SYMBOL "splash_plugin_entry_v1"

#define SPLASH_PLUGIN_HEADER_INIT(kind_, name_, version_, type_)                                   \
    {                                                                                              \
        .abi_major = SPLASH_ABI_MAJOR, .abi_minor = SPLASH_ABI_MINOR,                              \
        .size = (uint32_t)sizeof(type_), .kind = (kind_), .name = (name_), .version = (version_)   \
    }

/* One source, two link modes. Built as a shared object the macro exports the
 * ABI entry; built with -DSPLASH_PLUGIN_BUILTIN (unit tests, static builds) it
 * defines splash_builtin_<id>() instead, which the core registers directly. */
#if defined(SPLASH_PLUGIN_BUILTIN)
#define SPLASH_PLUGIN_DEFINE(id, entry)                                                            \
    const struct splash_plugin_header *splash_builtin_##id(const struct splash_host *host);        \
    const struct splash_plugin_header *splash_builtin_##id(const struct splash_host *host)         \
    {                                                                                              \
        return entry(host);                                                                        \
    }
#else
#define SPLASH_PLUGIN_DEFINE(id, entry)                                                            \
    __attribute__((visibility("default"))) const struct splash_plugin_header                      \
        *splash_plugin_entry_v1(const struct splash_host *host);                                   \
    __attribute__((visibility("default"))) const struct splash_plugin_header                      \
        *splash_plugin_entry_v1(const struct splash_host *host)                                    \
    {                                                                                              \
        return entry(host);                                                                        \
    }
#endif

#endif
