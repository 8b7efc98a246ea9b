/*
 * mintime_help.c - what the min-time test programs share: seeded random
 * chains (tiny ones for the exhaustive search, bigger ones for the
 * rounding) and the checks of a plan against the simulator.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "mintime_help.h"

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int64_t rng_in(uint64_t *s, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rng_next(s) % (uint64_t)(hi - lo + 1));
}

/* A block's refinements, from a stream of their own (so the other fields
 * are drawn as before): the forward with grad's transient equal to, below
 * or above the one without, and half the time a backward that frees part
 * of x̄_i and δ_i before its peak (often a negative net transient). */
static void refine(uint64_t *s, struct remat_stage *st)
{
    int64_t f = st->fwd_tmp_bytes;
    int64_t k = rng_in(s, 0, 3);
    st->fwd_grad_tmp_bytes = k == 0   ? rng_in(s, 0, f)
                             : k == 1 ? rng_in(s, 0, f + st->out_bytes)
                                      : f;
    st->bwd_freed_bytes = rng_in(s, 0, 1) ? rng_in(s, 0, st->saved_bytes + st->out_bytes) : 0;
}

/* A chain whose every field is a small random integer (scale multiplies the
 * byte sizes), times in quarter milliseconds. */
struct remat_profile *tiny_chain(uint64_t seed, size_t n, int64_t scale)
{
    struct remat_profile *p = remat_profile_new(n, NULL);
    assert_non_null(p);
    uint64_t s = seed * 7919 + n, s2 = s ^ 0x5eedull;
    p->input_bytes = rng_in(&s, 1, 6) * scale;
    for (size_t i = 0; i < n; i++) {
        struct remat_stage *st = &p->stages[i];
        st->out_bytes = rng_in(&s, 0, 8) * scale;
        st->saved_bytes = st->out_bytes + rng_in(&s, 0, 6) * scale;
        st->fwd_tmp_bytes = rng_in(&s, 0, 3) * scale;
        st->bwd_tmp_bytes = rng_in(&s, 0, 4) * scale;
        st->param_bytes = rng_in(&s, 0, 2) * scale;
        st->fwd_ms = (double)rng_in(&s, 1, 12) / 4.0;
        st->bwd_ms = (double)rng_in(&s, 1, 16) / 4.0;
        refine(&s2, st);
    }
    return p;
}

/* A chain with bigger random sizes, for the rounding checks. */
struct remat_profile *big_chain(uint64_t seed, size_t n)
{
    struct remat_profile *p = remat_profile_new(n, NULL);
    assert_non_null(p);
    uint64_t s = seed * 104729 + n, s2 = s ^ 0x5eedull;
    p->input_bytes = rng_in(&s, 1000, 50000);
    for (size_t i = 0; i < n; i++) {
        struct remat_stage *st = &p->stages[i];
        st->out_bytes = rng_in(&s, 1000, 400000);
        st->saved_bytes = st->out_bytes + rng_in(&s, 0, 600000);
        st->fwd_tmp_bytes = rng_in(&s, 0, 200000);
        st->bwd_tmp_bytes = rng_in(&s, 0, 300000);
        st->param_bytes = rng_in(&s, 0, 100000);
        st->fwd_ms = (double)rng_in(&s, 1, 40) / 4.0;
        st->bwd_ms = (double)rng_in(&s, 1, 80) / 4.0;
        refine(&s2, st);
    }
    return p;
}

int64_t store_all_peak(const struct remat_profile *p, double *time)
{
    struct remat_sim sim;
    memset(&sim, 0, sizeof sim);
    size_t none = 0;
    assert_int_equal(remat_simulate_checkpoints(p, REMAT_MODEL_TRACED, &none, 0, 0, &sim, NULL), 0);
    if (time != NULL)
        *time = sim.total_ms;
    int64_t v = sim.peak_bytes;
    remat_sim_clear(&sim);
    return v;
}

/* Op by op (struct remat_op has padding, so no memcmp). */
void assert_same_ops(const struct remat_schedule *a, const struct remat_schedule *b)
{
    assert_int_equal(a->n_ops, b->n_ops);
    for (size_t k = 0; k < a->n_ops; k++) {
        assert_int_equal(a->ops[k].kind, b->ops[k].kind);
        assert_int_equal(a->ops[k].stage, b->ops[k].stage);
    }
}

/* Re-simulates a plan and checks every field the solver filled. */
void check_plan(const struct remat_profile *p, const struct remat_plan *plan, int64_t budget)
{
    struct remat_sim sim;
    memset(&sim, 0, sizeof sim);
    assert_int_equal(remat_simulate(p, REMAT_MODEL_TRACED, &plan->schedule, 0, &sim, NULL), 0);
    assert_int_equal(sim.peak_bytes, plan->peak_bytes);
    assert_true(sim.total_ms == plan->total_ms);
    assert_true(sim.recompute_ms == plan->recompute_ms);
    remat_sim_clear(&sim);
    if (budget > 0)
        assert_true(plan->peak_bytes <= budget);
    assert_int_equal(plan->algorithm, REMAT_ALG_MIN_TIME);
    assert_int_equal(plan->n_stages, p->n_stages);
    assert_int_equal(plan->objective_model, REMAT_MODEL_TRACED);
    assert_int_equal(plan->objective_value, plan->peak_bytes);
    assert_int_equal(plan->store_all_peak_bytes, store_all_peak(p, NULL));
    assert_int_equal(plan->budget_bytes, budget);
    if (plan->single_level) {
        /* The checkpoints give back exactly this schedule. */
        struct remat_schedule ref;
        remat_schedule_init(&ref);
        size_t none = 0;
        assert_int_equal(
            remat_schedule_from_checkpoints(p, plan->n_checkpoints ? plan->checkpoints : &none,
                                            plan->n_checkpoints, &ref, NULL),
            0);
        assert_same_ops(&ref, &plan->schedule);
        remat_schedule_clear(&ref);
    } else {
        assert_int_equal(plan->n_checkpoints, 0);
    }
}

int solve(const struct remat_profile *p, int64_t budget, size_t slots, struct remat_plan *plan)
{
    struct remat_options o;
    remat_options_init(&o);
    o.algorithm = REMAT_ALG_MIN_TIME;
    o.budget_bytes = budget;
    o.mem_slots = slots;
    memset(plan, 0, sizeof *plan);
    struct remat_error err;
    return remat_solve(p, &o, plan, &err);
}
