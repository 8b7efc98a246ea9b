/*
 * solve_mintime_table.c - the min-time table: Rotor's dynamic program over
 * persistent multi-level schedules with the `traced` accounting folded in,
 * its fill and the schedules read back from it (solve_mintime.c is the
 * solver that uses it, solve_mintime_table.h its layout).
 *
 * A cell (i, l) of the table stands for the sub-problem "back-propagate
 * stages i..l, given that x_{i-1} and δ_l are live (δ_n is made by LOSS inside
 * the cell (n+1, n))".  Its value at m is the least time when m units of
 * memory are free at entry.  Two options (docs/min-time.md gives the byte
 * accounting of every op, derived from docs/memory-model.md):
 *
 *   chain:  F_all(i), cell (i+1, l) with m - x̄_i free, B(i);
 *   leaf j: F_ck(i), F_∅(i+1) .. F_∅(j-1), cell (j, l) with m - x_{j-1} free,
 *           then cell (i, j-1) with m + [l<n] x_l - x_{j-1} - Σ_{j..l} p free
 *           (δ_l is gone, δ_{j-1} and the weight gradients of j..l are live).
 *
 * The unit u rounds every amount the program subtracts from the free memory
 * up and every amount it gives back down, and every op's own peak is checked
 * in bytes against m·u, so m·u never exceeds the true free memory: a schedule
 * the table says fits does fit in the simulator (the re-simulation in
 * remat__mt_plan_from_schedule checks it again).
 *
 * Pruning: per cell a floor lo (below it nothing fits) and a saturation point
 * sat (from it on the plain chain fits and nothing is faster), both computed
 * first in O(n^3) integer steps; only [lo, min(sat, S+1)) is stored and
 * filled.  Within a cell, an option is skipped from the m on where the best
 * so far already beats its value at the top of its range (both only fall
 * with m).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "solve_mintime_table.h"

/* ceil(v / u) clamped to [0, S + 1]: the units an amount occupies. */
static int32_t up(const struct remat__mt *t, int64_t v)
{
    if (v <= 0)
        return 0;
    int64_t q = v / t->unit + (v % t->unit != 0);
    return q > (int64_t)t->S + 1 ? t->S + 1 : (int32_t)q;
}

/* floor(v / u) clamped to [-(S + 2), S + 2]: the units an amount gives back. */
static int32_t down(const struct remat__mt *t, int64_t v)
{
    int64_t q = v / t->unit;
    if (v % t->unit != 0 && v < 0)
        q--;
    int64_t lim = (int64_t)t->S + 2;
    return q > lim ? (int32_t)lim : q < -lim ? (int32_t)-lim : (int32_t)q;
}

static int32_t max32(int32_t a, int32_t b)
{
    return a > b ? a : b;
}

static int32_t min32(int32_t a, int32_t b)
{
    return a < b ? a : b;
}

static double get(const struct remat__mt *t, size_t c, int64_t m)
{
    if (m < t->lo[c])
        return HUGE_VAL;
    if (m >= t->hi[c])
        return t->cv[c];
    return t->tab[t->off[c] + (size_t)(m - t->lo[c])];
}

void remat__mt_free(struct remat__mt *t)
{
    if (t == NULL)
        return;
    free(t->buf_i64);
    free(t->buf_f64);
    free(t->lo);
    free(t->hi);
    free(t->sat);
    free(t->cv);
    free(t->ca);
    free(t->off);
    free(t->tab);
    free(t->tt);
    free(t->ubuf);
    free(t->dg);
    free(t->gend);
    free(t);
}

/* First pass: the floor and the saturation point of every cell, in units,
 * by the same recurrence the fill uses (so they are exactly where its values
 * stop being infinite and start being the plain chain's time). */
