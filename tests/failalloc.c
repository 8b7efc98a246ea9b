/* failalloc.c - see failalloc.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "failalloc.h"

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *ptr, size_t size);
void __real_free(void *ptr);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *ptr, size_t size);
void __wrap_free(void *ptr);

/* Test state: the test programs are single-threaded. */
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

void failalloc_install_jansson(void)
{
    json_set_alloc_funcs(json_malloc, json_free);
}

void failalloc_torture(const struct remat_profile *p, failalloc_op op, int64_t arg,
                       const char *what, long max_n)
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
            assert_true(n > 0); /* it allocates at all, so the loop tested something */
            print_message("%s: survived %ld failed allocations\n", what, n);
            return;
        }
        if (n > max_n)
            fail_msg("%s: never succeeds", what);
    }
}

int failalloc_solve_json(const struct remat_profile *p, const struct remat_options *o)
{
    struct remat_plan plan;
    struct remat_error err;
    int rc = remat_solve(p, o, &plan, &err);
    if (rc != REMAT_OK) {
        assert_int_equal(rc, REMAT_ENOMEM);
        assert_null(plan.checkpoints);
        assert_null(plan.schedule.ops);
        return 1;
    }
    json_t *j = remat_plan_to_json(p, &plan);
    remat_plan_clear(&plan);
    return failalloc_json_made(j);
}

int failalloc_json_made(json_t *j)
{
    if (j == NULL)
        return 1;
    json_decref(j);
    return 0;
}
