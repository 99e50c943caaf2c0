/* The DFlash2 draft plugin: its proposals against the PyTorch reference's recorded cycles
 * (../shared/testdata/drafts, teacher-forced: each cycle's context is the target's taps of
 * the recorded sequence before its start), with the projections as stored and quantized
 * to af4g64; its refusals of configurations the kernels or the target do not take, each
 * naming the key; and the target family's taps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/draft.h"
#include "core/gguf.h"
#include "core/gguf_write.h"
#include "core/import_mem.h"
#include "core/family.h"
#include "core/meta.h"
#include "core/model_check.h"
#include "core/registry.h"
#include "core/safetensors.h"
#include "core/threadpool.h"
#include "splash/draft.h"
#include "families/drafts/dflash2/dflash2.h"
#include "tests/support/config_file.h"
#include "tests/support/gguf_copy.h"
#include "tests/support/kernel_rows.h"
#include "tests/support/model_run.h"
#include "tests/support/rng.h"
#include "tests/support/testdata.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];

static struct splash_pool *pool;
static const struct splash_family_plugin *fam;

static int setup(void **state)
{
    splash_registry_add_builtins(splash_registry_global(), splash_builtin_plugins);
    fam = test_family("qwen_hybrid");
    pool = splash_pool_create(2);
    return fam && pool ? 0 : -1;
}

static int teardown(void **state)
{
    splash_pool_destroy(pool);
    return 0;
}

static void open_target(struct test_run *t)
{
    char path[512];
    const struct test_run_opts o = {.fam = fam, .pool = pool, .kv_format = SPLASH_KV_BF16};
    assert_int_equal(test_run_open(t,
                                   &o,
                                   test_testdata_path(path, sizeof path,
                                                      "models/qwen35-stories-Q8_0.gguf"),
                                   "stories"),
                     0);
}

/* The draft in dir (relative to the testdata directory, or absolute). */
static struct splash_meta *open_draft_at(const char *dir)
{
    char path[512];
    struct splash_meta *m = NULL;
    struct splash_err err = {{0}};
    if (splash_draft_open(splash_registry_global(), test_testdata_path(path, sizeof path, dir), 0,
                          &m, &err))
        fail_msg("draft %s: %s", dir, err.msg);
    return m;
}

static struct splash_meta *open_draft(void)
{
    return open_draft_at("drafts/qwen35-stories-DFlash2");
}

/* A draft selected for a target and created: its plugin, verdict, model and info. */
struct draft_made {
    const struct splash_draft_plugin *dp;
    struct splash_draft_verdict v;
    void *dm;
    struct splash_draft_info di;
};

/* Selects the draft for target (a refusal fails the test) and creates it: create's status,
 * its refusal in err. */
static enum splash_status draft_make(struct splash_meta *draft, struct splash_meta *target,
                                     const struct splash_draft_opts *o, struct draft_made *d,
                                     struct splash_err *err)
{
    memset(d, 0, sizeof *d);
    if (splash_draft_select(splash_registry_global(), draft, target, &d->dp, &d->v, err))
        fail_msg("select: %s", err->msg);
    return splash_draft_create(splash_registry_global(), d->dp, draft, target, o, &d->dm, &d->di,
                               err);
}

/* The stories target with its DFlash2 draft selected and created. */
struct draft_run {
    struct test_run t;
    struct splash_meta *meta;
    struct draft_made made;
};

static void draft_run_open(struct draft_run *d, const struct splash_draft_opts *o)
{
    memset(d, 0, sizeof *d);
    open_target(&d->t);
    d->meta = open_draft();
    struct splash_err err = {{0}};
    if (draft_make(d->meta, d->t.meta, o, &d->made, &err))
        fail_msg("create: %s", err.msg);
}

static void draft_run_close(struct draft_run *d)
{
    splash_draft_destroy(d->made.dp, d->made.dm);
    splash_meta_close(d->meta);
    test_run_close(&d->t);
}

/* The target's taps of tokens[0..n), one forward (n x n_taps * n_embd floats). */
static float *target_taps(struct test_run *t, const struct splash_draft_info *di,
                          const int32_t *tokens, int32_t n)
{
    struct splash_err err = {{0}};
    void *seq = NULL;
    assert_int_equal(splash_family_seq_create(t->fam, t->model, &seq, &err), SPLASH_OK);
    float *rows = malloc((size_t)n * (size_t)di->n_taps * (size_t)di->n_embd * sizeof(float));
    assert_non_null(rows);
    const struct splash_lane lane = {.seq = seq, .tokens = tokens, .n_tokens = n};
    const struct splash_taps taps = {
        .size = sizeof taps, .n_layers = di->n_taps, .layers = di->tap_layers, .rows = &rows};
    enum splash_status st = splash_family_forward_taps(t->fam, t->model, &lane, 1, &taps, &err);
    if (st)
        fail_msg("taps: %s", err.msg);
    splash_family_seq_destroy(t->fam, t->model, seq);
    return rows;
}

struct agreement {
    int rows, equal;       /* every proposal row */
    int cycles, whole;     /* cycles whose 7 proposals all agree */
    int prefix_rows, prefix_equal; /* rows whose earlier proposals agree */
    int sim_cycles, sim_tokens;    /* the decode cycle replayed on the greedy text */
    int same_accept;               /* cycles whose proposals the target keeps as many of */
    int accepted, ref_accepted;    /* proposals kept over the recorded cycles */
};

