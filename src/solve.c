/* solve.c - remat_solve: runs the chosen solver, then completes its plan from
 * fresh simulations (the schedule, the traced peak, the times, store-all),
 * so every number a plan reports is one the simulator would give. */
#include <stdio.h>

#include "solve_minpeak.h"
#include "solve_mintime.h"

int64_t remat__sum_value(const struct remat_profile *p, const size_t *ck, size_t m)
{
    size_t n = p->n_stages;
    int64_t members = remat__d(p, 0) + remat__d(p, n);
    int64_t worst = 0, interior = 0;
    size_t next = 0; /* index into ck of the next checkpoint */
    for (size_t j = 1; j < n; j++) {
        if (next < m && ck[next] == j) {
            members += remat__d(p, j);
            worst = interior > worst ? interior : worst;
            interior = 0;
            next++;
        } else {
            interior += remat__d(p, j);
        }
    }
    worst = interior > worst ? interior : worst;
    return members + worst;
}

int64_t remat__prefix_value(const struct remat_profile *p, const size_t *ck, size_t m)
{
    size_t n = p->n_stages;
    int64_t kept = remat__d(p, 0); /* P_k: checkpoints c_0..c_k */
    int64_t seg = 0, worst = 0;
    size_t next = 0;
    for (size_t j = 1; j <= n; j++) {
        seg += remat__d(p, j);
        if (j == n || (next < m && ck[next] == j)) {
            worst = kept + seg > worst ? kept + seg : worst;
            if (j < n) {
                kept += remat__d(p, j);
                seg = 0;
                next++;
            }
        }
    }
    return worst;
}

double remat__recompute_ms(const struct remat_profile *p, size_t last)
{
    double t = 0;
    for (size_t j = 1; j <= last; j++)
        t += p->stages[j - 1].fwd_ms;
    return t;
}

int remat__tie_cmp(const struct remat_profile *p, const size_t *a, size_t na, const size_t *b,
                   size_t nb)
{
    double ra = remat__recompute_ms(p, na > 0 ? a[na - 1] : 0);
    double rb = remat__recompute_ms(p, nb > 0 ? b[nb - 1] : 0);
    if (ra != rb)
        return ra < rb ? -1 : 1;
    if (na != nb)
        return na < nb ? -1 : 1;
    for (size_t k = 0; k < na; k++)
        if (a[k] != b[k])
            return a[k] < b[k] ? -1 : 1;
    return 0;
}

static int run_solver(const struct remat_profile *p, const struct remat_options *opts,
                      struct remat_plan *plan, struct remat_error *err)
{
    switch (opts->algorithm) {
    case REMAT_ALG_STORE_ALL:
        return remat__solve_store_all(p, plan, err);
    case REMAT_ALG_SQRT:
        return remat__solve_sqrt(p, plan, err);
    case REMAT_ALG_UNIFORM:
        if (opts->segments == 0)
            return remat__error(err, REMAT_EINVAL, "/segments",
                                "uniform needs the number of segments");
        return remat__solve_uniform(p, opts->segments, plan, err);
    case REMAT_ALG_ACG:
    case REMAT_ALG_PAPER_CUBIC: {
        struct remat__cancel cancel = {opts->cancel, opts->cancel_arg};
        return remat__solve_sum_cancel(p, plan, opts->algorithm == REMAT_ALG_PAPER_CUBIC, &cancel,
                                       err);
    }
    case REMAT_ALG_PAPER_LINEAR:
        return remat__solve_paper_linear(p, plan, err);
    case REMAT_ALG_MIN_PEAK:
        return remat__solve_min_peak(p, plan, err);
    default:
        return remat__error(err, REMAT_EINVAL, "/algorithm", "unknown algorithm %d",
                            (int)opts->algorithm);
    }
}

