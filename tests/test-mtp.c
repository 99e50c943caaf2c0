/* The model's own MTP (nextn) block as the proposer (families/drafts/nextn): make-model's
 * qwen35-tiny-mtp (llama.cpp's blk.8.nextn.* layout) decodes with --speculative mtp exactly
 * as without it (tokens and logprobs bit for bit, int8 and bf16 KV, three lanes at once),
 * and so does qwen35moe-tiny-mtp, whose block's FFN is the mixture of experts;
 * a "bigram" edit of it, whose trunk and block pass the token's embedding straight to the
 * head (every output projection zero, eh_proj the identity on the token's half), has a
 * block that predicts what the target says, so its proposals are accepted: the rows read
 * the token at their own position and chain each proposal into the next row. A fork, a
 * rollback and a context past the block's window draft as a fresh context does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/modelgen/model_writer.h"
#include "core/draft.h"
#include "core/gguf.h"
#include "core/gguf_write.h"
#include "core/meta.h"
#include "core/registry.h"
#include "core/threadpool.h"
#include "server/engine/gen_params.h"
#include "server/engine/protocol.h"
#include "server/engine/speculate.h"
#include "splash/draft.h"
#include "tests/support/engine_thread.h"
#include "tests/support/gguf_copy.h"
#include "tests/support/preset.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];

static char random_path[] = "/tmp/splash-mtp-random-XXXXXX.gguf";
static char bigram_path[] = "/tmp/splash-mtp-bigram-XXXXXX.gguf";
static char moe_path[] = "/tmp/splash-mtp-moe-XXXXXX.gguf";

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* The bigram edit: every layer's and the block's output projections zero (the residual
 * stream stays the token's embedding), the block's eh_proj the identity on its first half
 * (the normed embedding) and enorm ones, so the block's head reads what the target's does;
 * the head untied, each row the embedding of the token before, so the next token is a
 * function of the last that moves on (the tied head would mostly repeat the token). */
static void write_bigram(const char *src, const char *dst)
{
    struct splash_gguf *g;
    struct splash_err err;
    if (splash_gguf_open(src, 0, &g, &err) != SPLASH_OK)
        fail_msg("%s", err.msg);
    struct splash_gguf_writer *w = splash_gguf_writer_create();
    for (size_t i = 0; i < g->n_kv; i++)
        test_gguf_copy_kv(w, &g->kv[i]);
    void **scratch = calloc(g->n_tensors, sizeof *scratch);
    char *scratch_head = NULL;
    for (size_t i = 0; i < g->n_tensors; i++) {
        const struct splash_tensor_info *t = &g->tensors[i].info;
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        int32_t type = t->dtype;
        const void *data = t->data;
        uint64_t n_bytes = t->n_bytes;
        if (ends_with(t->name, "ssm_out.weight") || ends_with(t->name, "attn_output.weight") ||
            ends_with(t->name, "ffn_down.weight")) {
            data = scratch[i] = calloc(1, n_bytes);
        } else if (ends_with(t->name, "nextn.eh_proj.weight")) {
            type = 0;
            n_bytes = (uint64_t)(ne[0] * ne[1]) * sizeof(float);
            float *x = scratch[i] = calloc(1, n_bytes);
            for (int64_t r = 0; r < ne[1]; r++)
                x[r * ne[0] + r] = 1.0f;
            data = x;
        } else if (ends_with(t->name, "nextn.enorm.weight")) {
            type = 0;
            n_bytes = (uint64_t)ne[0] * sizeof(float);
            float *x = scratch[i] = malloc(n_bytes);
            for (int64_t r = 0; r < ne[0]; r++)
                x[r] = 1.0f;
            data = x;
        }
        if (splash_gguf_writer_add_tensor(w, t->name, type, t->n_dims, ne, data, n_bytes, &err))
            fail_msg("%s: %s", t->name, err.msg);
        if (!strcmp(t->name, "token_embd.weight")) {
            /* an untied head whose row j is token j - 1's embedding: a token's own row
             * scores highest against it, so the next token is the one after it */
            size_t row = (size_t)(n_bytes / (uint64_t)ne[1]);
            char *head = scratch_head = malloc(n_bytes);
            for (int64_t j = 0; j < ne[1]; j++)
                memcpy(head + (size_t)j * row,
                       (const char *)data + (size_t)((j + ne[1] - 1) % ne[1]) * row, row);
            if (splash_gguf_writer_add_tensor(w, "output.weight", type, 2, ne, head, n_bytes,
                                              &err))
                fail_msg("output.weight: %s", err.msg);
        }
    }
    if (splash_gguf_writer_write_file(w, dst, &err))
        fail_msg("%s", err.msg);
    splash_gguf_writer_destroy(w);
    for (size_t i = 0; i < g->n_tensors; i++)
        free(scratch[i]);
    free(scratch);
    free(scratch_head);
    splash_gguf_close(g);
}

