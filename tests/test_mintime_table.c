/*
 * test_mintime_table.c - the min-time table's fills against each other:
 * the pruned fill against Rotor's full one, the periodic sharing against
 * the plain table (random stacks of repeated blocks), the table over runs
 * and the part fills against the whole table.  Every schedule a table
 * gives is simulated: it fits the budget its m stands for and takes the
 * table's time.  test_mintime.c holds the solver to every persistent
 * schedule of tiny chains.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mintime_help.h"
#include "randchain.h"
#include "solve_mintime.h"

/* The pruned table holds exactly Rotor's full table wherever it stores a
 * value; the least-peak DP agrees with the table's first finite entry. */
static void test_pruned_equals_full(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 6; seed++) {
        size_t n = 6 + (size_t)seed * 3;
        struct remat_profile *p = big_chain(seed, n);
        int64_t sa = store_all_peak(p, NULL);
        int64_t least;
        assert_int_equal(remat__mt_min_peak(p, &least, NULL, NULL), 0);
        struct remat__mt *a = NULL, *b = NULL, *c = NULL;
        assert_int_equal(remat__mt_fill(p, sa, 97, 1, &a, NULL), 0);
        assert_int_equal(remat__mt_fill(p, sa, 97, 0, &b, NULL), 0);
        assert_int_equal(remat__mt_fill(p, sa, 97, 2, &c, NULL), 0);
        assert_int_equal(remat__mt_top(a), remat__mt_top(b));
        assert_int_equal(remat__mt_top(a), remat__mt_top(c));
        assert_true(remat__mt_table_bytes(a) < remat__mt_table_bytes(b));
        assert_int_equal(remat__mt_table_bytes(b), remat__mt_table_bytes(c));
        size_t finite = 0;
        for (size_t m = 0; m <= remat__mt_top(a); m++) {
            double x = remat__mt_time(a, m), y = remat__mt_time(b, m), z = remat__mt_time(c, m);
            if (y == HUGE_VAL) {
                assert_true(x == HUGE_VAL);
                assert_true(z == HUGE_VAL);
                continue;
            }
            finite++;
            assert_true(fabs(x - y) <= 1e-9 * y);
            assert_true(fabs(z - y) <= 1e-9 * y);
            assert_true(remat__mt_budget_at(a, m) >= least);
            /* The schedule behind each value takes that time and fits. */
            struct remat_schedule s;
            remat_schedule_init(&s);
            assert_int_equal(remat__mt_schedule(a, m, &s), 0);
            struct remat_sim sim;
            memset(&sim, 0, sizeof sim);
            assert_int_equal(remat_simulate(p, REMAT_MODEL_TRACED, &s, 0, &sim, NULL), 0);
            assert_true(sim.peak_bytes <= remat__mt_budget_at(a, m));
            assert_true(fabs(sim.total_ms - x) <= 1e-9 * x);
            remat_sim_clear(&sim);
            remat_schedule_clear(&s);
        }
        assert_true(finite > 10);
        remat__mt_free(a);
        remat__mt_free(b);
        remat__mt_free(c);
        remat_profile_free(p);
    }
}

/* A stack of repeated blocks (random blocks, random prefix and suffix):
 * the shared fill (remat__mt_period found) holds the plain fill's values,
 * the same doubles, at every m, with the same schedules, each fitting its
 * budget in the simulator; the least peak and its schedule are the plain
 * recursion's; both agree with Rotor's full fill.  Budgets at store-all
 * and halfway down to the least peak, one-byte units on the smaller ones. */