static void floors(struct remat__mt *t)
{
    size_t n = t->n;
    int32_t S1 = t->S + 1;
    for (size_t l = 1; l <= n; l++) {
        size_t pc = cell(t, l + 1, l);
        t->lo[pc] = t->sat[pc] = l == n ? up(t, t->x[n]) : 0;
        t->ca[pc] = 0;
        if (stop(t))
            return;
        for (size_t i = top_own_row(t, l); i >= 1; i--) {
            size_t c = cell(t, i, l), q = cell(t, i + 1, l);
            int32_t a = t->uxb[i];
            int32_t own = max32(t->uown[i], up(t, chain_bwd_bytes(t, i, l)));
            int32_t lo = max32(own, min32(a + t->lo[q], S1));
            int32_t sat = max32(own, min32(a + t->sat[q], S1));
            t->ca[c] = (t->tf[i] + t->ca[q]) + t->tb[i];
            int32_t fd = t->uf0[i];
            for (size_t j = i + 1; j <= l && lo > 0; j++) {
                if (j > i + 1)
                    fd = max32(fd, t->uf[j - 1]);
                if (fd > t->S)
                    break; /* the forward run only grows with j */
                int32_t need_a = t->ux[j - 1] + t->lo[cell(t, j, l)];
                int32_t lob = t->lo[cell(t, i, j - 1)];
                int32_t need_b = lob > t->S ? S1 : lob - t->dg[cell(t, j, l)];
                int32_t tj = max32(fd, max32(need_a, need_b));
                lo = min32(lo, tj);
            }
            lo = min32(max32(lo, 0), S1);
            t->lo[c] = lo;
            t->sat[c] = sat < lo ? lo : sat;
        }
    }
}

/* Relaxes T[m] for m in [ms, me) with (c + A(m - ka)) + B(m + kb), where A
 * reads array A[m - ka] below bA and the constant cva from bA on, and B
 * likewise with bB.  The four loops are the four combinations, each a plain
 * loop over pairs (T, A and B are distinct cells), which GCC's -O2 turns
 * into two-wide vector code (its default cost model does not vectorise the
 * plain loop) with the same results: minpd is the compare below. */
static void relax(double *restrict T, int32_t ms, int32_t me, double c, const double *restrict A,
                  int32_t ka, int32_t bA, double cva, const double *restrict B, int32_t kb,
                  int32_t bB, double cvb)
{
    int32_t m = ms;
    while (m < me) {
        int inA = m < bA, inB = m < bB;
        int32_t end = me, k = m;
        if (inA && bA < end)
            end = bA;
        if (inB && bB < end)
            end = bB;
        if (inA && inB) {
            for (; k + 2 <= end; k += 2) {
                double v0 = (c + A[k - ka]) + B[k + kb];
                double v1 = (c + A[k + 1 - ka]) + B[k + 1 + kb];
                T[k] = v0 < T[k] ? v0 : T[k];
                T[k + 1] = v1 < T[k + 1] ? v1 : T[k + 1];
            }
            for (; k < end; k++) {
                double v = (c + A[k - ka]) + B[k + kb];
                T[k] = v < T[k] ? v : T[k];
            }
        } else if (inA) {
            for (; k + 2 <= end; k += 2) {
                double v0 = (c + A[k - ka]) + cvb;
                double v1 = (c + A[k + 1 - ka]) + cvb;
                T[k] = v0 < T[k] ? v0 : T[k];
                T[k + 1] = v1 < T[k + 1] ? v1 : T[k + 1];
            }
            for (; k < end; k++) {
                double v = (c + A[k - ka]) + cvb;
                T[k] = v < T[k] ? v : T[k];
            }
        } else if (inB) {
            double ca = c + cva;
            for (; k + 2 <= end; k += 2) {
                double v0 = ca + B[k + kb];
                double v1 = ca + B[k + 1 + kb];
                T[k] = v0 < T[k] ? v0 : T[k];
                T[k + 1] = v1 < T[k + 1] ? v1 : T[k + 1];
            }
            for (; k < end; k++) {
                double v = ca + B[k + kb];
                T[k] = v < T[k] ? v : T[k];
            }
        } else {
            double v = (c + cva) + cvb;
            for (; k < end; k++)
                T[k] = v < T[k] ? v : T[k];
        }
        m = end;
    }
}

/* The chain option alone: T[k] = (c + A(k - ka)) + cb for k in [ks, ke),
 * A reading array A[k - ka] below bA and cva from bA on.  What relax
 * stores over HUGE_VAL, without the compare. */
static void chain_values(double *restrict T, int32_t ks, int32_t ke, double c,
                         const double *restrict A, int32_t ka, int32_t bA, double cva, double cb)
{
    int32_t k = ks, mid = bA < ks ? ks : bA > ke ? ke : bA;
    for (; k < mid; k++)
        T[k] = (c + A[k - ka]) + cb;
    double v = (c + cva) + cb;
    for (; k < ke; k++)
        T[k] = v;
}

/* A leaf option of a cell in T's indices: its value at k is (c + A(k -
 * ka)) + B(k + kb), A reading array A below bA and cva from bA on, B
 * likewise with bB and cvb (relax's arguments). */
struct opt {
    double c;
    const double *A;
    int32_t ka, bA;
    double cva;
    const double *B;
    int32_t kb, bB;
    double cvb;
};

