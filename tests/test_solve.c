/* test_solve.c - the solvers of libremat's core: the paper's test vectors
 * T1-T10 (paper-notes.md §8) exactly, every exact solver against exhaustive
 * search on seeded random chains, paper-linear against its O(n^2)
 * reference, and every plan's numbers against a fresh simulation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "exhaustive.h"
#include "randchain.h"
#include "solve_mintime.h"
#include "remat_private.h"

/* A profile whose d = [d_0, ..., d_n], the rest at the defaults. */
static struct remat_profile *chain(const int64_t *d, size_t n)
{
    struct remat_profile *p = remat_profile_new(n, NULL);
    assert_non_null(p);
    p->input_bytes = d[0];
    for (size_t i = 1; i <= n; i++) {
        p->stages[i - 1].out_bytes = d[i];
        p->stages[i - 1].saved_bytes = d[i];
    }
    assert_int_equal(remat_profile_validate(p, NULL), REMAT_OK);
    return p;
}

struct vector {
    int64_t d[8];
    size_t n;
    int64_t sum_value; /* A* */
    size_t sum_set[3]; /* canonical optimal set under sum */
    size_t sum_m;
    int64_t prefix_value; /* B* */
    size_t prefix_set[3];
    size_t prefix_m;
    int64_t sqrt_sum, sqrt_prefix; /* the sqrt set's A and B; -1 when §8 gives none */
    int64_t store_all;
};

/* paper-notes.md §8, with its canonical choices. */
static const struct vector vectors[] = {
    {{4, 1, 4, 1, 4}, 4, 13, {2}, 1, 10, {3}, 1, 13, 13, 14},                /* T1 */
    {{1, 2, 3, 4, 5}, 4, 13, {2}, 1, 10, {3}, 1, -1, -1, 15},                /* T2 */
    {{5, 4, 3, 2, 1}, 4, 13, {2}, 1, 12, {2}, 1, -1, -1, 15},                /* T3 */
    {{2, 2, 2, 2, 2, 2, 2}, 6, 10, {3}, 1, 8, {3, 5}, 2, 10, 10, 14},        /* T4 */
    {{3, 1, 1, 1, 1, 1, 1}, 6, 7, {3}, 1, 6, {3, 5}, 2, -1, -1, 9},          /* T5 */
    {{5, 1, 5, 1, 5, 1, 5}, 6, 17, {3}, 1, 12, {3, 5}, 2, 17, 17, 23},       /* T6 */
    {{1, 1, 9, 1, 1, 9, 1}, 6, 13, {3}, 1, 12, {3, 5}, 2, -1, -1, 23},       /* T7 */
    {{1, 10, 1, 10, 1, 10, 1}, 6, 14, {2, 4}, 2, 14, {2, 4}, 2, 23, 23, 34}, /* T8 */
    {{1, 1, 1, 1}, 3, 4, {0}, 0, 3, {2}, 1, 4, 4, 4},                        /* T9 */
    {{6, 2, 6, 2, 6, 2}, 5, 18, {3}, 1, 16, {3}, 1, 22, 22, 24},             /* T10 */
};

static void expect_set(const struct remat_plan *plan, const size_t *set, size_t m)
{
    assert_int_equal(plan->n_checkpoints, m);
    for (size_t k = 0; k < m; k++)
        assert_int_equal(plan->checkpoints[k], set[k]);
}

static int64_t sim_value(const struct remat_profile *p, enum remat_model model, const size_t *ck,
                         size_t m)
{
    int64_t v = -1;
    assert_int_equal(exhaustive_value(p, model, ck, m, &v), REMAT_OK);
    return v;
}

static void solve_ok(const struct remat_profile *p, enum remat_algorithm alg,
                     struct remat_plan *plan)
{
    struct remat_options o;
    remat_options_init(&o);
    o.algorithm = alg;
    struct remat_error err;
    int rc = remat_solve(p, &o, plan, &err);
    if (rc != REMAT_OK)
        fail_msg("%s: %s", remat_algorithm_name(alg), err.message);
}