/* The reference's greedy decode cycle replayed with this draft: after the prompt (n_prompt
 * tokens) and the prefill's token, each cycle drafts 7 proposals at the last token,
 * verifies min(8, tokens left) rows against the greedy text seq (the target's own, which
 * the reference showed speculation reproduces) and keeps the agreeing prefix and the
 * target's token. */
static void simulate(const struct splash_draft_plugin *dp, void *dm, const float *taps,
                     int64_t width, const int32_t *seq, int32_t n_prompt, int32_t n,
                     struct agreement *a)
{
    struct splash_err err = {{0}};
    void *ctx = NULL;
    assert_int_equal(splash_draft_ctx_create(dp, dm, &ctx, &err), SPLASH_OK);
    int32_t start = n_prompt, held = 0;
    while (start < n - 1) {
        assert_int_equal(splash_draft_append_context(dp, dm, ctx, taps + held * width, width,
                                                     held, start - held, &err),
                         SPLASH_OK);
        held = start;
        int32_t got[7], left = n - 1 - start, rows = left < 8 ? left : 8;
        const struct splash_draft_block b = {
            .size = sizeof b, .anchor = seq[start], .pos = start, .n_rows = 7, .tokens = got};
        assert_int_equal(splash_draft_propose(dp, dm, ctx, &b, &err), SPLASH_OK);
        int32_t acc = 0;
        while (acc < rows - 1 && got[acc] == seq[start + 1 + acc])
            acc++;
        int32_t produced = acc + 1 < left ? acc + 1 : left;
        a->sim_cycles++;
        a->sim_tokens += produced;
        start += produced;
    }
    splash_draft_ctx_destroy(dp, dm, ctx);
}

/* Teacher-forces every recorded cycle of every prompt through the draft. */
static void run_cycles(const struct splash_draft_plugin *dp, void *dm,
                       const struct splash_draft_info *di, struct test_run *t, json_t *results,
                       struct agreement *a)
{
    struct splash_err err = {{0}};
    size_t i;
    json_t *res;
    json_array_foreach(results, i, res) {
        json_t *prompt = json_object_get(res, "prompt"), *spec = json_object_get(res, "spec");
        int32_t n = (int32_t)(json_array_size(prompt) + json_array_size(spec));
        int32_t *seq = malloc((size_t)n * sizeof *seq);
        assert_non_null(seq);
        for (int32_t j = 0; j < n; j++) {
            size_t np = json_array_size(prompt);
            json_t *v = (size_t)j < np ? json_array_get(prompt, (size_t)j)
                                       : json_array_get(spec, (size_t)j - np);
            seq[j] = (int32_t)json_integer_value(v);
        }
        float *taps = target_taps(t, di, seq, n);
        const int64_t width = (int64_t)di->n_taps * di->n_embd;
        void *ctx = NULL;
        assert_int_equal(splash_draft_ctx_create(dp, dm, &ctx, &err), SPLASH_OK);
        int32_t held = 0;
        size_t c;
        json_t *cycle;
        json_array_foreach(json_object_get(res, "cycles"), c, cycle) {
            int32_t start = (int32_t)json_integer_value(json_object_get(cycle, "start"));
            json_t *want = json_object_get(cycle, "proposals");
            assert_true(start < n && start >= held);
            assert_int_equal(splash_draft_append_context(dp, dm, ctx, taps + held * width, width,
                                                         held, start - held, &err),
                             SPLASH_OK);
            held = start;
            int32_t got[7];
            const struct splash_draft_block b = {
                .size = sizeof b, .anchor = seq[start], .pos = start, .n_rows = 7, .tokens = got};
            if (splash_draft_propose(dp, dm, ctx, &b, &err))
                fail_msg("propose: %s", err.msg);
            int all = 1, prefix = 1;
            for (int r = 0; r < 7; r++) {
                int eq = got[r] == (int32_t)json_integer_value(json_array_get(want, (size_t)r));
                a->rows++;
                a->equal += eq;
                if (prefix) {
                    a->prefix_rows++;
                    a->prefix_equal += eq;
                }
                prefix &= eq;
                all &= eq;
            }
            a->cycles++;
            a->whole += all;
            /* what the target keeps of these proposals against what it kept of the reference's */
            int32_t acc = 0,
                    rows = (int32_t)json_integer_value(json_object_get(cycle, "verify_rows")),
                    ref = (int32_t)json_integer_value(json_object_get(cycle, "accepted_drafts"));
            while (acc < rows - 1 && acc < 7 && start + 1 + acc < n &&
                   got[acc] == seq[start + 1 + acc])
                acc++;
            a->same_accept += acc == ref;
            a->accepted += acc;
            a->ref_accepted += ref;
        }
        splash_draft_ctx_destroy(dp, dm, ctx);
        simulate(dp, dm, taps, width, seq, (int32_t)json_array_size(prompt), n, a);
        free(taps);
        free(seq);
    }
}

/* A JSON file of the testdata directory (fails the test when it does not parse). */
static json_t *load_json(const char *rel)
{
    char path[512];
    json_error_t je;
    json_t *d = json_load_file(test_testdata_path(path, sizeof path, rel), 0, &je);
    if (!d)
        fail_msg("%s: %s", rel, je.text);
    return d;
}

static json_t *load_decode(void)
{
    return load_json("drafts/qwen35-stories-DFlash2.decode.json");
}

