/* Checkpoint rules: MLX quantization, Model Optimizer, compressed-tensors, Splash
 * packages and gguf.require_quantized, each refusal's exact text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/checkpoint_rules.h"
#include "core/gguf_write.h"
#include "core/meta.h"
#include "tests/support/testdata.h"

#define REFUSE_TAIL ", but projections, experts and the head must be quantized"

/* Runs the rules on config text (single quotes stand for double quotes) and, when
 * names is non-NULL, the NULL-terminated tensor names. */
static enum splash_status check(const char *text, const char *const *names, int *kind,
                                struct splash_err *err)
{
    char *json = strdup(text);
    for (char *p = json; *p; p++)
        if (*p == '\'')
            *p = '"';
    json_error_t jerr;
    json_t *config = json_loads(json, 0, &jerr);
    if (!config)
        fail_msg("test config: %s: %s", jerr.text, json);
    size_t n = 0;
    while (names && names[n])
        n++;
    struct splash_checkpoint_input in = {
        .config = config,
        .config_name = "config.json",
        .tensors = names,
        .n_tensors = n,
        .names_file = "model.safetensors.index.json",
    };
    memset(err, 0, sizeof *err);
    enum splash_status st = splash_checkpoint_check(&in, kind, err);
    json_decref(config);
    free(json);
    return st;
}

static void expect_ok(const char *text, const char *const *names, int want_kind)
{
    struct splash_err err;
    int kind = 0;
    enum splash_status st = check(text, names, &kind, &err);
    if (st)
        fail_msg("refused: %s", err.msg);
    assert_int_equal(kind, want_kind);
}

static void expect_refused(const char *text, const char *const *names, enum splash_status want,
                           const char *msg)
{
    struct splash_err err;
    enum splash_status st = check(text, names, NULL, &err);
    if (st != want)
        fail_msg("status %d, want %d (%s)", st, want, err.msg);
    assert_string_equal(err.msg, msg);
}

/* ---- module roles ------------------------------------------------------------------ */

static void test_checkpoint_roles_default(void **state)
{
    const struct splash_module_roles *r = splash_module_roles_default();
    assert_true(splash_module_must_quantize(r, "model.layers.0.self_attn.q_proj"));
    assert_true(splash_module_must_quantize(r, "model.layers.3.linear_attn.in_proj_qkvz"));
    assert_true(splash_module_must_quantize(r, "model.layers.0.mlp.switch_mlp.down_proj"));
    assert_true(splash_module_must_quantize(r, "model.language_model.layers.0.mlp.experts.7.up_proj"));
    assert_true(splash_module_must_quantize(r, "lm_head"));
    assert_true(splash_module_must_quantize(r, "language_model.lm_head"));
    assert_false(splash_module_must_quantize(r, "model.layers.0.mlp.gate"));
    assert_false(splash_module_must_quantize(r, "model.layers.0.mlp.shared_expert_gate"));
    assert_false(splash_module_must_quantize(r, "model.layers.0.linear_attn.in_proj_a"));
    assert_false(splash_module_must_quantize(r, "model.layers.0.linear_attn.in_proj_ba"));
    assert_false(splash_module_must_quantize(r, "model.embed_tokens"));
    assert_false(splash_module_must_quantize(r, "vision_tower.blocks.0.attn.qkv_proj"));
    assert_false(splash_module_must_quantize(r, "model.visual.blocks.0.mlp.up_proj"));
    assert_false(splash_module_must_quantize(r, "mtp.layers.0.mlp.down_proj"));
}

/* ---- MLX ------------------------------------------------------------------------- */