int remat_solve(const struct remat_profile *profile, const struct remat_options *opts,
                struct remat_plan *plan, struct remat_error *err)
{
    memset(plan, 0, sizeof *plan);
    remat_schedule_init(&plan->schedule);
    plan->single_level = 1;
    struct remat_options defaults;
    if (opts == NULL) {
        remat_options_init(&defaults);
        opts = &defaults;
    }
    int rc = remat_profile_validate(profile, err);
    if (rc < 0)
        return rc;
    if (opts->has_model && opts->model != REMAT_MODEL_SUM && opts->model != REMAT_MODEL_PREFIX &&
        opts->model != REMAT_MODEL_TRACED)
        return remat__error(err, REMAT_EINVAL, "/model", "unknown model %d", (int)opts->model);
    plan->algorithm = opts->algorithm;
    plan->n_stages = profile->n_stages;
    struct remat__cancel cancel = {opts->cancel, opts->cancel_arg};
    if (remat__cancelled(&cancel))
        return remat__error(err, REMAT_ECANCELED, "", "the solve was canceled");
    if (opts->algorithm == REMAT_ALG_MIN_TIME) {
        rc = remat__solve_min_time(profile, opts, plan, err);
        if (rc < 0) {
            int64_t min_budget = plan->min_budget_bytes;
            remat_plan_clear(plan);
            plan->min_budget_bytes = min_budget;
            plan->algorithm = opts->algorithm;
            return rc;
        }
        plan->algorithm = REMAT_ALG_MIN_TIME;
        plan->n_stages = profile->n_stages;
        return REMAT_OK;
    }
    plan->objective_model = remat_algorithm_model(opts->algorithm);
    rc = run_solver(profile, opts, plan, err);
    if (rc < 0)
        goto fail;
    if (plan->checkpoints == NULL && (rc = remat__plan_set_checkpoints(plan, NULL, 0, err)) < 0)
        goto fail;
    rc = remat_schedule_from_checkpoints(profile, plan->checkpoints, plan->n_checkpoints,
                                         &plan->schedule, err);
    if (rc < 0)
        goto fail;
    struct remat_sim sim;
    rc = remat_simulate(profile, REMAT_MODEL_TRACED, &plan->schedule, 0, &sim, err);
    if (rc < 0)
        goto fail;
    plan->peak_bytes = sim.peak_bytes;
    plan->recompute_ms = sim.recompute_ms;
    plan->total_ms = sim.total_ms;
    remat_sim_clear(&sim);
    rc = remat_simulate_checkpoints(profile, REMAT_MODEL_TRACED, NULL, 0, 0, &sim, err);
    if (rc < 0)
        goto fail;
    plan->store_all_peak_bytes = sim.peak_bytes;
    remat_sim_clear(&sim);
    /* The objective: the traced peak just simulated, the solver's own value
     * when asked in its own model, or a fresh simulation in the model asked. */
    enum remat_model own = remat_algorithm_model(opts->algorithm);
    enum remat_model want = opts->has_model ? opts->model : own;
    if (want == REMAT_MODEL_TRACED) {
        plan->objective_value = plan->peak_bytes;
    } else if (want != own) {
        rc = remat_simulate_checkpoints(profile, want, plan->checkpoints, plan->n_checkpoints, 0,
                                        &sim, err);
        if (rc < 0)
            goto fail;
        plan->objective_value = sim.peak_bytes;
        remat_sim_clear(&sim);
    }
    plan->objective_model = want;
    return REMAT_OK;
fail:
    remat_plan_clear(plan);
    return rc;
}

int remat_solve_memory_bound(const struct remat_profile *profile, const struct remat_options *opts,
                             int64_t *bytes, struct remat_error *err)
{
    struct remat_options defaults;
    if (opts == NULL) {
        remat_options_init(&defaults);
        opts = &defaults;
    }
    if (profile == NULL || profile->n_stages == 0 || profile->n_stages > REMAT_MAX_STAGES)
        return remat__error(err, REMAT_EINVAL, "/stages", "the profile has no stages");
    int64_t n = (int64_t)profile->n_stages;
    /* Every plan: its schedule (at most 3n + 1 ops of 8 bytes), the
     * simulations (a byte per stage and a timeline) and the checkpoint
     * lists; min-peak's segment tree (about 80 bytes a leaf, leaves a power
     * of two) and its per-stage arrays.  512 bytes a stage covers them all. */
    int64_t b = 512 * n + 4096;
    if (opts->algorithm == REMAT_ALG_ACG || opts->algorithm == REMAT_ALG_PAPER_CUBIC) {
        /* The candidate bounds: one per pair of stages at worst. */
        b += 8 * n * (n + 1) / 2;
    } else if (opts->algorithm == REMAT_ALG_MIN_TIME) {
        if (n > REMAT_MT_MAX_STAGES)
            return remat__error(err, REMAT_ELIMIT, "/stages", "min-time takes at most %d stages",
                                REMAT_MT_MAX_STAGES);
        /* Past one table's stages the least peak and the tables are over
         * runs of stages (solve_mintime.c). */
        if (n > REMAT_MT_TABLE_MAX_STAGES)
            n = REMAT_MT_GROUPS;
        size_t slots = opts->mem_slots ? opts->mem_slots : REMAT__MT_DEFAULT_SLOTS;
        if (slots > REMAT_MT_MAX_SLOTS)
            return remat__error(err, REMAT_ELIMIT, "/mem_slots", "mem_slots is over %d",
                                REMAT_MT_MAX_SLOTS);
        int64_t ncell = (n + 2) * (n + 1);
        /* The least-peak pass (need, time, choice) and the table's per-cell
         * arrays (lo, hi, sat, cv, ca, off), then the values: at most
         * (slots + 1) per stored cell, at most REMAT_MT_MAX_TABLE_BYTES. */
        b += ncell * (8 + 8 + 4) + ncell * (3 * 4 + 2 * 8 + 8);
        int64_t vals = n * (n + 1) / 2 * ((int64_t)slots + 1) * 8;
        b += vals < REMAT_MT_MAX_TABLE_BYTES ? vals : REMAT_MT_MAX_TABLE_BYTES;
    }
    *bytes = b;
    return REMAT_OK;
}