static void test_vectors(void **state)
{
    (void)state;
    for (size_t t = 0; t < sizeof vectors / sizeof vectors[0]; t++) {
        const struct vector *v = &vectors[t];
        struct remat_profile *p = chain(v->d, v->n);
        struct remat_plan plan;
        /* sum: acg and paper-cubic, values and canonical sets. */
        const enum remat_algorithm sum_algs[] = {REMAT_ALG_ACG, REMAT_ALG_PAPER_CUBIC};
        for (size_t a = 0; a < 2; a++) {
            solve_ok(p, sum_algs[a], &plan);
            assert_int_equal(plan.objective_model, REMAT_MODEL_SUM);
            assert_int_equal(plan.objective_value, v->sum_value);
            expect_set(&plan, v->sum_set, v->sum_m);
            remat_plan_clear(&plan);
        }
        /* prefix: paper-linear and its reference. */
        solve_ok(p, REMAT_ALG_PAPER_LINEAR, &plan);
        assert_int_equal(plan.objective_model, REMAT_MODEL_PREFIX);
        assert_int_equal(plan.objective_value, v->prefix_value);
        expect_set(&plan, v->prefix_set, v->prefix_m);
        remat_plan_clear(&plan);
        assert_int_equal(remat__prefix_ref(p, &plan, NULL), REMAT_OK);
        assert_int_equal(plan.objective_value, v->prefix_value);
        expect_set(&plan, v->prefix_set, v->prefix_m);
        remat_plan_clear(&plan);
        /* The exhaustive search agrees, sets included. */
        struct exhaustive_result ex;
        assert_int_equal(exhaustive_search(p, REMAT_MODEL_SUM, &ex), REMAT_OK);
        assert_int_equal(ex.value, v->sum_value);
        assert_int_equal(ex.n_checkpoints, v->sum_m);
        assert_int_equal(exhaustive_search(p, REMAT_MODEL_PREFIX, &ex), REMAT_OK);
        assert_int_equal(ex.value, v->prefix_value);
        assert_int_equal(ex.n_checkpoints, v->prefix_m);
        /* sqrt and store-all, in both models. */
        struct remat_options o;
        remat_options_init(&o);
        o.algorithm = REMAT_ALG_SQRT;
        o.has_model = 1;
        if (v->sqrt_sum >= 0) {
            o.model = REMAT_MODEL_SUM;
            assert_int_equal(remat_solve(p, &o, &plan, NULL), REMAT_OK);
            assert_int_equal(plan.objective_value, v->sqrt_sum);
            remat_plan_clear(&plan);
            o.model = REMAT_MODEL_PREFIX;
            assert_int_equal(remat_solve(p, &o, &plan, NULL), REMAT_OK);
            assert_int_equal(plan.objective_value, v->sqrt_prefix);
            remat_plan_clear(&plan);
        }
        o.algorithm = REMAT_ALG_STORE_ALL;
        for (int m = REMAT_MODEL_SUM; m <= REMAT_MODEL_PREFIX; m++) {
            o.model = (enum remat_model)m;
            assert_int_equal(remat_solve(p, &o, &plan, NULL), REMAT_OK);
            assert_int_equal(plan.objective_value, v->store_all);
            assert_int_equal(plan.n_checkpoints, 0);
            remat_plan_clear(&plan);
        }
        remat_profile_free(p);
    }
}

/* The sqrt sets of §8 themselves: k = round(sqrt(n)), s = n / k. */
static void test_sqrt_sets(void **state)
{
    (void)state;
    const int64_t d6[] = {2, 2, 2, 2, 2, 2, 2};
    struct remat_profile *p = chain(d6, 6);
    struct remat_plan plan;
    solve_ok(p, REMAT_ALG_SQRT, &plan);
    const size_t want6[] = {3};
    expect_set(&plan, want6, 1);
    remat_plan_clear(&plan);
    remat_profile_free(p);
    /* n = 10: k = 3, s = 3, C = {3, 6}, the remainder (7..10) in the last. */
    const int64_t d10[11] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    p = chain(d10, 10);
    solve_ok(p, REMAT_ALG_SQRT, &plan);
    const size_t want10[] = {3, 6};
    expect_set(&plan, want10, 2);
    remat_plan_clear(&plan);
    /* uniform clamps K to 1..n. */
    struct remat_options o;
    remat_options_init(&o);
    o.algorithm = REMAT_ALG_UNIFORM;
    o.segments = 4;
    assert_int_equal(remat_solve(p, &o, &plan, NULL), REMAT_OK);
    const size_t want4[] = {2, 4, 6};
    expect_set(&plan, want4, 3);
    remat_plan_clear(&plan);
    o.segments = 1000;
    assert_int_equal(remat_solve(p, &o, &plan, NULL), REMAT_OK);
    assert_int_equal(plan.n_checkpoints, 9);
    remat_plan_clear(&plan);
    o.segments = 0;
    struct remat_error err;
    assert_int_equal(remat_solve(p, &o, &plan, &err), REMAT_EINVAL);
    assert_string_equal(err.pointer, "/segments");
    remat_profile_free(p);
}

