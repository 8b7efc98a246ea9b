/* test_mintime_alloc.c - the allocation-failure loop of test_alloc.c, over
 * min-time and the frontier: make the N-th allocation fail, for every N,
 * and check that each call either succeeds or fails cleanly with
 * REMAT_ENOMEM (or NULL JSON) and leaves no allocation behind.
 *
 * Allocations are intercepted at link time (-Wl,--wrap), jansson's through
 * json_set_alloc_funcs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "failalloc.h"
#include "solve_mintime.h"

/* A chain where the answers are nested (see test_mintime.c). */
static struct remat_profile *chain(size_t n)
{
    struct remat_profile *p = remat_profile_new(n, NULL);
    assert_non_null(p);
    p->input_bytes = 1;
    for (size_t i = 0; i < n; i++) {
        p->stages[i].out_bytes = 1 + (int64_t)(i % 3);
        p->stages[i].saved_bytes = 10 + (int64_t)(i % 4);
        p->stages[i].param_bytes = (int64_t)(i % 2);
        p->stages[i].fwd_ms = 1;
        p->stages[i].bwd_ms = 2;
    }
    return p;
}

static int op_solve(const struct remat_profile *p, int64_t budget)
{
    struct remat_options o;
    remat_options_init(&o);
    o.algorithm = REMAT_ALG_MIN_TIME;
    o.budget_bytes = budget;
    return failalloc_solve_json(p, &o);
}

static int op_infeasible(const struct remat_profile *p, int64_t budget)
{
    struct remat_options o;
    remat_options_init(&o);
    o.algorithm = REMAT_ALG_MIN_TIME;
    o.budget_bytes = budget;
    struct remat_plan plan;
    struct remat_error err;
    int rc = remat_solve(p, &o, &plan, &err);
    if (rc == REMAT_ENOMEM)
        return 1;
    assert_int_equal(rc, REMAT_EINFEASIBLE);
    assert_true(plan.min_budget_bytes > budget);
    return 0;
}

static int op_frontier(const struct remat_profile *p, int64_t unused)
{
    (void)unused;
    struct remat_frontier f;
    struct remat_error err;
    int rc = remat_frontier_compute(p, 0, &f, &err);
    if (rc != REMAT_OK) {
        assert_int_equal(rc, REMAT_ENOMEM);
        assert_int_equal(f.n_points, 0);
        assert_null(f.points);
        return 1;
    }
    assert_true(f.n_points >= 2);
    json_t *j = remat_frontier_to_json(p, &f);
    remat_frontier_clear(&f);
    return failalloc_json_made(j);
}

static void all_operations(void **state)
{
    (void)state;
    failalloc_install_jansson();
    struct remat_profile *p = chain(7);
    struct remat_options o;
    remat_options_init(&o);
    o.algorithm = REMAT_ALG_MIN_TIME;
    o.budget_bytes = 1;
    struct remat_plan plan;
    assert_int_equal(remat_solve(p, &o, &plan, NULL), REMAT_EINFEASIBLE);
    int64_t least = plan.min_budget_bytes;
    failalloc_torture(p, op_solve, least, "min-time at the least budget", 200000);
    failalloc_torture(p, op_solve, least + 9, "min-time above it", 200000);
    failalloc_torture(p, op_solve, 0, "min-time unlimited", 200000);
    failalloc_torture(p, op_infeasible, least - 1, "min-time infeasible", 200000);
    remat_profile_free(p);
    /* The frontier allocates a plan per point: a shorter chain keeps the
     * loop to seconds under the sanitizers. */
    p = chain(4);
    failalloc_torture(p, op_frontier, 0, "frontier", 200000);
    remat_profile_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(all_operations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
