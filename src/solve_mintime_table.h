/* solve_mintime_table.h - the min-time table's layout and the byte amounts
 * of its options, shared by the fill (solve_mintime_table.c) and the exact
 * least-peak recursion over the same options (solve_mintime_least.c).
 * Private to those two; everything else goes through solve_mintime.h. */
#ifndef REMAT_SOLVE_MINTIME_TABLE_H
#define REMAT_SOLVE_MINTIME_TABLE_H
#include "solve_mintime.h"

struct remat__mt {
    size_t n;
    int32_t S;    /* top index: free units at the budget */
    int64_t unit; /* bytes per unit */
    int64_t base; /* W + x_0: live before the first op */
    int prune;
    int old_cut; /* prune 4: no bound on the leaves' room (the bench) */
    /* Stage data, 1-based; x[0] is the input. */
    /* ft: the forward's transient without grad (F_ck, F_∅), fg: with grad
     * (F_all), bt: the backward's, signed (bwd_tmp_bytes - bwd_freed_bytes). */
    const int64_t *x, *xb, *ft, *fg, *bt;
    const double *tf, *tb;
    const int64_t *pp; /* pp[k] = Σ_{1..k} p */
    /* f0[k]: F_ck(k)'s peak above entry (x_k + ft_k); f1[k]: F_∅(k)'s
     * (x_{k-1} + x_k + ft_k). */
    const int64_t *f0, *f1;
    /* A grouped table (remat__mt_load_groups): its stages are runs of the
     * profile's, the run k ending at the profile's stage gend[k] (gend[0]
     * = 0); NULL for a table over the profile's own stages. */
    size_t *gend;
    int64_t *buf_i64;
    double *buf_f64;
    /* Cells (i, l) with 1 <= i <= l + 1, l in 1..n, at i * (n + 1) + l. */
    int32_t *lo, *hi, *sat;
    double *cv; /* the value from hi on */
    double *ca; /* time of the plain chain F_all .. B over i..l */
    size_t *off;
    double *tab;
    size_t tab_len;
    const struct remat__cancel *cancel; /* checked once per cell; may be NULL */
    int canceled;
    /* The time cap (remat__mt_fill_capped), HUGE_VAL when none; tt[k] is the
     * least time of stages 1..k, Σ (tf + tb), that every schedule spends. */
    double cap;
    double *tt;
    /* The amounts in units, computed once per fill (an int64 division each,
     * which the loops would otherwise repeat O(n^3) times): ux[k] = up(x_k),
     * uxb[k] = up(x̄_k), uown[k] = up(x̄_k + fg_k), uf0[k] = up(x_k + ft_k)
     * (F_ck(k)'s peak), uf[k] = up(x_{k-1} + x_k + ft_k) (F_∅(k)'s), and per
     * cell (j, l) dg = down(leaf_gain_bytes(., j, l)). */
    int32_t *ubuf;
    const int32_t *ux, *uxb, *uown, *uf0, *uf;
    int32_t *dg;
    int32_t exact_from; /* the root's values are the whole table's from here */
    /* A periodic stretch (remat__mt_find_period): stage s and stage s + per_p
     * have the same record for every s in [per_a, per_e]; per_p = 0 when
     * none is used.  The cells that are another one a period before
     * (shared_cell) have no storage of their own: cell() maps them onto
     * their first copy, so the per-cell arrays hold ncell entries, the
     * rows i <= per_r = per_a + per_p and the columns l > per_l0 =
     * min(per_e + per_p, n - 1), O(per_r * n) instead of O(n^2).  Without
     * a period per_r = n + 1 and per_l0 = 0: every cell its own. */
    size_t per_p, per_a, per_e, per_r, per_l0;
    size_t ncell;
};

/* Whether cell (i, l) is cell (i - p, l - p) over again.  A cell reads the
 * records of stages i..l, the output x_{i-1}, and whether i > 1 and l < n:
 * the same for both cells when every stage from i - p - 1 to l - p has the
 * record of the stage p after it (so i - p > 1) and l < n.  Its floor,
 * saturation point, values and choices are then the same numbers computed
 * by the same expressions, so it shares the other's storage. */
static inline int shared_cell(const struct remat__mt *t, size_t i, size_t l)
{
    return i > t->per_r && l <= t->per_l0;
}

/* How far cell (i, l) lies after the cell it shares the storage of: a
 * multiple of the period, 0 when it has its own. */
static inline size_t cell_shift(const struct remat__mt *t, size_t i, size_t l)
{
    if (!shared_cell(t, i, l))
        return 0;
    return ((i - t->per_r - 1) / t->per_p + 1) * t->per_p;
}