/* A plan's numbers are those of a fresh simulation of its own schedule. */
static void check_plan_numbers(const struct remat_profile *p, const struct remat_plan *plan)
{
    struct remat_sim sim;
    assert_int_equal(remat_simulate(p, REMAT_MODEL_TRACED, &plan->schedule, 0, &sim, NULL), 0);
    assert_int_equal(plan->peak_bytes, sim.peak_bytes);
    assert_true(plan->total_ms == sim.total_ms);
    assert_true(plan->recompute_ms == sim.recompute_ms);
    remat_sim_clear(&sim);
    if (plan->single_level) {
        assert_int_equal(plan->peak_bytes,
                         sim_value(p, REMAT_MODEL_TRACED, plan->checkpoints, plan->n_checkpoints));
        assert_int_equal(plan->objective_value, sim_value(p, plan->objective_model,
                                                          plan->checkpoints, plan->n_checkpoints));
    }
    assert_int_equal(plan->store_all_peak_bytes, sim_value(p, REMAT_MODEL_TRACED, NULL, 0));
}

/* Every exact solver against exhaustive search on seeded random chains:
 * 2,400 chains with n in 1..14 from all four distributions, half with
 * random times, saved, temporary and weight bytes too. */
static void test_random_exhaustive(void **state)
{
    (void)state;
    size_t chains = 0, tied = 0, linear_canonical_on_ties = 0, linear_fewest_on_ties = 0;
    for (uint64_t seed = 1; seed <= 300; seed++)
        for (int dist = 0; dist < RANDCHAIN_N_DISTS; dist++)
            for (int full = 0; full <= 1; full++) {
                size_t n = 1 + (size_t)((seed * 7 + (uint64_t)dist) % 14);
                struct remat_profile *p =
                    randchain_profile(seed, n, (enum randchain_dist)dist, full);
                assert_non_null(p);
                chains++;
                struct exhaustive_result sum, prefix;
                assert_int_equal(exhaustive_search(p, REMAT_MODEL_SUM, &sum), 0);
                assert_int_equal(exhaustive_search(p, REMAT_MODEL_PREFIX, &prefix), 0);
                struct remat_plan plan;
                const enum remat_algorithm sum_algs[] = {REMAT_ALG_ACG, REMAT_ALG_PAPER_CUBIC};
                for (size_t a = 0; a < 2; a++) {
                    solve_ok(p, sum_algs[a], &plan);
                    assert_int_equal(plan.objective_value, sum.value);
                    /* Exact tie-breaking: always the canonical set. */
                    expect_set(&plan, sum.checkpoints, sum.n_checkpoints);
                    check_plan_numbers(p, &plan);
                    remat_plan_clear(&plan);
                }
                solve_ok(p, REMAT_ALG_PAPER_LINEAR, &plan);
                assert_int_equal(plan.objective_value, prefix.value);
                assert_int_equal(remat__prefix_value(p, plan.checkpoints, plan.n_checkpoints),
                                 prefix.value);
                check_plan_numbers(p, &plan);
                if (prefix.n_optimal == 1) {
                    expect_set(&plan, prefix.checkpoints, prefix.n_checkpoints);
                } else {
                    tied++;
                    linear_canonical_on_ties +=
                        remat__tie_cmp(p, plan.checkpoints, plan.n_checkpoints, prefix.checkpoints,
                                       prefix.n_checkpoints) == 0;
                    /* The first tie key, least recompute, is exact. */
                    size_t last = plan.n_checkpoints ? plan.checkpoints[plan.n_checkpoints - 1] : 0;
                    size_t want =
                        prefix.n_checkpoints ? prefix.checkpoints[prefix.n_checkpoints - 1] : 0;
                    assert_true(remat__recompute_ms(p, last) == remat__recompute_ms(p, want));
                    linear_fewest_on_ties += plan.n_checkpoints == prefix.n_checkpoints;
                }
                remat_plan_clear(&plan);
                assert_int_equal(remat__prefix_ref(p, &plan, NULL), 0);
                assert_int_equal(plan.objective_value, prefix.value);
                assert_int_equal(
                    sim_value(p, REMAT_MODEL_PREFIX, plan.checkpoints, plan.n_checkpoints),
                    prefix.value);
                if (prefix.n_optimal == 1)
                    expect_set(&plan, prefix.checkpoints, prefix.n_checkpoints);
                remat_plan_clear(&plan);
                /* The definitions of A and B agree with their replays. */
                assert_int_equal(remat__sum_value(p, sum.checkpoints, sum.n_checkpoints),
                                 sum.value);
                assert_int_equal(remat__prefix_value(p, prefix.checkpoints, prefix.n_checkpoints),
                                 prefix.value);
                remat_profile_free(p);
            }
    assert_true(chains >= 2000);
    print_message("%zu chains; prefix optimum tied on %zu; on those paper-linear has the least "
                  "recompute on all, the fewest checkpoints on %zu, the canonical set on %zu\n",
                  chains, tied, linear_fewest_on_ties, linear_canonical_on_ties);
}

