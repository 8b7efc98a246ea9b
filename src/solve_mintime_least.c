/* solve_mintime_least.c - the least traced peak over persistent schedules,
 * exact in bytes (no units): the min-time table's options, each cell
 * keeping the least free bytes it needs at entry instead of a time per m.
 * The solver's feasibility test and the frontier's first point. */
#include <stdint.h>
#include <string.h>

#include "solve_mintime_table.h"

struct need_dp {
    struct remat__mt t; /* only the stage data is used */
    int64_t *need;      /* per cell: least free bytes at entry */
    double *time;       /* time of the schedule reaching it */
    int32_t *choice;    /* 0 = chain, else j */
};

static int need_rebuild(const struct need_dp *d, size_t i, size_t l, struct remat_schedule *s)
{
    const struct remat__mt *t = &d->t;
    if (i == l + 1)
        return l == t->n ? remat_schedule_push(s, REMAT_OP_LOSS, (uint32_t)l) : REMAT_OK;
    /* A shared cell's choice is its first copy's, whose leaf is that many
     * periods earlier. */
    size_t j = (size_t)d->choice[cell(t, i, l)];
    if (j != 0)
        j += cell_shift(t, i, l);
    int rc;
    if (j == 0) {
        rc = remat_schedule_push(s, REMAT_OP_F_ALL, (uint32_t)i);
        if (rc == REMAT_OK)
            rc = need_rebuild(d, i + 1, l, s);
        if (rc == REMAT_OK)
            rc = remat_schedule_push(s, REMAT_OP_B, (uint32_t)i);
        return rc;
    }
    rc = remat_schedule_push(s, REMAT_OP_F_CK, (uint32_t)i);
    for (size_t k = i + 1; k < j && rc == REMAT_OK; k++)
        rc = remat_schedule_push(s, REMAT_OP_F_NONE, (uint32_t)k);
    if (rc == REMAT_OK)
        rc = need_rebuild(d, j, l, s);
    if (rc == REMAT_OK)
        rc = need_rebuild(d, i, j - 1, s);
    return rc;
}

int remat__mt_min_peak(const struct remat_profile *p, int64_t *peak_bytes,
                       struct remat_schedule *sched, struct remat_error *err)
{
    return remat__mt_min_peak_cancel(p, peak_bytes, sched, NULL, err);
}

int remat__mt_min_peak_cancel(const struct remat_profile *p, int64_t *peak_bytes,
                              struct remat_schedule *sched, const struct remat__cancel *cancel,
                              struct remat_error *err)
{
    return remat__mt_min_peak_share(p, 1, peak_bytes, sched, cancel, err);
}

static int min_peak(const struct remat_profile *p, const size_t *ends, size_t g, int share,
                    int64_t *peak_bytes, struct remat_schedule *sched,
                    const struct remat__cancel *cancel, struct remat_error *err);

int remat__mt_min_peak_share(const struct remat_profile *p, int share, int64_t *peak_bytes,
                             struct remat_schedule *sched, const struct remat__cancel *cancel,
                             struct remat_error *err)
{
    return min_peak(p, NULL, 0, share, peak_bytes, sched, cancel, err);
}

int remat__mt_min_peak_groups(const struct remat_profile *p, const size_t *ends, size_t g,
                              int64_t *peak_bytes, struct remat_schedule *sched,
                              const struct remat__cancel *cancel, struct remat_error *err)
{
    return min_peak(p, ends, g, 0, peak_bytes, sched, cancel, err);
}

