/* YaRN past the native window (server.md "Memory and context"): a context past the
 * trained window scales RoPE; within the window nothing changes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/model_load.h"
#include "core/registry.h"
#include "tests/support/golden.h"
#include "tests/support/testdata.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];

/* Prompt logits of the trained stories model at a given context limit. */
static float *prompt_logits(int64_t max_context, const struct test_golden *g)
{
    struct splash_registry *r = splash_registry_global();
    if (!splash_registry_n_records(r))
        splash_registry_add_builtins(r, splash_builtin_plugins);
    char path[512];
    test_testdata_path(path, sizeof path, "models/qwen35-stories-Q8_0.gguf");
    struct splash_model_opts o = {.kv_format = SPLASH_KV_BF16, .max_context = max_context};
    struct splash_loaded_model *lm;
    struct splash_err err;
    if (splash_model_load(r, path, &o, 1, &lm, &err) != SPLASH_OK)
        fail_msg("%s", err.msg);
    void *seq;
    assert_int_equal(lm->family->seq_create(lm->model, &seq, &err), SPLASH_OK);
    float *logits = malloc((size_t)g->n_prompt * (size_t)g->n_vocab * sizeof *logits);
    struct splash_lane lane = {.seq = seq, .tokens = g->tokens, .n_tokens = g->n_prompt,
                               .logits = logits, .logits_all = 1};
    assert_int_equal(lm->family->forward(lm->model, &lane, 1, &err), SPLASH_OK);
    lm->family->seq_destroy(lm->model, seq);
    splash_model_unload(lm);
    return logits;
}

static void test_yarn_scales_past_the_window_only(void **state)
{
    struct test_golden g;
    assert_int_equal(test_golden_load("qwen35-stories-Q8_0", &g), 0);
    float *native = prompt_logits(0, &g);
    float *within = prompt_logits(2048, &g);   /* inside the 4096-token window: unchanged */
    float *yarn = prompt_logits(16384, &g);    /* factor 4 */
    size_t n = (size_t)g.n_prompt * (size_t)g.n_vocab;
    assert_memory_equal(native, within, n * sizeof *native);
    double max_diff = 0;
    int agree = 0;
    for (int32_t i = 0; i < g.n_prompt; i++) {
        const float *a = native + (size_t)i * g.n_vocab, *b = yarn + (size_t)i * g.n_vocab;
        max_diff = fmax(max_diff, test_logits_row_diff(a, b, g.n_vocab));
        agree += test_argmax(a, g.n_vocab) == test_argmax(b, g.n_vocab);
    }
    /* the scaled rotary changes the logits, and a trained model still reads its prompt */
    assert_true(max_diff > 1e-3);
    assert_true(agree * 10 >= g.n_prompt * 8);
    free(native);
    free(within);
    free(yarn);
    test_golden_free(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_yarn_scales_past_the_window_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