/* paper-linear equals the O(n^2) reference up to n = 2,000. */
static void test_linear_vs_ref(void **state)
{
    (void)state;
    const size_t sizes[] = {15, 30, 64, 100, 257, 500, 1000, 2000};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int dist = 0; dist < RANDCHAIN_N_DISTS; dist++)
            for (uint64_t seed = 1; seed <= 3; seed++) {
                struct remat_profile *p =
                    randchain_profile(seed + 1000, sizes[s], (enum randchain_dist)dist, 1);
                assert_non_null(p);
                struct remat_plan lin, ref;
                memset(&lin, 0, sizeof lin);
                memset(&ref, 0, sizeof ref);
                assert_int_equal(remat__solve_paper_linear(p, &lin, NULL), 0);
                assert_int_equal(remat__prefix_ref(p, &ref, NULL), 0);
                assert_int_equal(lin.objective_value, ref.objective_value);
                assert_int_equal(remat__prefix_value(p, lin.checkpoints, lin.n_checkpoints),
                                 lin.objective_value);
                assert_int_equal(remat__prefix_value(p, ref.checkpoints, ref.n_checkpoints),
                                 ref.objective_value);
                remat_plan_clear(&lin);
                remat_plan_clear(&ref);
                remat_profile_free(p);
            }
}

/* Every algorithm's plan, on larger chains, re-simulates to its numbers. */
static void test_every_solver_resimulates(void **state)
{
    (void)state;
    for (int alg = 0; alg < REMAT_ALG_COUNT; alg++) {
        if (alg == REMAT_ALG_MIN_TIME)
            continue; /* needs a budget: tests/mintime.mk covers it */
        for (int dist = 0; dist < RANDCHAIN_N_DISTS; dist++) {
            struct remat_profile *p = randchain_profile(77, 60, (enum randchain_dist)dist, 1);
            assert_non_null(p);
            struct remat_options o;
            remat_options_init(&o);
            o.algorithm = (enum remat_algorithm)alg;
            o.segments = 7;
            struct remat_plan plan;
            int rc = remat_solve(p, &o, &plan, NULL);
            if (rc == REMAT_EUNSUPPORTED && alg == REMAT_ALG_MIN_PEAK) {
                remat_profile_free(p);
                continue; /* not built in this tree yet */
            }
            assert_int_equal(rc, REMAT_OK);
            assert_int_equal(plan.algorithm, alg);
            assert_int_equal(plan.objective_model, remat_algorithm_model(o.algorithm));
            check_plan_numbers(p, &plan);
            json_t *j = remat_plan_to_json(p, &plan);
            assert_non_null(j);
            assert_int_equal(json_array_size(json_object_get(j, "checkpoints")),
                             plan.n_checkpoints);
            assert_int_equal(json_array_size(json_object_get(j, "segments")),
                             plan.n_checkpoints + 1);
            assert_int_equal(json_array_size(json_object_get(j, "schedule")), plan.schedule.n_ops);
            assert_int_equal(json_integer_value(json_object_get(j, "peak_bytes")), plan.peak_bytes);
            json_decref(j);
            remat_plan_clear(&plan);
            remat_profile_free(p);
        }
    }
}

