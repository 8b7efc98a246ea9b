/*
 * solve_mintime.c - the fastest persistent multi-level schedule under a byte
 * budget: the least-peak test (solve_mintime_least.c), the table filled at
 * the budget (solve_mintime_table.c), the walk of the store-all table for a
 * faster schedule the units' rounding hid, and the plan made from the
 * answer.  docs/min-time.md gives the whole of it.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "solve_mintime.h"

/* Sets plan->checkpoints and single_level = 1 when the schedule is exactly
 * the single-level schedule of some checkpoint set: the candidates are the
 * inputs kept by F_ck (stage 1's input x_0 is not a checkpoint). */
static int find_single_level(const struct remat_profile *p, struct remat_plan *plan,
                             struct remat_error *err)
{
    size_t n = p->n_stages;
    const struct remat_schedule *s = &plan->schedule;
    unsigned char *mark = calloc(n + 1, 1);
    size_t *cks = malloc((n + 1) * sizeof(size_t));
    if (mark == NULL || cks == NULL) {
        free(mark);
        free(cks);
        return remat__error(err, REMAT_ENOMEM, "", "out of memory");
    }
    for (size_t k = 0; k < s->n_ops; k++)
        if (s->ops[k].kind == REMAT_OP_F_CK && s->ops[k].stage >= 2 && s->ops[k].stage <= n)
            mark[s->ops[k].stage - 1] = 1;
    size_t nc = 0;
    for (size_t c = 1; c < n; c++)
        if (mark[c])
            cks[nc++] = c;
    free(mark);
    struct remat_schedule ref;
    remat_schedule_init(&ref);
    int rc = remat_schedule_from_checkpoints(p, cks, nc, &ref, err);
    if (rc != REMAT_OK) {
        free(cks);
        return rc;
    }
    int same = ref.n_ops == s->n_ops;
    for (size_t k = 0; same && k < s->n_ops; k++)
        same = ref.ops[k].kind == s->ops[k].kind && ref.ops[k].stage == s->ops[k].stage;
    remat_schedule_clear(&ref);
    if (same) {
        plan->single_level = 1;
        plan->n_checkpoints = nc;
        plan->checkpoints = cks;
    } else {
        plan->single_level = 0;
        plan->n_checkpoints = 0;
        plan->checkpoints = NULL;
        free(cks);
    }
    return REMAT_OK;
}

int remat__mt_plan_from_schedule(const struct remat_profile *p, struct remat_schedule *schedule,
                                 int64_t budget_bytes, struct remat_plan *plan,
                                 struct remat_error *err)
{
    memset(plan, 0, sizeof *plan);
    plan->algorithm = REMAT_ALG_MIN_TIME;
    plan->n_stages = p->n_stages;
    plan->schedule = *schedule;
    remat_schedule_init(schedule);
    plan->budget_bytes = budget_bytes;
    struct remat_sim sim;
    memset(&sim, 0, sizeof sim);
    int rc = remat_simulate(p, REMAT_MODEL_TRACED, &plan->schedule, 0, &sim, err);
    if (rc != REMAT_OK) {
        remat_plan_clear(plan);
        return rc;
    }
    plan->peak_bytes = sim.peak_bytes;
    plan->total_ms = sim.total_ms;
    plan->recompute_ms = sim.recompute_ms;
    remat_sim_clear(&sim);
    plan->objective_model = REMAT_MODEL_TRACED;
    plan->objective_value = plan->peak_bytes;
    size_t none = 0;
    memset(&sim, 0, sizeof sim);
    rc = remat_simulate_checkpoints(p, REMAT_MODEL_TRACED, &none, 0, 0, &sim, err);
    if (rc != REMAT_OK) {
        remat_plan_clear(plan);
        return rc;
    }
    plan->store_all_peak_bytes = sim.peak_bytes;
    remat_sim_clear(&sim);
    rc = find_single_level(p, plan, err);
    if (rc != REMAT_OK) {
        remat_plan_clear(plan);
        return rc;
    }
    return REMAT_OK;
}

static int store_all_schedule(const struct remat_profile *p, struct remat_schedule *s,
                              struct remat_error *err)
{
    size_t none = 0;
    return remat_schedule_from_checkpoints(p, &none, 0, s, err);
}

