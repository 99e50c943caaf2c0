/* The startup probes on the real templates of ../shared/testdata/templates: the later-system
 * outcome each reference rendering implies, the patched template against the references, and
 * the reasoning report. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <jansson.h>

#include "server/chat/template_probe.h"
#include "tests/support/testdata.h"

static char *read_rel(const char *rel, size_t *len)
{
    char path[1024];
    test_testdata_path(path, sizeof path, rel);
    return test_read_file(path, len);
}

static json_t *manifest_special(const char *stem)
{
    size_t len;
    char *text = read_rel("templates/manifest.json", &len);
    assert_non_null(text);
    json_t *m = json_loadb(text, len, 0, NULL);
    free(text);
    json_t *s = json_incref(json_object_get(
        json_object_get(json_object_get(m, "renderer"), "special_tokens"), stem));
    json_decref(m);
    return s;
}

static struct splash_jinja_template *probe(const char *stem, struct splash_later_system_probe *p)
{
    char rel[256];
    snprintf(rel, sizeof rel, "templates/%s.jinja", stem);
    size_t len;
    char *src = read_rel(rel, &len);
    assert_non_null(src);
    json_t *special = manifest_special(stem);
    struct splash_jinja_template *use = NULL;
    struct splash_err err = {{0}};
    assert_int_equal(splash_template_probe_later_system(src, len, special, &use, p, &err),
                     SPLASH_OK);
    assert_non_null(use);
    char line[600];
    splash_later_system_describe(p, stem, line, sizeof line);
    fprintf(stderr, "%s\n", line);
    json_decref(special);
    free(src);
    return use;
}

static void test_probe_classifies_testdata_templates(void **state)
{
    (void)state;
    static const struct {
        const char *stem;
        enum splash_later_system want;
    } cases[] = {
        {"Qwen-Qwen3-0.6B", SPLASH_LATER_SYSTEM_NATIVE},
        {"Qwen3-Coder", SPLASH_LATER_SYSTEM_NATIVE},
        {"Qwen-QwQ-32B", SPLASH_LATER_SYSTEM_NATIVE},
        {"Qwen-Qwen2.5-7B-Instruct", SPLASH_LATER_SYSTEM_NATIVE},
        {"GLM-4.6", SPLASH_LATER_SYSTEM_NATIVE},
        {"GLM-4.7-Flash", SPLASH_LATER_SYSTEM_NATIVE},
        /* raises "System message must be at the beginning." */
        {"Qwen3.5-4B", SPLASH_LATER_SYSTEM_PATCHED},
        /* drops it, with no single construct to patch and a preamble before its system block */
        {"openai-gpt-oss-120b", SPLASH_LATER_SYSTEM_UNSUPPORTED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct splash_later_system_probe p;
        struct splash_jinja_template *t = probe(cases[i].stem, &p);
        if (p.outcome != cases[i].want)
            fprintf(stderr, "%s: %s, want %s\n", cases[i].stem,
                    splash_later_system_name(p.outcome), splash_later_system_name(cases[i].want));
        assert_int_equal(p.outcome, cases[i].want);
        splash_jinja_free(t);
    }
}

/* The patched Qwen3.5 template renders every reference fixture as the shipped one did, and the
 * later system message in place as a system turn. */