/* acg and paper-cubic refuse chains their cost makes absurd. */
static void test_sum_limits(void **state)
{
    (void)state;
    const size_t big[] = {REMAT__ACG_MAX_STAGES + 1, REMAT__CUBIC_MAX_STAGES + 1};
    const enum remat_algorithm algs[] = {REMAT_ALG_ACG, REMAT_ALG_PAPER_CUBIC};
    for (size_t a = 0; a < 2; a++) {
        struct remat_profile *p = randchain_profile(5, big[a], RANDCHAIN_UNIFORM, 0);
        assert_non_null(p);
        struct remat_options o;
        remat_options_init(&o);
        o.algorithm = algs[a];
        struct remat_plan plan;
        struct remat_error err;
        assert_int_equal(remat_solve(p, &o, &plan, &err), REMAT_ELIMIT);
        assert_string_equal(err.pointer, "/stages");
        assert_null(plan.checkpoints);
        remat_profile_free(p);
    }
    /* The step budget: a long segment makes every window wide. */
    struct remat_profile *p = randchain_profile(6, 300, RANDCHAIN_POOLING, 0);
    assert_non_null(p);
    for (int cubic = 0; cubic <= 1; cubic++) {
        struct remat_plan plan;
        memset(&plan, 0, sizeof plan);
        struct remat_error err;
        assert_int_equal(remat__solve_sum_steps(p, &plan, cubic, 10000, &err), REMAT_ELIMIT);
        assert_string_equal(err.pointer, "/stages");
        assert_null(plan.checkpoints);
        assert_int_equal(remat__solve_sum_steps(p, &plan, cubic, REMAT__SUM_MAX_STEPS, &err),
                         REMAT_OK);
        assert_int_equal(plan.objective_value,
                         remat__sum_value(p, plan.checkpoints, plan.n_checkpoints));
        remat_plan_clear(&plan);
    }
    remat_profile_free(p);
}

/* Names round-trip; the objective can be asked in another model. */
static void test_names_and_models(void **state)
{
    (void)state;
    for (int a = 0; a < REMAT_ALG_COUNT; a++) {
        enum remat_algorithm back;
        assert_int_equal(
            remat_algorithm_parse(remat_algorithm_name((enum remat_algorithm)a), &back), 0);
        assert_int_equal(back, a);
    }
    enum remat_algorithm alg;
    assert_int_equal(remat_algorithm_parse("fastest", &alg), REMAT_EINVAL);
    assert_string_equal(remat_algorithm_name(REMAT_ALG_PAPER_LINEAR), "paper-linear");
    for (int m = 0; m <= REMAT_MODEL_TRACED; m++) {
        enum remat_model back;
        assert_int_equal(remat_model_parse(remat_model_name((enum remat_model)m), &back), 0);
        assert_int_equal(back, m);
    }
    enum remat_model model;
    assert_int_equal(remat_model_parse("peak", &model), REMAT_EINVAL);
    assert_int_equal(remat_algorithm_model(REMAT_ALG_SQRT), REMAT_MODEL_TRACED);
    assert_int_equal(remat_algorithm_model(REMAT_ALG_ACG), REMAT_MODEL_SUM);
    assert_string_equal(remat_strerror(REMAT_EINVAL), "invalid input");
    assert_string_equal(remat_strerror(42), "unknown error");

    const int64_t d[] = {4, 1, 4, 1, 4};
    struct remat_profile *p = chain(d, 4);
    struct remat_options o;
    remat_options_init(&o);
    o.algorithm = REMAT_ALG_PAPER_LINEAR;
    o.has_model = 1;
    o.model = REMAT_MODEL_SUM;
    struct remat_plan plan;
    assert_int_equal(remat_solve(p, &o, &plan, NULL), 0);
    /* T1: paper-linear's {3} under A: 4 + 1 + 4 + interior (1 + 4) = 14. */
    assert_int_equal(plan.objective_model, REMAT_MODEL_SUM);
    assert_int_equal(plan.objective_value, 14);
    remat_plan_clear(&plan);
    remat_profile_free(p);
}

/* The cancellation hook: a callback that says stop after `left` calls. */
struct countdown {
    int left, calls;
};

static int count_down(void *arg)
{
    struct countdown *c = arg;
    c->calls++;
    return c->left-- <= 0;
}

