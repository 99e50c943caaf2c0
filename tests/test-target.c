/* Target selection over directory layouts built in a temp dir (models.md "GGUF targets",
 * "Local model files"), and OWNER/REPO:VARIANT model IDs. */
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

#include "core/target.h"

static char tmp_root[64];

static void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[1024];
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

static int setup_tmp(void **state)
{
    snprintf(tmp_root, sizeof tmp_root, "/tmp/splash-test-target-XXXXXX");
    return mkdtemp(tmp_root) ? 0 : -1;
}

static int teardown_tmp(void **state)
{
    rm_tree(tmp_root);
    return 0;
}

/* Makes dir `name` under the temp root holding the NULL-terminated files (a name ending
 * in '/' makes a folder; files in folders are "FOLDER/FILE"). Returns its path. */
static const char *layout(const char *name, const char *const *files)
{
    static char dir[512];
    char path[1024];
    snprintf(dir, sizeof dir, "%s/%s", tmp_root, name);
    assert_int_equal(mkdir(dir, 0755), 0);
    for (; *files; files++) {
        snprintf(path, sizeof path, "%s/%s", dir, *files);
        size_t len = strlen(path);
        if (path[len - 1] == '/') {
            path[len - 1] = 0;
            assert_int_equal(mkdir(path, 0755), 0);
            continue;
        }
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fclose(f);
    }
    return dir;
}

static struct splash_target sel;

static void expect_pick(const char *dir, const char *variant, int kind, const char *rel,
                        int n_parts)
{
    struct splash_err err;
    if (splash_target_select(dir, variant, &sel, &err))
        fail_msg("variant %s: %s", variant ? variant : "(none)", err.msg);
    assert_int_equal(sel.kind, kind);
    assert_int_equal(sel.n_parts, n_parts);
    char want[1024];
    snprintf(want, sizeof want, "%s%s%s", dir, *rel ? "/" : "", rel);
    assert_string_equal(sel.path, want);
}

static void expect_fail(const char *dir, const char *variant, enum splash_status status,
                        const char *msg_after_dir)
{
    struct splash_err err = {{0}};
    enum splash_status st = splash_target_select(dir, variant, &sel, &err);
    if (st != status)
        fail_msg("status %d, want %d (%s)", st, status, err.msg);
    char want[1024];
    snprintf(want, sizeof want, "%s%s", dir, msg_after_dir);
    assert_string_equal(err.msg, want);
}

/* ---- a repository's layout --------------------------------------------------------- */

static const char *const repo[] = {
    "Qwen3.8-27B-UD-Q4_K_M.gguf",
    "Qwen3.8-27B-Q8_0.gguf",
    "Qwen3.8-27B-BF16-00001-of-00002.gguf",
    "Qwen3.8-27B-BF16-00002-of-00002.gguf",
    "mmproj-BF16.gguf",
    "README.md",
    "UD-Q8_K_XL/",
    "UD-Q8_K_XL/Qwen3.8-27B-UD-Q8_K_XL-00001-of-00002.gguf",
    "UD-Q8_K_XL/Qwen3.8-27B-UD-Q8_K_XL-00002-of-00002.gguf",
    NULL,
};

