/*
 * frontier.c - every (peak, time) Pareto point of persistent schedules, from
 * one fill of the min-time table.
 *
 * The table filled at the store-all peak holds, in its top cell, the least
 * time for every number m of free units up to the top: one step function
 * from the least memory to store-all.  Each step is one candidate; the exact
 * least-peak schedule (remat__mt_min_peak, which the units' rounding may hide
 * from the table) and store-all join them; each is rebuilt and re-simulated,
 * and only the points that no other point beats in both peak and time stay.
 */
#include <math.h>

#include "solve_mintime.h"

struct cand {
    struct remat_plan plan;
};

static int cmp_cand(const void *a, const void *b)
{
    const struct remat_plan *x = &((const struct cand *)a)->plan;
    const struct remat_plan *y = &((const struct cand *)b)->plan;
    if (x->peak_bytes != y->peak_bytes)
        return x->peak_bytes < y->peak_bytes ? -1 : 1;
    if (x->total_ms != y->total_ms)
        return x->total_ms < y->total_ms ? -1 : 1;
    return 0;
}

static int add_cand(const struct remat_profile *p, struct remat_schedule *s, struct cand **cands,
                    size_t *n, size_t *cap, struct remat_error *err)
{
    if (*n == *cap) {
        size_t nc = *cap ? 2 * *cap : 16;
        struct cand *c = realloc(*cands, nc * sizeof *c);
        if (c == NULL)
            return remat__error(err, REMAT_ENOMEM, "", "out of memory");
        *cands = c;
        *cap = nc;
    }
    int rc = remat__mt_plan_from_schedule(p, s, 0, &(*cands)[*n].plan, err);
    if (rc != REMAT_OK)
        return rc;
    /* A point's budget is the least one at which it is the answer: its peak. */
    (*cands)[*n].plan.budget_bytes = (*cands)[*n].plan.peak_bytes;
    (*n)++;
    return REMAT_OK;
}

int remat_frontier_compute(const struct remat_profile *profile, size_t mem_slots,
                           struct remat_frontier *out, struct remat_error *err)
{
    return remat_frontier_compute_cancel(profile, mem_slots, NULL, NULL, out, err);
}