static void test_checkpoint_mlx_formats(void **state)
{
    expect_ok("{'quantization':{'group_size':64,'bits':4}}", NULL, SPLASH_CHECKPOINT_MLX);
    expect_ok("{'quantization':{'group_size':32,'bits':4,'mode':'mxfp4'}}", NULL,
              SPLASH_CHECKPOINT_MLX);
    expect_ok("{'quantization':{'group_size':16,'bits':4,'mode':'nvfp4'}}", NULL,
              SPLASH_CHECKPOINT_MLX);
    for (int bits = 2; bits <= 8; bits++)
        for (int g = 16; g <= 256; g *= 2) {
            char cfg[128];
            snprintf(cfg, sizeof cfg, "{'quantization':{'group_size':%d,'bits':%d}}", g, bits);
            struct splash_err err;
            int ok = bits != 7 && (g == 32 || g == 64 || g == 128);
            assert_int_equal(check(cfg, NULL, NULL, &err) == SPLASH_OK, ok);
        }
    expect_refused("{'quantization':{'group_size':64,'bits':7}}", NULL, SPLASH_ERR_UNSUPPORTED,
                   "config.json: quantization: affine 7 bits in groups of 64 is not supported (2, "
                   "3, 4, 5, 6 or 8 bits in groups of 32, 64 or 128)");
    expect_refused("{'quantization':{'group_size':32,'bits':8,'mode':'mxfp8'}}", NULL,
                   SPLASH_ERR_UNSUPPORTED,
                   "config.json: quantization: mode mxfp8 is not supported (affine, mxfp4 or nvfp4)");
    expect_refused("{'quantization':{'group_size':64,'bits':4,'mode':'mxfp4'}}", NULL,
                   SPLASH_ERR_UNSUPPORTED,
                   "config.json: quantization: mxfp4 4 bits in groups of 64 is not supported "
                   "(mxfp4 is 4 bits in groups of 32)");
    expect_refused("{'quantization':{'group_size':'64','bits':4}}", NULL, SPLASH_ERR_INVALID,
                   "config.json: quantization: bits and group_size must be integers");
}

static void test_checkpoint_mlx_module_entries(void **state)
{
    /* a module's entry wins, mixed in any way */
    expect_ok("{'quantization':{'group_size':64,'bits':4,"
              "'model.layers.0.mlp.gate':{'group_size':64,'bits':8},"
              "'model.layers.1.mlp.switch_mlp.down_proj':{'mode':'mxfp4','group_size':32,'bits':4},"
              "'model.layers.1.self_attn.o_proj':{'mode':'nvfp4','group_size':16,'bits':4}}}",
              NULL, SPLASH_CHECKPOINT_MLX);
    /* other formats are refused naming the module */
    expect_refused("{'quantization':{'group_size':64,'bits':4,"
                   "'model.layers.2.mlp.switch_mlp.up_proj':{'mode':'mxfp8','group_size':32,"
                   "'bits':8}}}",
                   NULL, SPLASH_ERR_UNSUPPORTED,
                   "config.json: quantization.model.layers.2.mlp.switch_mlp.up_proj: mode mxfp8 is "
                   "not supported (affine, mxfp4 or nvfp4)");
    /* an entry's mode defaults to affine, not to the checkpoint's */
    expect_refused("{'quantization':{'group_size':16,'bits':4,'mode':'nvfp4',"
                   "'model.layers.0.mlp.gate':{'group_size':16,'bits':4}}}",
                   NULL, SPLASH_ERR_UNSUPPORTED,
                   "config.json: quantization.model.layers.0.mlp.gate: affine 4 bits in groups of "
                   "16 is not supported (2, 3, 4, 5, 6 or 8 bits in groups of 32, 64 or 128)");
    /* false: fine for the router, shared-expert gate, alpha/beta, token table, vision */
    expect_ok("{'quantization':{'group_size':64,'bits':4,'model.layers.0.mlp.gate':false,"
              "'model.layers.0.mlp.shared_expert_gate':false,"
              "'model.layers.0.linear_attn.in_proj_a':false,"
              "'model.layers.0.linear_attn.in_proj_b':false,'model.embed_tokens':false,"
              "'vision_tower.blocks.0.attn.proj':false}}",
              NULL, SPLASH_CHECKPOINT_MLX);
    expect_refused("{'quantization':{'group_size':64,'bits':4,"
                   "'model.layers.0.self_attn.q_proj':false}}",
                   NULL, SPLASH_ERR_UNSUPPORTED,
                   "config.json: quantization.model.layers.0.self_attn.q_proj: false, but "
                   "projections, experts and the head load only quantized");
    expect_refused("{'quantization':{'group_size':64,'bits':4,'lm_head':false}}", NULL,
                   SPLASH_ERR_UNSUPPORTED,
                   "config.json: quantization.lm_head: false, but projections, experts and the "
                   "head load only quantized");
    expect_refused("{'quantization':{'group_size':64,'bits':4,"
                   "'model.layers.5.mlp.switch_mlp.gate_proj':false}}",
                   NULL, SPLASH_ERR_UNSUPPORTED,
                   "config.json: quantization.model.layers.5.mlp.switch_mlp.gate_proj: false, but "
                   "projections, experts and the head load only quantized");
    expect_refused("{'quantization':{'group_size':64,'bits':4,'x.q_proj':4}}", NULL,
                   SPLASH_ERR_INVALID, "config.json: quantization.x.q_proj must be an object or false");
}