/* keep_stored: 1 the exact F32 path, 0 the projections in af4g64. */
static void agreement_run(int keep_stored, double min_rows)
{
    struct draft_run r;
    const struct splash_draft_opts o = {.pool = pool, .keep_stored = keep_stored};
    draft_run_open(&r, &o);
    const struct splash_draft_plugin *dp = r.made.dp;
    void *dm = r.made.dm;
    const struct splash_draft_info di = r.made.di;
    assert_string_equal(r.made.v.architecture, "DFlash2");
    assert_int_equal(di.block_size, 8);
    assert_int_equal(di.n_taps, 4);
    json_t *d = load_decode();
    struct agreement a = {0};
    run_cycles(dp, dm, &di, &r.t, json_object_get(d, "results"), &a);
    printf("draft %s: %d/%d proposal rows equal the reference's (%.1f%%), %d/%d rows after "
           "an agreeing prefix (%.1f%%), %d/%d cycles whole\n",
           keep_stored ? "as stored (F32)" : "af4g64", a.equal, a.rows, 100.0 * a.equal / a.rows,
           a.prefix_equal, a.prefix_rows, 100.0 * a.prefix_equal / a.prefix_rows, a.whole,
           a.cycles);
    printf("draft %s: %d/%d cycles keep as many proposals as the reference's (%d kept, the "
           "reference %d)\n",
           keep_stored ? "as stored (F32)" : "af4g64", a.same_accept, a.cycles, a.accepted,
           a.ref_accepted);
    printf("draft %s: the greedy cycle replayed: %.3f tokens per cycle (%d tokens in %d "
           "cycles; the reference 3.975)\n",
           keep_stored ? "as stored (F32)" : "af4g64", (double)a.sim_tokens / a.sim_cycles,
           a.sim_tokens, a.sim_cycles);
    assert_int_equal(a.cycles, 317);
    /* the bar for the served decode: within 10% of the reference's 3.975 */
    assert_true((double)a.sim_tokens / a.sim_cycles >= 0.9 * 3.975);
    assert_true((double)a.equal / a.rows >= min_rows);
    json_decref(d);
    draft_run_close(&r);
}

/* The resident bytes of the process (VmRSS), for the report. */
static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

/* The draft's af4g64 projections are held once: each in a region of the host's
 * (weight_rows_alloc) that the kernels give back once they hold its repacked image, as a
 * safetensors target's imports are (before, a plain copy stayed beside every image). */
static void test_af4g64_rows_given_back(void **state)
{
    (void)state;
    const struct splash_format_type *r16 =
        splash_registry_format_by_name(splash_registry_global(), "af4g64_R16");
    assert_non_null(r16);
    if (!test_row_runs_here(&r16->rows[0])) {
        printf("  af4g64 is not repacked on this CPU: its rows stay as made\n");
        skip();
    }
    const size_t base = splash_import_held();
    const long rss0 = rss_kib();
    struct draft_run r;
    const struct splash_draft_opts o = {.pool = pool, .keep_stored = 0};
    draft_run_open(&r, &o);
    const long rss1 = rss_kib();
    const struct dflash2_model *m = r.made.dm;
    size_t given = 0;
    int n = 0;
    for (int32_t il = 0; il < m->cfg.n_layers; il++) {
        const struct dflash2_layer *L = &m->layers[il];
        const struct dflash2_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->gate, &L->up,
                                             &L->down, &L->attn_conv.proj, &L->mlp_conv.proj};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
            if (strcmp(ws[i]->info.type_name, "af4g64"))
                continue;
            if (!splash_import_dropped(ws[i]->data, ws[i]->info.n_bytes))
                fail_msg("layer %d: %s's af4g64 rows are still held beside their image", il,
                         ws[i]->info.name);
            given += ws[i]->info.n_bytes;
            n++;
        }
    }
    assert_true(n > 0);
    assert_int_equal(splash_import_held(), base);
    printf("  %d af4g64 projections, %zu bytes given back after their repack; RSS %ld -> "
           "%ld KiB over the draft's load\n",
           n, given, rss0, rss1);
    draft_run_close(&r);
    assert_int_equal(splash_import_held(), base); /* every region unmapped */
}

static void test_proposals_match_reference_f32(void **state)
{
    agreement_run(1, 0.98);
}

static void test_proposals_match_reference_af4g64(void **state)
{
    agreement_run(0, 0.88);
}

/* ---- refusals ------------------------------------------------------------------- */

static json_t *release_config(void)
{
    return load_json("drafts/qwen35-stories-DFlash2/config.json");
}

static struct splash_meta *open_target_meta(void)
{
    char path[512];
    struct splash_meta *m = NULL;
    struct splash_err err = {{0}};
    assert_int_equal(
        splash_meta_open_gguf(test_testdata_path(path, sizeof path, "models/qwen35-stories-Q8_0.gguf"),
                              SPLASH_GGUF_HEADERS_ONLY, &m, &err),
        SPLASH_OK);
    return m;
}

/* splash_draft_select of the config c against target: its status, the verdict in v and a
 * refusal in err. */
static enum splash_status select_config(json_t *c, struct splash_meta *target,
                                        struct splash_draft_verdict *v, struct splash_err *err)
{
    char *text = json_dumps(c, 0);
    struct test_config tc;
    struct splash_meta *m = test_config_open(&tc, "/tmp/splash-draft-cfg-XXXXXX", text);
    const struct splash_draft_plugin *dp = NULL;
    enum splash_status st = splash_draft_select(splash_registry_global(), m, target, &dp, v, err);
    test_config_close(&tc);
    free(text);
    return st;
}

