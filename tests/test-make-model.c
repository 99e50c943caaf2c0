/* make-model: random-weight models of the test data's tiny shape hold the
 * reference quantizer's type mixes (golden/<model>.json), pass model-check, load
 * and decode; the built-in tokenizer round-trips text and its template renders
 * ChatML. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <openssl/evp.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/modelgen/builtin_vocab.h"
#include "cli/modelgen/demo_model.h"
#include "core/meta.h"
#include "core/model_check.h"
#include "core/model_load.h"
#include "cli/modelgen/model_writer.h"
#include "core/registry.h"
#include "server/text/tokenizer/tokenizer.h"
#include "server/chat/chat_format.h"
#include "server/chat/jinja.h"
#include "server/chat/template_probe.h"
#include "tests/support/testdata.h"
#include "tests/support/preset.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];
static struct splash_registry *reg;
static char tmp_dir[256];
static char tiny_path[512];

static int setup(void **state)
{
    (void)state;
    reg = splash_registry_global();
    if (splash_registry_n_records(reg) == 0)
        splash_registry_add_builtins(reg, splash_builtin_plugins);
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/splash-test-make-model-XXXXXX");
    if (!mkdtemp(tmp_dir))
        return -1;
    /* the tiny shape at the mix of golden/qwen35-tiny-Q4_K_M.json, written once */
    snprintf(tiny_path, sizeof tiny_path, "%s/tiny-Q4_K_M.gguf", tmp_dir);
    struct splash_model_write_opts opts = {.mix = "Q4_K_M", .seed = 101, .n_threads = 2};
    struct splash_err err = {{0}};
    if (splash_model_write(reg, test_preset("qwen35-tiny"), &opts, tiny_path, NULL,
                           &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char path[1024];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
            remove_tree(path);
        else
            unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

static int teardown(void **state)
{
    (void)state;
    remove_tree(tmp_dir);
    return 0;
}

static json_t *golden(const char *model)
{
    char rel[256], path[1024];
    snprintf(rel, sizeof rel, "golden/%s.json", model);
    json_error_t jerr;
    json_t *j = json_load_file(test_testdata_path(path, sizeof path, rel), 0, &jerr);
    if (!j)
        fprintf(stderr, "%s: %s\n", path, jerr.text);
    assert_non_null(j);
    return j;
}

/* Every tensor of the plan has the reference file's type, and the sets match. */
static int plan_matches(const struct splash_model_plan *plan, const char *model)
{
    json_t *g = golden(model);
    json_t *types = json_object_get(g, "tensor_types");
    assert_true(json_is_object(types));
    int mismatches = 0;
    for (size_t i = 0; i < plan->n_tensors; i++) {
        const struct splash_model_plan_tensor *t = &plan->tensors[i];
        const char *want = json_string_value(json_object_get(types, t->name));
        if (!want || strcmp(want, t->type_name)) {
            if (mismatches++ < 8)
                fprintf(stderr, "%s: %s is %s, the reference has %s\n", model, t->name,
                        t->type_name, want ? want : "no such tensor");
        }
    }
    if (json_object_size(types) != plan->n_tensors) {
        fprintf(stderr, "%s: %zu tensors, the reference has %zu\n", model, plan->n_tensors,
                json_object_size(types));
        mismatches++;
    }
    json_decref(g);
    return mismatches;
}

static void test_make_model_mixes_match_reference(void **state)
{
    (void)state;
    /* ftype mixes, and MXFP4 as a plain type (the reference file forced it everywhere) */
    static const char *const dense[] = {"Q4_K_M", "Q5_K_M", "Q3_K_M", "Q2_K", "Q4_0",
                                        "Q4_1",   "Q5_0",   "Q5_1",   "Q6_K", "Q8_0",
                                        "IQ4_XS", "IQ4_NL", "BF16",   "MXFP4"};
    int bad = 0;
    for (size_t i = 0; i < sizeof dense / sizeof dense[0]; i++) {
        struct splash_model_plan *plan = NULL;
        struct splash_err err = {{0}};
        enum splash_status st = splash_model_plan_create(
            reg, test_preset("qwen35-tiny"), dense[i], &plan, &err);
        if (st)
            fprintf(stderr, "%s: %s\n", dense[i], err.msg);
        assert_int_equal(st, SPLASH_OK);
        char model[64];
        snprintf(model, sizeof model, "qwen35-tiny-%s", dense[i]);
        bad += plan_matches(plan, model);
        splash_model_plan_free(plan);
    }
    /* the MoE mixes, once a family serves qwen35moe */
    static const char *const moe[] = {"Q4_K_M", "MXFP4_MOE", "IQ4_XS", "Q2_K"};
    for (size_t i = 0; i < sizeof moe / sizeof moe[0]; i++) {
        struct splash_model_plan *plan = NULL;
        struct splash_err err = {{0}};
        if (splash_model_plan_create(reg, test_preset("qwen35moe-tiny"), moe[i],
                                     &plan, &err)) {
            if (i == 0)
                fprintf(stderr, "note: qwen35moe mixes not checked: %s\n", err.msg);
            break;
        }
        char model[64];
        snprintf(model, sizeof model, "qwen35moe-tiny-%s", moe[i]);
        bad += plan_matches(plan, model);
        splash_model_plan_free(plan);
    }
    assert_int_equal(bad, 0);
}

static void test_make_model_reads_back(void **state)
{
    (void)state;
    struct splash_meta *m = NULL;
    struct splash_err err = {{0}};
    assert_int_equal(splash_meta_open_gguf(tiny_path, 0, &m, &err), SPLASH_OK);
    const struct splash_meta_api *api = splash_meta_api_get();
    /* the shape's keys, as the reference's qwen35-tiny files spell them */
    static const struct {
        const char *key;
        int64_t value;
    } keys[] = {
        {"qwen35.embedding_length", 256}, {"qwen35.block_count", 8},
        {"qwen35.feed_forward_length", 512}, {"qwen35.context_length", 4096},
        {"qwen35.attention.head_count", 4}, {"qwen35.attention.head_count_kv", 2},
        {"qwen35.attention.key_length", 64}, {"qwen35.attention.value_length", 64},
        {"qwen35.rope.dimension_count", 16}, {"qwen35.ssm.conv_kernel", 4},
        {"qwen35.ssm.state_size", 64}, {"qwen35.ssm.group_count", 2},
        {"qwen35.ssm.time_step_rank", 4}, {"qwen35.ssm.inner_size", 256},
        {"qwen35.full_attention_interval", 4}, {"general.file_type", 15},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        int64_t v = -1;
        assert_int_equal(api->get_i64(m, keys[i].key, &v, &err), SPLASH_OK);
        if (v != keys[i].value)
            fprintf(stderr, "%s: %lld, want %lld\n", keys[i].key, (long long)v,
                    (long long)keys[i].value);
        assert_int_equal(v, keys[i].value);
    }
    int64_t sect[4];
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(api->arr_i64(m, "qwen35.rope.dimension_sections", i, &sect[i], &err),
                         SPLASH_OK);
    assert_int_equal(sect[0], 4);
    assert_int_equal(sect[1], 2);
    assert_int_equal(sect[2], 2);
    assert_int_equal(sect[3], 0);
    double base, eps;
    assert_int_equal(api->get_f64(m, "qwen35.rope.freq_base", &base, &err), SPLASH_OK);
    assert_int_equal(api->get_f64(m, "qwen35.attention.layer_norm_rms_epsilon", &eps, &err),
                     SPLASH_OK);
    assert_true(fabs(base - 1e7) < 1);
    assert_true(fabs(eps - 1e-6) < 1e-9);
    const char *s = NULL;
    assert_int_equal(api->get_str(m, "general.architecture", &s, &err), SPLASH_OK);
    assert_string_equal(s, "qwen35");
    assert_int_equal(api->get_str(m, "tokenizer.ggml.pre", &s, &err), SPLASH_OK);
    assert_string_equal(s, "qwen2");

    /* the file's types are the reference's Q4_K_M mix, tensor by tensor */
    json_t *g = golden("qwen35-tiny-Q4_K_M");
    json_t *types = json_object_get(g, "tensor_types");
    assert_int_equal(api->n_tensors(m), json_object_size(types));
    for (size_t i = 0; i < api->n_tensors(m); i++) {
        const struct splash_tensor_info *t = api->tensor_at(m, i);
        const char *want = json_string_value(json_object_get(types, t->name));
        assert_non_null(want);
        if (strcmp(want, t->type_name))
            fprintf(stderr, "%s: %s, the reference has %s\n", t->name, t->type_name, want);
        assert_string_equal(t->type_name, want);
    }
    assert_string_equal(api->tensor_find(m, "token_embd.weight")->type_name, "Q6_K");
    assert_string_equal(api->tensor_find(m, "blk.0.attn_qkv.weight")->type_name, "Q6_K");
    assert_string_equal(api->tensor_find(m, "blk.1.attn_qkv.weight")->type_name, "Q4_K");
    assert_null(api->tensor_find(m, "output.weight"));
    json_decref(g);

    /* the values follow README §2: norms near 1, ssm_a in [-16, -1] */
    splash_meta_bind_formats(m, reg);
    const struct splash_tensor_info *a = api->tensor_find(m, "blk.0.ssm_a");
    const struct splash_tensor_info *norm = api->tensor_find(m, "blk.0.attn_norm.weight");
    assert_non_null(a);
    assert_non_null(norm);
    const float *av = a->data, *nv = norm->data;
    for (int64_t i = 0; i < a->ne[0]; i++)
        assert_true(av[i] <= -1.0f && av[i] >= -16.0f);
    double mean = 0;
    for (int64_t i = 0; i < norm->ne[0]; i++)
        mean += nv[i] / (double)norm->ne[0];
    assert_true(fabs(mean - 1.0) < 0.05);
    splash_meta_close(m);

    /* model-check passes it, claimed by the qwen35 family */
    struct splash_check_result res;
    enum splash_status st = splash_model_check(reg, tiny_path, &res, &err);
    if (st)
        fprintf(stderr, "model-check: %s\n%s\n", err.msg, res.problems ? res.problems : "");
    assert_int_equal(st, SPLASH_OK);
    assert_true(res.ok);
    assert_string_equal(res.verdict.architecture, "Qwen hybrid (qwen35)");
    splash_check_result_free(&res);
}

static void test_make_model_is_deterministic(void **state)
{
    (void)state;
    /* the same seed gives the same bytes on any number of threads */
    char path[600];
    snprintf(path, sizeof path, "%s/tiny-1thread.gguf", tmp_dir);
    struct splash_model_write_opts opts = {.mix = "Q4_K_M", .seed = 101, .n_threads = 1};
    struct splash_err err = {{0}};
    struct splash_model_write_stats stats;
    assert_int_equal(splash_model_write(reg, test_preset("qwen35-tiny"), &opts, path,
                                        &stats, &err),
                     SPLASH_OK);
    size_t na, nb;
    void *a = test_read_file(tiny_path, &na), *b = test_read_file(path, &nb);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(na, nb);
    assert_int_equal(stats.file_bytes, nb);
    assert_memory_equal(a, b, na);
    free(a);
    free(b);
    unlink(path);
}

static void test_make_model_decodes(void **state)
{
    (void)state;
    struct splash_err err = {{0}};
    struct splash_model_opts opts = {.kv_format = SPLASH_KV_INT8,
                                     .state_format = SPLASH_STATE_F32};
    struct splash_loaded_model *lm = NULL;
    enum splash_status st = splash_model_load(reg, tiny_path, &opts, 2, &lm, &err);
    if (st)
        fprintf(stderr, "load: %s\n", err.msg);
    assert_int_equal(st, SPLASH_OK);
    assert_int_equal(lm->info.n_vocab, 2048);
    void *seq = NULL;
    assert_int_equal(lm->family->seq_create(lm->model, &seq, &err), SPLASH_OK);
    float *logits = malloc(2048 * sizeof *logits);
    assert_non_null(logits);
    int32_t prompt[5] = {39, 301, 385, 1879, 0};
    struct splash_lane lane = {.seq = seq, .tokens = prompt, .n_tokens = 5, .pos0 = 0,
                               .logits = logits, .logits_all = 0};
    assert_int_equal(lm->family->forward(lm->model, &lane, 1, &err), SPLASH_OK);
    for (int32_t step = 0; step < 4; step++) {
        float lo = INFINITY, hi = -INFINITY;
        int32_t best = 0;
        for (int i = 0; i < 2048; i++) {
            assert_true(isfinite(logits[i]));
            if (logits[i] > hi) {
                hi = logits[i];
                best = i;
            }
            lo = logits[i] < lo ? logits[i] : lo;
        }
        assert_true(hi > lo); /* not a constant row */
        lane = (struct splash_lane){.seq = seq, .tokens = &best, .n_tokens = 1, .pos0 = 5 + step,
                                    .logits = logits, .logits_all = 0};
        st = lm->family->forward(lm->model, &lane, 1, &err);
        if (st)
            fprintf(stderr, "decode %d: %s\n", step, err.msg);
        assert_int_equal(st, SPLASH_OK);
    }
    free(logits);
    lm->family->seq_destroy(lm->model, seq);
    splash_model_unload(lm);
}

static int tokenize_cb(void *user, const char *text, size_t len, int32_t *ids, size_t max)
{
    struct splash_token_buf buf = {0};
    struct splash_err err;
    int n = -1;
    if (splash_tokenizer_encode(user, text, len, SPLASH_TOKENIZE_PARSE_SPECIAL, &buf, &err) ==
            SPLASH_OK &&
        buf.n <= max) {
        memcpy(ids, buf.ids, buf.n * sizeof *ids);
        n = (int)buf.n;
    }
    splash_token_buf_free(&buf);
    return n;
}

static void test_builtin_tokenizer_round_trips(void **state)
{
    (void)state;
    struct splash_tokenizer *tok = NULL;
    struct splash_err err = {{0}};
    assert_int_equal(splash_tokenizer_load_gguf(tiny_path, &tok, &err), SPLASH_OK);
    assert_int_equal(splash_tokenizer_n_tokens(tok), 2048);
    static const char *const texts[] = {
        "Once upon a time, there was a little girl who wanted to play with her friends.",
        "def f(x):\n    return x * 2  # doubled\n\n",
        "The government's answer wasn't important; they'll think about it.",
        "Zürich, naïve café — 你好，世界 🙂👍🏽 \xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82",
        "<|im_start|>user\nHello<|im_end|>\n<think>\nok\n</think>\n\n<tool_call>",
        "numbers 1234567890 and\ttabs\r\nand  spaces   ",
        "",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        struct splash_token_buf ids = {0};
        struct splash_tok_bytes out = {0};
        assert_int_equal(splash_tokenizer_encode(tok, texts[i], strlen(texts[i]),
                                                 SPLASH_TOKENIZE_PARSE_SPECIAL, &ids, &err),
                         SPLASH_OK);
        assert_int_equal(splash_tokenizer_decode(tok, ids.ids, ids.n, SPLASH_DETOK_SPECIAL, &out,
                                                 &err),
                         SPLASH_OK);
        assert_int_equal(out.len, strlen(texts[i]));
        assert_memory_equal(out.data, texts[i], out.len);
        /* English compresses: merges make fewer tokens than bytes */
        if (i == 0)
            assert_true(ids.n * 3 < strlen(texts[i]));
        splash_token_buf_free(&ids);
        splash_tok_bytes_free(&out);
    }
    /* frequent words are single tokens */
    static const char *const words[] = {" the", " and", " of", " once", " time", " friend"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        struct splash_token_buf ids = {0};
        assert_int_equal(splash_tokenizer_encode(tok, words[i], strlen(words[i]), 0, &ids, &err),
                         SPLASH_OK);
        if (ids.n != 1)
            fprintf(stderr, "'%s': %zu tokens\n", words[i], ids.n);
        assert_int_equal(ids.n, 1);
        splash_token_buf_free(&ids);
    }
    /* the special tokens, their types, and the reserved fillers */
    int32_t eot = splash_tokenizer_find_special(tok, "<|endoftext|>");
    int32_t im_end = splash_tokenizer_find_special(tok, "<|im_end|>");
    assert_true(eot > 255);
    assert_int_equal(splash_tokenizer_bos(tok), eot);
    assert_int_equal(splash_tokenizer_pad(tok), eot);
    assert_int_equal(splash_tokenizer_eos(tok), im_end);
    assert_int_equal(splash_tokenizer_token_type(tok, im_end), SPLASH_TOKEN_CONTROL);
    int32_t think = splash_tokenizer_find_special(tok, "<think>");
    assert_int_equal(splash_tokenizer_token_type(tok, think), SPLASH_TOKEN_USER_DEFINED);
    assert_int_equal(splash_tokenizer_token_type(tok, 2047), SPLASH_TOKEN_UNUSED);
    /* the qwen chat format finds every token it needs as one token */
    struct splash_chat_format_ids fids;
    enum splash_status st =
        splash_chat_format_check(&splash_chat_format_qwen, tokenize_cb, tok, &fids, &err);
    if (st)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(st, SPLASH_OK);
    assert_int_equal(fids.cache_reuse_after, im_end);
    splash_tokenizer_destroy(tok);
}

static void test_builtin_template_renders_chatml(void **state)
{
    (void)state;
    struct splash_jinja_template *t = NULL;
    struct splash_err err = {{0}};
    assert_int_equal(splash_jinja_parse(splash_builtin_chat_template,
                                        strlen(splash_builtin_chat_template), &t, &err),
                     SPLASH_OK);
    static const char vars_json[] =
        "{\"messages\": ["
        "{\"role\": \"system\", \"content\": \"Be brief.\"},"
        "{\"role\": \"user\", \"content\": \"Weather in Paris?\"},"
        "{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"type\": \"function\","
        " \"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\","
        " \"days\": 2}}}]},"
        "{\"role\": \"tool\", \"content\": \"sunny\"},"
        "{\"role\": \"assistant\", \"content\": \"Sunny.\", \"reasoning_content\": \"easy\"},"
        "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"Thanks\"}]}],"
        "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}],"
        "\"add_generation_prompt\": true, \"enable_thinking\": true}";
    static const char expected[] =
        "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call these functions:\n<tools>\n"
        "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}\n</tools>\n\n"
        "To call a function, reply with:\n<tool_call>\n<function=NAME>\n<parameter=ARGUMENT>\n"
        "VALUE\n</parameter>\n</function>\n</tool_call><|im_end|>\n"
        "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
        "<|im_start|>assistant\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
        "</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call><|im_end|>\n"
        "<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n<think>\neasy\n</think>\n\nSunny.<|im_end|>\n"
        "<|im_start|>user\nThanks<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n";
    json_error_t jerr;
    json_t *vars = json_loads(vars_json, 0, &jerr);
    assert_non_null(vars);
    char *out = NULL;
    size_t out_len = 0;
    struct splash_err rerr;
    enum splash_status st = splash_jinja_render(t, vars, NULL, &out, &out_len, &rerr);
    if (st)
        fprintf(stderr, "render: %s\n", rerr.msg);
    assert_int_equal(st, SPLASH_OK);
    if (strcmp(out, expected))
        fprintf(stderr, "rendered:\n%s\n---\n", out);
    assert_string_equal(out, expected);
    free(out);
    json_decref(vars);

    /* without tools and thinking: plain ChatML ending in the assistant tag */
    vars = json_loads("{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}],"
                      "\"add_generation_prompt\": true}",
                      0, &jerr);
    assert_int_equal(splash_jinja_render(t, vars, NULL, &out, &out_len, &rerr), SPLASH_OK);
    assert_string_equal(out, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    free(out);
    json_decref(vars);
    splash_jinja_free(t);

    /* the server's startup probes: later system messages render in place, and
     * enable_thinking switches reasoning (off unless asked for) */
    struct splash_jinja_template *use = NULL;
    struct splash_later_system_probe probe;
    assert_int_equal(splash_template_probe_later_system(splash_builtin_chat_template,
                                                        strlen(splash_builtin_chat_template),
                                                        NULL, &use, &probe, &err),
                     SPLASH_OK);
    if (probe.outcome != SPLASH_LATER_SYSTEM_NATIVE)
        fprintf(stderr, "later system: %s\n", probe.reason);
    assert_int_equal(probe.outcome, SPLASH_LATER_SYSTEM_NATIVE);
    struct splash_effort_report report;
    assert_int_equal(splash_template_probe_efforts(use, NULL, false, &report, &err), SPLASH_OK);
    assert_int_equal(report.thinks, 0);
    splash_jinja_free(use);
}

static void test_make_model_dims_parse(void **state)
{
    (void)state;
    struct splash_model_shape *s = test_preset("qwen35-demo");
    struct splash_err err = {{0}};
    assert_int_equal(splash_model_shape_parse_dims(
                         s, "embedding_length=512,block_count=2,attention.head_count=8,"
                            "rope.dimension_sections=8/4/4,vocab=999,tied=0,"
                            "attention.layer_norm_rms_epsilon=1e-5",
                         &err),
                     SPLASH_OK);
    assert_true(splash_model_shape_get(s, "embedding_length") == 512);
    assert_true(splash_model_shape_get(s, "block_count") == 2);
    assert_true(splash_model_shape_get(s, "attention.head_count") == 8);
    assert_true(splash_model_shape_get(s, "attention.head_count_kv") == 2);
    assert_true(splash_model_shape_get(s, "rope.dimension_sections") == 8);
    assert_true(fabs(splash_model_shape_get(s, "attention.layer_norm_rms_epsilon") - 1e-5) <
                1e-12);
    assert_int_equal(s->n_vocab, 999);
    assert_int_equal(s->tied, 0);
    assert_int_equal(splash_model_shape_parse_dims(s, "embedding_length=12x", &err),
                     SPLASH_ERR_INVALID);
    assert_string_equal(err.msg,
                        "--dims: embedding_length: '12x' is not a whole number in range");
    assert_int_equal(splash_model_shape_parse_dims(s, "block_count=-1", &err),
                     SPLASH_ERR_INVALID);
    assert_int_equal(splash_model_shape_parse_dims(s, "colour=3", &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "--dims: colour is not a key of shape qwen35-demo (qwen35.* "
                                 "keys as the preset writes them, vocab or tied)");
    assert_int_equal(splash_model_shape_parse_dims(s, "tied=2", &err), SPLASH_ERR_INVALID);
    /* a vocabulary too small for the built-in tokenizer is refused by name */
    s->n_vocab = 100;
    struct splash_model_plan *plan = NULL;
    assert_int_equal(splash_model_plan_create(reg, s, "Q8_0", &plan, &err), SPLASH_ERR_INVALID);
    assert_non_null(strstr(err.msg, "vocab 100"));
    /* a value the family refuses: its error says which */
    s = test_preset("qwen35-demo");
    assert_int_equal(splash_model_shape_parse_dims(s, "attention.head_count_kv=0", &err),
                     SPLASH_OK);
    assert_int_not_equal(splash_model_plan_create(reg, s, "Q8_0", &plan, &err), SPLASH_OK);
    assert_non_null(strstr(err.msg, "over 0 KV heads"));
    assert_int_equal(splash_model_plan_create(reg, test_preset("qwen35-demo"), "Q9_9", &plan,
                                              &err),
                     SPLASH_ERR_UNSUPPORTED);
    /* --arch: a family or an architecture, and a preset of another is refused */
    struct splash_model_shape *other = malloc(sizeof *other);
    assert_non_null(other);
    assert_int_equal(splash_model_shape_find(reg, "qwen_moe", NULL, other, &err), SPLASH_OK);
    assert_string_equal(other->name, "qwen35moe-tiny");
    assert_int_equal(splash_model_shape_find(reg, "qwen35", NULL, other, &err), SPLASH_OK);
    assert_string_equal(other->name, "qwen35-demo");
    assert_int_equal(splash_model_shape_find(reg, "qwen35moe", "qwen35-tiny", other, &err),
                     SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "shape qwen35-tiny is of architecture qwen35 (family "
                                 "qwen_hybrid), not qwen35moe");
    assert_int_equal(splash_model_shape_find(reg, NULL, "qwen99", other, &err),
                     SPLASH_ERR_NOT_FOUND);
    free(other);
}

/* ---- the presets write what the writer's own shape table wrote ---------------------- */

static void sha256_hex(const void *data, size_t n, char hex[65])
{
    unsigned char md[32];
    unsigned int len = 0;
    assert_int_equal(EVP_Digest(data, n, md, &len, EVP_sha256(), NULL), 1);
    for (unsigned int i = 0; i < len; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

/* Files of the tiny presets (seed 42, make-model's default) as the writer wrote them when
 * it held the shapes itself (sha256 of the files the previous make-model wrote). */
static void test_make_model_presets_bytes_unchanged(void **state)
{
    (void)state;
    static const struct {
        const char *preset, *mix, *sha256;
    } files[] = {
        {"qwen35-tiny", "Q4_K_M",
         "3889107c04cf573d3e40f2419bed922f0edb78722c83c87fe74a2ddc94e60a4e"},
        {"qwen35-tiny", "Q8_0", "916f54d35f8a2d27e80eb9465fee5fb3219302205506f63e4506db65bb0b686c"},
        {"qwen35-demo", "Q4_K_M",
         "5ad4b1ea556c169097dca71f7eeb0473f17a78d815498d890565cf7541a94648"},
        {"qwen35moe-tiny", "Q4_K_M",
         "a806d7e116a1b495d4a79bbaa232ac44b1a5cf399298e839709b19e6dbdcf117"},
        {"qwen35moe-tiny", "Q8_0",
         "2b85d7b98fd21138a0001854cbb25a0b42d2b307b9b4f33e53f108c117b7fa5b"},
        {"gpt-oss-tiny", "Q8_0",
         "4e0408c985e442f0413a47cbd3ba6d9f27f661b5904511a3b201db7bcdecb8b6"},
        {"gpt-oss-tiny", "MXFP4_MOE",
         "c33a985552f5d8543197f2a836975809a39eb01d7d0492e75240f3a1bb49ae89"},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[600], hex[65];
        snprintf(path, sizeof path, "%s/%s-%s.gguf", tmp_dir, files[i].preset, files[i].mix);
        struct splash_model_write_opts opts = {.mix = files[i].mix, .seed = 42, .n_threads = 2};
        struct splash_err err = {{0}};
        if (splash_model_write(reg, test_preset(files[i].preset), &opts, path, NULL, &err))
            fail_msg("%s %s: %s", files[i].preset, files[i].mix, err.msg);
        size_t n;
        void *bytes = test_read_file(path, &n);
        assert_non_null(bytes);
        sha256_hex(bytes, n, hex);
        free(bytes);
        unlink(path);
        if (strcmp(hex, files[i].sha256)) {
            fprintf(stderr, "%s %s: sha256 %s, the old writer's %s\n", files[i].preset,
                    files[i].mix, hex, files[i].sha256);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

/* What decides a preset's bytes but the random values: its metadata and its plan (tensor
 * names, types, shapes), as text. */
static char *preset_text(const struct splash_model_shape *s, const struct splash_model_plan *p)
{
    size_t cap = 1 << 20, n = 0;
    char *t = malloc(cap);
    assert_non_null(t);
#define PUT(...) (n += (size_t)snprintf(t + n, n < cap ? cap - n : 0, __VA_ARGS__))
    PUT("%s %s %lld %d %s\n", s->name, s->arch, (long long)s->n_vocab, s->tied, s->chat_format);
    for (size_t i = 0; i < s->n_values; i++) {
        const struct splash_model_value *v = &s->values[i];
        PUT("%s %d %.17g %s", v->key, v->kind, v->num, v->str);
        for (uint32_t k = 0; k < v->n; k++)
            PUT(" %.17g", v->nums[k]);
        PUT("\n");
    }
    for (size_t i = 0; i < p->n_tensors; i++) {
        const struct splash_model_plan_tensor *x = &p->tensors[i];
        PUT("%s %s %lld %lld %lld %lld\n", x->name, x->type_name, (long long)x->ne[0],
            (long long)x->ne[1], (long long)x->ne[2], (long long)x->ne[3]);
    }
#undef PUT
    assert_true(n < cap);
    return t;
}

/* The large presets, whose files (written with --sample-values 65536) were checked byte for
 * byte against the old writer's once: their metadata and Q4_K_M plans stay as then. */
static void test_make_model_large_presets_unchanged(void **state)
{
    (void)state;
    static const struct {
        const char *preset, *sha256;
    } presets[] = {
        {"qwen35-0.8b", "dbbe7d87857447eab6e09a94f9f82d7d5588f2759d7af7b26f76b73f0735830a"},
        {"qwen35-27b-4l", "d293295f10f8f9ffd2c4484cc2ff055bbbd085c01f3c2042d0b8ded7164079a8"},
        {"qwen35moe-35b-a3b-4l",
         "fad3c9dfb8c7c52cf2ccc17c4d92effa6761586d6761f533a4be59dda9b9018f"},
        {"qwen35moe-64e-4l", "bf8b7419be6935e041c364e3dda65961fd535a3e8992209e513b35e86d994989"},
        {"gpt-oss-20b-4l", "82f01dc3dbe6f7f74db1bd43d2eab5532275762022f1784e6931e35a3637434a"},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        struct splash_model_shape *s = test_preset(presets[i].preset);
        struct splash_model_plan *plan = NULL;
        struct splash_err err = {{0}};
        if (splash_model_plan_create(reg, s, "Q4_K_M", &plan, &err))
            fail_msg("%s: %s", presets[i].preset, err.msg);
        char *text = preset_text(s, plan), hex[65];
        sha256_hex(text, strlen(text), hex);
        if (strcmp(hex, presets[i].sha256)) {
            fprintf(stderr, "%s: sha256 %s, recorded %s\n", presets[i].preset, hex,
                    presets[i].sha256);
            bad++;
        }
        free(text);
        splash_model_plan_free(plan);
    }
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_make_model_mixes_match_reference),
        cmocka_unit_test(test_make_model_reads_back),
        cmocka_unit_test(test_make_model_is_deterministic),
        cmocka_unit_test(test_make_model_decodes),
        cmocka_unit_test(test_builtin_tokenizer_round_trips),
        cmocka_unit_test(test_builtin_template_renders_chatml),
        cmocka_unit_test(test_make_model_dims_parse),
        cmocka_unit_test(test_make_model_presets_bytes_unchanged),
        cmocka_unit_test(test_make_model_large_presets_unchanged),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