static double opt_at(const struct opt *o, int32_t k)
{
    return (o->c + (k < o->bA ? o->A[k - o->ka] : o->cva)) + (k < o->bB ? o->B[k + o->kb] : o->cvb);
}

static void relax_opt(double *T, int32_t ks, int32_t ke, const struct opt *o)
{
    relax(T, ks, ke, o->c, o->A, o->ka, o->bA, o->cva, o->B, o->kb, o->bB, o->cvb);
}

/* The option's value only falls with m, so its value at the top of the
 * range bounds it below everywhere; T only falls with m too, so where T is
 * already at or under that bound the option cannot win: from the first
 * such k on, found by bisection after a look at both ends (most options are
 * cut whole or not at all).  Once was measured best: a second round with
 * the value at the new top cut too little to pay for itself, and cutting
 * the range into halves, each looked at so, cost more looks (each a read
 * of two other cells) than the values it spared.  The margin keeps
 * rounding from cutting a real improvement (a cell's values fall with m up
 * to the last bits of the sums, where its array meets its saturation
 * value). */
static void relax_cut(double *T, int32_t k0, int32_t end, const struct opt *o)
{
    int32_t k = end - 1;
    double v = opt_at(o, k);
    double thr = v - 1e-12 * fabs(v);
    if (T[k0] <= thr)
        return;
    if (T[k] <= thr) {
        int32_t a0 = k0 + 1, b0 = k;
        while (a0 < b0) {
            int32_t mid = a0 + (b0 - a0) / 2;
            if (T[mid] <= thr)
                b0 = mid;
            else
                a0 = mid + 1;
        }
        end = a0;
    }
    relax_opt(T, k0, end, o);
}

/* Base pointer of a cell's stored values such that P[m] is the value at m
 * for lo <= m < hi.  Formed as an index offset to stay inside the array. */
static const double *cell_vals(const struct remat__mt *t, size_t c)
{
    return t->tab + t->off[c];
}

/* Under a time cap H, the values of cell (i, l) at or over H less the
 * least time of the stages outside i..l cannot be on the path of a root
 * value under H (every stage outside runs forward and backward at least
 * once, and every option adds its cells' values to times that are not
 * negative), so its floor is raised past them: they read as HUGE_VAL, and
 * the cells that use this one start their ranges higher.  Every value that
 * a root value under H rests on is unchanged, and so is every choice
 * behind it; a value this lifts stays at or over its threshold, so the
 * parents' values it feeds stay over theirs.  The margin (1e-9 of H) keeps
 * the rounding of the sums from cutting a value that is in fact under. */
static double cap_threshold(const struct remat__mt *t, size_t i, size_t l)
{
    double outside = t->tt[t->n] - (t->tt[l] - t->tt[i - 1]);
    return (t->cap - outside) + 1e-9 * fabs(t->cap);
}

static void cut_over_cap(struct remat__mt *t, size_t i, size_t l)
{
    size_t c = cell(t, i, l);
    double thr = cap_threshold(t, i, l);
    const double *T = t->tab + t->off[c];
    int32_t k = t->hi[c] - t->lo[c];
    while (k > 0 && T[k - 1] < thr)
        k--;
    t->lo[c] += k;
    t->off[c] += (size_t)k;
}

/* When only the root's values from r up are wanted, raises every cell's lo
 * to the least m at which the fill of those values (or the rebuild of their
 * schedules) reads it: parents come before the cells they read (l falling,
 * i rising), each passing on its own least m less what each option takes
 * (or plus what it gives back, at most S).  Every value at or over the new
 * lo is then the whole table's, and so is every choice made from one: the
 * options' ranges start at or over their cells' lo either way, and an
 * option's bisection (fill_pruned) finds the same end wherever it lies at
 * or over the cell's lo.  A cell no parent reads stores nothing. */