static void test_checkpoint_mlx_tensor_names(void **state)
{
    static const char *const good[] = {
        "model.embed_tokens.weight",
        "model.layers.0.self_attn.q_proj.weight",
        "model.layers.0.self_attn.q_proj.scales",
        "model.layers.0.self_attn.q_proj.biases",
        "model.layers.0.mlp.gate.weight", /* the router may stay bf16 */
        "vision_tower.blocks.0.attn.qkv_proj.weight",
        "lm_head.weight",
        "lm_head.scales",
        NULL,
    };
    expect_ok("{'quantization':{'group_size':64,'bits':4}}", good, SPLASH_CHECKPOINT_MLX);
    static const char *const bad[] = {
        "model.layers.0.self_attn.q_proj.weight",
        "model.layers.0.self_attn.q_proj.scales",
        "model.layers.0.mlp.switch_mlp.down_proj.weight",
        NULL,
    };
    expect_refused("{'quantization':{'group_size':64,'bits':4}}", bad, SPLASH_ERR_UNSUPPORTED,
                   "model.safetensors.index.json: model.layers.0.mlp.switch_mlp.down_proj is "
                   "unquantized (no .scales), but projections, experts and the head load only "
                   "quantized");
}

static void test_checkpoint_unquantized_and_other_methods(void **state)
{
    expect_refused("{'model_type':'qwen3_5','text_config':{'hidden_size':8}}", NULL,
                   SPLASH_ERR_UNSUPPORTED,
                   "config.json: the checkpoint is not quantized; Splash loads quantized MLX, "
                   "Model Optimizer or compressed-tensors checkpoints");
    expect_refused("{'quantization_config':{'quant_method':'gptq','bits':4}}", NULL,
                   SPLASH_ERR_UNSUPPORTED,
                   "config.json: quantization_config.quant_method gptq is not supported (MLX, "
                   "modelopt or compressed-tensors)");
    /* mlx-lm's copy under quantization_config, without a method, is MLX's */
    expect_ok("{'quantization_config':{'group_size':64,'bits':4}}", NULL, SPLASH_CHECKPOINT_MLX);
    /* under text_config too */
    expect_ok("{'text_config':{'quantization':{'group_size':64,'bits':6}}}", NULL,
              SPLASH_CHECKPOINT_MLX);
}

/* ---- Model Optimizer ---------------------------------------------------------------- */

#define MO(body) "{'quantization_config':{'quant_method':'modelopt'," body "}}"

static const char *const mo_names[] = {
    "model.language_model.embed_tokens.weight",
    "model.language_model.layers.0.self_attn.q_proj.weight",
    "model.language_model.layers.0.self_attn.q_proj.weight_scale",
    "model.language_model.layers.0.mlp.gate.weight",
    "model.language_model.layers.0.mlp.experts.0.down_proj.weight",
    "model.language_model.layers.0.mlp.experts.0.down_proj.weight_scale",
    "model.visual.blocks.0.mlp.linear_fc1.weight",
    "lm_head.weight",
    "lm_head.weight_scale",
    NULL,
};

