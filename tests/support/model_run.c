#include "tests/support/model_run.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/family.h"
#include "core/host_impl.h"
#include "core/meta.h"
#include "core/registry.h"

const struct splash_family_plugin *test_family(const char *name)
{
    struct splash_registry *r = splash_registry_global();
    for (size_t i = 0; i < splash_registry_n_families(r); i++)
        if (!strcmp(splash_registry_family(r, i)->header.name, name))
            return splash_registry_family(r, i);
    fail_msg("no family %s", name);
    return NULL;
}

int test_run_open(struct test_run *r, const struct test_run_opts *o, const char *path,
                  const char *label)
{
    struct splash_err err = {{0}};
    memset(r, 0, sizeof *r);
    r->fam = o->fam;
    assert_int_equal(splash_meta_open_gguf(path, 0, &r->meta, &err), SPLASH_OK);
    splash_meta_bind_formats(r->meta, splash_registry_global());
    for (size_t i = 0; o->skip_unformatted && i < r->meta->n_tensors; i++) {
        const struct splash_tensor_info *t = r->meta->tensors[i];
        if (!t->format) {
            printf("  note: %s skipped: no format plugin decodes %s (%s) yet\n", label,
                   t->type_name, t->name);
            splash_meta_close(r->meta);
            return 1;
        }
    }
    struct splash_model_opts opts = {
        .pool = o->pool, .kv_format = o->kv_format, .state_format = o->state_format,
        .expert_memory = o->expert_memory, .expert_elastic = o->expert_elastic};
    if (splash_family_model_create(splash_registry_global(), r->fam, r->meta, &opts, &r->model,
                                   &r->info, &err))
        fail_msg("%s: %s", label, err.msg);
    return 0;
}

void test_run_close(struct test_run *r)
{
    r->fam->model_destroy(r->model);
    splash_meta_close(r->meta);
}

float *test_run_logits(struct test_run *r, const int32_t *tokens, int32_t n, int decode,
                       int32_t *step_pos0)
{
    struct splash_err err = {{0}};
    void *seq;
    assert_int_equal(r->fam->seq_create(r->model, &seq, &err), SPLASH_OK);
    size_t V = (size_t)r->info.n_vocab;
    float *out = malloc((size_t)n * V * sizeof *out);
    assert_non_null(out);
    int32_t step = decode ? 1 : n;
    for (int32_t i = 0; i < n; i += step) {
        struct splash_lane lane = {.seq = seq,
                                   .tokens = tokens + i,
                                   .n_tokens = step,
                                   .pos0 = i,
                                   .logits = out + (size_t)i * V,
                                   .logits_all = 1};
        if (step_pos0)
            *step_pos0 = i;
        if (r->fam->forward(r->model, &lane, 1, &err))
            fail_msg("forward at %d: %s", i, err.msg);
    }
    r->fam->seq_destroy(r->model, seq);
    return out;
}