static int raise_to_needs(struct remat__mt *t, int32_t r)
{
    size_t n = t->n, ncell = t->ncell;
    int32_t S = t->S, none = S + 1;
    int32_t *need = malloc(ncell * sizeof(int32_t));
    if (need == NULL)
        return REMAT_ENOMEM;
    for (size_t c = 0; c < ncell; c++)
        need[c] = none;
    need[cell(t, 1, n)] = r;
    for (size_t l = n; l >= 1; l--) {
        /* A shared cell's need is its first copy's (cell() gives the same
         * index), which comes later in this order (its l is smaller) and
         * passes it on to the cells it reads, which the copy's own cells
         * share. */
        for (size_t i = 1, top = top_own_row(t, l); i <= top; i++) {
            size_t c = cell(t, i, l);
            int32_t lo = max32(t->lo[c], need[c]);
            if (need[c] > S || lo >= t->hi[c]) {
                /* Nothing read here: the value at hi and over is the plain
                 * chain's, or nothing fits at all. */
                t->lo[c] = t->hi[c];
                continue;
            }
            t->lo[c] = lo;
            size_t q = cell(t, i + 1, l);
            if (i < l)
                need[q] = min32(need[q], lo - t->uxb[i]);
            int32_t fd = t->uf0[i];
            for (size_t j = i + 1; j <= l; j++) {
                if (j > i + 1)
                    fd = max32(fd, t->uf[j - 1]);
                if (fd > S)
                    break;
                size_t ca = cell(t, j, l), cb = cell(t, i, j - 1);
                int32_t dj = t->dg[ca];
                need[ca] = min32(need[ca], lo - t->ux[j - 1]);
                int32_t mb = lo + dj > S ? S : lo + dj;
                need[cb] = min32(need[cb], mb);
            }
        }
    }
    free(need);
    return REMAT_OK;
}

/* Fills the amounts in units (struct remat__mt) once the unit is known. */
static int unit_tables(struct remat__mt *t)
{
    size_t n = t->n;
    t->ubuf = malloc(5 * (n + 1) * sizeof(int32_t));
    t->dg = malloc(t->ncell * sizeof(int32_t));
    if (t->ubuf == NULL || t->dg == NULL)
        return REMAT_ENOMEM;
    int32_t *ux = t->ubuf, *uxb = ux + (n + 1), *uown = uxb + (n + 1), *uf0 = uown + (n + 1);
    int32_t *uf = uf0 + (n + 1);
    for (size_t k = 0; k <= n; k++) {
        ux[k] = up(t, t->x[k]);
        uxb[k] = up(t, t->xb[k]);
        uown[k] = up(t, t->xb[k] + t->fg[k]);
        uf0[k] = up(t, fwd_bytes(t, k, k));
        uf[k] = k == 0 ? 0 : up(t, fwd_bytes(t, 0, k));
    }
    for (size_t l = 1; l <= n; l++)
        for (size_t j = 2, top = top_own_row(t, l); j <= top; j++)
            t->dg[cell(t, j, l)] = down(t, leaf_gain_bytes(t, 0, j, l));
    t->ux = ux;
    t->uxb = uxb;
    t->uown = uown;
    t->uf0 = uf0;
    t->uf = uf;
    return REMAT_OK;
}