static void test_checkpoint_modelopt(void **state)
{
    expect_ok(MO("'quant_algo':'NVFP4','group_size':16,"
                 "'ignore':['model.language_model.layers.*.mlp.gate','model.visual*']"),
              mo_names, SPLASH_CHECKPOINT_MODELOPT);
    expect_ok(MO("'quant_algo':'FP8','exclude_modules':['*mlp.gate']"), NULL,
              SPLASH_CHECKPOINT_MODELOPT);
    expect_ok(MO("'quant_algo':'W4A16_NVFP4'"), mo_names, SPLASH_CHECKPOINT_MODELOPT);
    expect_refused(MO("'quant_algo':'FP8_PB_WO'"), NULL, SPLASH_ERR_UNSUPPORTED,
                   "config.json: quantization_config: every layer: quant_algo FP8_PB_WO is not "
                   "supported (NVFP4 or W4A16_NVFP4 in groups of 16, or FP8 per tensor)");
    expect_refused(MO("'quant_algo':'NVFP4','group_size':32"), NULL, SPLASH_ERR_UNSUPPORTED,
                   "config.json: quantization_config: every layer: NVFP4 must be in groups of 16");
    /* the head ignored: refused from the config alone, and with the names */
    expect_refused(MO("'quant_algo':'NVFP4','ignore':['lm_head']"), NULL, SPLASH_ERR_UNSUPPORTED,
                   "config.json: quantization_config: lm_head is ignored (lm_head)" REFUSE_TAIL);
    expect_ok("{'tie_word_embeddings':true,'quantization_config':{'quant_method':'modelopt',"
              "'quant_algo':'NVFP4','ignore':['lm_head']}}",
              NULL, SPLASH_CHECKPOINT_MODELOPT);
    expect_refused(MO("'quant_algo':'NVFP4','ignore':['*self_attn*']"), mo_names,
                   SPLASH_ERR_UNSUPPORTED,
                   "config.json: quantization_config: "
                   "model.language_model.layers.0.self_attn.q_proj is ignored (*self_attn*)"
                   REFUSE_TAIL);
    /* a pattern covers a module through its parent */
    expect_refused(MO("'quant_algo':'NVFP4','ignore':['model.language_model.layers.0.mlp']"),
                   mo_names, SPLASH_ERR_UNSUPPORTED,
                   "config.json: quantization_config: "
                   "model.language_model.layers.0.mlp.experts.0.down_proj is ignored "
                   "(model.language_model.layers.0.mlp)" REFUSE_TAIL);
    expect_refused(MO("'quant_algo':'NVFP4','ignore':['model.layers.3.self_attn.o_proj']"), NULL,
                   SPLASH_ERR_UNSUPPORTED,
                   "config.json: quantization_config: model.layers.3.self_attn.o_proj is ignored"
                   REFUSE_TAIL);
}

static void test_checkpoint_modelopt_quantized_layers(void **state)
{
    const char *cfg = MO("'quant_algo':'MIXED_PRECISION','quantized_layers':{"
                         "'lm_head':{'quant_algo':'FP8'},"
                         "'model.language_model.layers.0.self_attn.q_proj':{'quant_algo':'NVFP4',"
                         "'group_size':16},"
                         "'model.language_model.layers.0.mlp.experts.0.down_proj':{'quant_algo':"
                         "'NVFP4'}}");
    expect_ok(cfg, mo_names, SPLASH_CHECKPOINT_MODELOPT);
    expect_refused(MO("'quant_algo':'MIXED_PRECISION','quantized_layers':{"
                      "'lm_head':{'quant_algo':'FP8'}}"),
                   mo_names, SPLASH_ERR_UNSUPPORTED,
                   "config.json: quantization_config: "
                   "model.language_model.layers.0.mlp.experts.0.down_proj is not a quantized "
                   "layer, but projections, experts and the head must be");
    expect_refused(MO("'quantized_layers':{'model.layers.0.mlp.down_proj':{'quant_algo':"
                      "'INT4_AWQ'}}"),
                   NULL, SPLASH_ERR_UNSUPPORTED,
                   "config.json: quantization_config: model.layers.0.mlp.down_proj: quant_algo "
                   "INT4_AWQ is not supported (NVFP4 or W4A16_NVFP4 in groups of 16, or FP8 per "
                   "tensor)");
    expect_refused(MO("'quantized_layers':{'model.layers.0.mlp.down_proj':{'quant_algo':"
                      "'NVFP4','group_size':32}}"),
                   NULL, SPLASH_ERR_UNSUPPORTED,
                   "config.json: quantization_config: model.layers.0.mlp.down_proj: NVFP4 must "
                   "be in groups of 16");
    /* the head must be a quantized layer */
    expect_refused(MO("'quantized_layers':{'model.layers.0.mlp.down_proj':{'quant_algo':'FP8'}}"),
                   NULL, SPLASH_ERR_UNSUPPORTED,
                   "config.json: quantization_config: lm_head is not a quantized layer, but "
                   "projections, experts and the head must be");
}