static int report_model(const struct remat_profile *p, const struct remat_options *opts,
                        struct remat_plan *plan, struct remat_error *err)
{
    if (!opts->has_model || opts->model == REMAT_MODEL_TRACED)
        return REMAT_OK;
    struct remat_sim sim;
    memset(&sim, 0, sizeof sim);
    int rc;
    if (opts->model == REMAT_MODEL_SUM) {
        if (!plan->single_level)
            return remat__error(err, REMAT_EUNSUPPORTED, "/model",
                                "the sum model is defined on checkpoint sets, and this "
                                "min-time schedule is nested");
        size_t none = 0;
        rc = remat_simulate_checkpoints(p, REMAT_MODEL_SUM,
                                        plan->n_checkpoints ? plan->checkpoints : &none,
                                        plan->n_checkpoints, 0, &sim, err);
    } else {
        rc = remat_simulate(p, opts->model, &plan->schedule, 0, &sim, err);
    }
    if (rc != REMAT_OK)
        return rc;
    plan->objective_model = opts->model;
    plan->objective_value = sim.peak_bytes;
    remat_sim_clear(&sim);
    return REMAT_OK;
}

/* One walk of the store-all table t: 1 when it would read a value below
 * remat__mt_exact_from(t) (the caller fills the whole table and walks
 * again), else 0 with *best replaced when a faster schedule fits, or
 * negative. */
static int walk_store_all_table(const struct remat_profile *p, const struct remat__mt *t,
                                int64_t budget, double have, struct remat_schedule *best,
                                struct remat_error *err)
{
    struct remat_sim sim;
    struct remat_schedule s;
    remat_schedule_init(&s);
    size_t top = remat__mt_top(t), exact = remat__mt_exact_from(t);
    int rc = REMAT_OK;
    for (size_t m = top + 1; m-- > 0 && rc == REMAT_OK;) {
        if (m < exact || (m > 0 && m - 1 < exact)) {
            rc = 1;
            break;
        }
        double v = remat__mt_time(t, m);
        if (!(v < have))
            break; /* the times only grow below: nothing faster is left */
        if (m > 0 && !(remat__mt_time(t, m - 1) > v))
            continue; /* not a step: the same schedule as below */
        rc = remat__mt_schedule(t, m, &s);
        if (rc != REMAT_OK) {
            rc = remat__error(err, rc, "", "rebuilding a schedule failed");
            break;
        }
        memset(&sim, 0, sizeof sim);
        rc = remat_simulate(p, REMAT_MODEL_TRACED, &s, 0, &sim, err);
        if (rc != REMAT_OK)
            break;
        int fits = sim.peak_bytes <= budget && sim.total_ms < have;
        remat_sim_clear(&sim);
        if (fits) {
            remat_schedule_clear(best);
            *best = s;
            remat_schedule_init(&s);
            break;
        }
        remat_schedule_clear(&s);
    }
    remat_schedule_clear(&s);
    return rc;
}

/* The units' rounding can hide a faster schedule that fits: at VGG-19
 * batch 64's least budget (docs/accuracy.md, "Side by side ... (GPU)") the
 * table filled at the budget answered 73.5 ms while a schedule of the same
 * peak takes 62.2 ms.  A table filled at store-all's peak (the frontier's,
 * its units elsewhere) is walked from its top down, each step's schedule
 * re-simulated exactly: the first that fits the budget is the fastest of
 * them that fits, and replaces *best (whose time is have) when it is
 * faster.  A table over the limits skips this search; a cancel stops the
 * solve.
 *
 * The walk reads only times under have, and stops at the latest at the
 * first step at or under the budget (whose schedule fits), so the table is
 * filled capped at have and from the budget up; a walk that goes below that
 * (a flat run across the budget) is done again on the whole table. */
static int faster_from_store_all_table(const struct remat_profile *p, int64_t budget,
                                       int64_t sa_peak, size_t slots, int prune,
                                       const struct remat__cancel *cancel, double have,
                                       struct remat_schedule *best, struct remat_error *err)
{
    int rc = 1;
    for (int whole = 0; whole < 2 && rc == 1; whole++) {
        struct remat__mt *t = NULL;
        struct remat_error skip;
        memset(&skip, 0, sizeof skip);
        rc = remat__mt_fill_capped(p, sa_peak, slots, prune, have, whole ? 0 : budget, cancel, &t,
                                   &skip);
        if (rc == REMAT_ECANCELED) {
            if (err != NULL)
                *err = skip;
            return rc;
        }
        if (rc != REMAT_OK)
            return REMAT_OK;
        rc = walk_store_all_table(p, t, budget, have, best, err);
        remat__mt_free(t);
    }
    return rc;
}

int remat__solve_min_time(const struct remat_profile *p, const struct remat_options *opts,
                          struct remat_plan *plan, struct remat_error *err)
{
    return remat__solve_min_time_share(p, opts, 1, plan, err);
}

