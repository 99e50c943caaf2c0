/* llama.cpp's golden logits (../shared/testdata/golden, README.md sections 4 and 6) and
 * the comparison of logits with them. */
#ifndef SPLASH_TEST_GOLDEN_H
#define SPLASH_TEST_GOLDEN_H

#include <jansson.h>
#include <stdint.h>

#define TEST_GOLDEN_NAME 64

struct test_golden {
    char name[TEST_GOLDEN_NAME];
    json_t *json;
    int32_t tokens[128]; /* prompt then the reference's greedy continuation */
    int32_t n_prompt, n_tokens, n_vocab;
    int32_t greedy[64], n_greedy;
    float *logits; /* [n_tokens][n_vocab]: prompt rows, then gen rows */
    double spread; /* checks.batch_vs_token_by_token_prompt_max_abs_diff */
};

/* Loads golden/<name>.json and its .logits.f32 and .gen.logits.f32; 0 on success, -1 when
 * a file is missing, too long for the struct, or of the wrong size. */
int test_golden_load(const char *name, struct test_golden *g);
/* The same files under another testdata folder ("safetensors"). */
int test_golden_load_dir(const char *dir, const char *name, struct test_golden *g);
void test_golden_free(struct test_golden *g);

/* The names (without .json) of golden/<prefix>*.json, sorted: at most max of them, taken in
 * directory order. Returns how many. */
int test_golden_names(const char *prefix, char (*names)[TEST_GOLDEN_NAME], int max);

/* The index of the first largest of x[0..n). */
int32_t test_argmax(const float *x, int32_t n);

/* max_j |a[j] - b[j]| over one row of V logits. */
double test_logits_row_diff(const float *a, const float *b, int32_t V);

struct test_logits_diff {
    double max_abs;       /* over every logit of every row */
    int32_t worst_row;    /* the first row holding it */
    int32_t argmax_equal; /* rows whose argmax agrees */
};

/* Two [rows][V] logit arrays against each other. */
struct test_logits_diff test_logits_compare(const float *a, const float *b, int32_t rows,
                                            int32_t V);

#endif
