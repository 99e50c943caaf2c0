/* The Hub installer's pure parts: the environment as huggingface_hub reads it, the
 * revision endpoint's JSON, target selection over a listing (models.md "GGUF targets"),
 * file URLs and the cache's snapshot links. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/model_check.h"
#include "core/registry.h"
#include "core/safetensors.h"
#include "core/target.h"
#include "server/hub/api.h"
#include "server/hub/cache.h"
#include "server/hub/draft.h"
#include "server/hub/env.h"
#include "server/hub/projector.h"
#include "server/hub/shards.h"
#include "splash/plugin.h"
#include "tests/support/testdata.h"

extern const splash_plugin_entry_fn splash_builtin_plugins[];

static void clear_env(void)
{
    static const char *const vars[] = {"HF_ENDPOINT", "HF_HOME", "HF_HUB_CACHE",
                                       "HUGGINGFACE_HUB_CACHE", "HF_TOKEN", "HF_TOKEN_PATH",
                                       "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE",
                                       "TRANSFORMERS_OFFLINE", "XDG_CACHE_HOME"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    setenv("HOME", "/home/u", 1);
}

static void test_env_defaults(void **state)
{
    (void)state;
    clear_env();
    struct splash_hub_env env;
    struct splash_err err;
    assert_int_equal(splash_hub_env_read(&env, &err), SPLASH_OK);
    assert_string_equal(env.endpoint, "https://huggingface.co");
    assert_string_equal(env.home, "/home/u/.cache/huggingface");
    assert_string_equal(env.cache, "/home/u/.cache/huggingface/hub");
    assert_int_equal(env.offline, 0);
    setenv("XDG_CACHE_HOME", "/x/cache", 1);
    assert_int_equal(splash_hub_env_read(&env, &err), SPLASH_OK);
    assert_string_equal(env.cache, "/x/cache/huggingface/hub");
    setenv("HF_HOME", "~/hf", 1);
    assert_int_equal(splash_hub_env_read(&env, &err), SPLASH_OK);
    assert_string_equal(env.cache, "/home/u/hf/hub");
    setenv("HUGGINGFACE_HUB_CACHE", "/legacy", 1);
    assert_int_equal(splash_hub_env_read(&env, &err), SPLASH_OK);
    assert_string_equal(env.cache, "/legacy");
    setenv("HF_HUB_CACHE", "/new", 1); /* wins over the legacy name */
    assert_int_equal(splash_hub_env_read(&env, &err), SPLASH_OK);
    assert_string_equal(env.cache, "/new");
}

static void test_env_endpoint_offline_token(void **state)
{
    (void)state;
    clear_env();
    struct splash_hub_env env;
    struct splash_err err;
    setenv("HF_ENDPOINT", "https://hf-mirror.com//", 1); /* .rstrip("/") */
    assert_int_equal(splash_hub_env_read(&env, &err), SPLASH_OK);
    assert_string_equal(env.endpoint, "https://hf-mirror.com");
    setenv("HF_ENDPOINT", "hf-mirror.com", 1);
    assert_int_equal(splash_hub_env_read(&env, &err), SPLASH_ERR_INVALID);
    assert_non_null(strstr(err.msg, "HF_ENDPOINT"));
    unsetenv("HF_ENDPOINT");
    const char *yes[] = {"1", "ON", "yes", "True"}, *no[] = {"0", "off", "", "2"};
    for (int i = 0; i < 4; i++) {
        setenv("HF_HUB_OFFLINE", yes[i], 1);
        assert_int_equal(splash_hub_env_read(&env, &err), SPLASH_OK);
        assert_int_equal(env.offline, 1);
        setenv("HF_HUB_OFFLINE", no[i], 1);
        assert_int_equal(splash_hub_env_read(&env, &err), SPLASH_OK);
        assert_int_equal(env.offline, 0);
    }
    char dir[] = "/tmp/splash-hub-env-XXXXXX", path[PATH_MAX];
    assert_non_null(mkdtemp(dir));
    setenv("HF_HOME", dir, 1);
    snprintf(path, sizeof path, "%s/token", dir);
    FILE *f = fopen(path, "w");
    fputs("  hf_file_token\n", f);
    fclose(f);
    assert_int_equal(splash_hub_env_read(&env, &err), SPLASH_OK);
    assert_string_equal(env.token, "hf_file_token");
    setenv("HF_TOKEN", "hf_env", 1); /* the variable wins over the file */
    assert_int_equal(splash_hub_env_read(&env, &err), SPLASH_OK);
    assert_string_equal(env.token, "hf_env");
    unlink(path);
    rmdir(dir);
    clear_env();
}

