#include "tests/support/identical.h"

#include <setjmp.h>
#include <stdarg.h>

#include <cmocka.h>

#include <stdio.h>

#include "splash/fp.h"

void test_assert_floats_identical(const char *what, const float *got, const float *want, size_t n)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (splash_fp32_to_bits(got[i]) != splash_fp32_to_bits(want[i])) {
            if (bad < 5)
                print_error("%s[%zu]: got %.9g (0x%08x), want %.9g (0x%08x)\n", what, i,
                            (double)got[i], splash_fp32_to_bits(got[i]), (double)want[i],
                            splash_fp32_to_bits(want[i]));
            bad++;
        }
    }
    if (bad)
        fail_msg("%s: %d of %zu values differ", what, bad, n);
}

void test_assert_bytes_identical(const char *what, const uint8_t *got, const uint8_t *want,
                                 size_t n)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (got[i] != want[i]) {
            if (bad < 5)
                print_error("%s byte %zu: got 0x%02x, want 0x%02x\n", what, i, got[i], want[i]);
            bad++;
        }
    }
    if (bad)
        fail_msg("%s: %d of %zu bytes differ", what, bad, n);
}

size_t test_count_float_mismatches(const char *prefix, const float *got, const float *want,
                                   size_t n, size_t row_len)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (splash_fp32_to_bits(got[i]) != splash_fp32_to_bits(want[i])) {
            if (bad < 8)
                fprintf(stderr, "  %srow %zu elem %zu: got %.9g, want %.9g\n", prefix, i / row_len,
                        i % row_len, (double)got[i], (double)want[i]);
            bad++;
        }
    }
    return bad;
}

size_t test_count_byte_mismatches(const char *prefix, const uint8_t *got, const uint8_t *want,
                                  size_t n, size_t block_bytes)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (got[i] != want[i]) {
            if (bad < 8)
                fprintf(stderr, "  %sbyte %zu (block %zu + %zu): got 0x%02x, want 0x%02x\n", prefix,
                        i, i / block_bytes, i % block_bytes, got[i], want[i]);
            bad++;
        }
    }
    return bad;
}