/* The index of cell (i, l), 1 <= i <= l + 1, in the per-cell arrays: row
 * by row (i <= per_r, every row without a period), then the columns past
 * per_l0; a shared cell is its first copy's.  Without a period per_r is
 * n + 1 and this is i * (n + 1) + l. */
static inline size_t cell(const struct remat__mt *t, size_t i, size_t l)
{
    if (i <= t->per_r)
        return i * (t->n + 1) + l;
    if (l > t->per_l0)
        return (t->per_r + 1) * (t->n + 1) + (l - t->per_l0 - 1) * (t->n + 2) + i;
    size_t s = ((i - t->per_r - 1) / t->per_p + 1) * t->per_p;
    return (i - s) * (t->n + 1) + (l - s);
}

/* The highest i <= l whose cell (i, l) has storage of its own: the loops
 * over a column's cells go from it down to 1 and skip the shared ones. */
static inline size_t top_own_row(const struct remat__mt *t, size_t l)
{
    return l <= t->per_l0 && l > t->per_r ? t->per_r : l;
}

/* Looks for the period p and the stretch [a, e] over which stage s and
 * stage s + p have the same record (every field the table reads, times
 * compared as doubles) that lets the most cells be shared; sets per_p (0
 * when none helps), per_a, per_e and the layout (per_r, per_l0, ncell).
 * O(n^2) comparisons at most. */
void remat__mt_find_period(struct remat__mt *t);

/* The layout without a period: every cell its own, (n + 2)(n + 1) of
 * them. */
void remat__mt_no_period(struct remat__mt *t);

/* The limits on one table: REMAT_ELIMIT past REMAT_MT_TABLE_MAX_STAGES
 * stages of a table without a period (table_stages; 0 for a table whose
 * period is not known yet) or past REMAT_MT_MAX_STAGES stages of the
 * profile (n); remat__mt_check_cells, once the layout is known, past a
 * 1000-stage table's cells, which a stack of repeated blocks can stay
 * under with more stages.  REMAT_OK otherwise. */
int remat__mt_check_stages(size_t table_stages, size_t n, struct remat_error *err);
int remat__mt_check_cells(const struct remat__mt *t, struct remat_error *err);

/* Whether the fill is to stop (once told, it stays stopped). */
static inline int stop(struct remat__mt *t)
{
    if (!t->canceled && remat__cancelled(t->cancel))
        t->canceled = 1;
    return t->canceled;
}

/* Bytes live at B(i)'s peak above the entry of the chain option of (i, l):
 * x̄_i, δ_i, the weight gradients of i..l, δ_{i-1} and b_i, less δ_l. */
static inline int64_t chain_bwd_bytes(const struct remat__mt *t, size_t i, size_t l)
{
    int64_t v = t->xb[i] + t->x[i] + (t->pp[l] - t->pp[i - 1]) + t->bt[i];
    if (i > 1)
        v += t->x[i - 1];
    if (l < t->n)
        v -= t->x[l];
    return v;
}

/* Bytes the leaf option of (i, l) at j gives back before cell (i, j-1):
 * δ_l, less δ_{j-1} and the weight gradients of j..l. */
static inline int64_t leaf_gain_bytes(const struct remat__mt *t, size_t i, size_t j, size_t l)
{
    (void)i;
    int64_t v = -t->x[j - 1] - (t->pp[l] - t->pp[j - 1]);
    if (l < t->n)
        v += t->x[l];
    return v;
}

/* Peak above entry of F_∅(k) for k > i in a leaf (x_{k-1} and x_k live), and
 * of F_ck(i) (x_i). */
static inline int64_t fwd_bytes(const struct remat__mt *t, size_t i, size_t k)
{
    return k == i ? t->f0[k] : t->f1[k];
}

/* Copies the stage data into flat 1-based arrays (t->buf_i64, t->buf_f64)
 * and checks that every sum the program forms stays far from overflow. */
int remat__mt_load_stages(struct remat__mt *t, const struct remat_profile *p,
                          struct remat_error *err);

/* The same for the chain of runs of stages that ends[1..g] end (ends[0] =
 * 0 < ends[1] < ... < ends[g] = n): each run is one stage of t whose every
 * option is the run's ops one after the other, with their peaks in bytes
 * exactly (docs/min-time.md, "Chains past the exact table").  A schedule
 * over t's stages is the profile's schedule by remat__mt_expand. */
int remat__mt_load_groups(struct remat__mt *t, const struct remat_profile *p, const size_t *ends,
                          size_t g, struct remat_error *err);

/* Appends to *out the profile's ops of a schedule over the runs that
 * ends[0..g] bound (remat__mt_load_groups).  Returns REMAT_OK or
 * REMAT_ENOMEM. */
int remat__mt_expand(const size_t *ends, size_t g, size_t n, const struct remat_schedule *s,
                     struct remat_schedule *out);
#endif