static void fill_pruned(struct remat__mt *t)
{
    size_t n = t->n;
    int32_t S = t->S;
    for (size_t l = 1; l <= n; l++) {
        size_t pc = cell(t, l + 1, l);
        t->hi[pc] = t->lo[pc];
        t->cv[pc] = t->lo[pc] > S ? HUGE_VAL : 0.0;
        /* A shared cell is its first copy, filled (and cut) already. */
        for (size_t i = top_own_row(t, l); i >= 1; i--) {
            if (stop(t))
                return;
            size_t c = cell(t, i, l), q = cell(t, i + 1, l);
            int32_t lo = t->lo[c], hi = t->hi[c];
            double *T = t->tab + t->off[c];
            int32_t me = hi - lo; /* T is indexed from lo */
            if (me > 0) {
                /* chain: (tf_i + cell(i+1, l)[m - a]) + tb_i, written over
                 * HUGE_VAL (what relax would compare it with). */
                int32_t a = t->uxb[i];
                int32_t ms = max32(lo, max32(t->uown[i], up(t, chain_bwd_bytes(t, i, l))));
                ms = max32(ms, t->lo[q] + a);
                int32_t k1 = ms < hi ? ms - lo : me;
                for (int32_t k = 0; k < k1; k++)
                    T[k] = HUGE_VAL;
                if (k1 < me)
                    chain_values(T, k1, me, t->tf[i], cell_vals(t, q), a + t->lo[q] - lo,
                                 t->hi[q] + a - lo, t->cv[q], t->tb[i]);
                double cf = t->tf[i];
                int32_t fd = t->uf0[i];
                /* Leaf j costs at least the plain chain's time and its own
                 * forward run: its cells' values are never under their
                 * plain chains' (every stage forwards and backwards once,
                 * and no time is negative), which with the forwards of
                 * i..j-1 add up to ca + cf.  At the m where T is already at
                 * or under that (a prefix [0, room) of T's indices,
                 * shrinking as cf grows) or where a value would be cut over
                 * the cap anyway, it cannot count; once nothing is left, no
                 * later leaf can either.  The margin covers the sums'
                 * different order.  prune = 4 leaves this out (the fill as
                 * it was, for the bench). */
                int32_t room = me;
                double over = t->cap == HUGE_VAL ? HUGE_VAL : cap_threshold(t, i, l);
                for (size_t j = i + 1; j <= l; j++) {
                    if (j > i + 1) {
                        fd = max32(fd, t->uf[j - 1]);
                        cf += t->tf[j - 1];
                    }
                    if (fd > S)
                        break;
                    if (!t->old_cut && t->prune == 1) {
                        double least = cf + t->ca[c];
                        least -= 1e-9 * fabs(least);
                        if (over <= least)
                            break;
                        while (room > 0 && T[room - 1] <= least)
                            room--;
                        if (room == 0)
                            break;
                    }
                    size_t ca = cell(t, j, l), cb = cell(t, i, j - 1);
                    int32_t aj = t->ux[j - 1];
                    int32_t dj = t->dg[ca];
                    if (t->lo[cb] > S || t->lo[ca] > S)
                        continue;
                    int32_t s0 = max32(max32(lo, fd), max32(t->lo[ca] + aj, t->lo[cb] - dj));
                    if (s0 >= hi)
                        continue;
                    /* A at m - aj (array below hi[ca] + aj); B at min(m + dj, S)
                     * (array below min(hi[cb], S) - dj, where index S is
                     * cv[cb] either way).  In T's indices k = m - lo: */
                    const double *A = cell_vals(t, ca), *B = cell_vals(t, cb);
                    int32_t ka = aj + t->lo[ca] - lo, bA = t->hi[ca] + aj - lo;
                    int32_t kb = dj - t->lo[cb] + lo, bB = min32(t->hi[cb], S) - dj - lo;
                    int32_t k0 = s0 - lo, end = min32(me, room);
                    if (k0 >= end)
                        continue;
                    const struct opt o = {cf, A, ka, bA, t->cv[ca], B, kb, bB, t->cv[cb]};
                    if (t->prune == 1)
                        relax_cut(T, k0, end, &o);
                    else
                        relax(T, k0, end, cf, A, ka, bA, t->cv[ca], B, kb, bB, t->cv[cb]);
                }
            }
            if (lo > S)
                t->cv[c] = HUGE_VAL;
            else if (hi <= S)
                t->cv[c] = t->ca[c]; /* hi is the saturation point */
            else
                t->cv[c] = T[S - lo];
            if (t->cap != HUGE_VAL)
                cut_over_cap(t, i, l);
        }
    }
}

/* The best time of cell (i, l) with m units free, every option checked:
 * "chain" (F_all at i) and every "leaf" j (F_ck at i, F_none up to j-1).
 * *choice (when not NULL) gets 0 for chain, else the leaf's j.  The
 * unpruned fill and the schedule rebuild both use it, so they compare the
 * same doubles computed the same way. */
static double cell_best(const struct remat__mt *t, size_t i, size_t l, int32_t m, size_t *choice)
{
    int32_t S = t->S;
    double best = HUGE_VAL;
    size_t pick = 0;
    int32_t a = t->uxb[i];
    int32_t own = max32(t->uown[i], up(t, chain_bwd_bytes(t, i, l)));
    if (m >= own && m - a >= 0)
        best = (t->tf[i] + get(t, cell(t, i + 1, l), m - a)) + t->tb[i];
    double cf = t->tf[i];
    int32_t fd = t->uf0[i];
    for (size_t j = i + 1; j <= l; j++) {
        if (j > i + 1) {
            fd = max32(fd, t->uf[j - 1]);
            cf += t->tf[j - 1];
        }
        /* fd never falls as j grows: no later leaf fits either. */
        if (fd > m)
            break;
        int32_t aj = t->ux[j - 1];
        int64_t mb = (int64_t)m + t->dg[cell(t, j, l)];
        if (m - aj < 0 || mb < 0)
            continue;
        double v =
            (cf + get(t, cell(t, j, l), m - aj)) + get(t, cell(t, i, j - 1), mb > S ? S : mb);
        if (v < best) {
            best = v;
            pick = j;
        }
    }
    if (choice)
        *choice = pick;
    return best;
}

/* Rotor's fill, unpruned: every m of every cell, every option checked per m.
 * Kept for the bench (what pruning buys) and for the tests (both agree). */