#define SHA "0123456789abcdef0123456789abcdef01234567"
#define H64 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

static enum splash_status parse(const char *json, struct splash_hub_revision *rev,
                                struct splash_err *err)
{
    return splash_hub_revision_parse(json, strlen(json), rev, err);
}

static void test_revision_parse(void **state)
{
    (void)state;
    struct splash_hub_revision rev;
    struct splash_err err;
    assert_int_equal(parse("{\"sha\":\"" SHA "\",\"siblings\":[{\"rfilename\":\"README.md\","
                           "\"blobId\":\"" SHA "\",\"size\":12},{\"rfilename\":\"Q/M.gguf\","
                           "\"blobId\":\"" SHA "\",\"size\":7,\"lfs\":{\"sha256\":\"" H64 "\","
                           "\"size\":7,\"pointerSize\":134}}]}",
                           &rev, &err),
                     SPLASH_OK);
    assert_string_equal(rev.commit, SHA);
    assert_int_equal(rev.n_files, 2);
    assert_int_equal(rev.files[0].lfs, 0);
    assert_string_equal(rev.files[0].blob, SHA);
    assert_int_equal(rev.files[1].lfs, 1);
    assert_string_equal(rev.files[1].blob, H64);
    assert_int_equal(rev.files[1].size, 7);
    assert_non_null(splash_hub_revision_find(&rev, "Q/M.gguf"));
    splash_hub_revision_free(&rev);

    static const struct {
        const char *json, *error;
    } bad[] = {
        {"[]", "no commit"},
        {"{\"sha\":\"abc\",\"siblings\":[]}", "no commit"},
        {"{\"sha\":\"" SHA "\"}", "no file list"},
        {"{\"sha\":\"" SHA "\",\"siblings\":[{\"rfilename\":\"../x.gguf\",\"size\":1}]}",
         "unsafe file name ../x.gguf"},
        {"{\"sha\":\"" SHA "\",\"siblings\":[{\"rfilename\":\"a//b\",\"size\":1}]}", "unsafe"},
        {"{\"sha\":\"" SHA "\",\"siblings\":[{\"rfilename\":\"/etc/x\",\"size\":1}]}", "unsafe"},
        {"{\"sha\":\"" SHA "\",\"siblings\":[{\"rfilename\":\"m.gguf\",\"blobId\":\"" SHA "\"}]}",
         "m.gguf: the listing gives no size"},
        {"{\"sha\":\"" SHA "\",\"siblings\":[{\"rfilename\":\"m.gguf\",\"size\":3,\"lfs\":"
         "{\"sha256\":\"xyz\"}}]}",
         "m.gguf: lfs.sha256"},
        {"{\"sha\":\"" SHA "\",\"siblings\":[{\"rfilename\":\"m.gguf\",\"size\":3,\"lfs\":"
         "{\"sha256\":\"" H64 "\",\"size\":4}}]}",
         "lfs.size and size disagree"},
        {"{\"sha\":\"" SHA "\",\"siblings\":[{\"rfilename\":\"a\",\"size\":1,\"blobId\":\"" SHA
         "\"},{\"rfilename\":\"a\",\"size\":1,\"blobId\":\"" SHA "\"}]}",
         "a: listed twice"},
        {"not json", "not JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_not_equal(parse(bad[i].json, &rev, &err), SPLASH_OK);
        if (!strstr(err.msg, bad[i].error))
            fail_msg("case %zu: %s (wanted %s)", i, err.msg, bad[i].error);
    }
}

static enum splash_status pick(const char *const *paths, size_t n, const char *variant,
                               struct splash_target *t, struct splash_err *err)
{
    return splash_target_select_listing(paths, n, variant, t, err);
}

static void test_listing_selection(void **state)
{
    (void)state;
    struct splash_target t;
    struct splash_err err;
    const char *repo[] = {"README.md", "mmproj-BF16.gguf", "Qwen-UD-Q4_K_M.gguf", "Qwen-Q8_0.gguf",
                          "Qwen-Q8_0-00001-of-00002.gguf", "Qwen-Q8_0-00002-of-00002.gguf",
                          "BF16/Qwen-BF16-00001-of-00002.gguf", "BF16/Qwen-BF16-00002-of-00002.gguf"};
    size_t n = sizeof repo / sizeof repo[0];
    assert_int_equal(pick(repo, n, "UD-Q4_K_M", &t, &err), SPLASH_OK);
    assert_string_equal(t.path, "Qwen-UD-Q4_K_M.gguf");
    assert_int_equal(t.kind, SPLASH_TARGET_GGUF);
    /* the whole file before the split parts of its name */
    assert_int_equal(pick(repo, n, "Q8_0", &t, &err), SPLASH_OK);
    assert_string_equal(t.path, "Qwen-Q8_0.gguf");
    /* a folder, in any case */
    assert_int_equal(pick(repo, n, "bf16", &t, &err), SPLASH_OK);
    assert_int_equal(t.kind, SPLASH_TARGET_GGUF_SPLIT);
    assert_int_equal(t.n_parts, 2);
    assert_string_equal(t.dir, "BF16");
    assert_string_equal(t.path, "BF16/Qwen-BF16-00001-of-00002.gguf");
    /* the only root target ending in -VARIANT */
    const char *other[] = {"A-Q4_0.gguf", "B-IQ2_S.gguf"};
    assert_int_equal(pick(other, 2, "IQ2_S", &t, &err), SPLASH_OK);
    assert_string_equal(t.path, "B-IQ2_S.gguf");
    /* no variant: the only name, else a list of what is there */
    assert_int_equal(pick(repo, n, NULL, &t, &err), SPLASH_ERR_INVALID);
    assert_non_null(strstr(err.msg, "several targets"));
    assert_ptr_equal(strstr(err.msg, ".:"), NULL);
    assert_int_equal(pick(repo, n, "Q2_K", &t, &err), SPLASH_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "no target for variant Q2_K"));
    /* a missing split part is named */
    const char *gap[] = {"M-00001-of-00003.gguf", "M-00003-of-00003.gguf"};
    assert_int_equal(pick(gap, 2, NULL, &t, &err), SPLASH_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "M-00002-of-00003.gguf is missing"));
    /* a folder mixing names */
    const char *mixed[] = {"Q/A-00001-of-00002.gguf", "Q/B-00002-of-00002.gguf"};
    assert_int_equal(pick(mixed, 2, "Q", &t, &err), SPLASH_ERR_INVALID);
    assert_non_null(strstr(err.msg, "mixes the split parts"));
    /* upper-case extensions and deeper paths are not targets */
    const char *odd[] = {"X.GGUF", "a/b/C-00001-of-00001.gguf"};
    assert_int_equal(pick(odd, 2, NULL, &t, &err), SPLASH_ERR_NOT_FOUND);
    /* an MLX model */
    const char *mlx[] = {"config.json", "model-00001-of-00002.safetensors", "tokenizer.json"};
    assert_int_equal(pick(mlx, 3, NULL, &t, &err), SPLASH_OK);
    assert_int_equal(t.kind, SPLASH_TARGET_SAFETENSORS);
    assert_int_equal(pick(mlx, 3, "Q4", &t, &err), SPLASH_ERR_INVALID);
}

