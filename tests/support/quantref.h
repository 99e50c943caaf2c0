/* The quantization reference vectors of ../shared/testdata/quant/ (README.md section 5):
 * the per-type files and index.json. */
#ifndef SPLASH_TEST_QUANTREF_H
#define SPLASH_TEST_QUANTREF_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Reads quant/<file>.<ext> (caller frees), failing the test when it cannot or, for want > 0,
 * when the file is not want bytes long; *size (optional) gets its length. */
void *test_quant_load(const char *file, const char *ext, size_t want, size_t *size);

/* Loads quant/index.json; NULL with "<path>: <reason>" in msg when it cannot. */
json_t *test_quant_index_load(char *msg, size_t msg_size);
/* index.json's types.<file>; fails the test when there is none. */
const json_t *test_quant_index_type(const json_t *index, const char *file);

/* Q8_0 activation blocks (as the .actq files hold them) as values: d * q, by the block's
 * definition. n is a multiple of 32. */
void test_q8_0_to_float(const void *blocks, float *out, int64_t n);

#endif