static void fill_full(struct remat__mt *t)
{
    size_t n = t->n;
    int32_t S = t->S;
    for (size_t l = 1; l <= n; l++) {
        size_t pc = cell(t, l + 1, l);
        t->hi[pc] = t->lo[pc];
        t->cv[pc] = t->lo[pc] > S ? HUGE_VAL : 0.0;
        for (size_t i = top_own_row(t, l); i >= 1; i--) {
            if (stop(t))
                return;
            size_t c = cell(t, i, l);
            double *T = t->tab + t->off[c];
            for (int32_t m = 0; m <= S; m++)
                T[m] = cell_best(t, i, l, m, NULL);
            t->cv[c] = T[S];
        }
    }
}

int remat__mt_fill(const struct remat_profile *p, int64_t budget_bytes, size_t slots, int prune,
                   struct remat__mt **out, struct remat_error *err)
{
    return remat__mt_fill_cancel(p, budget_bytes, slots, prune, NULL, out, err);
}

int remat__mt_fill_cancel(const struct remat_profile *p, int64_t budget_bytes, size_t slots,
                          int prune, const struct remat__cancel *cancel, struct remat__mt **out,
                          struct remat_error *err)
{
    return remat__mt_fill_capped(p, budget_bytes, slots, prune, HUGE_VAL, 0, cancel, out, err);
}

size_t remat__mt_exact_from(const struct remat__mt *t)
{
    return (size_t)t->exact_from;
}

static int fill_impl(const struct remat_profile *p, const size_t *ends, size_t g,
                     int64_t budget_bytes, size_t slots, int prune, double cap_ms,
                     int64_t root_lo_bytes, const struct remat__cancel *cancel,
                     struct remat__mt **out, struct remat_error *err);

int remat__mt_fill_capped(const struct remat_profile *p, int64_t budget_bytes, size_t slots,
                          int prune, double cap_ms, int64_t root_lo_bytes,
                          const struct remat__cancel *cancel, struct remat__mt **out,
                          struct remat_error *err)
{
    return fill_impl(p, NULL, 0, budget_bytes, slots, prune, cap_ms, root_lo_bytes, cancel, out,
                     err);
}

int remat__mt_fill_groups(const struct remat_profile *p, const size_t *ends, size_t g,
                          int64_t budget_bytes, size_t slots, double cap_ms, int64_t root_lo_bytes,
                          const struct remat__cancel *cancel, struct remat__mt **out,
                          struct remat_error *err)
{
    return fill_impl(p, ends, g, budget_bytes, slots, 1, cap_ms, root_lo_bytes, cancel, out, err);
}

