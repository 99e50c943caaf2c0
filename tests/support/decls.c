#include "tests/support/decls.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdio.h>

#include "core/host_impl.h"
#include "core/registry.h"
#include "core/meta.h"

struct decls_ctx {
    const struct splash_meta *meta;
    struct test_decls r;
};

static void on_decl(void *ctx, const struct splash_tensor_decl *d)
{
    struct decls_ctx *c = ctx;
    const struct splash_tensor_info *t = splash_meta_api_get()->tensor_find(c->meta, d->name);
    c->r.n++;
    if (!t) {
        if (!(d->flags & SPLASH_DECL_OPTIONAL)) {
            printf("  declared but missing: %s\n", d->name);
            c->r.bad++;
        }
        return;
    }
    for (int i = 0; i < 4; i++)
        if (t->ne[i] != d->ne[i]) {
            printf("  %s: shape dim %d is %lld, declared %lld\n", d->name, i, (long long)t->ne[i],
                   (long long)d->ne[i]);
            c->r.bad++;
        }
}

struct test_decls test_decls_check(const struct splash_family_plugin *fam,
                                   const struct splash_meta *m)
{
    struct splash_err err = {{0}};
    struct decls_ctx c = {.meta = m};
    const struct splash_host *host = splash_registry_host(splash_registry_global());
    assert_int_equal(fam->declare_tensors(host, m, on_decl, &c, &err), SPLASH_OK);
    return c.r;
}
