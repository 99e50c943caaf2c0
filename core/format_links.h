/* What the registry binds to each format type it holds, so the kernels work from the
 * format bound to a tensor and never look formats up in a registry. */
#ifndef SPLASH_CORE_FORMAT_LINKS_H
#define SPLASH_CORE_FORMAT_LINKS_H

#include "splash/format.h"

struct splash_format_links {
    /* the format activations are quantized to (act_type); NULL: activations stay F32
     * or act_type names no registered format */
    const struct splash_format_type *act;
    /* the repacked layout repack_to names; NULL when none */
    const struct splash_format_type *repack;
};

/* The registry keeps each registered type in one of these (the type first). */
struct splash_format_record {
    struct splash_format_type type;
    struct splash_format_links links;
};

/* The links of a type a registry holds: every format a registry hands out (look-ups,
 * tensors bound by splash_meta_bind_formats) is one. */
static inline const struct splash_format_links *
splash_format_links_of(const struct splash_format_type *f)
{
    return &((const struct splash_format_record *)f)->links;
}

#endif