/* ---- compressed-tensors --------------------------------------------------------------- */

#define NVFP4_W "'weights':{'num_bits':4,'type':'float','strategy':'tensor_group','group_size':16," \
                "'symmetric':true,'dynamic':false,'actorder':null}"
#define FP8_W "'weights':{'num_bits':8,'type':'float','strategy':'channel','symmetric':true," \
              "'dynamic':false}"
#define CT(groups, rest) "{'quantization_config':{'quant_method':'compressed-tensors'," \
                         "'format':'nvfp4-pack-quantized','config_groups':{" groups "}" rest "}}"

static const char *const ct_names[] = {
    "model.language_model.embed_tokens.weight",
    "model.language_model.layers.0.self_attn.q_proj.weight_packed",
    "model.language_model.layers.0.self_attn.q_proj.weight_scale",
    "model.language_model.layers.0.mlp.gate.weight",
    "model.language_model.layers.0.mlp.experts.0.gate_proj.weight_packed",
    "model.language_model.layers.0.mlp.experts.127.gate_proj.weight_packed",
    "lm_head.weight_packed",
    NULL,
};

static void test_checkpoint_compressed_tensors(void **state)
{
    expect_ok(CT("'group_0':{'targets':['Linear']," NVFP4_W "}",
                 ",'ignore':['re:.*mlp[.]gate$','model.visual.merger']"),
              ct_names, SPLASH_CHECKPOINT_COMPRESSED_TENSORS);
    expect_ok(CT("'group_0':{'targets':['Linear']," NVFP4_W "}", ",'ignore':[]"), NULL,
              SPLASH_CHECKPOINT_COMPRESSED_TENSORS);
    /* FP8 by channel in a group of its own format; targets by name and by regex */
    expect_ok(CT("'g0':{'targets':['re:.*self_attn.*','lm_head']," NVFP4_W "},"
                 "'g1':{'format':'float-quantized','targets':['re:model[.]language_model[.]layers"
                 "[.][0-9]+[.]mlp[.]experts']," FP8_W "}", ""),
              ct_names, SPLASH_CHECKPOINT_COMPRESSED_TENSORS);
    /* RedHatAI's: the head kept in BF16 */
    expect_refused(CT("'group_0':{'targets':['Linear']," NVFP4_W "}", ",'ignore':['lm_head']"),
                   NULL, SPLASH_ERR_UNSUPPORTED,
                   "config.json: quantization_config: lm_head is ignored (lm_head)" REFUSE_TAIL);
    expect_refused(CT("'group_0':{'targets':['Linear']," NVFP4_W "}",
                      ",'ignore':['re:.*experts[.]127[.]']"),
                   ct_names, SPLASH_ERR_UNSUPPORTED,
                   "config.json: quantization_config: "
                   "model.language_model.layers.0.mlp.experts.127.gate_proj is ignored "
                   "(re:.*experts[.]127[.])" REFUSE_TAIL);
    /* re: matches from the start of the name */
    expect_refused(CT("'group_0':{'targets':['re:self_attn','re:.*experts','lm_head']," NVFP4_W
                      "}", ""),
                   ct_names, SPLASH_ERR_UNSUPPORTED,
                   "config.json: quantization_config: "
                   "model.language_model.layers.0.self_attn.q_proj is the target of no config "
                   "group, but projections, experts and the head must be");
}

