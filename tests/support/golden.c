#include "tests/support/golden.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/testdata.h"

int test_golden_load(const char *name, struct test_golden *g)
{
    return test_golden_load_dir("golden", name, g);
}

int test_golden_load_dir(const char *dir, const char *name, struct test_golden *g)
{
    char path[512], rel[256];
    memset(g, 0, sizeof *g);
    snprintf(g->name, sizeof g->name, "%s", name);
    snprintf(rel, sizeof rel, "%s/%s.json", dir, name);
    g->json = json_load_file(test_testdata_path(path, sizeof path, rel), 0, NULL);
    if (!g->json)
        return -1;
    json_t *toks = json_object_get(g->json, "tokens"), *gr = json_object_get(g->json, "greedy");
    g->n_vocab = (int32_t)json_integer_value(json_object_get(g->json, "n_vocab"));
    g->n_prompt = (int32_t)json_array_size(toks);
    g->n_greedy = (int32_t)json_array_size(gr);
    g->n_tokens = g->n_prompt + g->n_greedy;
    if (g->n_tokens > 128 || g->n_greedy > 64)
        return -1;
    for (int32_t i = 0; i < g->n_prompt; i++)
        g->tokens[i] = (int32_t)json_integer_value(json_array_get(toks, (size_t)i));
    for (int32_t i = 0; i < g->n_greedy; i++)
        g->greedy[i] = g->tokens[g->n_prompt + i] =
            (int32_t)json_integer_value(json_array_get(gr, (size_t)i));
    g->spread = json_real_value(json_object_get(json_object_get(g->json, "checks"),
                                                "batch_vs_token_by_token_prompt_max_abs_diff"));
    size_t rows = (size_t)g->n_tokens * (size_t)g->n_vocab, n1, n2;
    g->logits = malloc(rows * sizeof(float));
    snprintf(rel, sizeof rel, "%s/%s.logits.f32", dir, name);
    float *a = test_read_file(test_testdata_path(path, sizeof path, rel), &n1);
    snprintf(rel, sizeof rel, "%s/%s.gen.logits.f32", dir, name);
    float *b = test_read_file(test_testdata_path(path, sizeof path, rel), &n2);
    int ok = g->logits && a && b &&
             n1 == (size_t)g->n_prompt * (size_t)g->n_vocab * sizeof(float) &&
             n2 == (size_t)g->n_greedy * (size_t)g->n_vocab * sizeof(float);
    if (ok) {
        memcpy(g->logits, a, n1);
        memcpy((char *)g->logits + n1, b, n2);
    }
    free(a);
    free(b);
    return ok ? 0 : -1;
}

void test_golden_free(struct test_golden *g)
{
    json_decref(g->json);
    free(g->logits);
}

int test_golden_names(const char *prefix, char (*names)[TEST_GOLDEN_NAME], int max)
{
    char path[512];
    DIR *d = opendir(test_testdata_path(path, sizeof path, "golden"));
    assert_non_null(d);
    size_t plen = strlen(prefix);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, prefix, plen) || len < 6 || strcmp(e->d_name + len - 5, ".json"))
            continue;
        snprintf(names[n], sizeof names[n], "%.*s", (int)(len - 5), e->d_name);
        n++;
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], (int (*)(const void *, const void *))strcmp);
    return n;
}

int32_t test_argmax(const float *x, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

double test_logits_row_diff(const float *a, const float *b, int32_t V)
{
    double m = 0;
    for (int32_t j = 0; j < V; j++) {
        double e = fabs((double)a[j] - b[j]);
        if (e > m)
            m = e;
    }
    return m;
}

struct test_logits_diff test_logits_compare(const float *a, const float *b, int32_t rows, int32_t V)
{
    struct test_logits_diff d = {0, 0, 0};
    for (int32_t i = 0; i < rows; i++) {
        const float *ra = a + (size_t)i * V, *rb = b + (size_t)i * V;
        double e = test_logits_row_diff(ra, rb, V);
        if (e > d.max_abs) {
            d.max_abs = e;
            d.worst_row = i;
        }
        d.argmax_equal += test_argmax(ra, V) == test_argmax(rb, V);
    }
    return d;
}