static void test_urls_and_links(void **state)
{
    (void)state;
    struct splash_hub_env env = {.endpoint = "http://127.0.0.1:9"};
    char url[512];
    assert_true(splash_hub_file_url(&env, "o/r", SHA, "UD Q4/M #1.gguf", url, sizeof url));
    assert_string_equal(url, "http://127.0.0.1:9/o/r/resolve/" SHA "/UD%20Q4/M%20%231.gguf");
    char dir[] = "/tmp/splash-hub-cache-XXXXXX", link[PATH_MAX], target[PATH_MAX];
    assert_non_null(mkdtemp(dir));
    struct splash_err err;
    assert_int_equal(splash_hub_cache_link(dir, SHA, "Q8_0/M-00001-of-00002.gguf", H64, &err),
                     SPLASH_OK);
    snprintf(link, sizeof link, "%s/snapshots/" SHA "/Q8_0/M-00001-of-00002.gguf", dir);
    ssize_t len = readlink(link, target, sizeof target - 1);
    assert_true(len > 0);
    target[len] = 0;
    assert_string_equal(target, "../../../blobs/" H64); /* one more ../ for the folder */
    assert_int_equal(splash_hub_cache_write_ref(dir, "main", SHA, &err), SPLASH_OK);
    char commit[41];
    assert_int_equal(splash_hub_cache_read_ref(dir, "main", commit, &err), SPLASH_OK);
    assert_string_equal(commit, SHA);
    assert_int_equal(splash_hub_cache_write_ref(dir, "../x", SHA, &err), SPLASH_ERR_INVALID);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_shards_and_projectors(void **state)
{
    (void)state;
    json_t *map = json_pack("{s:s, s:s, s:s, s:s}", "model.embed_tokens.weight", "a.safetensors",
                            "vision_tower.blocks.0.w", "a.safetensors",
                            "model.visual.patch_embed.w", "tower/b.safetensors",
                            "vision_tower.merger.w", "tower/b.safetensors");
    assert_true(splash_hub_shard_wanted(map, "a.safetensors", 1));   /* mixed: kept */
    assert_true(splash_hub_shard_wanted(map, "tower/b.safetensors", 0));
    assert_false(splash_hub_shard_wanted(map, "tower/b.safetensors", 1)); /* tower only */
    assert_false(splash_hub_shard_wanted(map, "c.safetensors", 0));  /* the index names it not */
    assert_true(splash_hub_shard_wanted(NULL, "model.safetensors", 1)); /* no index: the root's */
    assert_false(splash_hub_shard_wanted(NULL, "sub/model.safetensors", 0));
    /* the loader's set: what the checkpoint rules ignore, MTP layers too (the Hub kept its
     * own list of vision prefixes before, and downloaded this shard the loader skips) */
    json_object_set_new(map, "mtp.layers.0.mlp.w", json_string("mtp.safetensors"));
    json_object_set_new(map, "model.multi_modal_projector.w", json_string("mtp.safetensors"));
    assert_true(splash_hub_shard_wanted(map, "mtp.safetensors", 0));
    assert_false(splash_hub_shard_wanted(map, "mtp.safetensors", 1));
    assert_false(splash_safetensors_shard_needed(map, "mtp.safetensors"));
    assert_true(splash_safetensors_shard_needed(map, "a.safetensors"));
    assert_false(splash_safetensors_shard_needed(map, "c.safetensors"));
    json_decref(map);
    assert_true(splash_hub_is_projector("mmproj-BF16.gguf"));
    assert_true(splash_hub_is_projector("Qwen3.5-0.8B-MMPROJ-F16.gguf"));
    assert_false(splash_hub_is_projector("BF16/mmproj-BF16.gguf")); /* root only */
    assert_false(splash_hub_is_projector("Qwen3.5-0.8B-Q4_K_M.gguf"));
}

/* A draft directory holding this config.json (and nothing else), in dir. */
static void write_draft_config(const char *dir, json_t *config)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/config.json", dir);
    assert_int_equal(json_dump_file(config, path, JSON_INDENT(1)), 0);
}

