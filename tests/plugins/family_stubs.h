/* The loader tests' family fixtures: a check that claims whatever it is shown and an empty
 * declaration list (the loader never runs them past registration). */
#ifndef SPLASH_TEST_PLUGINS_FAMILY_STUBS_H
#define SPLASH_TEST_PLUGINS_FAMILY_STUBS_H

#include "splash/family.h"

static enum splash_status check(const struct splash_host *host, const struct splash_meta *m,
                                struct splash_family_verdict *v, struct splash_err *err)
{
    v->score = 1;
    return SPLASH_OK;
}

static enum splash_status declare(const struct splash_host *host, const struct splash_meta *m,
                                  splash_decl_emit_fn emit, void *ctx, struct splash_err *err)
{
    return SPLASH_OK;
}

#endif