static int setup(void **state)
{
    (void)state;
    splash_registry_add_builtins(splash_registry_global(), splash_builtin_plugins);
    int fd = mkstemps(random_path, 5);
    if (fd < 0)
        return -1;
    close(fd);
    fd = mkstemps(bigram_path, 5);
    if (fd < 0)
        return -1;
    close(fd);
    fd = mkstemps(moe_path, 5);
    if (fd < 0)
        return -1;
    close(fd);
    struct splash_model_write_opts opts = {.mix = "Q8_0", .seed = 7, .n_threads = 2};
    struct splash_err err;
    if (splash_model_write(splash_registry_global(), test_preset("qwen35-tiny-mtp"), &opts,
                           random_path, NULL, &err) != SPLASH_OK) {
        fprintf(stderr, "make-model: %s\n", err.msg);
        return -1;
    }
    if (splash_model_write(splash_registry_global(), test_preset("qwen35moe-tiny-mtp"), &opts,
                           moe_path, NULL, &err) != SPLASH_OK) {
        fprintf(stderr, "make-model: %s\n", err.msg);
        return -1;
    }
    write_bigram(random_path, bigram_path);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(random_path);
    unlink(bigram_path);
    unlink(moe_path);
    return 0;
}

/* ---- the engine end to end ------------------------------------------------------------ */

static void engine_start_spec(struct test_engine *t, const char *file, int kv, int spec)
{
    const struct splash_engine_opts o = {.n_threads = 2,
                                         .kv_format = kv,
                                         .max_context = 2048,
                                         .max_lanes = 4,
                                         .prefill_chunk = 64,
                                         .decode_share = 0.5,
                                         .speculative = spec};
    test_engine_start_opts(t, file, &o);
}

enum { R = 3, OUT = 48 };

static void submit_all(struct test_engine *t, int32_t p[R][24], int n)
{
    for (int i = 0; i < R; i++) {
        struct splash_submit s = {.prompt = p[i], .n_prompt = (size_t)n, .reuse_token = -1};
        splash_gen_params_init(&s.params);
        s.params.max_tokens = OUT;
        s.params.logprobs = 1;
        s.params.sampling.temperature = 0.0f;
        struct splash_err err;
        assert_int_equal(splash_frame_write_submit(t->fd, 1 + (uint64_t)i, &s, &err), SPLASH_OK);
    }
}

/* Plain and MTP greedy decoding of three prompts at once; returns the accepted and
 * proposed counts over them. */
