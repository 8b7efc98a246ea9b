/* test_simulate_store_all.c - remat_simulate_checkpoints answers the
 * traced store-all case (no checkpoints, no timeline) with a loop of its
 * own instead of replaying the schedule.  It must give what the replay
 * gives, to the bit: here both run on random chains of every size
 * distribution, on hand-made profiles with negative and huge byte counts
 * (overflow at the start, in the forward, at the loss and in the backward)
 * and odd times, and the answers (code, pointer, message, peak, its phase,
 * times, phase count) are compared. */
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

static int same_double(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

/* The shortcut against the replay of the store-all schedule. */
static int agree(const struct remat_profile *p)
{
    struct remat_sim fast, slow;
    struct remat_error ef, es;
    memset(&ef, 0, sizeof ef);
    memset(&es, 0, sizeof es);
    int rf = remat_simulate_checkpoints(p, REMAT_MODEL_TRACED, NULL, 0, 0, &fast, &ef);
    struct remat_schedule s;
    remat_schedule_init(&s);
    assert_int_equal(remat_schedule_from_checkpoints(p, NULL, 0, &s, NULL), REMAT_OK);
    int rs = remat_simulate(p, REMAT_MODEL_TRACED, &s, 0, &slow, &es);
    remat_schedule_clear(&s);
    assert_int_equal(rf, rs);
    if (rf != REMAT_OK) {
        assert_int_equal(ef.code, es.code);
        assert_string_equal(ef.pointer, es.pointer);
        assert_string_equal(ef.message, es.message);
        assert_int_equal(fast.peak_bytes, 0);
        return 0;
    }
    assert_int_equal(fast.peak_bytes, slow.peak_bytes);
    assert_int_equal(fast.peak_phase, slow.peak_phase);
    assert_true(same_double(fast.total_ms, slow.total_ms));
    assert_true(same_double(fast.recompute_ms, slow.recompute_ms));
    assert_int_equal(fast.n_phases, slow.n_phases);
    assert_null(fast.timeline);
    /* With a timeline asked for, the replay answers: the same figures. */
    struct remat_sim withtl;
    assert_int_equal(remat_simulate_checkpoints(p, REMAT_MODEL_TRACED, NULL, 0, 1, &withtl, NULL),
                     REMAT_OK);
    assert_int_equal(withtl.peak_bytes, fast.peak_bytes);
    assert_int_equal(withtl.peak_phase, fast.peak_phase);
    remat_sim_clear(&withtl);
    remat_sim_clear(&fast);
    remat_sim_clear(&slow);
    return 1;
}

static void random_chains(void **state)
{
    (void)state;
    int ok = 0;
    for (uint64_t seed = 1; seed <= 400; seed++) {
        size_t n = 1 + (size_t)((seed * 7919) % 300);
        struct remat_profile *p =
            randchain_profile(seed, n, (enum randchain_dist)(seed % RANDCHAIN_N_DISTS), 1);
        assert_non_null(p);
        ok += agree(p);
        remat_profile_free(p);
    }
    assert_int_equal(ok, 400);
}

/* Values for the temporaries, which the simulator only adds to the bytes
 * of one op, with a check: any, the largest included. */
static int64_t any_value(struct randchain_rng *rng)
{
    static const int64_t values[] = {-1,
                                     -5,
                                     INT64_C(1) << 60,
                                     INT64_C(1) << 61,
                                     INT64_MAX / 4,
                                     INT64_MAX / 2,
                                     INT64_MAX - 3,
                                     INT64_MAX};
    if (randchain_below(rng, 4) != 0)
        return (int64_t)randchain_below(rng, 100000);
    return values[randchain_below(rng, sizeof values / sizeof values[0])];
}

/* Values for the bytes that stay live (out, saved and param bytes, and at
 * most 2^61 for the input): small negatives and up to 2^56.  A backward
 * step subtracts without a check right after adding with one, so a replay
 * whose live bytes could pass 2^63 there is undefined in C whichever loop
 * runs it; these keep them below 2^62.  overflow_at_each_op overflows the
 * live bytes where nothing follows unchecked. */
static int64_t held_value(struct randchain_rng *rng)
{
    static const int64_t values[] = {-1, -5, 0, INT64_C(1) << 50, INT64_C(1) << 56};
    if (randchain_below(rng, 4) != 0)
        return (int64_t)randchain_below(rng, 100000);
    return values[randchain_below(rng, sizeof values / sizeof values[0])];
}

/* A profile of n stages, never validated: the simulator's own checks are
 * what is compared. */
static struct remat_profile *odd_profile(struct randchain_rng *rng, size_t n)
{
    struct remat_profile *p = remat_profile_new(n, NULL);
    assert_non_null(p);
    p->input_bytes = randchain_below(rng, 3) != 0 ? held_value(rng) : INT64_C(1) << 61;
    for (size_t i = 0; i < n; i++) {
        struct remat_stage *s = &p->stages[i];
        s->out_bytes = held_value(rng);
        s->saved_bytes = held_value(rng);
        s->fwd_tmp_bytes = any_value(rng);
        s->fwd_grad_tmp_bytes = any_value(rng);
        s->bwd_tmp_bytes = any_value(rng);
        s->bwd_freed_bytes = randchain_below(rng, 2) != 0 ? 0 : any_value(rng);
        s->param_bytes =
            randchain_below(rng, 8) != 0 ? (int64_t)randchain_below(rng, 1000) : held_value(rng);
        s->fwd_ms = (double)randchain_below(rng, 1000) / 7.0;
        s->bwd_ms = randchain_below(rng, 50) != 0 ? (double)randchain_below(rng, 1000) / 3.0 : -0.0;
    }
    return p;
}

static void odd_profiles(void **state)
{
    (void)state;
    struct randchain_rng rng;
    randchain_seed(&rng, 99);
    int ok = 0, refused = 0;
    for (int k = 0; k < 3000; k++) {
        struct remat_profile *p = odd_profile(&rng, 1 + (size_t)randchain_below(&rng, 12));
        if (agree(p))
            ok++;
        else
            refused++;
        remat_profile_free(p);
    }
    /* Both outcomes, often: the overflow paths are compared too. */
    assert_true(ok > 300);
    assert_true(refused > 300);
}

/* Both simulators agree on p, and store-all's simulation of it stops with
 * REMAT_ELIMIT naming op `op` of the schedule.  Frees p. */
static void overflows_at(struct remat_profile *p, size_t op)
{
    assert_int_equal(agree(p), 0);
    struct remat_sim sim;
    struct remat_error err;
    assert_int_equal(remat_simulate_checkpoints(p, REMAT_MODEL_TRACED, NULL, 0, 0, &sim, &err),
                     REMAT_ELIMIT);
    char want[64];
    snprintf(want, sizeof want, "/schedule/%zu", op);
    assert_string_equal(err.pointer, want);
    remat_profile_free(p);
}

/* Overflow placed at each op of the schedule in turn: before the first
 * (the weights), in each forward, at the loss and in each backward. */
static void overflow_at_each_op(void **state)
{
    (void)state;
    const size_t n = 5;
    for (size_t op = 0; op <= 2 * n; op++) {
        struct remat_profile *p = remat_profile_new(n, NULL);
        assert_non_null(p);
        p->input_bytes = INT64_MAX - 1000;
        for (size_t i = 0; i < n; i++) {
            struct remat_stage *s = &p->stages[i];
            s->fwd_ms = 1.5;
            s->bwd_ms = 2.5;
        }
        if (op < n)
            p->stages[op].fwd_grad_tmp_bytes = 2000; /* F_all(op + 1) */
        else if (op == n)
            p->stages[n - 1].out_bytes = 2000; /* the loss adds x_n's gradient */
        else
            p->stages[2 * n - op].bwd_tmp_bytes = 2000; /* B(2n + 1 - op) */
        overflows_at(p, op);
    }
    /* The live bytes themselves past 2^63: in the weights before the first
     * op (reported at op 0), and in the saved bytes of a forward. */
    for (size_t op = 0; op <= n; op++) {
        struct remat_profile *p = remat_profile_new(n, NULL);
        assert_non_null(p);
        p->input_bytes = INT64_MAX - 1000;
        if (op == n)
            p->stages[2].param_bytes = 2000;
        else
            p->stages[op].saved_bytes = 2000;
        overflows_at(p, op == n ? 0 : op);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(random_chains),
        cmocka_unit_test(odd_profiles),
        cmocka_unit_test(overflow_at_each_op),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