int remat_frontier_compute_cancel(const struct remat_profile *profile, size_t mem_slots,
                                  int (*cancel)(void *cancel_arg), void *cancel_arg,
                                  struct remat_frontier *out, struct remat_error *err)
{
    const struct remat__cancel guard = {cancel, cancel_arg};
    out->n_points = 0;
    out->points = NULL;
    if (profile == NULL)
        return remat__error(err, REMAT_EINVAL, "", "no profile");
    int rc = remat_profile_validate(profile, err);
    if (rc != REMAT_OK)
        return rc;
    struct cand *cands = NULL;
    size_t n = 0, cap = 0;
    struct remat_schedule s;
    remat_schedule_init(&s);
    struct remat__mt *t = NULL;
    int64_t least_peak = 0;
    /* Past REMAT_MT_EXACT_STAGES, on a chain that shares too few cells,
     * the table is over runs of stages, as for the solve
     * (docs/min-time.md): each point carries its optimality_gap. */
    size_t ns = profile->n_stages, *ends = NULL, g = 0;
    if (ns > REMAT_MT_MAX_STAGES)
        return remat__error(err, REMAT_ELIMIT, "/stages", "min-time takes at most %d stages",
                            REMAT_MT_MAX_STAGES);
    if (ns > REMAT_MT_EXACT_STAGES) {
        rc = ns <= REMAT_MT_TABLE_MAX_STAGES ? remat__mt_profile_shares(profile, err) : 0;
        if (rc < 0)
            return rc;
        if (rc == 0) {
            g = REMAT_MT_GROUPS;
            ends = remat__mt_runs(profile, g);
            if (ends == NULL)
                return remat__error(err, REMAT_ENOMEM, "", "out of memory");
        }
        rc = REMAT_OK;
    }
    if (ns <= REMAT_MT_TABLE_MAX_STAGES)
        rc = remat__mt_min_peak_cancel(profile, &least_peak, &s, &guard, err);
    else
        rc = remat__mt_min_peak_groups(profile, ends, g, &least_peak, &s, &guard, err);
    if (rc == REMAT_OK)
        rc = add_cand(profile, &s, &cands, &n, &cap, err);
    if (rc == REMAT_OK) {
        size_t none = 0;
        rc = remat_schedule_from_checkpoints(profile, &none, 0, &s, err);
    }
    if (rc == REMAT_OK)
        rc = add_cand(profile, &s, &cands, &n, &cap, err);
    /* cands[1] is store-all: the table is filled at its peak. */
    if (rc == REMAT_OK && cands[1].plan.peak_bytes > least_peak) {
        int64_t sa = cands[1].plan.peak_bytes;
        rc = ends != NULL ? remat__mt_fill_groups(profile, ends, g, sa, mem_slots, HUGE_VAL, 0,
                                                  &guard, &t, err)
                          : remat__mt_fill_cancel(profile, sa, mem_slots, 1, &guard, &t, err);
    }
    if (rc == REMAT_OK && t != NULL) {
        double prev = HUGE_VAL;
        size_t top = remat__mt_top(t);
        for (size_t m = 0; m <= top && rc == REMAT_OK; m++) {
            double v = remat__mt_time(t, m);
            if (!(v < prev))
                continue;
            prev = v;
            rc = remat__mt_schedule(t, m, &s);
            if (rc != REMAT_OK) {
                rc = remat__error(err, rc, "", "rebuilding a schedule failed");
                break;
            }
            rc = add_cand(profile, &s, &cands, &n, &cap, err);
        }
    }
    remat__mt_free(t);
    remat_schedule_clear(&s);
    /* Each point over runs against the bound from below at its own peak
     * (its budget); 0 where it meets it. */
    for (size_t c = 0; ends != NULL && rc == REMAT_OK && c < n; c++) {
        struct remat_plan *pl = &cands[c].plan;
        double lb = remat__mt_time_bound(profile, pl->peak_bytes);
        pl->optimality_gap = pl->total_ms <= lb || !(lb > 0) ? 0.0 : (pl->total_ms - lb) / lb;
    }
    free(ends);
    if (rc == REMAT_OK) {
        qsort(cands, n, sizeof *cands, cmp_cand);
        out->points = calloc(n, sizeof *out->points);
        if (out->points == NULL)
            rc = remat__error(err, REMAT_ENOMEM, "", "out of memory");
    }
    /* Keep a point only when it is strictly faster than every point of
     * smaller or equal peak: the rest are dominated. */
    size_t k = 0;
    for (size_t c = 0; c < n; c++) {
        if (rc == REMAT_OK && (k == 0 || cands[c].plan.total_ms < out->points[k - 1].total_ms)) {
            out->points[k].peak_bytes = cands[c].plan.peak_bytes;
            out->points[k].total_ms = cands[c].plan.total_ms;
            out->points[k].plan = cands[c].plan;
            k++;
        } else {
            remat_plan_clear(&cands[c].plan);
        }
    }
    free(cands);
    out->n_points = k;
    if (rc != REMAT_OK)
        remat_frontier_clear(out);
    return rc;
}

void remat_frontier_clear(struct remat_frontier *f)
{
    if (f == NULL)
        return;
    for (size_t i = 0; i < f->n_points; i++)
        remat_plan_clear(&f->points[i].plan);
    free(f->points);
    f->points = NULL;
    f->n_points = 0;
}

json_t *remat_frontier_to_json(const struct remat_profile *profile, const struct remat_frontier *f)
{
    json_t *root = json_object();
    json_t *pts = json_array();
    /* json_object_set_new takes pts even when it fails. */
    if (root == NULL) {
        json_decref(pts);
        return NULL;
    }
    if (json_object_set_new(root, "points", pts) != 0) {
        json_decref(root);
        return NULL;
    }
    for (size_t i = 0; i < f->n_points; i++) {
        const struct remat_frontier_point *pt = &f->points[i];
        json_t *plan = remat_plan_to_json(profile, &pt->plan);
        json_t *o = plan ? json_pack("{s:I,s:f,s:f,s:o}", "peak_bytes", (json_int_t)pt->peak_bytes,
                                     "total_ms", pt->total_ms, "recompute_ms",
                                     pt->plan.recompute_ms, "plan", plan)
                         : NULL;
        if (o == NULL || json_array_append_new(pts, o) != 0) {
            json_decref(root);
            return NULL;
        }
    }
    if (f->n_points > 0 &&
        (json_object_set_new(root, "min_peak_bytes", json_integer(f->points[0].peak_bytes)) != 0 ||
         json_object_set_new(root, "store_all_peak_bytes",
                             json_integer(f->points[f->n_points - 1].peak_bytes)) != 0)) {
        json_decref(root);
        return NULL;
    }
    return root;
}