static void test_target_variants_in_a_repository(void **state)
{
    const char *d = layout("repo", repo);
    char dir[512];
    snprintf(dir, sizeof dir, "%s", d);
    expect_pick(dir, "UD-Q4_K_M", SPLASH_TARGET_GGUF, "Qwen3.8-27B-UD-Q4_K_M.gguf", 1);
    assert_string_equal(sel.name, "Qwen3.8-27B-UD-Q4_K_M");
    expect_pick(dir, "Q8_0", SPLASH_TARGET_GGUF, "Qwen3.8-27B-Q8_0.gguf", 1);
    expect_pick(dir, "BF16", SPLASH_TARGET_GGUF_SPLIT, "Qwen3.8-27B-BF16-00001-of-00002.gguf", 2);
    /* the folder, in any case */
    expect_pick(dir, "ud-q8_k_xl", SPLASH_TARGET_GGUF_SPLIT,
                "UD-Q8_K_XL/Qwen3.8-27B-UD-Q8_K_XL-00001-of-00002.gguf", 2);
    char part[1024];
    assert_true(splash_target_part_path(&sel, 2, part, sizeof part));
    char want[1024];
    snprintf(want, sizeof want, "%s/UD-Q8_K_XL/Qwen3.8-27B-UD-Q8_K_XL-00002-of-00002.gguf", dir);
    assert_string_equal(part, want);
    /* nothing else matches: the error lists what was found */
    expect_fail(dir, "Q5_K_M", SPLASH_ERR_NOT_FOUND,
                ": no target for variant Q5_K_M; found: Qwen3.8-27B-BF16 (2 parts), "
                "Qwen3.8-27B-Q8_0.gguf, Qwen3.8-27B-UD-Q4_K_M.gguf, UD-Q8_K_XL/ "
                "(Qwen3.8-27B-UD-Q8_K_XL, 2 parts); projectors: mmproj-BF16.gguf");
    expect_fail(dir, NULL, SPLASH_ERR_INVALID,
                ": several targets, name one as a variant; found: Qwen3.8-27B-BF16 (2 parts), "
                "Qwen3.8-27B-Q8_0.gguf, Qwen3.8-27B-UD-Q4_K_M.gguf, UD-Q8_K_XL/ "
                "(Qwen3.8-27B-UD-Q8_K_XL, 2 parts); projectors: mmproj-BF16.gguf");
}

static void test_target_rule_order(void **state)
{
    /* rule 1 (MODEL-VARIANT) before rule 3, which alone would be ambiguous */
    static const char *const r1[] = {"Model-Q4_K_M.gguf", "Model-UD-Q4_K_M.gguf", NULL};
    const char *dir = layout("order1", r1);
    expect_pick(dir, "Q4_K_M", SPLASH_TARGET_GGUF, "Model-Q4_K_M.gguf", 1);
    expect_pick(dir, "UD-Q4_K_M", SPLASH_TARGET_GGUF, "Model-UD-Q4_K_M.gguf", 1);
    /* rule 3: names sharing no model name; the only one ending in -VARIANT */
    static const char *const r3[] = {"Foo-Q4_K_M.gguf", "Bar-Q8_0.gguf", NULL};
    dir = layout("order3", r3);
    expect_pick(dir, "Q4_K_M", SPLASH_TARGET_GGUF, "Foo-Q4_K_M.gguf", 1);
    static const char *const amb[] = {"Foo-Q4_K_M.gguf", "Bar-Q4_K_M.gguf", NULL};
    dir = layout("ambiguous", amb);
    expect_fail(dir, "Q4_K_M", SPLASH_ERR_INVALID,
                ": variant Q4_K_M names several targets (Bar-Q4_K_M, Foo-Q4_K_M)");
    /* rule 2 (the folder) before rule 3 */
    static const char *const r2[] = {"Other-Q4_K_M.gguf", "Else.gguf", "Q4_K_M/",
                                     "Q4_K_M/M-Q4_K_M-00001-of-00001.gguf", NULL};
    dir = layout("order2", r2);
    expect_pick(dir, "Q4_K_M", SPLASH_TARGET_GGUF_SPLIT, "Q4_K_M/M-Q4_K_M-00001-of-00001.gguf", 1);
}