/* The installer holds a draft to its target through the core's model-check, whose draft
 * plugin names the key (before, the Hub kept its own DFlash2 rules): the config alone
 * before any weight moves, a local directory whole. */
static void test_draft_config(void **state)
{
    (void)state;
    struct splash_registry *r = splash_registry_global();
    if (splash_registry_n_records(r) == 0)
        splash_registry_add_builtins(r, splash_builtin_plugins);
    char target[PATH_MAX], draft[1024], config[PATH_MAX], dir[] = "/tmp/splash-test-draft-XXXXXX";
    test_testdata_path(target, sizeof target, "models/qwen35-stories-Q8_0.gguf");
    test_testdata_path(draft, sizeof draft, "drafts/qwen35-stories-DFlash2");
    assert_non_null(mkdtemp(dir));
    struct splash_err err;
    assert_int_equal(splash_hub_draft_check(r, target, draft, 0, &err), SPLASH_OK);
    assert_int_equal(
        splash_hub_draft_check(r, target, draft, SPLASH_CHECK_DRAFT_CONFIG_ONLY, &err), SPLASH_OK);
    /* the config alone: a directory without weights passes only as config-only */
    snprintf(config, sizeof config, "%s/config.json", draft);
    json_t *c = json_load_file(config, 0, NULL);
    assert_non_null(c);
    write_draft_config(dir, c);
    assert_int_equal(splash_hub_draft_check(r, target, dir, SPLASH_CHECK_DRAFT_CONFIG_ONLY, &err),
                     SPLASH_OK);
    assert_int_not_equal(splash_hub_draft_check(r, target, dir, 0, &err), SPLASH_OK);
    /* a draft of another model's width, taps past the target's layers, no draft at all */
    json_object_set_new(c, "hidden_size", json_integer(512));
    write_draft_config(dir, c);
    assert_int_equal(splash_hub_draft_check(r, target, dir, SPLASH_CHECK_DRAFT_CONFIG_ONLY, &err),
                     SPLASH_ERR_INVALID);
    printf("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "hidden_size"));
    json_object_set_new(c, "hidden_size", json_integer(256));
    json_t *ids = json_object_get(json_object_get(c, "dflash_config"), "target_layer_ids");
    assert_int_equal(json_array_set_new(ids, 0, json_integer(40)), 0);
    write_draft_config(dir, c);
    assert_int_equal(splash_hub_draft_check(r, target, dir, SPLASH_CHECK_DRAFT_CONFIG_ONLY, &err),
                     SPLASH_ERR_INVALID);
    printf("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "target_layer_ids"));
    json_decref(c);
    c = json_pack("{s:s, s:i}", "model_type", "qwen3", "hidden_size", 256);
    write_draft_config(dir, c);
    json_decref(c);
    assert_int_equal(splash_hub_draft_check(r, target, dir, SPLASH_CHECK_DRAFT_CONFIG_ONLY, &err),
                     SPLASH_ERR_INVALID);
    assert_non_null(strstr(err.msg, "architectures"));
    /* a target model-check refuses is named as the target */
    assert_int_not_equal(splash_hub_draft_check(r, "/nonexistent.gguf", draft, 0, &err),
                         SPLASH_OK);
    assert_non_null(strstr(err.msg, "the target /nonexistent.gguf"));
    snprintf(config, sizeof config, "%s/config.json", dir);
    unlink(config);
    rmdir(dir);
}

/* A local model's family draft comes from the Hugging Face cache as it stands: the
 * snapshot refs/main names, when it holds config.json; nothing without the ref or the file
 * (the Hub is never asked). */
static void test_draft_cached(void **state)
{
    (void)state;
    char cache[] = "/tmp/splash-hub-cached-XXXXXX", path[PATH_MAX], dir[PATH_MAX];
    struct splash_err err;
    assert_non_null(mkdtemp(cache));
    assert_int_equal(splash_hub_draft_cached(cache, "incoai/Qwen3.5-0.8B-DFlash2", dir,
                                             sizeof dir, &err),
                     SPLASH_OK);
    assert_string_equal(dir, ""); /* no such repository in the cache */
    char repo[PATH_MAX];
    assert_true(splash_hub_cache_repo_dir(cache, "incoai", "Qwen3.5-0.8B-DFlash2", repo,
                                          sizeof repo) >= 0);
    assert_int_equal(splash_hub_cache_write_ref(repo, "main", SHA, &err), SPLASH_OK);
    assert_int_equal(splash_hub_draft_cached(cache, "incoai/Qwen3.5-0.8B-DFlash2", dir,
                                             sizeof dir, &err),
                     SPLASH_OK);
    assert_string_equal(dir, ""); /* a ref, but no snapshot with config.json */
    snprintf(path, sizeof path, "%.3000s/snapshots", repo);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%.3000s/snapshots/%s", repo, SHA);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%.3000s/snapshots/%s/config.json", repo, SHA);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{}\n", f);
    fclose(f);
    assert_int_equal(splash_hub_draft_cached(cache, "incoai/Qwen3.5-0.8B-DFlash2", dir,
                                             sizeof dir, &err),
                     SPLASH_OK);
    char want[PATH_MAX];
    snprintf(want, sizeof want, "%.3000s/snapshots/%s", repo, SHA);
    assert_string_equal(dir, want);
    assert_int_equal(splash_hub_draft_cached(cache, "not-a-repo", dir, sizeof dir, &err),
                     SPLASH_ERR_INVALID);
    assert_non_null(strstr(err.msg, "not OWNER/REPO"));
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_env_defaults),
        cmocka_unit_test(test_env_endpoint_offline_token),
        cmocka_unit_test(test_revision_parse),
        cmocka_unit_test(test_listing_selection),
        cmocka_unit_test(test_urls_and_links),
        cmocka_unit_test(test_shards_and_projectors),
        cmocka_unit_test(test_draft_config),
        cmocka_unit_test(test_draft_cached),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
