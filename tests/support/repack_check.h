/* The checks every 16-row repacked format (a plain format's load-time `repack`, e.g.
 * Q4_K -> Q4_K_R16) gets against ggml's reference blocks of the plain type
 * (../shared/testdata/quant, README.md section 5): its descriptor, to_float bit for bit,
 * mul_rows of every kernel row against float64 dots, SIMD rows against the scalar row,
 * and validate. test-format-rows.c describes each format by a struct test_repack_case. */
#ifndef SPLASH_TEST_REPACK_CHECK_H
#define SPLASH_TEST_REPACK_CHECK_H

#include <stddef.h>
#include <stdint.h>

struct test_repack_case {
    const char *plain;    /* the plain type: "Q4_K" */
    const char *repacked; /* its repacked type: "Q4_K_R16" */
    /* the reference files' stem and index.json key: "q4_K"; NULL for a type ggml does not
     * define (PQ2_0): 8 rows of 1024 random plain blocks stand in for ggml's, and the
     * plain type's to_float gives their values */
    const char *ref;
    int block_values;     /* values of a plain block: 256 */
    size_t block_bytes;   /* bytes of a plain block: 144 */
    const char *act_type; /* the activation type: "Q8_K" */
    /* n_blocks valid random plain blocks from splitmix64 state *rng */
    void (*random_blocks)(uint64_t *rng, uint8_t *q, int64_t n_blocks);
    /* mul_rows against the float64 dot, as a fraction of sum |w a| */
    double dot_tol;
    /* SIMD row against the scalar row on random blocks, as a fraction of sum |w a|
     * (0: the same value) */
    double simd_tol;
    /* the scalar row's results are the plain type's scalar vec_dot bit for bit */
    int scalar_is_plain;
    /* each SIMD row gives every activation row alone the bits it gets in a batch */
    int simd_batch_bits;
    /* rows of the image validate checks: 0 for 40 (two groups and plain tail rows); 32
     * for formats whose validate takes whole 16-row blocks only */
    int validate_rows;
    /* optional, 0 for none: the GGUF type id index.json must give c->ref */
    int gguf_type_id;
    /* load ggml's own activations and dots (<ref>.actq, <ref>.dotref.f32) for
     * test_repack_check_dotref */
    int dotref;
    /* mul_rows: each activation row alone gives the bits it gets in the batch (every row,
     * every n_w and n_act) */
    int mul_rows_batch_bits;
    /* test_repack_check_simd_rows: nonzero makes the group rows the scalar row's bits and
     * holds the plain tail rows within this fraction of sum |w a| (simd_tol unused) */
    double simd_tail_tol;
    /* nonzero: every row's dots (mul_rows checks, and test_repack_check_simd_rows with
     * simd_rows_exact) within this fraction of sum |w a| of the plain scalar vec_dot's */
    double plain_tol;
    /* test_repack_check_simd_rows also holds every row, the scalar one too, within
     * dot_tol of the float64 dot (and plain_tol of the plain scalar row) */
    int simd_rows_exact;
    /* nonzero: the bits per weight both types must give */
    float bits_per_weight;
};

/* Loads c's reference blocks and values (test_formats_setup's registry must exist) for the
 * checks below; 0, or -1 with the reason on stderr. The case must outlive the checks. */
int test_repack_load(const struct test_repack_case *c);
void test_repack_unload(void);

/* The repacked type is flagged REPACKED, has no GGUF type, groups 16 plain rows of one
 * block each, the plain bits per weight, c->act_type activations (the plain type's too)
 * and a mul_rows on every row, the last one "scalar"; the plain type names it as
 * repack_to and has a repack. */
void test_repack_check_descriptor(void);
/* Matrices of 40, 19 and 32 rows shuffled from the reference blocks, repacked: to_float
 * of every group block gives ggml's values bit for bit and the tail rows stay plain. */
void test_repack_check_to_float(void);
/* Every kernel row's mul_rows on repacked reference rows for n_act {1,2,7,8,9,16,17,33}
 * x n_w {16,32,40,19} within dot_tol of the float64 dot, writing nothing else; with
 * scalar_is_plain, the scalar row's results the plain scalar vec_dot's bits; with
 * mul_rows_batch_bits, each activation row alone its bits in the batch. */
void test_repack_check_mul_rows(void);
/* Random blocks, 2048 values x 53 rows: every SIMD row within simd_tol of the scalar row
 * for n_act 1..17 and 33, writing nothing outside its output (and, with simd_batch_bits,
 * each activation row alone gives the bits it got in the batch). */
void test_repack_check_simd(void);
/* The same on n values x n_rows rows (n a multiple of block_values), with
 * simd_tail_tol's split between group and tail rows when it is set. */
void test_repack_check_simd_rows(int64_t n, int64_t n_rows);
/* With c->dotref: ggml's activations against its reference rows in place (37 rows, row i
 * reference row i % n_ref_rows): every row's dot within dot_tol of ggml's dotref. */
void test_repack_check_dotref(void);
/* With c->dotref: ggml's activations against its reference rows in place: every row's
 * dot is ggml's own vec_dot (<ref>.dot.f32) bit for bit (kernels that take ggml's float
 * steps). */
void test_repack_check_ggml_dot_bits(void);
/* Random blocks, n values x 53 rows (seed): every row gives the plain type's row of isa
 * plain_isa bit for bit for n_act 1..17 and 33 (skipped where that row cannot run). */
void test_repack_check_plain_row_bits(int64_t n, const char *plain_isa, uint64_t seed);
/* Random blocks, n values x n_rows rows (seed): every row (scalar too) gives each
 * activation row alone the bits it got in batches of the 0-terminated batches' sizes (at
 * most 33; NULL or empty: 2, 9, 16 and 23). */
void test_repack_check_batch_bits(int64_t n, int64_t n_rows, uint64_t seed,
                                  const int64_t *batches);
/* A repacked image of n_rows rows of the test matrix (caller frees); *bytes gets its size
 * and *n_elems its values, for a format's own validate checks. */
uint8_t *test_repack_image(int64_t n_rows, size_t *bytes, int64_t *n_elems);
/* validate accepts a repacked image of validate_rows (40) rows and refuses it one byte, one block
 * or one group short, or with fewer elements than it holds. */
void test_repack_check_validate(void);

#endif