int remat__solve_min_time_share(const struct remat_profile *p, const struct remat_options *opts,
                                int share, struct remat_plan *plan, struct remat_error *err)
{
    /* The table's fill with (1) or without (3) the periodic sharing. */
    int prune = share ? 1 : 3;
    memset(plan, 0, sizeof *plan);
    int64_t budget = opts->budget_bytes;
    if (budget < 0)
        return remat__error(err, REMAT_EINVAL, "/budget_bytes", "budget_bytes is negative");
    if (opts->mem_slots > REMAT_MT_MAX_SLOTS)
        return remat__error(err, REMAT_ELIMIT, "/mem_slots", "mem_slots is over %d",
                            REMAT_MT_MAX_SLOTS);
    struct remat_schedule least, best;
    remat_schedule_init(&least);
    remat_schedule_init(&best);
    int64_t least_peak = 0;
    struct remat__cancel cancel = {opts->cancel, opts->cancel_arg};
    int rc = remat__mt_min_peak_share(p, share, &least_peak, &least, &cancel, err);
    if (rc != REMAT_OK)
        goto out;
    if (budget != 0 && budget < least_peak) {
        plan->min_budget_bytes = least_peak;
        rc = remat__error(err, REMAT_EINFEASIBLE, "/budget_bytes",
                          "no schedule fits in %lld bytes; the least budget that fits is %lld",
                          (long long)budget, (long long)least_peak);
        goto out;
    }
    /* Store-all is the fastest schedule there is: when it fits, it is the
     * answer, and the table is only needed below its peak. */
    struct remat_sim sim;
    memset(&sim, 0, sizeof sim);
    rc = store_all_schedule(p, &best, err);
    if (rc == REMAT_OK)
        rc = remat_simulate(p, REMAT_MODEL_TRACED, &best, 0, &sim, err);
    if (rc != REMAT_OK)
        goto out;
    int64_t sa_peak = sim.peak_bytes;
    remat_sim_clear(&sim);
    if (budget != 0 && budget < sa_peak) {
        remat_schedule_clear(&best);
        struct remat__mt *t = NULL;
        /* Only the top's value and schedule are read. */
        rc = remat__mt_fill_capped(p, budget, opts->mem_slots, prune, HUGE_VAL, budget, &cancel, &t,
                                   err);
        if (rc != REMAT_OK)
            goto out;
        size_t top = remat__mt_top(t);
        if (remat__mt_time(t, top) != HUGE_VAL) {
            rc = remat__mt_schedule(t, top, &best);
            if (rc != REMAT_OK)
                rc = remat__error(err, rc, "", "rebuilding the schedule failed");
        }
        remat__mt_free(t);
        if (rc != REMAT_OK)
            goto out;
        /* The least-peak schedule fits whenever the budget is feasible; it
         * wins when the units' rounding hid every faster schedule. */
        double tb = HUGE_VAL, tl = HUGE_VAL;
        if (best.n_ops > 0) {
            rc = remat_simulate(p, REMAT_MODEL_TRACED, &best, 0, &sim, err);
            if (rc != REMAT_OK)
                goto out;
            tb = sim.total_ms;
            remat_sim_clear(&sim);
        }
        rc = remat_simulate(p, REMAT_MODEL_TRACED, &least, 0, &sim, err);
        if (rc != REMAT_OK)
            goto out;
        tl = sim.total_ms;
        remat_sim_clear(&sim);
        if (tl < tb) {
            remat_schedule_clear(&best);
            best = least;
            remat_schedule_init(&least);
            tb = tl;
        }
        rc = faster_from_store_all_table(p, budget, sa_peak, opts->mem_slots, prune, &cancel, tb,
                                         &best, err);
        if (rc != REMAT_OK)
            goto out;
    }
    rc = remat__mt_plan_from_schedule(p, &best, budget, plan, err);
    if (rc == REMAT_OK && budget != 0 && plan->peak_bytes > budget) {
        /* Cannot happen (see the comment at the top); kept as a guard so that
         * a broken invariant is an error, never a plan over budget. */
        remat_plan_clear(plan);
        rc = remat__error(err, REMAT_EINVAL, "", "internal error: schedule over budget");
    }
    if (rc == REMAT_OK)
        rc = report_model(p, opts, plan, err);
    if (rc != REMAT_OK && rc != REMAT_EINFEASIBLE)
        remat_plan_clear(plan);
out:
    remat_schedule_clear(&least);
    remat_schedule_clear(&best);
    return rc;
}