static int fill_impl(const struct remat_profile *p, const size_t *ends, size_t g,
                     int64_t budget_bytes, size_t slots, int prune, double cap_ms,
                     int64_t root_lo_bytes, const struct remat__cancel *cancel,
                     struct remat__mt **out, struct remat_error *err)
{
    *out = NULL;
    /* prune = 3 is the solver's fill without the periodic sharing: the
     * tests' reference for it. */
    int share = prune == 1 || prune == 4, old_cut = prune == 4;
    if (prune == 3 || prune == 4)
        prune = 1;
    if (prune != 1)
        cap_ms = HUGE_VAL; /* the cut needs the pruned fill's layout */
    if (slots == 0)
        slots = REMAT__MT_DEFAULT_SLOTS;
    if (slots > REMAT_MT_MAX_SLOTS)
        return remat__error(err, REMAT_ELIMIT, "/mem_slots", "mem_slots is over %d",
                            REMAT_MT_MAX_SLOTS);
    if (ends != NULL)
        share = 0;
    /* A shared table is checked on its cells once its period is known. */
    int rc = remat__mt_check_stages(share ? 0 : ends != NULL ? g : p->n_stages, p->n_stages, err);
    if (rc != REMAT_OK)
        return rc;
    struct remat__mt *t = calloc(1, sizeof *t);
    if (t == NULL)
        return remat__error(err, REMAT_ENOMEM, "", "out of memory");
    t->cancel = cancel;
    t->cap = cap_ms;
    t->old_cut = old_cut;
    rc =
        ends != NULL ? remat__mt_load_groups(t, p, ends, g, err) : remat__mt_load_stages(t, p, err);
    if (rc == REMAT_OK && cap_ms != HUGE_VAL) {
        t->tt = malloc((t->n + 1) * sizeof(double));
        if (t->tt == NULL)
            rc = remat__error(err, REMAT_ENOMEM, "", "out of memory");
        else
            for (size_t k = 0; k <= t->n; k++)
                t->tt[k] = k == 0 ? 0.0 : t->tt[k - 1] + (t->tf[k] + t->tb[k]);
    }
    if (rc != REMAT_OK) {
        remat__mt_free(t);
        return rc;
    }
    /* The optimizer's state is live throughout, like the weights. */
    t->base = t->pp[t->n] + t->x[0] + p->optimizer.state_bytes;
    t->prune = prune;
    int64_t avail = budget_bytes - t->base;
    if (avail < 0) {
        remat__mt_free(t);
        return remat__error(err, REMAT_EINFEASIBLE, "/budget_bytes",
                            "the budget is below the weights and the input");
    }
    t->unit = avail / (int64_t)slots + (avail % (int64_t)slots != 0);
    if (t->unit < 1)
        t->unit = 1;
    t->S = (int32_t)(avail / t->unit);
    /* The two limits hold for shared cells too: a source is wanted from the
     * least m any of its copies is read at (raise_to_needs), and the cap's
     * cut (cut_over_cap) reads only the time of the stages inside a cell,
     * the same for every copy. */
    if (share)
        remat__mt_find_period(t);
    else
        remat__mt_no_period(t);
    rc = remat__mt_check_cells(t, err);
    if (rc != REMAT_OK) {
        remat__mt_free(t);
        return rc;
    }
    size_t n = t->n, ncell = t->ncell;
    if (unit_tables(t) != REMAT_OK) {
        remat__mt_free(t);
        return remat__error(err, REMAT_ENOMEM, "", "out of memory");
    }
    t->lo = malloc(ncell * sizeof(int32_t));
    t->hi = malloc(ncell * sizeof(int32_t));
    t->sat = malloc(ncell * sizeof(int32_t));
    t->cv = malloc(ncell * sizeof(double));
    t->ca = malloc(ncell * sizeof(double));
    t->off = calloc(ncell, sizeof(size_t)); /* pseudo-cells store nothing: 0 */
    if (!t->lo || !t->hi || !t->sat || !t->cv || !t->ca || !t->off) {
        remat__mt_free(t);
        return remat__error(err, REMAT_ENOMEM, "", "out of memory");
    }
    floors(t);
    if (t->canceled) {
        remat__mt_free(t);
        return remat__error(err, REMAT_ECANCELED, "", "the solve was canceled");
    }
    /* Lay out the stored ranges.  The limit is on the whole table's, so that
     * whether a fill is refused does not depend on root_lo. */
    size_t len = 0;
    for (size_t l = 1; l <= n; l++) {
        for (size_t i = 1, top = top_own_row(t, l); i <= top; i++) {
            size_t c = cell(t, i, l);
            if (prune != 1) {
                t->lo[c] = 0;
                t->hi[c] = t->S + 1;
            } else {
                t->hi[c] = min32(t->sat[c], t->S + 1);
                if (t->hi[c] < t->lo[c])
                    t->hi[c] = t->lo[c];
            }
            len += (size_t)(t->hi[c] - t->lo[c]);
        }
    }
    if (len > (size_t)(REMAT_MT_MAX_TABLE_BYTES / (int64_t)sizeof(double))) {
        remat__mt_free(t);
        return remat__error(err, REMAT_ELIMIT, "/mem_slots", "the table would take over %lld MiB",
                            (long long)(REMAT_MT_MAX_TABLE_BYTES >> 20));
    }
    int64_t r = (root_lo_bytes - t->base) / t->unit;
    t->exact_from = prune != 1 || r <= 0 || n == 0 ? 0 : r > t->S ? t->S : (int32_t)r;
    if (t->exact_from > 0) {
        if (raise_to_needs(t, t->exact_from) != REMAT_OK) {
            remat__mt_free(t);
            return remat__error(err, REMAT_ENOMEM, "", "out of memory");
        }
    }
    /* Row by row: the leaves of a cell (i, l) read the row's cells (i, j)
     * for every j < l, one after the other. */
    len = 0;
    for (size_t i = 1; i <= n; i++) {
        size_t l0 = shared_cell(t, i, i) ? t->per_l0 + 1 : i;
        for (size_t l = l0; l <= n; l++) {
            size_t c = cell(t, i, l);
            t->off[c] = len;
            len += (size_t)(t->hi[c] - t->lo[c]);
        }
    }
    t->tab_len = len;
    t->tab = malloc((len ? len : 1) * sizeof(double));
    if (t->tab == NULL) {
        remat__mt_free(t);
        return remat__error(err, REMAT_ENOMEM, "", "out of memory");
    }
    if (prune)
        fill_pruned(t); /* with prune == 2 every range is [0, S] */
    else
        fill_full(t);
    if (t->canceled) {
        remat__mt_free(t);
        return remat__error(err, REMAT_ECANCELED, "", "the solve was canceled");
    }
    *out = t;
    return REMAT_OK;
}

