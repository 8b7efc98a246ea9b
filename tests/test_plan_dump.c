/* test_plan_dump.c - remat_plan_dumps writes, byte for byte, what
 * json_dumps(remat_plan_to_json(...), JSON_COMPACT) writes: every algorithm
 * on many random chains, min-time plans nested and single-level, and reals
 * in every shape jansson prints them. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "randchain.h"
#include "remat_private.h"
#include "rematx/real.h"

/* Both writers on one plan; returns 1 when the plan is nested. */
static int same_text(const struct remat_profile *p, const struct remat_plan *plan, const char *what)
{
    json_t *j = remat_plan_to_json(p, plan);
    assert_non_null(j);
    char *want = rematx_json_dumps(j, JSON_COMPACT);
    assert_non_null(want);
    json_decref(j);
    size_t len = 0;
    char *got = remat_plan_dumps(p, plan, &len);
    assert_non_null(got);
    if (strcmp(got, want) != 0)
        fail_msg("%s: remat_plan_dumps differs from jansson:\n%s\n%s", what, got, want);
    assert_int_equal(len, strlen(want));
    free(got);
    free(want);
    return !plan->single_level;
}

static void every_algorithm(void **state)
{
    (void)state;
    size_t plans = 0;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        size_t n = 1 + (size_t)(seed * 7 % 90);
        struct remat_profile *p =
            randchain_profile(seed, n, (enum randchain_dist)(seed % RANDCHAIN_N_DISTS), 1);
        assert_non_null(p);
        p->stages[0].fwd_ms = 0.1 * (double)seed; /* times that are not short in binary */
        for (int a = 0; a < REMAT_ALG_COUNT; a++) {
            struct remat_options o;
            remat_options_init(&o);
            o.algorithm = (enum remat_algorithm)a;
            o.segments = 1 + seed % 5;
            struct remat_plan plan;
            memset(&plan, 0, sizeof plan);
            struct remat_error err;
            int rc = remat_solve(p, &o, &plan, &err);
            if (rc == REMAT_OK) {
                char what[64];
                snprintf(what, sizeof what, "seed %llu %s", (unsigned long long)seed,
                         remat_algorithm_name((enum remat_algorithm)a));
                same_text(p, &plan, what);
                plans++;
            }
            remat_plan_clear(&plan);
        }
        remat_profile_free(p);
    }
    assert_true(plans > 400);
}

/* Min-time between its least budget and store-all: nested plans among them. */
static void min_time_budgets(void **state)
{
    (void)state;
    size_t nested = 0, plans = 0;
    for (uint64_t seed = 1; seed <= 16; seed++) {
        size_t n = 4 + (size_t)seed * 2;
        struct remat_profile *p = randchain_profile(seed + 100, n, RANDCHAIN_HEAVY, 1);
        assert_non_null(p);
        for (size_t i = 0; i < n; i++)
            p->stages[i].saved_bytes = p->stages[i].out_bytes * (int64_t)(2 + i % 7);
        struct remat_options o;
        remat_options_init(&o);
        o.algorithm = REMAT_ALG_MIN_TIME;
        o.budget_bytes = 1;
        struct remat_plan plan;
        memset(&plan, 0, sizeof plan);
        assert_int_equal(remat_solve(p, &o, &plan, NULL), REMAT_EINFEASIBLE);
        int64_t least = plan.min_budget_bytes;
        remat_plan_clear(&plan);
        o.algorithm = REMAT_ALG_STORE_ALL;
        o.budget_bytes = 0;
        assert_int_equal(remat_solve(p, &o, &plan, NULL), REMAT_OK);
        int64_t all = plan.peak_bytes;
        remat_plan_clear(&plan);
        o.algorithm = REMAT_ALG_MIN_TIME;
        for (int k = 0; k <= 8; k++) {
            o.budget_bytes = least + (all - least) * k / 8;
            int rc = remat_solve(p, &o, &plan, NULL);
            if (rc == REMAT_OK) {
                nested += (size_t)same_text(p, &plan, "min-time");
                plans++;
            }
            remat_plan_clear(&plan);
        }
        remat_profile_free(p);
    }
    assert_true(plans > 100);
    assert_true(nested > 0);
}

/* Reals in each of jansson's shapes: integral (".0" added), exponents
 * with and without sign, 17 digits, zero and negative zero. */
static void reals(void **state)
{
    (void)state;
    struct remat_profile *p = randchain_profile(3, 5, RANDCHAIN_UNIFORM, 1);
    assert_non_null(p);
    struct remat_options o;
    remat_options_init(&o);
    struct remat_plan plan;
    memset(&plan, 0, sizeof plan);
    assert_int_equal(remat_solve(p, &o, &plan, NULL), REMAT_OK);
    static const double values[] = {
        0.0,    -0.0,    1.0,   2.5,  0.1,  1e-5,  1e-300, 1e20, 1e21, 1e300, 123456789012345678.0,
        5e-324, 1.0 / 3, 100.0, 1e16, 1e17, 4.9e-7};
    size_t nv = sizeof values / sizeof values[0];
    for (size_t a = 0; a < nv; a++) {
        plan.recompute_ms = values[a];
        plan.total_ms = values[nv - 1 - a];
        same_text(p, &plan, "reals");
    }
    plan.total_ms = HUGE_VAL;
    assert_null(remat_plan_to_json(p, &plan));
    assert_null(remat_plan_dumps(p, &plan, NULL));
    remat_plan_clear(&plan);
    remat_profile_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_algorithm),
        cmocka_unit_test(min_time_budgets),
        cmocka_unit_test(reals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