static void test_probe_patched_qwen35_keeps_references(void **state)
{
    (void)state;
    struct splash_later_system_probe p;
    struct splash_jinja_template *t = probe("Qwen3.5-4B", &p);
    assert_int_equal(p.outcome, SPLASH_LATER_SYSTEM_PATCHED);
    json_t *special = manifest_special("Qwen3.5-4B");
    size_t len;
    char *text = read_rel("templates/manifest.json", &len);
    json_t *m = json_loadb(text, len, 0, NULL);
    free(text);
    struct tm tm = {.tm_year = 126, .tm_mon = 0, .tm_mday = 15, .tm_hour = 12, .tm_isdst = -1};
    struct splash_jinja_render_opts opts = {.now = (int64_t)mktime(&tm)};
    size_t i, checked = 0;
    json_t *pair;
    json_array_foreach(json_object_get(m, "pairs"), i, pair) {
        if (strcmp(json_string_value(json_object_get(pair, "template")), "Qwen3.5-4B.jinja"))
            continue;
        const char *fixture_rel = json_string_value(json_object_get(pair, "fixture"));
        char rel[512];
        snprintf(rel, sizeof rel, "templates/%s", fixture_rel);
        char *fix = read_rel(rel, &len);
        json_t *fixture = json_loadb(fix, len, 0, NULL);
        free(fix);
        json_t *vars = json_object();
        json_object_set(vars, "messages", json_object_get(fixture, "messages"));
        json_t *tools = json_object_get(fixture, "tools");
        json_object_set_new(vars, "tools", tools ? json_incref(tools) : json_null());
        json_object_set_new(vars, "documents", json_null());
        json_object_set(vars, "add_generation_prompt",
                        json_object_get(fixture, "add_generation_prompt"));
        json_object_update(vars, special);
        json_object_update(vars, json_object_get(fixture, "kwargs"));
        char *out = NULL;
        size_t out_len = 0;
        struct splash_err err;
        enum splash_status st = splash_jinja_render(t, vars, &opts, &out, &out_len, &err);
        snprintf(rel, sizeof rel, "templates/%s",
                 json_string_value(json_object_get(pair, "expected")));
        char *want = read_rel(rel, &len);
        if (strstr(fixture_rel, "later_system_message")) {
            assert_int_equal(st, SPLASH_OK);
            const char *turn = "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>system\n"
                               "From now on answer in French.<|im_end|>\n<|im_start|>user\n"
                               "How are you?<|im_end|>\n";
            if (!strstr(out, turn))
                fprintf(stderr, "patched later system rendering:\n%s\n", out);
            assert_non_null(strstr(out, turn));
        } else if (strcmp(json_string_value(json_object_get(pair, "outcome")), "ok") == 0) {
            assert_int_equal(st, SPLASH_OK);
            assert_int_equal(out_len, len);
            assert_memory_equal(out, want, len);
        } else {
            assert_int_not_equal(st, SPLASH_OK);
        }
        checked++;
        free(want);
        free(out);
        json_decref(vars);
        json_decref(fixture);
    }
    assert_int_equal(checked, 25);
    json_decref(m);
    json_decref(special);
    splash_jinja_free(t);
}

static json_t *report(const char *stem, int override)
{
    struct splash_later_system_probe p;
    struct splash_jinja_template *t = probe(stem, &p);
    json_t *special = manifest_special(stem);
    struct splash_effort_report r;
    struct splash_err err;
    assert_int_equal(splash_template_probe_efforts(t, special, false, &r, &err), SPLASH_OK);
    json_t *j = splash_effort_report_json(&r, override);
    char *s = json_dumps(j, JSON_COMPACT);
    fprintf(stderr, "%s reasoning: %s\n", stem, s);
    free(s);
    json_decref(special);
    splash_jinja_free(t);
    return j;
}

static void expect_report(const char *stem, int override, const char *want_json)
{
    json_t *got = report(stem, override);
    json_t *want = json_loads(want_json, 0, NULL);
    assert_non_null(want);
    assert_true(json_equal(got, want));
    json_decref(got);
    json_decref(want);
}

static void test_probe_effort_reports(void **state)
{
    (void)state;
    /* enable_thinking switches Qwen3 and Qwen3.5 alike at every effort: no efforts to offer */
    expect_report("Qwen-Qwen3-0.6B", -1, "{\"thinks\": true, \"efforts\": [], \"default\": null}");
    expect_report("Qwen3.5-4B", -1, "{\"thinks\": true, \"efforts\": [], \"default\": null}");
    /* QwQ's copy closes the think block unless enable_thinking is truthy */
    expect_report("Qwen-QwQ-32B", -1, "{\"thinks\": false, \"efforts\": [], \"default\": null}");
    expect_report("Qwen-Qwen2.5-7B-Instruct", -1,
                  "{\"thinks\": false, \"efforts\": [], \"default\": null}");
    /* gpt-oss prints reasoning_effort as given, "medium" when absent */
    expect_report("openai-gpt-oss-120b", -1,
                  "{\"thinks\": true, \"efforts\": [\"minimal\", \"low\", \"medium\", \"high\","
                  " \"xhigh\", \"max\"], \"default\": \"medium\"}");
    expect_report("openai-gpt-oss-120b", SPLASH_EFFORT_HIGH,
                  "{\"thinks\": true, \"efforts\": [\"minimal\", \"low\", \"medium\", \"high\","
                  " \"xhigh\", \"max\"], \"default\": \"high\"}");
    struct splash_effort_report r;
    struct splash_jinja_template *t = NULL;
    const char *model_decides = "<|assistant|>";
    assert_int_equal(splash_jinja_parse(model_decides, strlen(model_decides), &t, NULL),
                     SPLASH_OK);
    assert_int_equal(splash_template_probe_efforts(t, NULL, true, &r, NULL), SPLASH_OK);
    json_t *j = splash_effort_report_json(&r, -1);
    json_t *want = json_loads("{\"thinks\": null, \"efforts\": [], \"default\": null}", 0, NULL);
    assert_true(json_equal(j, want));
    json_decref(j);
    json_decref(want);
    splash_jinja_free(t);
}