static void test_checkpoint_compressed_tensors_groups_refused(void **state)
{
    expect_refused(CT("'group_0':{'targets':['Linear'],'weights':{'num_bits':4,'type':'float',"
                      "'strategy':'tensor_group','group_size':32,'symmetric':true}}", ""),
                   NULL, SPLASH_ERR_UNSUPPORTED,
                   "config.json: quantization_config.config_groups.group_0: nvfp4-pack-quantized "
                   "must be float 4-bit by tensor_group in groups of 16");
    expect_refused(CT("'group_0':{'targets':['Linear'],'weights':{'num_bits':4,'type':'float',"
                      "'strategy':'tensor_group','group_size':16,'symmetric':false}}", ""),
                   NULL, SPLASH_ERR_UNSUPPORTED,
                   "config.json: quantization_config.config_groups.group_0: asymmetric weights "
                   "are not supported");
    expect_refused(CT("'group_0':{'targets':['Linear'],'weights':{'num_bits':4,'type':'float',"
                      "'strategy':'tensor_group','group_size':16,'actorder':'group'}}", ""),
                   NULL, SPLASH_ERR_UNSUPPORTED,
                   "config.json: quantization_config.config_groups.group_0: actorder reorders "
                   "columns; weights must be in their stored column order");
    expect_refused(CT("'fp8':{'format':'float-quantized','targets':['Linear'],'weights':{"
                      "'num_bits':8,'type':'float','strategy':'block','block_structure':[128,128],"
                      "'symmetric':true}}", ""),
                   NULL, SPLASH_ERR_UNSUPPORTED,
                   "config.json: quantization_config.config_groups.fp8: float-quantized must be "
                   "float 8-bit by channel or tensor");
    expect_refused(CT("'int4':{'format':'pack-quantized','targets':['Linear']," NVFP4_W "}", ""),
                   NULL, SPLASH_ERR_UNSUPPORTED,
                   "config.json: quantization_config.config_groups.int4: format pack-quantized is "
                   "not supported (nvfp4-pack-quantized or float-quantized)");
    expect_refused(CT("'group_0':{'targets':['Embedding']," NVFP4_W "}", ""), NULL,
                   SPLASH_ERR_UNSUPPORTED,
                   "config.json: quantization_config.config_groups.group_0.targets[0]: Embedding "
                   "is not a module name, re: expression or Linear");
    expect_refused(CT("'group_0':{'targets':['re:(unclosed']," NVFP4_W "}", ""), NULL,
                   SPLASH_ERR_INVALID,
                   "config.json: quantization_config.config_groups.group_0.targets[0]: missing "
                   "closing parenthesis at offset 9");
    expect_refused(CT("'group_0':{'targets':['Linear']}", ""), NULL, SPLASH_ERR_UNSUPPORTED,
                   "config.json: quantization_config.config_groups.group_0: the group quantizes "
                   "no weights");
    /* a regular expression of 513 bytes */
    char cfg[2048], re[520];
    memset(re, 'a', 513);
    re[513] = 0;
    snprintf(cfg, sizeof cfg, CT("'group_0':{'targets':['re:%s']," NVFP4_W "}", ""), re);
    expect_refused(cfg, NULL, SPLASH_ERR_UNSUPPORTED,
                   "config.json: quantization_config.config_groups.group_0.targets[0]: a regular "
                   "expression of 513 bytes (at most 512)");
    re[512] = 0;
    snprintf(cfg, sizeof cfg, CT("'group_0':{'targets':['Linear','re:%s']," NVFP4_W "}", ""), re);
    expect_ok(cfg, NULL, SPLASH_CHECKPOINT_COMPRESSED_TENSORS);
    /* catastrophic backtracking gives up and refuses, naming the expression */
    static const char *const long_name[] = {
        "model.b.layers.0.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaz.q_proj.weight",
        NULL,
    };
    struct splash_err err;
    assert_int_equal(check(CT("'group_0':{'targets':['Linear']," NVFP4_W "}",
                              ",'ignore':['re:.*(a|aa)+b']"),
                           long_name, NULL, &err),
                     SPLASH_ERR_UNSUPPORTED);
    const char *want = "config.json: quantization_config: re:.*(a|aa)+b gives up matching "
                       "model.b.layers.0.aaaa";
    if (strncmp(err.msg, want, strlen(want)))
        fail_msg("%s", err.msg);
}

/* ---- Splash packages and directories ----------------------------------------------- */

static char tmp_root[64];

static int setup_tmp(void **state)
{
    snprintf(tmp_root, sizeof tmp_root, "/tmp/splash-test-ckpt-XXXXXX");
    return mkdtemp(tmp_root) ? 0 : -1;
}