static void greedy_case(const char *file, const char *label, int kv, int64_t *accepted,
                        int64_t *proposed)
{
    int32_t p[R][24];
    uint64_t x = 12345;
    for (int i = 0; i < R; i++)
        for (int k = 0; k < 24; k++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            p[i][k] = (int32_t)(20 + (x >> 33) % 1000);
        }
    struct test_result plain[R], spec[R];
    struct test_engine t;
    engine_start_spec(&t, file, kv, SPLASH_SPEC_OFF);
    submit_all(&t, p, 24);
    test_engine_collect_all(&t, 1, R, plain);
    test_engine_stop(&t);
    engine_start_spec(&t, file, kv, SPLASH_SPEC_MTP);
    const char *mode = json_string_value(
        json_object_get(json_object_get(t.ready, "speculation"), "mode"));
    assert_non_null(mode);
    assert_string_equal(mode, "mtp");
    submit_all(&t, p, 24);
    test_engine_collect_all(&t, 1, R, spec);
    test_engine_stop(&t);
    *accepted = *proposed = 0;
    for (int i = 0; i < R; i++) {
        char what[128];
        snprintf(what, sizeof what, "%s kv %d request %d with mtp", label, kv, i);
        if (!plain[i].done || !spec[i].done)
            fail_msg("%s: %s%s", what, plain[i].message, spec[i].message);
        test_result_assert_same(what, &spec[i], &plain[i], "plain decoding");
        assert_int_equal(spec[i].completion, OUT);
        int distinct = 0;
        for (int k = 0; k < plain[i].n; k++) {
            int seen = 0;
            for (int j = 0; j < k; j++)
                seen |= plain[i].tokens[j] == plain[i].tokens[k];
            distinct += !seen;
        }
        assert_true(distinct >= 2); /* not one token repeated: a row's token matters */
        *accepted += spec[i].accepted;
        *proposed += spec[i].proposed;
    }
    printf("  %s kv %d: %lld of %lld proposals accepted\n", label, kv, (long long)*accepted,
           (long long)*proposed);
}

static void test_mtp_greedy_identical(void **state)
{
    (void)state;
    const int kvs[2] = {SPLASH_KV_INT8, SPLASH_KV_BF16};
    for (int k = 0; k < 2; k++) {
        int64_t acc, prop;
        greedy_case(random_path, "random", kvs[k], &acc, &prop);
        assert_true(prop > 0);
        greedy_case(moe_path, "random MoE", kvs[k], &acc, &prop);
        assert_true(prop > 0);
        greedy_case(bigram_path, "bigram", kvs[k], &acc, &prop);
        /* the block says what the target says: nearly every proposal is accepted */
        assert_true(prop > 0);
        assert_true(acc * 10 >= prop * 9);
    }
}

/* ---- the draft's context ------------------------------------------------------------- */

struct nextn_run {
    struct splash_meta *meta;
    const struct splash_draft_plugin *plugin;
    void *model;
    struct splash_draft_info info;
    struct splash_pool *pool;
};

static void open_nextn(struct nextn_run *n, const char *path)
{
    struct splash_err err = {{0}};
    memset(n, 0, sizeof *n);
    n->pool = splash_pool_create(2);
    if (splash_meta_open_gguf(path, 0, &n->meta, &err))
        fail_msg("%s", err.msg);
    splash_meta_bind_formats(n->meta, splash_registry_global());
    struct splash_draft_verdict v;
    if (splash_draft_select_nextn(splash_registry_global(), n->meta, &n->plugin, &v, &err))
        fail_msg("%s", err.msg);
    const struct splash_draft_opts o = {.pool = n->pool};
    if (splash_draft_create(splash_registry_global(), n->plugin, n->meta, n->meta, &o, &n->model,
                            &n->info, &err))
        fail_msg("%s", err.msg);
}

static void close_nextn(struct nextn_run *n)
{
    splash_draft_destroy(n->plugin, n->model);
    splash_meta_close(n->meta);
    splash_pool_destroy(n->pool);
}

enum { LONG = 2600, E = 256 };

/* A proposal of 7 at pos over tokens[0..pos]; out: tokens then candidate probabilities. */
static void propose_at(struct nextn_run *n, void *ctx, const int32_t *tokens, int32_t pos,
                       int32_t *out, float *probs)
{
    struct splash_err err = {{0}};
    const struct splash_draft_block b = {.size = sizeof b,
                                         .anchor = tokens[pos],
                                         .pos = pos,
                                         .n_rows = 7,
                                         .tokens = out,
                                         .cand_tokens = NULL,
                                         .cand_probs = probs,
                                         .history = tokens};
    if (splash_draft_propose(n->plugin, n->model, ctx, &b, &err))
        fail_msg("propose at %d: %s", pos, err.msg);
}