/* The release's config with one change: key (dotted) set to the JSON value, or removed
 * when value is NULL; the draft must be refused with a message holding `named`. */
static void refused(struct splash_meta *target, const char *key, const char *value,
                    const char *named)
{
    json_t *c = release_config(), *obj = c;
    char k[128];
    snprintf(k, sizeof k, "%s", key);
    char *dot = strchr(k, '.');
    if (dot) {
        *dot = 0;
        obj = json_object_get(c, k);
    }
    const char *leaf = dot ? dot + 1 : k;
    if (value) {
        json_error_t je;
        json_t *v = json_loads(value, JSON_DECODE_ANY, &je);
        assert_non_null(v);
        json_object_set_new(obj, leaf, v);
    } else {
        json_object_del(obj, leaf);
    }
    struct splash_draft_verdict v;
    struct splash_err err = {{0}};
    enum splash_status st = select_config(c, target, &v, &err);
    if (st == SPLASH_OK || !strstr(err.msg, named))
        fail_msg("%s = %s: status %d, \"%s\" does not name %s", key, value ? value : "(removed)",
                 st, err.msg, named);
    json_decref(c);
}

static void test_refuses_configs_naming_the_key(void **state)
{
    struct splash_meta *t = open_target_meta();
    /* the release's config is accepted */
    json_t *c = release_config();
    struct splash_draft_verdict v;
    struct splash_err err = {{0}};
    if (select_config(c, t, &v, &err))
        fail_msg("release config: %s", err.msg);
    assert_string_equal(v.summary, "1 layer, hidden 256, block 8, taps 1,3,5,6, window 2048");
    json_decref(c);

    refused(t, "hidden_size", "512", "hidden_size is 512, the target's hidden size is 256");
    refused(t, "vocab_size", "4096", "vocab_size is 4096, the target's vocabulary is 2048");
    refused(t, "num_attention_heads", "16", "num_attention_heads");
    refused(t, "num_key_value_heads", "4", "num_key_value_heads");
    refused(t, "head_dim", "64", "head_dim");
    refused(t, "sliding_window", "4096", "sliding_window");
    refused(t, "num_hidden_layers", "0", "num_hidden_layers");
    refused(t, "intermediate_size", "100", "intermediate_size");
    refused(t, "layer_types", "[\"full_attention\"]", "layer_types[0]");
    refused(t, "dflash_config.mask_token_id", "2048", "dflash_config.mask_token_id");
    refused(t, "dflash_config.mask_token_id", NULL, "dflash_config.mask_token_id is missing");
    refused(t, "dflash_config.selector_rank", "128", "dflash_config.selector_rank");
    refused(t, "dflash_config.selector_top_k", "8", "dflash_config.selector_top_k");
    refused(t, "dflash_config.block_size", "4", "dflash_config.block_size");
    refused(t, "dflash_config.conv_group_size", "32", "dflash_config.conv_group_size");
    refused(t, "dflash_config.conv_kernel_size", "0", "dflash_config.conv_kernel_size");
    refused(t, "dflash_config.target_layer_ids", "[3, 1]", "not ascending");
    refused(t, "dflash_config.target_layer_ids", "[0,1,2,3,4,5,6,7,8]",
            "dflash_config.target_layer_ids holds 9 layers");
    refused(t, "dflash_config.target_layer_ids", "[1, 8]",
            "dflash_config.target_layer_ids[1] is 8, the target has layers 0 to 7");
    refused(t, "dflash_config.target_layer_ids", "[]", "dflash_config.target_layer_ids");
    refused(t, "dflash_config.target_hidden_reduction", "\"stream_mean\"",
            "dflash_config.target_hidden_reduction is stream_mean");
    refused(t, "dflash_config.output_multiplier", "-1", "dflash_config.output_multiplier");
    refused(t, "rms_norm_eps", "\"small\"", "rms_norm_eps");
    refused(t, "architectures", "[\"EagleDraftModel\"]",
            "draft architecture EagleDraftModel is not one Splash runs");
    refused(t, "architectures", NULL, "architectures is missing");
    splash_meta_close(t);
}

/* A Flint target (its flat config.json, as model-check reads it before a download): its
 * vocabulary keeps no mask token, so a draft's mask_token_id must be one of Flint's
 * reserved special tokens, 150019 to 150143 (models.md); any other is refused by name. */
