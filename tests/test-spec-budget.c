/* The MoE verify budget (server/engine/spec_budget.c) against the cost a verify pass
 * measures: where rows cost little next to the step (the weights read once for every row)
 * it verifies every proposal the acceptance makes worth it; where each row costs a step's
 * worth it cuts the proposals back; every SPLASH_BUDGET_ALL_EVERY-th cycle verifies all. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "server/engine/spec_budget.h"

enum { PROPOSALS = 7 };

/* A budget that has seen 400 cycles accepting each proposal with probability p (the first
 * rejection ends a cycle) and 32 decode steps costing base + row * rows seconds. */
static void budget_seen(struct splash_verify_budget *b, double p, double base, double row)
{
    splash_budget_init(b);
    uint64_t x = 12345;
    for (int c = 0; c < 400; c++) {
        /* each proposal accepted with probability p (a fixed LCG draws the labels) */
        int32_t n_acc = 0;
        for (;;) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            if (n_acc == PROPOSALS || (double)(x >> 11) * 0x1p-53 >= p)
                break;
            n_acc++;
        }
        splash_budget_label(b, PROPOSALS, n_acc);
    }
    for (int i = 0; i < 32; i++) {
        int32_t rows = 1 + i % 8;
        splash_budget_time(b, rows, base + row * rows);
    }
    b->cycles = 1; /* past the cycle that verifies every row */
}

static int32_t choose(struct splash_verify_budget *b)
{
    int32_t n_prop[2] = {PROPOSALS, PROPOSALS};
    int32_t depth = splash_budget_choose(b, n_prop, 2, 2);
    assert_true(n_prop[0] == depth || n_prop[0] == PROPOSALS);
    return depth;
}

static void test_cheap_rows_verify_all(void **state)
{
    (void)state;
    struct splash_verify_budget b;
    /* 8 rows cost 1.2x one row, acceptance 0.9: every proposal pays */
    budget_seen(&b, 0.9, 0.0200, 0.0005);
    assert_int_equal(choose(&b), PROPOSALS);
}

static void test_costly_rows_cut_back(void **state)
{
    (void)state;
    struct splash_verify_budget b;
    /* every row a whole step's cost, acceptance 0.5: verifying proposals loses */
    budget_seen(&b, 0.5, 0.0001, 0.0200);
    assert_int_equal(choose(&b), 0);
    /* the same acceptance on rows at 1% of a step goes deeper */
    budget_seen(&b, 0.5, 0.0200, 0.0002);
    assert_true(choose(&b) >= 3);
}

static void test_every_32nd_cycle_verifies_all(void **state)
{
    (void)state;
    struct splash_verify_budget b;
    budget_seen(&b, 0.2, 0.0001, 0.0200);
    int all = 0;
    for (int c = 1; c <= SPLASH_BUDGET_ALL_EVERY; c++)
        all += choose(&b) == PROPOSALS;
    assert_int_equal(all, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cheap_rows_verify_all),
        cmocka_unit_test(test_costly_rows_cut_back),
        cmocka_unit_test(test_every_32nd_cycle_verifies_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
