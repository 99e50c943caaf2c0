/* Bit-for-bit comparison of results with reference arrays, printing the first mismatches. */
#ifndef SPLASH_TEST_IDENTICAL_H
#define SPLASH_TEST_IDENTICAL_H

#include <stddef.h>
#include <stdint.h>

/* Fails the test (naming what) unless got and want hold the same float bit patterns. */
void test_assert_floats_identical(const char *what, const float *got, const float *want, size_t n);
/* Fails the test (naming what) unless got and want hold the same bytes. */
void test_assert_bytes_identical(const char *what, const uint8_t *got, const uint8_t *want,
                                 size_t n);

/* The number of values of got whose bits differ from want's; prints the first 8 to stderr as
 * "  <prefix>row R elem E: got G, want W" (rows of row_len values). */
size_t test_count_float_mismatches(const char *prefix, const float *got, const float *want,
                                   size_t n, size_t row_len);
/* The number of bytes of got that differ from want's; prints the first 8 to stderr as
 * "  <prefix>byte I (block B + O): got 0xG, want 0xW" (blocks of block_bytes). */
size_t test_count_byte_mismatches(const char *prefix, const uint8_t *got, const uint8_t *want,
                                  size_t n, size_t block_bytes);

#endif