static void test_periodic_equals_plain(void **state)
{
    (void)state;
    size_t shared = 0, compared = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        struct randchain_rng r;
        randchain_seed(&r, seed * 7919);
        size_t pre = randchain_below(&r, 3), block = 1 + randchain_below(&r, 4);
        size_t k = 5 + randchain_below(&r, 8), post = randchain_below(&r, 3);
        struct remat_profile *p = randchain_stack(seed, pre, block, k, post,
                                                  (enum randchain_dist)(seed % RANDCHAIN_N_DISTS));
        assert_non_null(p);
        int64_t least_a, least_b;
        struct remat_schedule la, lb;
        remat_schedule_init(&la);
        remat_schedule_init(&lb);
        assert_int_equal(remat__mt_min_peak_share(p, 1, &least_a, &la, NULL, NULL), 0);
        assert_int_equal(remat__mt_min_peak_share(p, 0, &least_b, &lb, NULL, NULL), 0);
        assert_true(least_a == least_b);
        assert_same_ops(&la, &lb);
        remat_schedule_clear(&la);
        remat_schedule_clear(&lb);
        int64_t sa = store_all_peak(p, NULL);
        for (int b = 0; b < 2; b++) {
            int64_t budget = b == 0 ? sa : least_a + (sa - least_a) / 2;
            size_t slots = seed % 2 && budget < 4000 ? (size_t)budget : 97;
            struct remat__mt *a = NULL, *w = NULL, *f = NULL;
            assert_int_equal(remat__mt_fill(p, budget, slots, 1, &a, NULL), 0);
            assert_int_equal(remat__mt_fill(p, budget, slots, 3, &w, NULL), 0);
            assert_int_equal(remat__mt_fill(p, budget, slots, 0, &f, NULL), 0);
            assert_int_equal(remat__mt_period(w), 0);
            if (remat__mt_period(a) != 0) {
                shared++;
                assert_true(remat__mt_table_bytes(a) <= remat__mt_table_bytes(w));
            }
            for (size_t m = 0; m <= remat__mt_top(a); m++) {
                double x = remat__mt_time(a, m), y = remat__mt_time(w, m);
                double z = remat__mt_time(f, m);
                assert_true(x == y);
                assert_true(z == HUGE_VAL ? x == HUGE_VAL : fabs(x - z) <= 1e-9 * z);
                if (x == HUGE_VAL)
                    continue;
                struct remat_schedule sa_, sw;
                remat_schedule_init(&sa_);
                remat_schedule_init(&sw);
                assert_int_equal(remat__mt_schedule(a, m, &sa_), 0);
                assert_int_equal(remat__mt_schedule(w, m, &sw), 0);
                assert_same_ops(&sa_, &sw);
                struct remat_sim sim;
                memset(&sim, 0, sizeof sim);
                assert_int_equal(remat_simulate(p, REMAT_MODEL_TRACED, &sa_, 0, &sim, NULL), 0);
                assert_true(sim.peak_bytes <= remat__mt_budget_at(a, m));
                assert_true(fabs(sim.total_ms - x) <= 1e-9 * x);
                remat_sim_clear(&sim);
                remat_schedule_clear(&sa_);
                remat_schedule_clear(&sw);
                compared++;
            }
            remat__mt_free(a);
            remat__mt_free(w);
            remat__mt_free(f);
            /* The solver (both fills, the walk, the least-peak backstop)
             * gives the same plan with and without the sharing. */
            struct remat_options o;
            remat_options_init(&o);
            o.algorithm = REMAT_ALG_MIN_TIME;
            o.budget_bytes = budget;
            o.mem_slots = slots;
            struct remat_plan pa, pw;
            assert_int_equal(remat__solve_min_time_share(p, &o, 1, &pa, NULL), 0);
            assert_int_equal(remat__solve_min_time_share(p, &o, 0, &pw, NULL), 0);
            assert_true(pa.total_ms == pw.total_ms);
            assert_true(pa.peak_bytes == pw.peak_bytes && pa.peak_bytes <= budget);
            assert_same_ops(&pa.schedule, &pw.schedule);
            remat_plan_clear(&pa);
            remat_plan_clear(&pw);
        }
        remat_profile_free(p);
    }
    /* Most of these stacks are periodic enough to share. */
    assert_true(shared >= 40);
    assert_true(compared > 1000);
}

/* The table over runs of stages (remat__mt_fill_groups): with runs of one
 * stage it is the plain table, value for value and schedule for schedule;
 * with longer runs and one-byte units (no rounding) it searches a subset of
 * the schedules, so it is never faster; every schedule it gives is one of
 * the profile's that fits its budget in the simulator and takes its time.
 * The least peak over the runs is at or over the plain one, and reached. */