/* Each slow solver stops with REMAT_ECANCELED once its hook says so (after
 * 0 calls and after a few), leaves the plan empty, and solves as before
 * when the hook never does; remat_solve_memory_bound bounds min-time's
 * table by mem_slots and is refused past min-time's limits. */
static void test_cancel_and_memory_bound(void **state)
{
    (void)state;
    struct remat_profile *p = randchain_profile(11, 120, RANDCHAIN_POOLING, 0);
    assert_non_null(p);
    enum remat_algorithm algs[] = {REMAT_ALG_ACG, REMAT_ALG_PAPER_CUBIC, REMAT_ALG_MIN_TIME};
    for (size_t a = 0; a < sizeof algs / sizeof algs[0]; a++) {
        struct remat_options o;
        remat_options_init(&o);
        o.algorithm = algs[a];
        struct remat_plan base;
        struct remat_error err;
        if (algs[a] == REMAT_ALG_MIN_TIME) {
            /* A budget under store-all, so that the table is filled. */
            o.algorithm = REMAT_ALG_MIN_PEAK;
            assert_int_equal(remat_solve(p, &o, &base, &err), REMAT_OK);
            o.budget_bytes = base.peak_bytes + base.peak_bytes / 20;
            o.algorithm = REMAT_ALG_MIN_TIME;
            remat_plan_clear(&base);
        }
        assert_int_equal(remat_solve(p, &o, &base, &err), REMAT_OK);
        for (int left = 0; left <= 3; left++) {
            struct countdown c = {left, 0};
            o.cancel = count_down;
            o.cancel_arg = &c;
            struct remat_plan plan;
            assert_int_equal(remat_solve(p, &o, &plan, &err), REMAT_ECANCELED);
            assert_int_equal(c.calls, left + 1);
            assert_null(plan.checkpoints);
            assert_int_equal(plan.schedule.n_ops, 0);
        }
        struct countdown never = {1 << 30, 0};
        o.cancel_arg = &never;
        struct remat_plan plan;
        assert_int_equal(remat_solve(p, &o, &plan, &err), REMAT_OK);
        assert_true(never.calls > 3);
        assert_int_equal(plan.peak_bytes, base.peak_bytes);
        assert_int_equal(plan.n_checkpoints, base.n_checkpoints);
        remat_plan_clear(&plan);
        remat_plan_clear(&base);
    }
    assert_string_equal(remat_strerror(REMAT_ECANCELED), "canceled");

    struct remat_options o;
    remat_options_init(&o);
    int64_t small = 0, big = 0, peak = 0;
    struct remat_error err;
    assert_int_equal(remat_solve_memory_bound(p, &o, &peak, &err), REMAT_OK);
    o.algorithm = REMAT_ALG_MIN_TIME;
    o.mem_slots = 100;
    assert_int_equal(remat_solve_memory_bound(p, &o, &small, &err), REMAT_OK);
    o.mem_slots = 100000;
    assert_int_equal(remat_solve_memory_bound(p, &o, &big, &err), REMAT_OK);
    assert_true(peak > 0 && peak < small && small < big);
    /* 120 stages: 7260 cells of up to 100001 values, over the table cap. */
    assert_true(big >= REMAT_MT_MAX_TABLE_BYTES && big < REMAT_MT_MAX_TABLE_BYTES + (64 << 20));
    o.mem_slots = REMAT_MT_MAX_SLOTS + 1;
    assert_int_equal(remat_solve_memory_bound(p, &o, &big, &err), REMAT_ELIMIT);
    remat_profile_free(p);
    struct remat_profile *long_chain = randchain_profile(3, REMAT_MT_MAX_STAGES + 1, 0, 0);
    assert_non_null(long_chain);
    o.mem_slots = 0;
    assert_int_equal(remat_solve_memory_bound(long_chain, &o, &big, &err), REMAT_ELIMIT);
    remat_profile_free(long_chain);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors),
        cmocka_unit_test(test_sqrt_sets),
        cmocka_unit_test(test_random_exhaustive),
        cmocka_unit_test(test_linear_vs_ref),
        cmocka_unit_test(test_every_solver_resimulates),
        cmocka_unit_test(test_names_and_models),
        cmocka_unit_test(test_sum_limits),
        cmocka_unit_test(test_cancel_and_memory_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