static void test_flint_target_mask_token(void **state)
{
    struct test_config tt;
    struct splash_meta *flint = test_config_open(
        &tt, "/tmp/splash-draft-flint-XXXXXX",
        "{\"model_type\": \"flint\", \"hidden_size\": 256, \"num_hidden_layers\": 8, "
        "\"vocab_size\": 151552}");
    static const struct {
        int64_t mask;
        int ok;
    } cases[] = {{150019, 1}, {150143, 1}, {150080, 1}, {150018, 0}, {150144, 0}, {1000, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *c = release_config();
        json_object_set_new(c, "vocab_size", json_integer(151552));
        json_object_set_new(json_object_get(c, "dflash_config"), "mask_token_id",
                            json_integer(cases[i].mask));
        struct splash_draft_verdict v;
        struct splash_err err = {{0}};
        enum splash_status st = select_config(c, flint, &v, &err);
        if (cases[i].ok && st)
            fail_msg("mask %lld: refused: %s", (long long)cases[i].mask, err.msg);
        if (!cases[i].ok &&
            (!st || !strstr(err.msg, "dflash_config.mask_token_id is") ||
             !strstr(err.msg, "not one of Flint's reserved special tokens (150019 to 150143)")))
            fail_msg("mask %lld: status %d, \"%s\"", (long long)cases[i].mask, st, err.msg);
        json_decref(c);
    }
    test_config_close(&tt);
    /* a Qwen target takes any token of its vocabulary, as before */
    struct splash_meta *t = open_target_meta();
    json_t *c = release_config();
    json_object_set_new(json_object_get(c, "dflash_config"), "mask_token_id", json_integer(1000));
    struct splash_draft_verdict v;
    struct splash_err err = {{0}};
    assert_int_equal(select_config(c, t, &v, &err), SPLASH_OK);
    json_decref(c);
    splash_meta_close(t);
}

/* A config whose sizes disagree with its weights: the tensor is named with both shapes. */
static void test_refuses_weights_of_another_shape(void **state)
{
    char dir[64] = "/tmp/splash-draft-dir-XXXXXX", path[600], src[512];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    char *abs = realpath(test_testdata_path(src, sizeof src,
                                            "drafts/qwen35-stories-DFlash2/model.safetensors"),
                         NULL);
    assert_non_null(abs);
    assert_int_equal(symlink(abs, path), 0);
    free(abs);
    json_t *c = release_config();
    json_object_set_new(c, "intermediate_size", json_integer(1024));
    char cfg[600];
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    assert_int_equal(json_dump_file(c, cfg, 0), 0);
    struct splash_meta *dm = NULL, *t = open_target_meta();
    struct splash_err err = {{0}};
    assert_int_equal(splash_draft_open(splash_registry_global(), dir, 0, &dm, &err), SPLASH_OK);
    const struct splash_draft_plugin *dp = NULL;
    struct splash_draft_verdict v;
    assert_int_not_equal(splash_draft_select(splash_registry_global(), dm, t, &dp, &v, &err),
                         SPLASH_OK);
    assert_non_null(strstr(err.msg, "tensor layers.0.mlp.gate_proj.weight is [256, 768, 1], "
                                    "expected [256, 1024, 1]"));
    splash_meta_close(dm);
    splash_meta_close(t);
    json_decref(c);
    remove(cfg);
    remove(path);
    rmdir(dir);
}

/* A draft whose weights an index maps (here to one shard, model-00001-of-00001): the
 * shard's tensors and mask_embedding.safetensors beside it are found and the draft loads. */
static void test_loads_through_an_index(void **state)
{
    char dir[64] = "/tmp/splash-draft-idx-XXXXXX", src[512], path[600];
    assert_non_null(mkdtemp(dir));
    const char *files[3][2] = {{"model.safetensors", "model-00001-of-00001.safetensors"},
                               {"mask_embedding.safetensors", "mask_embedding.safetensors"},
                               {"config.json", "config.json"}};
    for (int i = 0; i < 3; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "drafts/qwen35-stories-DFlash2/%s", files[i][0]);
        char *abs = realpath(test_testdata_path(src, sizeof src, rel), NULL);
        assert_non_null(abs);
        snprintf(path, sizeof path, "%s/%s", dir, files[i][1]);
        assert_int_equal(symlink(abs, path), 0);
        free(abs);
    }
    struct splash_safetensors *st = NULL;
    struct splash_err err = {{0}};
    snprintf(path, sizeof path, "%s/model-00001-of-00001.safetensors", dir);
    assert_int_equal(splash_safetensors_open(path, SPLASH_SAFETENSORS_HEADERS_ONLY, &st, &err),
                     SPLASH_OK);
    json_t *map = json_object();
    for (size_t i = 0; i < st->n_tensors; i++)
        json_object_set_new(map, st->tensors[i].info.name,
                            json_string("model-00001-of-00001.safetensors"));
    size_t n_weights = st->n_tensors;
    splash_safetensors_close(st);
    json_t *index = json_pack("{s:{s:i}, s:o}", "metadata", "total_size", 9249000, "weight_map", map);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    assert_int_equal(json_dump_file(index, path, 0), 0);
    json_decref(index);

    struct test_run t;
    open_target(&t);
    struct splash_meta *dm = open_draft_at(dir);
    assert_int_equal(splash_meta_api_get()->n_tensors(dm), n_weights + 1);
    assert_non_null(splash_meta_api_get()->tensor_find(dm, "mask_embedding"));
    struct draft_made d;
    const struct splash_draft_opts o = {.pool = pool};
    if (draft_make(dm, t.meta, &o, &d, &err))
        fail_msg("create: %s", err.msg);
    splash_draft_destroy(d.dp, d.dm);
    splash_meta_close(dm);
    test_run_close(&t);
    const char *made[] = {"model-00001-of-00001.safetensors", "mask_embedding.safetensors",
                          "config.json", "model.safetensors.index.json"};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, made[i]);
        remove(path);
    }
    rmdir(dir);
}

/* A target whose token table carries NVFP4's per-tensor scale: the draft would read its
 * rows unscaled, so it refuses by name. */
static void test_refuses_a_scaled_token_table(void **state)
{
    char src[512];
    char *path = test_gguf_with_tensor(
        test_testdata_path(src, sizeof src, "models/qwen35-stories-Q8_0.gguf"), "token_embd.scale",
        1, 1.0f);
    struct splash_err err = {{0}};
    struct splash_meta *t = NULL, *dmeta = open_draft();
    assert_int_equal(splash_meta_open_gguf(path, 0, &t, &err), SPLASH_OK);
    splash_meta_bind_formats(t, splash_registry_global());
    struct draft_made made;
    const struct splash_draft_opts o = {.pool = pool};
    assert_int_equal(draft_make(dmeta, t, &o, &made, &err), SPLASH_ERR_UNSUPPORTED);
    assert_string_equal(err.msg,
                        "target: token_embd.scale (a per-tensor scale) is not one the draft reads");
    splash_meta_close(t);
    splash_meta_close(dmeta);
    unlink(path);
    free(path);
}