static void test_groups(void **state)
{
    (void)state;
    size_t compared = 0;
    for (uint64_t seed = 1; seed <= 30; seed++) {
        size_t n = 4 + (size_t)(seed % 9);
        struct remat_profile *p =
            randchain_profile(seed, n, (enum randchain_dist)(seed % RANDCHAIN_N_DISTS), 1);
        assert_non_null(p);
        int64_t least;
        assert_int_equal(remat__mt_min_peak(p, &least, NULL, NULL), 0);
        size_t ends[16], g = 0, one[16];
        struct randchain_rng r;
        randchain_seed(&r, seed);
        ends[0] = one[0] = 0;
        for (size_t k = 1; k <= n; k++)
            one[k] = k;
        while (ends[g] < n) {
            size_t len = 1 + randchain_below(&r, 3);
            ends[g + 1] = ends[g] + len > n ? n : ends[g] + len;
            g++;
        }
        int64_t gl;
        struct remat_schedule ls;
        remat_schedule_init(&ls);
        assert_int_equal(remat__mt_min_peak_groups(p, ends, g, &gl, &ls, NULL, NULL), 0);
        assert_true(gl >= least);
        struct remat_sim sim;
        memset(&sim, 0, sizeof sim);
        assert_int_equal(remat_simulate(p, REMAT_MODEL_TRACED, &ls, 0, &sim, NULL), 0);
        assert_true(sim.peak_bytes == gl);
        remat_sim_clear(&sim);
        remat_schedule_clear(&ls);
        int64_t sa = store_all_peak(p, NULL);
        int64_t budget = sa - (sa - least) / 3;
        int64_t base = p->input_bytes + p->optimizer.state_bytes;
        for (size_t k = 0; k < n; k++)
            base += p->stages[k].param_bytes;
        /* One byte a unit where that is small enough. */
        size_t slots = budget - base <= 20000 ? (size_t)(budget - base) : 97;
        struct remat__mt *w = NULL, *a = NULL, *b = NULL;
        assert_int_equal(remat__mt_fill(p, budget, slots, 1, &w, NULL), 0);
        assert_int_equal(
            remat__mt_fill_groups(p, one, n, budget, slots, HUGE_VAL, 0, NULL, &a, NULL), 0);
        assert_int_equal(
            remat__mt_fill_groups(p, ends, g, budget, slots, HUGE_VAL, 0, NULL, &b, NULL), 0);
        int unit_one = remat__mt_unit(w) == 1;
        for (size_t m = 0; m <= remat__mt_top(w); m++) {
            double x = remat__mt_time(w, m), y = remat__mt_time(a, m), z = remat__mt_time(b, m);
            assert_true(x == y);
            if (unit_one)
                assert_true(z >= x);
            if (z == HUGE_VAL)
                continue;
            struct remat_schedule sw, sa_, sb;
            remat_schedule_init(&sw);
            remat_schedule_init(&sa_);
            remat_schedule_init(&sb);
            if (x != HUGE_VAL) {
                assert_int_equal(remat__mt_schedule(w, m, &sw), 0);
                assert_int_equal(remat__mt_schedule(a, m, &sa_), 0);
                assert_same_ops(&sw, &sa_);
            }
            assert_int_equal(remat__mt_schedule(b, m, &sb), 0);
            memset(&sim, 0, sizeof sim);
            assert_int_equal(remat_simulate(p, REMAT_MODEL_TRACED, &sb, 0, &sim, NULL), 0);
            assert_true(sim.peak_bytes <= remat__mt_budget_at(b, m));
            assert_true(fabs(sim.total_ms - z) <= 1e-9 * z);
            remat_sim_clear(&sim);
            remat_schedule_clear(&sw);
            remat_schedule_clear(&sa_);
            remat_schedule_clear(&sb);
            compared++;
        }
        remat__mt_free(w);
        remat__mt_free(a);
        remat__mt_free(b);
        remat_profile_free(p);
    }
    assert_true(compared > 500);
}