static void test_target_whole_file_before_its_parts(void **state)
{
    static const char *const merged[] = {"X.gguf", "X-00001-of-00002.gguf",
                                         "X-00002-of-00002.gguf", "mmproj-X-F16.gguf", NULL};
    const char *dir = layout("merged", merged);
    expect_pick(dir, NULL, SPLASH_TARGET_GGUF, "X.gguf", 1);
    static const char *const named[] = {"M-Q4.gguf", "M-Q4-00001-of-00002.gguf",
                                        "M-Q4-00002-of-00002.gguf", "M-Q8.gguf", NULL};
    dir = layout("named", named);
    expect_pick(dir, "Q4", SPLASH_TARGET_GGUF, "M-Q4.gguf", 1);
    /* the only name, as split parts */
    static const char *const parts[] = {"Y-00002-of-00002.gguf", "Y-00001-of-00002.gguf", NULL};
    dir = layout("parts", parts);
    expect_pick(dir, NULL, SPLASH_TARGET_GGUF_SPLIT, "Y-00001-of-00002.gguf", 2);
    assert_string_equal(sel.name, "Y");
}

static void test_target_refusals(void **state)
{
    static const char *const proj[] = {"mmproj-BF16.gguf", "Model.GGUF", NULL};
    const char *dir = layout("projonly", proj);
    expect_fail(dir, NULL, SPLASH_ERR_NOT_FOUND,
                ": no MLX model and no GGUF target; found: no GGUF target; projectors: "
                "mmproj-BF16.gguf");
    static const char *const missing[] = {"M-00001-of-00003.gguf", "M-00003-of-00003.gguf", NULL};
    dir = layout("missing", missing);
    expect_fail(dir, NULL, SPLASH_ERR_NOT_FOUND,
                ": M-00002-of-00003.gguf is missing (split part 2 of 3)");
    static const char *const counts[] = {"M-00001-of-00002.gguf", "M-00002-of-00003.gguf", NULL};
    dir = layout("counts", counts);
    expect_fail(dir, NULL, SPLASH_ERR_INVALID, ": the split parts of M disagree on their count");
    static const char *const mixed[] = {"Q4/", "Q4/B-00001-of-00001.gguf",
                                        "Q4/A-00001-of-00001.gguf", NULL};
    dir = layout("mixed", mixed);
    struct splash_err err;
    assert_int_equal(splash_target_select(dir, "q4", &sel, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "Q4: mixes the split parts of several names (A, B)");
    static const char *const folder_missing[] = {"Q8/", "Q8/M-Q8-00002-of-00002.gguf", NULL};
    dir = layout("foldermissing", folder_missing);
    assert_int_equal(splash_target_select(dir, "Q8", &sel, &err), SPLASH_ERR_NOT_FOUND);
    assert_string_equal(err.msg, "Q8: M-Q8-00001-of-00002.gguf is missing (split part 1 of 2)");
}

static void test_target_files_and_parts(void **state)
{
    static const char *const files[] = {"W.gguf", "S-00001-of-00003.gguf", "S-00002-of-00003.gguf",
                                        "S-00003-of-00003.gguf", "T-00001-of-00002.gguf",
                                        "Up.GGUF", "mmproj-F16.gguf", NULL};
    const char *d = layout("files", files);
    char dir[512], path[1024];
    struct splash_err err;
    snprintf(dir, sizeof dir, "%s", d);
    snprintf(path, sizeof path, "%s/W.gguf", dir);
    assert_int_equal(splash_target_select(path, "ignored", &sel, &err), 0);
    assert_int_equal(sel.kind, SPLASH_TARGET_GGUF);
    assert_string_equal(sel.path, path);
    snprintf(path, sizeof path, "%s/S-00002-of-00003.gguf", dir);
    assert_int_equal(splash_target_select(path, NULL, &sel, &err), 0);
    assert_int_equal(sel.kind, SPLASH_TARGET_GGUF_SPLIT);
    assert_int_equal(sel.n_parts, 3);
    snprintf(path, sizeof path, "%s/S-00001-of-00003.gguf", dir);
    assert_string_equal(sel.path, path);
    snprintf(path, sizeof path, "%s/T-00001-of-00002.gguf", dir);
    assert_int_equal(splash_target_select(path, NULL, &sel, &err), SPLASH_ERR_NOT_FOUND);
    assert_string_equal(err.msg, "T-00002-of-00002.gguf is missing (split part 2 of 2)");
    snprintf(path, sizeof path, "%s/Up.GGUF", dir);
    assert_int_equal(splash_target_select(path, NULL, &sel, &err), SPLASH_ERR_UNSUPPORTED);
    char want[1200];
    snprintf(want, sizeof want, "%s: not a GGUF file (a .gguf extension, in lower case)", path);
    assert_string_equal(err.msg, want);
    snprintf(path, sizeof path, "%s/mmproj-F16.gguf", dir);
    assert_int_equal(splash_target_select(path, NULL, &sel, &err), SPLASH_ERR_INVALID);
    snprintf(path, sizeof path, "%s/none.gguf", dir);
    assert_int_equal(splash_target_select(path, NULL, &sel, &err), SPLASH_ERR_NOT_FOUND);
}

static void test_target_mlx_directory(void **state)
{
    static const char *const mlx[] = {"config.json", "model.safetensors.index.json",
                                      "model-00001-of-00002.safetensors", "stray-Q4_K_M.gguf",
                                      NULL};
    const char *dir = layout("mlx", mlx);
    expect_pick(dir, NULL, SPLASH_TARGET_SAFETENSORS, "", 1);
    expect_fail(dir, "Q4_K_M", SPLASH_ERR_INVALID,
                ": an MLX model; a variant (Q4_K_M) selects GGUF targets");
    /* config.json alone is no MLX model */
    static const char *const cfg[] = {"config.json", "Z-Q4_K_M.gguf", NULL};
    dir = layout("cfgonly", cfg);
    expect_pick(dir, NULL, SPLASH_TARGET_GGUF, "Z-Q4_K_M.gguf", 1);
}

/* ---- model IDs ------------------------------------------------------------------- */

static void test_target_model_id_parse(void **state)
{
    struct splash_model_id id;
    struct splash_err err;
    assert_int_equal(splash_model_id_parse("unsloth/Qwen3.8-27B-GGUF:UD-Q4_K_M", &id, &err), 0);
    assert_string_equal(id.owner, "unsloth");
    assert_string_equal(id.repo, "Qwen3.8-27B-GGUF");
    assert_string_equal(id.variant, "UD-Q4_K_M");
    assert_int_equal(splash_model_id_parse("mlx-community/Qwen3.6-35B-A3B-4bit", &id, &err), 0);
    assert_string_equal(id.repo, "Qwen3.6-35B-A3B-4bit");
    assert_string_equal(id.variant, "");
    static const char *const bad[] = {
        "noslash", "a/b/c", "/b", "a/", "a/:x", "a/b:", "-a/b", "a/b..c", "a/b:x/y",
        "a:x/b", "a/b c", "a/b.", "a/b:x:y",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (splash_model_id_parse(bad[i], &id, &err) != SPLASH_ERR_INVALID)
            fail_msg("%s was accepted", bad[i]);
    assert_int_equal(splash_model_id_parse("a/b:x/y", &id, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "model a/b:x/y: bad character in the variant");
    assert_int_equal(splash_model_id_parse("noslash", &id, &err), SPLASH_ERR_INVALID);
    assert_string_equal(err.msg, "model noslash: expected OWNER/REPO or OWNER/REPO:VARIANT");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_target_variants_in_a_repository),
        cmocka_unit_test(test_target_rule_order),
        cmocka_unit_test(test_target_whole_file_before_its_parts),
        cmocka_unit_test(test_target_refusals),
        cmocka_unit_test(test_target_files_and_parts),
        cmocka_unit_test(test_target_mlx_directory),
        cmocka_unit_test(test_target_model_id_parse),
    };
    return cmocka_run_group_tests(tests, setup_tmp, teardown_tmp);
}