size_t remat__mt_top(const struct remat__mt *t)
{
    return (size_t)t->S;
}

int64_t remat__mt_unit(const struct remat__mt *t)
{
    return t->unit;
}

int64_t remat__mt_budget_at(const struct remat__mt *t, size_t m)
{
    return t->base + (int64_t)m * t->unit;
}

size_t remat__mt_table_bytes(const struct remat__mt *t)
{
    size_t ncell = t->ncell;
    return t->tab_len * sizeof(double) +
           ncell * (3 * sizeof(int32_t) + 2 * sizeof(double) + sizeof(size_t));
}

double remat__mt_time(const struct remat__mt *t, size_t m)
{
    if (m > (size_t)t->S)
        m = (size_t)t->S;
    return get(t, cell(t, 1, t->n), (int64_t)m);
}

static int push_chain_all(const struct remat__mt *t, size_t i, size_t l, struct remat_schedule *s)
{
    int rc = REMAT_OK;
    for (size_t k = i; k <= l && rc == REMAT_OK; k++)
        rc = remat_schedule_push(s, REMAT_OP_F_ALL, (uint32_t)k);
    if (rc == REMAT_OK && l == t->n)
        rc = remat_schedule_push(s, REMAT_OP_LOSS, (uint32_t)t->n);
    for (size_t k = l; k >= i && rc == REMAT_OK; k--)
        rc = remat_schedule_push(s, REMAT_OP_B, (uint32_t)k);
    return rc;
}

/* Rebuilds the choice the fill made at (i, l, m) by evaluating the options
 * with the same expressions in the same order (so the same doubles), then
 * emits the ops and recurses. */
static int rebuild(const struct remat__mt *t, size_t i, size_t l, int32_t m,
                   struct remat_schedule *s)
{
    if (i == l + 1)
        return l == t->n ? remat_schedule_push(s, REMAT_OP_LOSS, (uint32_t)l) : REMAT_OK;
    size_t c = cell(t, i, l);
    if (m >= t->sat[c])
        return push_chain_all(t, i, l, s);
    if (m < t->lo[c])
        return REMAT_EINVAL;
    int32_t S = t->S;
    size_t choice; /* 0 = chain, else j */
    double best = cell_best(t, i, l, m, &choice);
    if (best == HUGE_VAL)
        return REMAT_EINVAL;
    int rc;
    if (choice == 0) {
        rc = remat_schedule_push(s, REMAT_OP_F_ALL, (uint32_t)i);
        if (rc == REMAT_OK)
            rc = rebuild(t, i + 1, l, m - t->uxb[i], s);
        if (rc == REMAT_OK)
            rc = remat_schedule_push(s, REMAT_OP_B, (uint32_t)i);
        return rc;
    }
    size_t j = choice;
    rc = remat_schedule_push(s, REMAT_OP_F_CK, (uint32_t)i);
    for (size_t k = i + 1; k < j && rc == REMAT_OK; k++)
        rc = remat_schedule_push(s, REMAT_OP_F_NONE, (uint32_t)k);
    if (rc == REMAT_OK)
        rc = rebuild(t, j, l, m - t->ux[j - 1], s);
    int64_t mb = (int64_t)m + t->dg[cell(t, j, l)];
    if (rc == REMAT_OK)
        rc = rebuild(t, i, j - 1, (int32_t)(mb > S ? S : mb), s);
    return rc;
}

int remat__mt_schedule(const struct remat__mt *t, size_t m, struct remat_schedule *out)
{
    if (t->prune != 1)
        return REMAT_EUNSUPPORTED;
    if (m > (size_t)t->S)
        m = (size_t)t->S;
    if (remat__mt_time(t, m) == HUGE_VAL)
        return REMAT_EINFEASIBLE;
    if (t->gend == NULL)
        return rebuild(t, 1, t->n, (int32_t)m, out);
    struct remat_schedule s;
    remat_schedule_init(&s);
    int rc = rebuild(t, 1, t->n, (int32_t)m, &s);
    if (rc == REMAT_OK)
        rc = remat__mt_expand(t->gend, t->n, t->gend[t->n], &s, out);
    remat_schedule_clear(&s);
    return rc;
}