/* The part fill (remat__mt_fill_capped) against the whole table: from its
 * exact_from up, every time under the cap and its schedule are the whole
 * table's, op for op; the times at or over the cap read no lower.  Caps at
 * a few of the table's own times and roots from the bottom to the top. */
static void test_part_fill_equals_whole(void **state)
{
    (void)state;
    size_t compared = 0, over = 0;
    for (uint64_t seed = 1; seed <= 8; seed++) {
        size_t n = 5 + (size_t)seed * 4;
        struct remat_profile *p = big_chain(seed + 900, n);
        int64_t sa = store_all_peak(p, NULL);
        size_t slots = seed % 2 ? 97 : 300;
        struct remat__mt *w = NULL;
        assert_int_equal(remat__mt_fill(p, sa, slots, 1, &w, NULL), 0);
        size_t top = remat__mt_top(w);
        for (int k = 0; k < 4; k++) {
            /* The cap at the time of a quarter of the way up, or none. */
            double cap = k == 3 ? HUGE_VAL : remat__mt_time(w, top * (size_t)(k + 1) / 4);
            int64_t root = remat__mt_budget_at(w, top * (size_t)k / 3);
            struct remat__mt *t = NULL;
            assert_int_equal(remat__mt_fill_capped(p, sa, slots, 1, cap, root, NULL, &t, NULL), 0);
            assert_int_equal(remat__mt_top(t), top);
            assert_true(remat__mt_table_bytes(t) <= remat__mt_table_bytes(w));
            size_t from = remat__mt_exact_from(t);
            assert_true(from <= top * (size_t)k / 3);
            for (size_t m = from; m <= top; m++) {
                double x = remat__mt_time(t, m), y = remat__mt_time(w, m);
                if (!(y < cap)) {
                    assert_true(x >= y);
                    over++;
                    continue;
                }
                assert_true(x == y);
                if (y == HUGE_VAL)
                    continue;
                struct remat_schedule a, b;
                remat_schedule_init(&a);
                remat_schedule_init(&b);
                assert_int_equal(remat__mt_schedule(t, m, &a), 0);
                assert_int_equal(remat__mt_schedule(w, m, &b), 0);
                assert_int_equal(a.n_ops, b.n_ops);
                for (size_t o = 0; o < a.n_ops; o++) {
                    assert_int_equal(a.ops[o].kind, b.ops[o].kind);
                    assert_int_equal(a.ops[o].stage, b.ops[o].stage);
                }
                remat_schedule_clear(&a);
                remat_schedule_clear(&b);
                compared++;
            }
            remat__mt_free(t);
        }
        remat__mt_free(w);
        remat_profile_free(p);
    }
    assert_true(compared > 1000);
    assert_true(over > 100);
}

/* A stack: a tiny random chain of pre + block + post stages, its block
 * repeated k times between the first pre and the last post stages (an
 * embedding and a head).  Times are quarter milliseconds, so every sum is
 * exact in double and Rotor's full fill is compared with ==.  New. */
static struct remat_profile *tiny_stack(uint64_t seed, size_t pre, size_t block, size_t k,
                                        size_t post)
{
    struct remat_profile *src = tiny_chain(seed, pre + block + post, 1);
    struct remat_profile *p = remat_profile_new(pre + block * k + post, NULL);
    assert_non_null(p);
    p->input_bytes = src->input_bytes;
    size_t o = 0;
    for (size_t s = 0; s < pre; s++)
        p->stages[o++] = src->stages[s];
    for (size_t c = 0; c < k; c++)
        for (size_t s = 0; s < block; s++)
            p->stages[o++] = src->stages[pre + s];
    for (size_t s = 0; s < post; s++)
        p->stages[o++] = src->stages[pre + block + s];
    remat_profile_free(src);
    return p;
}