/* A template that rejects some efforts renders their aliases. */
static void test_probe_effort_aliases(void **state)
{
    (void)state;
    const char *src =
        "{%- if reasoning_effort is defined and reasoning_effort not in "
        "['none', 'low', 'medium', 'xhigh'] %}{{ raise_exception('bad effort') }}{% endif -%}"
        "{{ messages[0].content }}|{{ reasoning_effort | default('xhigh') }}";
    struct splash_jinja_template *t = NULL;
    assert_int_equal(splash_jinja_parse(src, strlen(src), &t, NULL), SPLASH_OK);
    struct splash_effort_report r;
    assert_int_equal(splash_template_probe_efforts(t, NULL, false, &r, NULL), SPLASH_OK);
    assert_int_equal(r.render_as[SPLASH_EFFORT_MINIMAL], SPLASH_EFFORT_LOW);
    assert_int_equal(r.render_as[SPLASH_EFFORT_HIGH], SPLASH_EFFORT_XHIGH);
    assert_int_equal(r.render_as[SPLASH_EFFORT_MAX], SPLASH_EFFORT_XHIGH);
    json_t *j = splash_effort_report_json(&r, SPLASH_EFFORT_HIGH);
    json_t *want = json_loads("{\"thinks\": true, \"efforts\": [\"low\", \"medium\", "
                              "\"xhigh\"], \"default\": \"xhigh\"}", 0, NULL);
    char *s = json_dumps(j, 0);
    fprintf(stderr, "aliases: %s\n", s);
    free(s);
    assert_true(json_equal(j, want));
    json_decref(j);
    json_decref(want);
    splash_jinja_free(t);
}

static enum splash_later_system probe_text(const char *src, const char *special_json,
                                           struct splash_jinja_template **use)
{
    json_t *special = special_json ? json_loads(special_json, 0, NULL) : NULL;
    struct splash_later_system_probe p;
    struct splash_err err = {{0}};
    assert_int_equal(splash_template_probe_later_system(src, strlen(src), special, use, &p, &err),
                     SPLASH_OK);
    char line[700];
    splash_later_system_describe(&p, "synthetic", line, sizeof line);
    fprintf(stderr, "%s\n", line);
    json_decref(special);
    return p.outcome;
}

/* A loop condition that skips system messages (as Unsloth's Qwen3.6 GGUF template has) is
 * patched; a template that renders a BOS token before its system block is not. */
static void test_probe_loop_condition_and_bos(void **state)
{
    (void)state;
    const char *filtered =
        "{%- if messages[0].role == 'system' %}<|im_start|>system\n{{ messages[0].content }}"
        "<|im_end|>\n{% endif %}"
        "{%- for message in messages if message.role != 'system' %}<|im_start|>"
        "{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endfor %}"
        "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
    struct splash_jinja_template *t = NULL;
    assert_int_equal(probe_text(filtered, NULL, &t), SPLASH_LATER_SYSTEM_PATCHED);
    json_t *vars = json_loads("{\"messages\":[{\"role\":\"system\",\"content\":\"S\"},"
                              "{\"role\":\"user\",\"content\":\"U\"},"
                              "{\"role\":\"system\",\"content\":\"L\"}],"
                              "\"add_generation_prompt\":false}", 0, NULL);
    char *out = NULL;
    assert_int_equal(splash_jinja_render(t, vars, NULL, &out, NULL, NULL), SPLASH_OK);
    assert_string_equal(out, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n"
                             "<|im_start|>system\nL<|im_end|>\n");
    free(out);
    json_decref(vars);
    splash_jinja_free(t);
    const char *bos =
        "{{ bos_token }}{%- if messages[0].role == 'system' %}[SYS]{{ messages[0].content }}"
        "{% endif %}{%- for message in messages %}{% if message.role == 'system' %}"
        "{% if not loop.first %}{{ raise_exception('no') }}{% endif %}"
        "{% else %}[{{ message.role }}]{{ message.content }}{% endif %}{% endfor %}";
    assert_int_equal(probe_text(bos, "{\"bos_token\":\"<s>\"}", &t),
                     SPLASH_LATER_SYSTEM_UNSUPPORTED);
    splash_jinja_free(t);
    /* the same template without a BOS token patches */
    assert_int_equal(probe_text(bos, "{\"bos_token\":\"\"}", &t), SPLASH_LATER_SYSTEM_PATCHED);
    splash_jinja_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probe_classifies_testdata_templates),
        cmocka_unit_test(test_probe_patched_qwen35_keeps_references),
        cmocka_unit_test(test_probe_effort_reports),
        cmocka_unit_test(test_probe_effort_aliases),
        cmocka_unit_test(test_probe_loop_condition_and_bos),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