/* model-check --draft-model: the draft against the target it would serve with. */
static void test_model_check_with_draft(void **state)
{
    char target[512], other[512], dir[512];
    test_testdata_path(target, sizeof target, "models/qwen35-stories-Q8_0.gguf");
    test_testdata_path(other, sizeof other, "models/qwen35moe-tiny-Q4_K_M.gguf");
    test_testdata_path(dir, sizeof dir, "drafts/qwen35-stories-DFlash2");
    struct splash_check_result res;
    struct splash_err err = {{0}};
    assert_int_equal(splash_model_check_draft(splash_registry_global(), target, dir, &res, &err),
                     SPLASH_OK);
    assert_true(res.ok && res.draft_checked);
    assert_string_equal(res.draft_plugin, "dflash2");
    assert_string_equal(res.draft_file, "qwen35-stories-DFlash2");
    splash_check_result_free(&res);
    /* a target of 4 layers has no layer 5 to tap */
    assert_int_equal(splash_model_check_draft(splash_registry_global(), other, dir, &res, &err),
                     SPLASH_ERR_INVALID);
    assert_false(res.ok);
    assert_string_equal(res.problems, "draft qwen35-stories-DFlash2: config.json: "
                                      "dflash_config.target_layer_ids[2] is 5, the target has "
                                      "layers 0 to 3");
    splash_check_result_free(&res);
}

/* ---- the context and the block's outputs ---------------------------------------------- */

/* Rolling the context back and appending the same rows again proposes what a fresh
 * context does; the candidates and their probabilities are a distribution whose best
 * is the greedy proposal; uniforms draw by the candidates' cumulative probabilities. */
static void test_context_rollback_and_candidates(void **state)
{
    struct draft_run r;
    const struct splash_draft_opts o = {.pool = pool};
    draft_run_open(&r, &o);
    const struct splash_draft_plugin *dp = r.made.dp;
    void *dm = r.made.dm;
    const struct splash_draft_info di = r.made.di;
    struct splash_err err = {{0}};
    assert_int_equal(di.top_k, 16);
    json_t *d = load_decode();
    json_t *prompt = json_object_get(json_array_get(json_object_get(d, "results"), 0), "prompt");
    int32_t n = (int32_t)json_array_size(prompt), toks[64];
    assert_true(n <= 64);
    for (int32_t i = 0; i < n; i++)
        toks[i] = (int32_t)json_integer_value(json_array_get(prompt, (size_t)i));
    float *taps = target_taps(&r.t, &di, toks, n);
    const int64_t width = (int64_t)di.n_taps * di.n_embd;
    void *ctx = NULL;
    assert_int_equal(splash_draft_ctx_create(dp, dm, &ctx, &err), SPLASH_OK);
    /* a gap or a block at another position is refused */
    assert_int_equal(splash_draft_append_context(dp, dm, ctx, taps, width, 1, 1, &err),
                     SPLASH_ERR_INVALID);
    assert_int_equal(splash_draft_append_context(dp, dm, ctx, taps, width, 0, n - 1, &err),
                     SPLASH_OK);
    int32_t fresh[7], again[7], cand[7 * 16], drawn[7];
    float prob[7 * 16], conf[7];
    struct splash_draft_block b = {.size = sizeof b, .anchor = toks[n - 1], .pos = n - 1,
                                   .n_rows = 7, .tokens = fresh, .cand_tokens = cand,
                                   .cand_probs = prob, .confidence = conf};
    assert_int_equal(splash_draft_propose(dp, dm, ctx, &b, &err), SPLASH_OK);
    for (int r = 0; r < 7; r++) {
        double sum = 0;
        for (int j = 0; j < 16; j++) {
            sum += prob[r * 16 + j];
            if (j)
                assert_true(prob[r * 16 + j] <= prob[r * 16 + j - 1]);
        }
        assert_true(fabs(sum - 1.0) < 1e-5);
        assert_int_equal(cand[r * 16], fresh[r]);
        assert_true(conf[r] == prob[r * 16]);
    }
    b.pos = n - 2;
    assert_int_equal(splash_draft_propose(dp, dm, ctx, &b, &err), SPLASH_ERR_INVALID);
    /* rollback, append again: the same proposals */
    assert_int_equal(splash_draft_rollback(dp, dm, ctx, 10, &err), SPLASH_OK);
    assert_int_equal(splash_draft_append_context(dp, dm, ctx, taps + 10 * width, width, 10,
                                                 n - 11, &err),
                     SPLASH_OK);
    b = (struct splash_draft_block){.size = sizeof b, .anchor = toks[n - 1], .pos = n - 1,
                                    .n_rows = 7, .tokens = again};
    assert_int_equal(splash_draft_propose(dp, dm, ctx, &b, &err), SPLASH_OK);
    assert_memory_equal(fresh, again, sizeof fresh);
    /* uniforms just past the best candidate's mass draw the second best of row 0 */
    float u[7] = {0};
    u[0] = prob[0] + 0.5f * prob[1];
    b.uniforms = u;
    b.tokens = drawn;
    assert_int_equal(splash_draft_propose(dp, dm, ctx, &b, &err), SPLASH_OK);
    assert_int_equal(drawn[0], cand[1]);
    assert_int_equal(splash_draft_rollback(dp, dm, ctx, n, &err), SPLASH_ERR_INVALID);
    splash_draft_ctx_destroy(dp, dm, ctx);
    free(taps);
    json_decref(d);
    draft_run_close(&r);
}