static void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[512];
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
            rm_tree(path);
        else
            unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

static int teardown_tmp(void **state)
{
    rm_tree(tmp_root);
    return 0;
}

static void put_file(const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmp_root, rel);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_checkpoint_splash_package_refused(void **state)
{
    char dir[512], mlx[160];
    snprintf(dir, sizeof dir, "%s/pkg", tmp_root);
    mkdir(dir, 0755);
    put_file("pkg/manifest.json",
             "{\"format\":\"splash-package\",\"model\":\"Qwen3.6-35B-A3B\",\"artifacts\":[]}");
    assert_true(splash_checkpoint_is_package(dir, mlx, sizeof mlx));
    assert_string_equal(mlx, "mlx-community/Qwen3.6-35B-A3B-4bit");
    struct splash_err err;
    assert_int_equal(splash_check_checkpoint(dir, NULL, &err), SPLASH_ERR_UNSUPPORTED);
    char want[1024];
    snprintf(want, sizeof want,
             "%s: a Splash package, a format this Splash no longer loads; serve "
             "mlx-community/Qwen3.6-35B-A3B-4bit instead",
             dir);
    assert_string_equal(err.msg, want);
    /* the manifest's own upstream target wins */
    put_file("pkg/manifest.json",
             "{\"upstream\":{\"target\":{\"repo_id\":\"mlx-community/Qwen3.8-27B-4bit\"}}}");
    assert_true(splash_checkpoint_is_package(dir, mlx, sizeof mlx));
    assert_string_equal(mlx, "mlx-community/Qwen3.8-27B-4bit");
    /* some other manifest is no package */
    put_file("pkg/manifest.json", "{\"files\":[\"a\"]}");
    assert_false(splash_checkpoint_is_package(dir, mlx, sizeof mlx));
}

static void test_checkpoint_directory_check(void **state)
{
    char dir[512];
    struct splash_err err;
    int kind = 0;
    snprintf(dir, sizeof dir, "%s/mlx", tmp_root);
    mkdir(dir, 0755);
    put_file("mlx/config.json", "{\"quantization\":{\"group_size\":64,\"bits\":4}}");
    assert_int_equal(splash_check_checkpoint(dir, &kind, &err), 0);
    assert_int_equal(kind, SPLASH_CHECKPOINT_MLX);
    /* the index's names are checked before any shard is there */
    put_file("mlx/model.safetensors.index.json",
             "{\"weight_map\":{\"lm_head.weight\":\"model-00001-of-00001.safetensors\"}}");
    assert_int_equal(splash_check_checkpoint(dir, &kind, &err), SPLASH_ERR_UNSUPPORTED);
    assert_string_equal(err.msg, "model.safetensors.index.json: lm_head is unquantized (no "
                                 ".scales), but projections, experts and the head load only "
                                 "quantized");
    /* Model Optimizer's older exports: hf_quant_config.json */
    snprintf(dir, sizeof dir, "%s/mo", tmp_root);
    mkdir(dir, 0755);
    put_file("mo/config.json", "{\"model_type\":\"qwen3_5\"}");
    put_file("mo/hf_quant_config.json",
             "{\"producer\":{\"name\":\"modelopt\"},\"quantization\":{\"quant_algo\":\"NVFP4\","
             "\"group_size\":16,\"exclude_modules\":[\"lm_head\"]}}");
    assert_int_equal(splash_check_checkpoint(dir, &kind, &err), SPLASH_ERR_UNSUPPORTED);
    assert_string_equal(err.msg, "config.json: quantization_config: lm_head is ignored (lm_head)"
                                 REFUSE_TAIL);
    assert_int_equal(kind, SPLASH_CHECKPOINT_MODELOPT);
    /* a config.json named directly is read alone */
    char path[600];
    snprintf(path, sizeof path, "%s/mlx/config.json", tmp_root);
    assert_int_equal(splash_check_checkpoint(path, &kind, &err), 0);
}

/* ---- gguf.require_quantized ------------------------------------------------------- */