/* Random stacks, k from 1 to 12 copies of a block of 1-5 stages between a
 * random first part and a random last part of 0-2 stages each: at
 * store-all, halfway to the least peak and near it (one-byte units where
 * the budget is small), the shared fill's value at every m is the plain
 * table's and Rotor's full fill's (==), its schedule is the plain table's
 * op for op and, simulated, fits the budget of that m and takes that
 * time; the solver's plan is the same with and without the sharing. */
static void test_random_stacks(void **state)
{
    (void)state;
    size_t shared = 0, compared = 0, seen_k[13] = {0};
    for (uint64_t seed = 1; seed <= 48; seed++) {
        struct randchain_rng r;
        randchain_seed(&r, seed * 104729);
        size_t pre = randchain_below(&r, 3), post = randchain_below(&r, 3);
        size_t block = 1 + randchain_below(&r, 5), k = 1 + (size_t)(seed - 1) % 12;
        seen_k[k]++;
        struct remat_profile *p = tiny_stack(seed, pre, block, k, post);
        int64_t least = 0, sa = store_all_peak(p, NULL);
        assert_int_equal(remat__mt_min_peak(p, &least, NULL, NULL), 0);
        for (int b = 0; b < 3; b++) {
            int64_t budget = b == 0   ? sa
                             : b == 1 ? least + (sa - least) / 2
                                      : least + (sa - least) / 8;
            size_t slots = budget < 300 ? (size_t)budget : 61;
            struct remat__mt *a = NULL, *w = NULL, *f = NULL;
            assert_int_equal(remat__mt_fill(p, budget, slots, 1, &a, NULL), 0);
            assert_int_equal(remat__mt_fill(p, budget, slots, 3, &w, NULL), 0);
            assert_int_equal(remat__mt_fill(p, budget, slots, 0, &f, NULL), 0);
            shared += remat__mt_period(a) != 0;
            for (size_t m = 0; m <= remat__mt_top(a); m++) {
                double x = remat__mt_time(a, m);
                assert_true(x == remat__mt_time(w, m));
                assert_true(x == remat__mt_time(f, m));
                if (x == HUGE_VAL)
                    continue;
                struct remat_schedule sa_, sw;
                remat_schedule_init(&sa_);
                remat_schedule_init(&sw);
                assert_int_equal(remat__mt_schedule(a, m, &sa_), 0);
                assert_int_equal(remat__mt_schedule(w, m, &sw), 0);
                assert_same_ops(&sa_, &sw);
                struct remat_sim sim;
                memset(&sim, 0, sizeof sim);
                assert_int_equal(remat_simulate(p, REMAT_MODEL_TRACED, &sa_, 0, &sim, NULL), 0);
                assert_true(sim.peak_bytes <= remat__mt_budget_at(a, m));
                assert_true(sim.total_ms == x);
                remat_sim_clear(&sim);
                remat_schedule_clear(&sa_);
                remat_schedule_clear(&sw);
                compared++;
            }
            remat__mt_free(a);
            remat__mt_free(w);
            remat__mt_free(f);
            struct remat_options o;
            remat_options_init(&o);
            o.algorithm = REMAT_ALG_MIN_TIME;
            o.budget_bytes = budget;
            o.mem_slots = slots;
            struct remat_plan pa, pw;
            assert_int_equal(remat__solve_min_time_share(p, &o, 1, &pa, NULL), 0);
            assert_int_equal(remat__solve_min_time_share(p, &o, 0, &pw, NULL), 0);
            check_plan(p, &pa, budget);
            assert_true(pa.total_ms == pw.total_ms);
            assert_same_ops(&pa.schedule, &pw.schedule);
            remat_plan_clear(&pa);
            remat_plan_clear(&pw);
        }
        remat_profile_free(p);
    }
    for (size_t k = 1; k <= 12; k++)
        assert_int_equal(seen_k[k], 4);
    /* Two copies of a block already share cells; most stacks here do. */
    assert_true(shared >= 48 * 3 / 2);
    assert_true(compared > 2000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pruned_equals_full),
        cmocka_unit_test(test_part_fill_equals_whole),
        cmocka_unit_test(test_periodic_equals_plain),
        cmocka_unit_test(test_random_stacks),
        cmocka_unit_test(test_groups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