/* This thread's CPU time: the timing test runs the draft without a pool, so the numbers
 * hold on a loaded machine. */
static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Past the window: the ring holds the last rows whatever the appends' sizes (one append
 * or blocks of 7 give the same proposals), a rollback within a block is taken and one past
 * what the ring holds refused; prints the cost of a block at a full window. */
static void test_context_past_the_window(void **state)
{
    struct draft_run r;
    const struct splash_draft_opts o = {.pool = NULL};
    draft_run_open(&r, &o);
    const struct splash_draft_plugin *dp = r.made.dp;
    void *dm = r.made.dm;
    const struct splash_draft_info di = r.made.di;
    struct splash_err err = {{0}};
    const int32_t n = 2100;
    const int64_t width = (int64_t)di.n_taps * di.n_embd;
    float *taps = malloc((size_t)n * (size_t)width * sizeof(float));
    assert_non_null(taps);
    uint64_t rng = 15;
    for (int64_t i = 0; i < n * width; i++)
        taps[i] = 4.0f * test_splitmix_uniform(&rng) - 2.0f;
    void *a = NULL, *b = NULL;
    assert_int_equal(splash_draft_ctx_create(dp, dm, &a, &err), SPLASH_OK);
    assert_int_equal(splash_draft_ctx_create(dp, dm, &b, &err), SPLASH_OK);
    double t0 = now_ms();
    assert_int_equal(splash_draft_append_context(dp, dm, a, taps, width, 0, n, &err), SPLASH_OK);
    double t1 = now_ms();
    for (int32_t p = 0; p < n; p += 7) {
        int32_t len = n - p < 7 ? n - p : 7;
        assert_int_equal(
            splash_draft_append_context(dp, dm, b, taps + p * width, width, p, len, &err),
            SPLASH_OK);
    }
    int32_t pa[7], pb[7];
    struct splash_draft_block blk = {
        .size = sizeof blk, .anchor = 77, .pos = n, .n_rows = 7, .tokens = pa};
    const int reps = 5;
    double t2 = now_ms();
    for (int i = 0; i < reps; i++)
        assert_int_equal(splash_draft_propose(dp, dm, a, &blk, &err), SPLASH_OK);
    double t3 = now_ms();
    blk.tokens = pb;
    assert_int_equal(splash_draft_propose(dp, dm, b, &blk, &err), SPLASH_OK);
    assert_memory_equal(pa, pb, sizeof pa);
    printf("draft: %d context rows appended in %.1f ms; a block at a full window %.2f ms (one "
           "thread's CPU time, af4g64)\n",
           n, t1 - t0, (t3 - t2) / reps);
    /* a fork (ABI 1.4: the context kept beside a restore point) of a wrapped ring drafts as
     * the original, and goes on apart from it */
    void *f = NULL;
    assert_int_equal(splash_draft_ctx_fork(dp, dm, a, &f, &err), SPLASH_OK);
    int32_t pf[7];
    blk.tokens = pf;
    assert_int_equal(splash_draft_propose(dp, dm, f, &blk, &err), SPLASH_OK);
    assert_memory_equal(pa, pf, sizeof pa);
    assert_int_equal(splash_draft_rollback(dp, dm, f, 0, &err), SPLASH_OK);
    blk.tokens = pb;
    assert_int_equal(splash_draft_propose(dp, dm, a, &blk, &err), SPLASH_OK);
    assert_memory_equal(pa, pb, sizeof pa);
    splash_draft_ctx_destroy(dp, dm, f);
    /* a plugin built against ABI 1.3 has no fork: refused, not called */
    struct splash_draft_plugin old = *dp;
    old.header.abi_minor = 3;
    old.ctx_fork = NULL;
    assert_int_equal(splash_draft_ctx_fork(&old, dm, a, &f, &err), SPLASH_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "predates ABI 1.4"));
    assert_int_equal(splash_draft_rollback(dp, dm, a, n - 20, &err), SPLASH_OK);
    assert_int_equal(splash_draft_rollback(dp, dm, b, n - 200, &err), SPLASH_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "append them again from 0"));
    assert_int_equal(splash_draft_rollback(dp, dm, b, 0, &err), SPLASH_OK);
    splash_draft_ctx_destroy(dp, dm, a);
    splash_draft_ctx_destroy(dp, dm, b);
    free(taps);
    draft_run_close(&r);
}