static void test_checkpoint_gguf_require_quantized_testdata(void **state)
{
    char dir[512], path[1024];
    DIR *d = opendir(test_testdata_path(dir, sizeof dir, "models"));
    assert_non_null(d);
    struct dirent *e;
    int passed = 0;
    while ((e = readdir(d))) {
        if (!strstr(e->d_name, ".gguf"))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct splash_meta *m;
        struct splash_err err;
        assert_int_equal(splash_meta_open_gguf(path, SPLASH_GGUF_HEADERS_ONLY, &m, &err), 0);
        enum splash_status st = splash_gguf_require_quantized(m, &err);
        if (!strcmp(e->d_name, "qwen35-tiny-BF16.gguf")) {
            assert_int_equal(st, SPLASH_ERR_UNSUPPORTED);
            assert_string_equal(err.msg, "qwen35-tiny-BF16.gguf: 100% of its values are BF16, "
                                         "F16 or F32; Splash serves quantized GGUFs: choose a "
                                         "quantized variant (such as Q4_K_M)");
        } else {
            if (st)
                fail_msg("%s", err.msg);
            passed++;
        }
        splash_meta_close(m);
    }
    closedir(d);
    assert_true(passed >= 25);
}

/* Builds a GGUF of BF16 [n_bf16 x 256] and Q8_0 [n_q8 x 256] tensors and checks it. */
static enum splash_status require_quantized_of(int n_bf16, int n_q8, struct splash_err *err)
{
    static uint8_t zeros[256 * 64 * 2];
    char path[512];
    snprintf(path, sizeof path, "%s/mix.gguf", tmp_root);
    struct splash_gguf_writer *w = splash_gguf_writer_create();
    int64_t ne_bf[2] = {256, n_bf16}, ne_q8[2] = {256, n_q8};
    assert_int_equal(splash_gguf_writer_add_tensor(w, "blk.0.attn_q.weight", 30, 2, ne_bf, zeros,
                                                   256ull * n_bf16 * 2, err),
                     0);
    assert_int_equal(splash_gguf_writer_add_tensor(w, "token_embd.weight", 8, 2, ne_q8, zeros,
                                                   8ull * 34 * n_q8, err),
                     0);
    assert_int_equal(splash_gguf_writer_write_file(w, path, err), 0);
    splash_gguf_writer_destroy(w);
    struct splash_meta *m;
    assert_int_equal(splash_meta_open_gguf(path, 0, &m, err), 0);
    enum splash_status st = splash_gguf_require_quantized(m, err);
    splash_meta_close(m);
    return st;
}

static void test_checkpoint_gguf_require_quantized_counts_values(void **state)
{
    struct splash_err err;
    /* a whole-BF16 file with its token table quantized is still refused */
    assert_int_equal(require_quantized_of(48, 16, &err), SPLASH_ERR_UNSUPPORTED);
    assert_string_equal(err.msg, "mix.gguf: 75% of its values are BF16, F16 or F32; Splash serves "
                                 "quantized GGUFs: choose a quantized variant (such as Q4_K_M)");
    /* equal counts do not outnumber; more quantized values pass */
    assert_int_equal(require_quantized_of(32, 32, &err), 0);
    assert_int_equal(require_quantized_of(16, 48, &err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checkpoint_roles_default),
        cmocka_unit_test(test_checkpoint_mlx_formats),
        cmocka_unit_test(test_checkpoint_mlx_module_entries),
        cmocka_unit_test(test_checkpoint_mlx_tensor_names),
        cmocka_unit_test(test_checkpoint_unquantized_and_other_methods),
        cmocka_unit_test(test_checkpoint_modelopt),
        cmocka_unit_test(test_checkpoint_modelopt_quantized_layers),
        cmocka_unit_test(test_checkpoint_compressed_tensors),
        cmocka_unit_test(test_checkpoint_compressed_tensors_groups_refused),
        cmocka_unit_test(test_checkpoint_splash_package_refused),
        cmocka_unit_test(test_checkpoint_directory_check),
        cmocka_unit_test(test_checkpoint_gguf_require_quantized_testdata),
        cmocka_unit_test(test_checkpoint_gguf_require_quantized_counts_values),
    };
    return cmocka_run_group_tests(tests, setup_tmp, teardown_tmp);
}
