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

#include "mintime.h"

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *ptr, size_t size);
void __real_free(void *ptr);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *ptr, size_t size);
void __wrap_free(void *ptr);

/* Test state: the program is single-threaded. */
static long countdown = -1; /* allocations left before one fails; -1: never */
static long live;           /* allocations not yet freed */
static int failed;          /* the countdown fired */

static int should_fail(void)
{
    if (countdown < 0)
        return 0;
    if (countdown == 0) {
        failed = 1;
        return 1;
    }
    countdown--;
    return 0;
}

void *__wrap_malloc(size_t size)
{
    if (should_fail())
        return NULL;
    void *p = __real_malloc(size);
    live += p != NULL;
    return p;
}

void *__wrap_calloc(size_t n, size_t size)
{
    if (should_fail())
        return NULL;
    void *p = __real_calloc(n, size);
    live += p != NULL;
    return p;
}

void *__wrap_realloc(void *ptr, size_t size)
{
    if (should_fail())
        return NULL;
    void *p = __real_realloc(ptr, size);
    live += ptr == NULL && p != NULL;
    return p;
}

void __wrap_free(void *ptr)
{
    live -= ptr != NULL;
    __real_free(ptr);
}

static void *json_malloc(size_t size)
{
    return __wrap_malloc(size);
}

static void json_free(void *ptr)
{
    __wrap_free(ptr);
}

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

typedef int (*op_fn)(const struct remat_profile *p, int64_t budget);

static int op_solve(const struct remat_profile *p, int64_t budget)
{
    struct remat_options o;
    remat_options_init(&o);
    o.algorithm = REMAT_ALG_MIN_TIME;
    o.budget_bytes = budget;
    struct remat_plan plan;
    struct remat_error err;
    int rc = remat_solve(p, &o, &plan, &err);
    if (rc != REMAT_OK) {
        assert_int_equal(rc, REMAT_ENOMEM);
        assert_null(plan.checkpoints);
        assert_null(plan.schedule.ops);
        return 1;
    }
    json_t *j = remat_plan_to_json(p, &plan);
    remat_plan_clear(&plan);
    if (j == NULL)
        return 1;
    json_decref(j);
    return 0;
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
    if (j == NULL)
        return 1;
    json_decref(j);
    return 0;
}

/* Fails allocation 0, 1, 2, ... until the operation runs through. */
static void torture(const struct remat_profile *p, op_fn op, int64_t arg, const char *what)
{
    for (long n = 0;; n++) {
        long before = live;
        failed = 0;
        countdown = n;
        int rc = op(p, arg);
        countdown = -1;
        if (live != before)
            fail_msg("%s: %ld allocations left behind when allocation %ld failed", what,
                     live - before, n);
        if (!failed) {
            assert_int_equal(rc, 0);
            assert_true(n > 0);
            print_message("%s: survived %ld failed allocations\n", what, n);
            return;
        }
        if (n > 200000)
            fail_msg("%s: never succeeds", what);
    }
}

static void all_operations(void **state)
{
    (void)state;
    json_set_alloc_funcs(json_malloc, json_free);
    struct remat_profile *p = chain(7);
    struct remat_options o;
    remat_options_init(&o);
    o.algorithm = REMAT_ALG_MIN_TIME;
    o.budget_bytes = 1;
    struct remat_plan plan;
    assert_int_equal(remat_solve(p, &o, &plan, NULL), REMAT_EINFEASIBLE);
    int64_t least = plan.min_budget_bytes;
    torture(p, op_solve, least, "min-time at the least budget");
    torture(p, op_solve, least + 9, "min-time above it");
    torture(p, op_solve, 0, "min-time unlimited");
    torture(p, op_infeasible, least - 1, "min-time infeasible");
    remat_profile_free(p);
    /* The frontier allocates a plan per point: a shorter chain keeps the
     * loop to seconds under the sanitizers. */
    p = chain(4);
    torture(p, op_frontier, 0, "frontier");
    remat_profile_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(all_operations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