/* The attention's AVX2 loops against the scalar ones on random rows. */
static void test_attention_rows_agree(void **state)
{
#if defined(__x86_64__)
    if (!test_cpu_has(SPLASH_CPU_AVX2 | SPLASH_CPU_FMA, "dflash2 attention avx2"))
        return;
    enum { N = 32, D = DFLASH2_HEAD_DIM };
    static float q[N * D], k[D], p[N], a_ref[N * D], a_simd[N * D];
    float d_ref[N], d_simd[N];
    uint64_t rng = 3;
    for (int i = 0; i < N * D; i++) {
        q[i] = 2.0f * test_splitmix_uniform(&rng) - 1.0f;
        a_ref[i] = a_simd[i] = test_splitmix_uniform(&rng);
    }
    for (int i = 0; i < D; i++)
        k[i] = 2.0f * test_splitmix_uniform(&rng) - 1.0f;
    for (int i = 0; i < N; i++)
        p[i] = test_splitmix_uniform(&rng);
    dflash2_attn_ref.dots(q, N, k, d_ref);
    dflash2_attn_avx2.dots(q, N, k, d_simd);
    dflash2_attn_ref.axpy(p, N, k, a_ref);
    dflash2_attn_avx2.axpy(p, N, k, a_simd);
    for (int i = 0; i < N; i++)
        assert_true(fabsf(d_ref[i] - d_simd[i]) <= 1e-5f * 128);
    for (int i = 0; i < N * D; i++)
        assert_true(fabsf(a_ref[i] - a_simd[i]) <= 1e-6f);
    assert_ptr_equal(dflash2_attn_pick(SPLASH_CPU_AVX2 | SPLASH_CPU_FMA), &dflash2_attn_avx2);
#endif
    assert_ptr_equal(dflash2_attn_pick(0), &dflash2_attn_ref);
}

/* Taps: the same rows from one forward and from one token per forward, the logits as
 * forward gives them, and a family without forward_taps refused by name. */
static void test_family_taps(void **state)
{
    struct test_run t;
    open_target(&t);
    struct splash_err err = {{0}};
    const int32_t toks[6] = {5, 17, 300, 42, 9, 1000};
    const int32_t layers[2] = {2, 7};
    const int64_t E = t.info.n_embd, V = t.info.n_vocab, W = 2 * E;
    float *one = calloc(6 * (size_t)W, sizeof(float)), *step = calloc(6 * (size_t)W, sizeof(float));
    float *la = malloc((size_t)V * sizeof(float)), *lb = malloc((size_t)V * sizeof(float));
    void *s1 = NULL, *s2 = NULL, *s3 = NULL;
    assert_int_equal(splash_family_seq_create(t.fam, t.model, &s1, &err), SPLASH_OK);
    assert_int_equal(splash_family_seq_create(t.fam, t.model, &s2, &err), SPLASH_OK);
    assert_int_equal(splash_family_seq_create(t.fam, t.model, &s3, &err), SPLASH_OK);
    struct splash_lane lane = {.seq = s1, .tokens = toks, .n_tokens = 6, .logits = la};
    struct splash_taps taps = {.size = sizeof taps, .n_layers = 2, .layers = layers, .rows = &one};
    assert_int_equal(splash_family_forward_taps(t.fam, t.model, &lane, 1, &taps, &err), SPLASH_OK);
    for (int32_t i = 0; i < 6; i++) {
        float *row = step + i * W;
        struct splash_lane l1 = {.seq = s2, .tokens = toks + i, .n_tokens = 1, .pos0 = i};
        struct splash_taps t1 = {.size = sizeof t1, .n_layers = 2, .layers = layers, .rows = &row};
        assert_int_equal(splash_family_forward_taps(t.fam, t.model, &l1, 1, &t1, &err), SPLASH_OK);
    }
    double worst = 0, norm = 0;
    for (int64_t i = 0; i < 6 * W; i++) {
        worst = fmax(worst, fabs(one[i] - step[i]));
        norm = fmax(norm, fabs(one[i]));
    }
    assert_true(norm > 0);
    assert_true(worst <= 1e-3 * norm);
    /* logits as plain forward gives them */
    struct splash_lane plain = {.seq = s3, .tokens = toks, .n_tokens = 6, .logits = lb};
    assert_int_equal(splash_family_forward(t.fam, t.model, &plain, 1, &err), SPLASH_OK);
    assert_memory_equal(la, lb, (size_t)V * sizeof(float));
    /* layers out of order or range */
    const int32_t bad[2] = {7, 2};
    taps.layers = bad;
    lane.pos0 = 6;
    lane.n_tokens = 1;
    assert_int_equal(splash_family_forward_taps(t.fam, t.model, &lane, 1, &taps, &err),
                     SPLASH_ERR_INVALID);
    assert_non_null(strstr(err.msg, "taps: layer 2"));
    /* a family of ABI 1.2 writes none */
    struct splash_family_plugin old = *t.fam;
    old.forward_taps = NULL;
    assert_int_equal(splash_family_forward_taps(&old, t.model, &lane, 1, &taps, &err),
                     SPLASH_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "writes no draft taps"));
    splash_family_seq_destroy(t.fam, t.model, s1);
    splash_family_seq_destroy(t.fam, t.model, s2);
    splash_family_seq_destroy(t.fam, t.model, s3);
    free(one);
    free(step);
    free(la);
    free(lb);
    test_run_close(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refuses_configs_naming_the_key),
        cmocka_unit_test(test_flint_target_mask_token),
        cmocka_unit_test(test_refuses_weights_of_another_shape),
        cmocka_unit_test(test_model_check_with_draft),
        cmocka_unit_test(test_refuses_a_scaled_token_table),
        cmocka_unit_test(test_loads_through_an_index),
        cmocka_unit_test(test_family_taps),
        cmocka_unit_test(test_context_rollback_and_candidates),
        cmocka_unit_test(test_context_past_the_window),
        cmocka_unit_test(test_attention_rows_agree),
        cmocka_unit_test(test_af4g64_rows_given_back),
        cmocka_unit_test(test_proposals_match_reference_f32),
        cmocka_unit_test(test_proposals_match_reference_af4g64),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
