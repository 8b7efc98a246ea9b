/*
 * solve_mintime.c - the fastest persistent multi-level schedule under a byte
 * budget: the least-peak test (solve_mintime_least.c), the table filled at
 * the budget (solve_mintime_table.c), the walk of the store-all table for a
 * faster schedule the units' rounding hid, and the plan made from the
 * answer.  Past REMAT_MT_EXACT_STAGES stages the tables are over runs of
 * stages (unless the chain is a stack that shares most of the plain one),
 * and the plan reports its optimality_gap against the bound from below
 * (solve_mintime_bound.c).  docs/min-time.md gives the whole of it.
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

/* Which table a solve fills: the plain one (ends NULL; prune 1, or 3
 * without the periodic sharing) or the one over the runs ends[0..g]. */
struct which {
    int prune;
    const size_t *ends;
    size_t g;
};

static int fill(const struct remat_profile *p, const struct which *w, int64_t budget, size_t slots,
                double cap, int64_t root, const struct remat__cancel *cancel, struct remat__mt **t,
                struct remat_error *err)
{
    if (w->ends != NULL)
        return remat__mt_fill_groups(p, w->ends, w->g, budget, slots, cap, root, cancel, t, err);
    return remat__mt_fill_capped(p, budget, slots, w->prune, cap, root, cancel, t, err);
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
                                       int64_t sa_peak, size_t slots, const struct which *w,
                                       const struct remat__cancel *cancel, double have,
                                       struct remat_schedule *best, struct remat_error *err)
{
    int rc = 1;
    for (int whole = 0; whole < 2 && rc == 1; whole++) {
        struct remat__mt *t = NULL;
        struct remat_error skip;
        memset(&skip, 0, sizeof skip);
        rc = fill(p, w, sa_peak, slots, have, whole ? 0 : budget, cancel, &t, &skip);
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

/* The runs of the long-chain solve: g runs (ends[0] = 0, ends[g] = n),
 * each cut moved from where equal runs would put it to the stage of least
 * output within a quarter run of it, since a leaf keeps a run's last
 * output and small ones make cheap checkpoints.  Returns a new array, or
 * NULL when out of memory. */
size_t *remat__mt_runs(const struct remat_profile *p, size_t g)
{
    size_t n = p->n_stages;
    size_t *ends = malloc((g + 1) * sizeof *ends);
    if (ends == NULL)
        return NULL;
    size_t w = n / g / 4;
    ends[0] = 0;
    for (size_t k = 1; k < g; k++) {
        size_t c = (size_t)((unsigned long long)n * k / g);
        size_t lo = c > w ? c - w : 1, hi = c + w < n ? c + w : n - 1, best = c;
        if (lo <= ends[k - 1])
            lo = ends[k - 1] + 1;
        for (size_t s = lo; s <= hi; s++)
            if (p->stages[s - 1].out_bytes < p->stages[best - 1].out_bytes)
                best = s;
        ends[k] = best > ends[k - 1] ? best : ends[k - 1] + 1;
    }
    ends[g] = n;
    return ends;
}

/* The table a solve fills when groups is 0: the solver's own choice, or
 * (EXACT) the plain table whatever the chain's length. */
#define EXACT ((size_t)-1)

static int solve(const struct remat_profile *p, const struct remat_options *opts, int prune,
                 size_t groups, struct remat_plan *plan, struct remat_error *err);

int remat__solve_min_time_share(const struct remat_profile *p, const struct remat_options *opts,
                                int share, struct remat_plan *plan, struct remat_error *err)
{
    return solve(p, opts, share ? 1 : 3, 0, plan, err);
}

int remat__solve_min_time_exact(const struct remat_profile *p, const struct remat_options *opts,
                                int prune, struct remat_plan *plan, struct remat_error *err)
{
    if (prune != 1 && prune != 3 && prune != 4)
        return remat__error(err, REMAT_EINVAL, "", "no such fill");
    return solve(p, opts, prune, EXACT, plan, err);
}

int remat__solve_min_time_groups(const struct remat_profile *p, const struct remat_options *opts,
                                 size_t groups, struct remat_plan *plan, struct remat_error *err)
{
    if (groups == 0 || groups > p->n_stages)
        return remat__error(err, REMAT_EINVAL, "", "the runs do not cover the chain");
    return solve(p, opts, 1, groups, plan, err);
}

/* groups = 0: the solver's own choice of table; EXACT: the plain table
 * filled with prune (1, 3 or 4: remat__mt_fill); else the table over that
 * many runs (remat__mt_runs). */
static int solve(const struct remat_profile *p, const struct remat_options *opts, int prune,
                 size_t groups, struct remat_plan *plan, struct remat_error *err)
{
    memset(plan, 0, sizeof *plan);
    int64_t budget = opts->budget_bytes;
    if (budget < 0)
        return remat__error(err, REMAT_EINVAL, "/budget_bytes", "budget_bytes is negative");
    if (opts->mem_slots > REMAT_MT_MAX_SLOTS)
        return remat__error(err, REMAT_ELIMIT, "/mem_slots", "mem_slots is over %d",
                            REMAT_MT_MAX_SLOTS);
    size_t n = p->n_stages;
    if (n > REMAT_MT_MAX_STAGES)
        return remat__error(err, REMAT_ELIMIT, "/stages", "min-time takes at most %d stages",
                            REMAT_MT_MAX_STAGES);
    /* The table's fill with (1) or without (3) the periodic sharing, over
     * the stages or, past REMAT_MT_EXACT_STAGES on a chain that shares too
     * little, over runs of them. */
    struct which w = {prune, NULL, 0};
    int share = prune != 3;
    size_t *ends = NULL;
    int exact = 1;
    if (groups == 0 && n > REMAT_MT_EXACT_STAGES) {
        int shares = n <= REMAT_MT_TABLE_MAX_STAGES ? remat__mt_profile_shares(p, err) : 0;
        if (shares < 0)
            return shares;
        if (!shares)
            groups = REMAT_MT_GROUPS;
    }
    if (groups == EXACT) {
        groups = 0;
    } else if (groups != 0) {
        ends = remat__mt_runs(p, groups);
        if (ends == NULL)
            return remat__error(err, REMAT_ENOMEM, "", "out of memory");
        w.ends = ends;
        w.g = groups;
        exact = 0;
    }
    struct remat_schedule least, best;
    remat_schedule_init(&least);
    remat_schedule_init(&best);
    int64_t least_peak = 0;
    struct remat__cancel cancel = {opts->cancel, opts->cancel_arg};
    /* The least peak: exact on the plain table; over runs, the runs' own
     * (a bound from above, and cheap), and the exact one under it while one
     * table takes the chain (it says whether anything fits, and its
     * schedule is then the plan). */
    int least_exact = w.ends == NULL;
    int rc = least_exact
                 ? remat__mt_min_peak_share(p, share, &least_peak, &least, &cancel, err)
                 : remat__mt_min_peak_groups(p, w.ends, w.g, &least_peak, &least, &cancel, err);
    if (rc == REMAT_OK && !least_exact && budget != 0 && budget < least_peak &&
        n <= REMAT_MT_TABLE_MAX_STAGES) {
        remat_schedule_clear(&least);
        least_exact = 1;
        rc = remat__mt_min_peak_share(p, share, &least_peak, &least, &cancel, err);
    }
    if (rc != REMAT_OK)
        goto out;
    if (budget != 0 && budget < least_peak) {
        plan->min_budget_bytes = least_peak;
        if (least_exact)
            rc = remat__error(err, REMAT_EINFEASIBLE, "/budget_bytes",
                              "no schedule fits in %lld bytes; the least budget that fits is %lld",
                              (long long)budget, (long long)least_peak);
        else
            rc = remat__error(err, REMAT_EINFEASIBLE, "/budget_bytes",
                              "no schedule min-time plans at %zu stages fits in %lld bytes; the "
                              "least budget it plans is %lld",
                              n, (long long)budget, (long long)least_peak);
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
        rc = fill(p, &w, budget, opts->mem_slots, HUGE_VAL, budget, &cancel, &t, err);
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
        rc = faster_from_store_all_table(p, budget, sa_peak, opts->mem_slots, &w, &cancel, tb,
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
    if (rc == REMAT_OK && !exact && budget != 0) {
        /* The gap to the optimum is at most the distance to the bound from
         * below; 0 only when the plan meets it. */
        double lb = remat__mt_time_bound(p, budget);
        plan->optimality_gap = plan->total_ms <= lb || !(lb > 0) ? 0.0 : (plan->total_ms - lb) / lb;
    }
    if (rc == REMAT_OK)
        rc = report_model(p, opts, plan, err);
    if (rc != REMAT_OK && rc != REMAT_EINFEASIBLE)
        remat_plan_clear(plan);
out:
    remat_schedule_clear(&least);
    remat_schedule_clear(&best);
    free(ends);
    return rc;
}
