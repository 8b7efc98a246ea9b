/* test_exports.c - plan JSON's "exports": each knob present exactly when it
 * runs the plan's schedule.  tests/python/test_exports.py runs the knobs in
 * PyTorch; this checks the shapes on many random chains in C. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "randchain.h"
#include "remat_private.h"

static const char *const knobs[] = {"checkpoint_sequential", "per_module", "megatron", "deepspeed",
                                    "torch_compile"};

static json_t *solve_exports(const struct remat_profile *p, enum remat_algorithm a, size_t segments,
                             int64_t budget, struct remat_plan *plan)
{
    struct remat_options o;
    remat_options_init(&o);
    o.algorithm = a;
    o.segments = segments;
    o.budget_bytes = budget;
    memset(plan, 0, sizeof *plan);
    struct remat_error err;
    if (remat_solve(p, &o, plan, &err) != REMAT_OK)
        return NULL;
    json_t *j = remat_plan_to_json(p, plan);
    assert_non_null(j);
    json_t *ex = json_incref(json_object_get(j, "exports"));
    json_decref(j);
    assert_non_null(ex);
    for (size_t k = 0; k < sizeof knobs / sizeof *knobs; k++) {
        json_t *e = json_object_get(ex, knobs[k]);
        assert_non_null(e);
        json_t *av = json_object_get(e, "available");
        assert_true(json_is_boolean(av));
        if (!json_is_true(av))
            assert_true(json_string_length(json_object_get(e, "reason")) > 0);
    }
    return ex;
}

static int available(json_t *ex, const char *knob)
{
    return json_is_true(json_object_get(json_object_get(ex, knob), "available"));
}

static json_int_t int_of(json_t *ex, const char *knob, const char *field)
{
    json_t *v = json_object_get(json_object_get(ex, knob), field);
    assert_true(json_is_integer(v));
    return json_integer_value(v);
}

static void every_algorithm_on_random_chains(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        size_t n = 2 + (size_t)(seed * 7 % 40);
        struct remat_profile *p =
            randchain_profile(seed, n, (enum randchain_dist)(seed % RANDCHAIN_N_DISTS), 1);
        assert_non_null(p);
        for (int a = 0; a < REMAT_ALG_COUNT; a++) {
            struct remat_plan plan;
            json_t *ex = solve_exports(p, (enum remat_algorithm)a, 1 + seed % 5, 0, &plan);
            if (ex == NULL) {
                remat_plan_clear(&plan);
                continue;
            }
            if (plan.single_level) {
                /* One checkpoint call per segment but the last. */
                assert_true(available(ex, "deepspeed"));
                assert_int_equal(int_of(ex, "deepspeed", "number_checkpoints"), plan.n_checkpoints);
                /* checkpoint_sequential exactly when the checkpoints are
                 * every n // K modules. */
                size_t K = plan.n_checkpoints + 1, len = n / K;
                int every = len >= 1;
                for (size_t j = 0; every && j < plan.n_checkpoints; j++)
                    every = plan.checkpoints[j] == len * (j + 1);
                assert_int_equal(available(ex, "checkpoint_sequential"), every);
                if (every)
                    assert_int_equal(int_of(ex, "checkpoint_sequential", "segments"), K);
                /* One module per recomputed segment: checkpoints 1..m. */
                int per = 1;
                for (size_t j = 0; j < plan.n_checkpoints; j++)
                    per &= plan.checkpoints[j] == j + 1;
                assert_int_equal(available(ex, "per_module"), per);
                assert_int_equal(available(ex, "megatron"), per);
            }
            if (plan.algorithm == REMAT_ALG_STORE_ALL) {
                json_t *tc = json_object_get(ex, "torch_compile");
                assert_true(json_real_value(json_object_get(tc, "activation_memory_budget")) ==
                            1.0);
                assert_int_equal(
                    json_array_size(json_object_get(json_object_get(ex, "megatron"), "args")), 0);
            }
            json_decref(ex);
            remat_plan_clear(&plan);
        }
        remat_profile_free(p);
    }
}

static void uniform_every_module_is_per_module_and_megatron(void **state)
{
    (void)state;
    size_t n = 9;
    struct remat_profile *p = randchain_profile(3, n, RANDCHAIN_UNIFORM, 1);
    assert_non_null(p);
    struct remat_plan plan;
    json_t *ex = solve_exports(p, REMAT_ALG_UNIFORM, n, 0, &plan);
    assert_non_null(ex);
    json_t *mods = json_object_get(json_object_get(ex, "per_module"), "modules");
    assert_int_equal(json_array_size(mods), n - 1);
    for (size_t k = 0; k < n - 1; k++)
        assert_int_equal(json_integer_value(json_array_get(mods, k)), k);
    json_t *args = json_object_get(json_object_get(ex, "megatron"), "args");
    assert_int_equal(json_array_size(args), 6);
    assert_string_equal(json_string_value(json_array_get(args, 3)), "block");
    assert_string_equal(json_string_value(json_array_get(args, 5)), "8");
    assert_true(available(ex, "checkpoint_sequential"));
    assert_int_equal(int_of(ex, "checkpoint_sequential", "segments"), n);
    json_decref(ex);
    remat_plan_clear(&plan);
    remat_profile_free(p);
}

static void nested_min_time_is_not_single_level(void **state)
{
    (void)state;
    size_t nested = 0;
    for (uint64_t seed = 1; seed <= 30; seed++) {
        size_t n = 8 + (size_t)(seed % 12);
        struct remat_profile *p = randchain_profile(seed, n, RANDCHAIN_UNIFORM, 1);
        assert_non_null(p);
        struct remat_plan sa;
        json_t *ex0 = solve_exports(p, REMAT_ALG_STORE_ALL, 0, 0, &sa);
        assert_non_null(ex0);
        json_decref(ex0);
        for (int f = 3; f <= 8; f++) {
            struct remat_plan plan;
            json_t *ex = solve_exports(p, REMAT_ALG_MIN_TIME, 0, sa.peak_bytes * f / 10, &plan);
            if (ex != NULL && !plan.single_level) {
                /* A multi-level schedule that no checkpoint set makes has
                 * no single-level knob. */
                const char *r =
                    json_string_value(json_object_get(json_object_get(ex, "deepspeed"), "reason"));
                if (!available(ex, "deepspeed")) {
                    assert_non_null(r);
                    nested++;
                    assert_false(available(ex, "checkpoint_sequential"));
                }
            }
            json_decref(ex);
            remat_plan_clear(&plan);
        }
        remat_plan_clear(&sa);
        remat_profile_free(p);
    }
    assert_true(nested > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_algorithm_on_random_chains),
        cmocka_unit_test(uniform_every_module_is_per_module_and_megatron),
        cmocka_unit_test(nested_min_time_is_not_single_level),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