static void test_mtp_context_fork_rollback_window(void **state)
{
    (void)state;
    struct nextn_run n;
    open_nextn(&n, random_path);
    assert_int_equal(n.info.n_taps, 1);
    assert_int_equal(n.info.tap_layers[0], 7); /* the trunk's last layer */
    assert_int_equal(n.info.n_embd, E);
    static float taps[LONG * E];
    static int32_t tokens[LONG + 1];
    uint64_t x = 99;
    for (int64_t i = 0; i < (int64_t)LONG * E; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        taps[i] = (float)((double)(x >> 40) / (double)(1ull << 24) - 0.5) * 4.0f;
    }
    for (int i = 0; i <= LONG; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        tokens[i] = (int32_t)((x >> 33) % 2000);
    }
    struct splash_err err = {{0}};
    const struct splash_draft_plugin *p = n.plugin;
    /* a: the taps in one go, past the block's window and its pages */
    void *a, *b, *f;
    int32_t ta[7], tb[7];
    float pa[7 * 16], pb[7 * 16];
    assert_int_equal(splash_draft_ctx_create(p, n.model, &a, &err), SPLASH_OK);
    assert_int_equal(splash_draft_append_context(p, n.model, a, taps, E, 0, LONG, &err),
                     SPLASH_OK);
    propose_at(&n, a, tokens, LONG, ta, pa);
    /* b: a few rows at a time with blocks proposed and rolled back between */
    assert_int_equal(splash_draft_ctx_create(p, n.model, &b, &err), SPLASH_OK);
    for (int32_t at = 0; at < LONG;) {
        int32_t step = at < 2000 ? 250 : 7;
        if (at + step > LONG)
            step = LONG - at;
        assert_int_equal(splash_draft_append_context(p, n.model, b, taps + (int64_t)at * E, E, at,
                                                     step, &err),
                         SPLASH_OK);
        at += step;
        propose_at(&n, b, tokens, at, tb, pb);
        if (at < LONG && at > 3 * step) {
            /* a verify that kept fewer rows than fed: rolled back, then fed again */
            assert_int_equal(splash_draft_rollback(p, n.model, b, at - 3, &err), SPLASH_OK);
            assert_int_equal(splash_draft_append_context(p, n.model, b,
                                                         taps + (int64_t)(at - 3) * E, E, at - 3,
                                                         3, &err),
                             SPLASH_OK);
        }
    }
    propose_at(&n, b, tokens, LONG, tb, pb);
    assert_memory_equal(ta, tb, sizeof ta);
    assert_memory_equal(pa, pb, sizeof pa);
    /* a fork drafts as its source */
    assert_int_equal(splash_draft_ctx_fork(p, n.model, a, &f, &err), SPLASH_OK);
    propose_at(&n, f, tokens, LONG, tb, pb);
    assert_memory_equal(ta, tb, sizeof ta);
    assert_memory_equal(pa, pb, sizeof pa);
    /* rows the window dropped cannot come back: refused, not guessed */
    assert_int_equal(splash_draft_rollback(p, n.model, a, 100, &err), SPLASH_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "rows before 100 are gone"));
    /* a block without the tokens is refused with the reason */
    const struct splash_draft_block nohist = {.size = offsetof(struct splash_draft_block, history),
                                              .anchor = tokens[LONG],
                                              .pos = LONG,
                                              .n_rows = 7,
                                              .tokens = tb};
    assert_int_equal(splash_draft_propose(p, n.model, f, &nohist, &err), SPLASH_ERR_INVALID);
    assert_non_null(strstr(err.msg, "no token history"));
    splash_draft_ctx_destroy(p, n.model, a);
    splash_draft_ctx_destroy(p, n.model, b);
    splash_draft_ctx_destroy(p, n.model, f);
    close_nextn(&n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mtp_context_fork_rollback_window),
        cmocka_unit_test(test_mtp_greedy_identical),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