static int min_peak(const struct remat_profile *p, const size_t *ends, size_t g, int share,
                    int64_t *peak_bytes, struct remat_schedule *sched,
                    const struct remat__cancel *cancel, struct remat_error *err)
{
    if (ends != NULL)
        share = 0;
    int rc = remat__mt_check_stages(share ? 0 : ends != NULL ? g : p->n_stages, p->n_stages, err);
    if (rc != REMAT_OK)
        return rc;
    struct need_dp d;
    memset(&d, 0, sizeof d);
    struct remat__mt *t = &d.t;
    t->cancel = cancel;
    rc =
        ends != NULL ? remat__mt_load_groups(t, p, ends, g, err) : remat__mt_load_stages(t, p, err);
    size_t n = ends != NULL ? g : p->n_stages, ncell = 0;
    if (rc == REMAT_OK) {
        if (share)
            remat__mt_find_period(t);
        else
            remat__mt_no_period(t);
        rc = remat__mt_check_cells(t, err);
        ncell = t->ncell;
    }
    if (rc == REMAT_OK) {
        d.need = malloc(ncell * sizeof(int64_t));
        d.time = malloc(ncell * sizeof(double));
        d.choice = malloc(ncell * sizeof(int32_t));
        if (!d.need || !d.time || !d.choice)
            rc = remat__error(err, REMAT_ENOMEM, "", "out of memory");
    }
    if (rc == REMAT_OK) {
        for (size_t l = 1; l <= n; l++) {
            size_t pc = cell(t, l + 1, l);
            d.need[pc] = l == n ? t->x[n] : 0;
            d.time[pc] = 0;
            if (stop(t))
                break;
            /* A shared cell has the same options over the same records as
             * its first copy: the same need, time and choice, stored once
             * (remat__mt_find_period). */
            for (size_t i = top_own_row(t, l); i >= 1; i--) {
                size_t c = cell(t, i, l), q = cell(t, i + 1, l);
                int64_t best = t->xb[i] + t->fg[i];
                if (t->xb[i] + d.need[q] > best)
                    best = t->xb[i] + d.need[q];
                if (chain_bwd_bytes(t, i, l) > best)
                    best = chain_bwd_bytes(t, i, l);
                double bt = (t->tf[i] + d.time[q]) + t->tb[i];
                int32_t bc = 0;
                double cf = t->tf[i];
                int64_t maxd = fwd_bytes(t, i, i);
                for (size_t j = i + 1; j <= l; j++) {
                    if (j > i + 1) {
                        int64_t f = fwd_bytes(t, i, j - 1);
                        maxd = maxd > f ? maxd : f;
                        cf += t->tf[j - 1];
                    }
                    if (maxd > best)
                        break;
                    int64_t v = maxd;
                    size_t ca = cell(t, j, l), cb = cell(t, i, j - 1);
                    if (t->x[j - 1] + d.need[ca] > v)
                        v = t->x[j - 1] + d.need[ca];
                    if (d.need[cb] - leaf_gain_bytes(t, i, j, l) > v)
                        v = d.need[cb] - leaf_gain_bytes(t, i, j, l);
                    double tv = (cf + d.time[ca]) + d.time[cb];
                    if (v < best || (v == best && tv < bt)) {
                        best = v;
                        bt = tv;
                        bc = (int32_t)j;
                    }
                }
                d.need[c] = best < 0 ? 0 : best;
                d.time[c] = bt;
                d.choice[c] = bc;
            }
        }
    }
    if (rc == REMAT_OK && t->canceled)
        rc = remat__error(err, REMAT_ECANCELED, "", "the solve was canceled");
    if (rc == REMAT_OK) {
        int64_t top = d.need[cell(t, 1, n)];
        *peak_bytes = t->pp[n] + t->x[0] + p->optimizer.state_bytes + top;
        /* The optimizer step after the backward is a floor under any peak. */
        if (remat_optim_step_peak_bytes(p) > *peak_bytes)
            *peak_bytes = remat_optim_step_peak_bytes(p);
        if (sched != NULL && ends == NULL) {
            rc = need_rebuild(&d, 1, n, sched);
        } else if (sched != NULL) {
            struct remat_schedule s;
            remat_schedule_init(&s);
            rc = need_rebuild(&d, 1, n, &s);
            if (rc == REMAT_OK)
                rc = remat__mt_expand(ends, g, p->n_stages, &s, sched);
            remat_schedule_clear(&s);
        }
        if (rc != REMAT_OK)
            rc = remat__error(err, rc, "", "out of memory");
    }
    free(d.need);
    free(d.time);
    free(d.choice);
    free(t->buf_i64);
    free(t->buf_f64);
    free(t->gend);
    return rc;
}
