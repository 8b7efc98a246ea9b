/*
 * solve_mintime.c - the fastest persistent multi-level schedule under a byte
 * budget (Rotor's dynamic program with the `traced` accounting folded in).
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

#include "mintime.h"

struct remat__mt {
    size_t n;
    int32_t S;    /* top index: free units at the budget */
    int64_t unit; /* bytes per unit */
    int64_t base; /* W + x_0: live before the first op */
    int prune;
    /* Stage data, 1-based; x[0] is the input. */
    /* ft: the forward's transient without grad (F_ck, F_∅), fg: with grad
     * (F_all), bt: the backward's, signed (bwd_tmp_bytes - bwd_freed_bytes). */
    const int64_t *x, *xb, *ft, *fg, *bt;
    const double *tf, *tb;
    const int64_t *pp; /* pp[k] = Σ_{1..k} p */
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
};

/* Whether the fill is to stop (once told, it stays stopped). */
static int stop(struct remat__mt *t)
{
    if (!t->canceled && remat__cancelled(t->cancel))
        t->canceled = 1;
    return t->canceled;
}

static size_t cell(const struct remat__mt *t, size_t i, size_t l)
{
    return i * (t->n + 1) + l;
}

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

/* Bytes live at B(i)'s peak above the entry of the chain option of (i, l):
 * x̄_i, δ_i, the weight gradients of i..l, δ_{i-1} and b_i, less δ_l. */
static int64_t chain_bwd_bytes(const struct remat__mt *t, size_t i, size_t l)
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
static int64_t leaf_gain_bytes(const struct remat__mt *t, size_t i, size_t j, size_t l)
{
    (void)i;
    int64_t v = -t->x[j - 1] - (t->pp[l] - t->pp[j - 1]);
    if (l < t->n)
        v += t->x[l];
    return v;
}

/* Peak above entry of F_∅(k) for k > i in a leaf (x_{k-1} and x_k live), and
 * of F_ck(i) (x_i). */
static int64_t fwd_bytes(const struct remat__mt *t, size_t i, size_t k)
{
    return (k == i ? 0 : t->x[k - 1]) + t->x[k] + t->ft[k];
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
    free(t);
}

/* Copies the stage data into flat 1-based arrays and checks that every sum
 * the program forms stays far from overflow. */
static int load_stages(struct remat__mt *t, const struct remat_profile *p, struct remat_error *err)
{
    size_t n = p->n_stages;
    t->n = n;
    t->buf_i64 = malloc(6 * (n + 2) * sizeof(int64_t));
    t->buf_f64 = malloc(2 * (n + 2) * sizeof(double));
    if (t->buf_i64 == NULL || t->buf_f64 == NULL)
        return remat__error(err, REMAT_ENOMEM, "", "out of memory");
    int64_t *x = t->buf_i64, *xb = x + (n + 2), *ft = xb + (n + 2), *fg = ft + (n + 2);
    int64_t *bt = fg + (n + 2), *pp = bt + (n + 2);
    double *tf = t->buf_f64, *tb = tf + (n + 2);
    /* 2^61 bounds the sum of everything: every amount the program adds
     * is a sum of distinct fields, so int64 never overflows. */
    const int64_t cap = INT64_C(1) << 61;
    int64_t total = p->input_bytes;
    x[0] = p->input_bytes;
    xb[0] = ft[0] = fg[0] = bt[0] = pp[0] = 0;
    tf[0] = tb[0] = 0;
    for (size_t k = 1; k <= n; k++) {
        const struct remat_stage *s = &p->stages[k - 1];
        x[k] = s->out_bytes;
        xb[k] = s->saved_bytes;
        ft[k] = s->fwd_tmp_bytes;
        fg[k] = remat_stage_fwd_grad_tmp_bytes(s);
        bt[k] = s->bwd_tmp_bytes - s->bwd_freed_bytes;
        pp[k] = pp[k - 1] + s->param_bytes;
        tf[k] = s->fwd_ms;
        tb[k] = s->bwd_ms;
        /* What bt takes away is at most x̄_k + x_k (remat_profile_validate),
         * so no amount below falls under minus the total either. */
        if (s->bwd_freed_bytes < 0 || s->bwd_freed_bytes > s->saved_bytes + s->out_bytes)
            return remat__error(err, REMAT_EINVAL, "", "stage %zu frees more than it holds", k);
        int64_t add[6] = {x[k], xb[k], ft[k], fg[k], s->bwd_tmp_bytes, 2 * s->param_bytes};
        for (int a = 0; a < 6; a++) {
            if (add[a] < 0 || add[a] > cap || total > cap - add[a])
                return remat__error(err, REMAT_ELIMIT, "", "byte sizes add up past 2^61");
            total += add[a];
        }
    }
    int64_t opt[2] = {p->optimizer.state_bytes, p->optimizer.step_tmp_bytes};
    for (int a = 0; a < 2; a++) {
        if (opt[a] < 0 || opt[a] > cap || total > cap - opt[a])
            return remat__error(err, REMAT_ELIMIT, "", "byte sizes add up past 2^61");
        total += opt[a];
    }
    x[n + 1] = xb[n + 1] = ft[n + 1] = fg[n + 1] = bt[n + 1] = 0;
    pp[n + 1] = pp[n];
    tf[n + 1] = tb[n + 1] = 0;
    t->x = x;
    t->xb = xb;
    t->ft = ft;
    t->fg = fg;
    t->bt = bt;
    t->pp = pp;
    t->tf = tf;
    t->tb = tb;
    return REMAT_OK;
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
        for (size_t i = l; i >= 1; i--) {
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
 * loop the compiler can vectorise (T, A and B are distinct cells). */
static void relax(double *restrict T, int32_t ms, int32_t me, double c, const double *restrict A,
                  int32_t ka, int32_t bA, double cva, const double *restrict B, int32_t kb,
                  int32_t bB, double cvb)
{
    int32_t m = ms;
    while (m < me) {
        int inA = m < bA, inB = m < bB;
        int32_t end = me;
        if (inA && bA < end)
            end = bA;
        if (inB && bB < end)
            end = bB;
        if (inA && inB) {
            for (int32_t k = m; k < end; k++) {
                double v = (c + A[k - ka]) + B[k + kb];
                T[k] = v < T[k] ? v : T[k];
            }
        } else if (inA) {
            for (int32_t k = m; k < end; k++) {
                double v = (c + A[k - ka]) + cvb;
                T[k] = v < T[k] ? v : T[k];
            }
        } else if (inB) {
            for (int32_t k = m; k < end; k++) {
                double v = (c + cva) + B[k + kb];
                T[k] = v < T[k] ? v : T[k];
            }
        } else {
            double v = (c + cva) + cvb;
            for (int32_t k = m; k < end; k++)
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
static void cut_over_cap(struct remat__mt *t, size_t i, size_t l)
{
    size_t c = cell(t, i, l);
    double outside = t->tt[t->n] - (t->tt[l] - t->tt[i - 1]);
    double thr = (t->cap - outside) + 1e-9 * fabs(t->cap);
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
    size_t n = t->n, ncell = (n + 2) * (n + 1);
    int32_t S = t->S, none = S + 1;
    int32_t *need = malloc(ncell * sizeof(int32_t));
    if (need == NULL)
        return REMAT_ENOMEM;
    for (size_t c = 0; c < ncell; c++)
        need[c] = none;
    need[cell(t, 1, n)] = r;
    for (size_t l = n; l >= 1; l--) {
        for (size_t i = 1; i <= l; i++) {
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
                if (j <= l)
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
    t->dg = malloc((n + 2) * (n + 1) * sizeof(int32_t));
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
        for (size_t j = 2; j <= l; j++)
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
        for (size_t i = l; i >= 1; i--) {
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
                for (size_t j = i + 1; j <= l; j++) {
                    if (j > i + 1) {
                        fd = max32(fd, t->uf[j - 1]);
                        cf += t->tf[j - 1];
                    }
                    if (fd > S)
                        break;
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
                    int32_t k0 = s0 - lo, end = me;
                    if (t->prune == 1) {
                        /* The option's value only falls with m, so its value
                         * at the top of the range bounds it below everywhere;
                         * T only falls with m too, so where T is already at
                         * or under that bound the option cannot win: from
                         * the first such k on, found by bisection after a
                         * look at both ends (most options are cut whole or
                         * not at all).  Once was measured best: a second
                         * round with the value at the new top cut too little
                         * to pay for itself.  The margin keeps rounding from
                         * cutting a real improvement. */
                        int32_t k = end - 1;
                        double v = (cf + (k < bA ? A[k - ka] : t->cv[ca])) +
                                   (k < bB ? B[k + kb] : t->cv[cb]);
                        double thr = v - 1e-12 * fabs(v);
                        if (T[k0] <= thr)
                            continue;
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
                    }
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
        for (size_t i = l; i >= 1; i--) {
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

int remat__mt_fill_capped(const struct remat_profile *p, int64_t budget_bytes, size_t slots,
                          int prune, double cap_ms, int64_t root_lo_bytes,
                          const struct remat__cancel *cancel, struct remat__mt **out,
                          struct remat_error *err)
{
    *out = NULL;
    if (prune != 1)
        cap_ms = HUGE_VAL; /* the cut needs the pruned fill's layout */
    if (slots == 0)
        slots = REMAT__MT_DEFAULT_SLOTS;
    if (slots > REMAT_MT_MAX_SLOTS)
        return remat__error(err, REMAT_ELIMIT, "/mem_slots", "mem_slots is over %d",
                            REMAT_MT_MAX_SLOTS);
    if (p->n_stages > REMAT_MT_MAX_STAGES)
        return remat__error(err, REMAT_ELIMIT, "/stages", "min-time takes at most %d stages",
                            REMAT_MT_MAX_STAGES);
    struct remat__mt *t = calloc(1, sizeof *t);
    if (t == NULL)
        return remat__error(err, REMAT_ENOMEM, "", "out of memory");
    t->cancel = cancel;
    t->cap = cap_ms;
    int rc = load_stages(t, p, err);
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
    t->base = t->pp[p->n_stages] + t->x[0] + p->optimizer.state_bytes;
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
    size_t n = t->n, ncell = (n + 2) * (n + 1);
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
        for (size_t i = 1; i <= l; i++) {
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
    len = 0;
    for (size_t l = 1; l <= n; l++) {
        for (size_t i = 1; i <= l; i++) {
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
    size_t ncell = (t->n + 2) * (t->n + 1);
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
    return rebuild(t, 1, t->n, (int32_t)m, out);
}

/* ------------------------------------------------------------------------
 * The least peak over persistent schedules, exact in bytes.
 */

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
    size_t j = (size_t)d->choice[cell(t, i, l)];
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
    if (p->n_stages > REMAT_MT_MAX_STAGES)
        return remat__error(err, REMAT_ELIMIT, "/stages", "min-time takes at most %d stages",
                            REMAT_MT_MAX_STAGES);
    struct need_dp d;
    memset(&d, 0, sizeof d);
    struct remat__mt *t = &d.t;
    t->cancel = cancel;
    int rc = load_stages(t, p, err);
    size_t n = p->n_stages, ncell = (n + 2) * (n + 1);
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
            for (size_t i = l; i >= 1; i--) {
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
        if (sched != NULL) {
            rc = need_rebuild(&d, 1, n, sched);
            if (rc != REMAT_OK)
                rc = remat__error(err, rc, "", "out of memory");
        }
    }
    free(d.need);
    free(d.time);
    free(d.choice);
    free(t->buf_i64);
    free(t->buf_f64);
    return rc;
}

/* ------------------------------------------------------------------------
 * Plans
 */

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
                                       int64_t sa_peak, size_t slots,
                                       const struct remat__cancel *cancel, double have,
                                       struct remat_schedule *best, struct remat_error *err)
{
    int rc = 1;
    for (int whole = 0; whole < 2 && rc == 1; whole++) {
        struct remat__mt *t = NULL;
        struct remat_error skip;
        memset(&skip, 0, sizeof skip);
        rc = remat__mt_fill_capped(p, sa_peak, slots, 1, have, whole ? 0 : budget, cancel, &t,
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
    int rc = remat__mt_min_peak_cancel(p, &least_peak, &least, &cancel, err);
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
        rc = remat__mt_fill_capped(p, budget, opts->mem_slots, 1, HUGE_VAL, budget, &cancel, &t,
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
        rc = faster_from_store_all_table(p, budget, sa_peak, opts->mem_slots, &cancel, tb, &best,
                                         err);
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

/* ------------------------------------------------------------------------
 * The nested segment description (docs/min-time.md, "Applying a plan").
 *
 * A persistent schedule of the cell (i, l) is a list of items over i..l: a
 * stage run with grad (F_all .. B, the chain option) or a checkpointed
 * segment [i, j-1] (F_ck, F_∅ .. in the forward; its own list, recomputed
 * with grad, in the backward).  Their ops come as the forward parts left to
 * right, then the backward parts right to left, so the parser walks forward
 * pushing items and then pops them, parsing each segment's inner list.
 */

struct seg_parser {
    const struct remat_schedule *s;
    size_t n, pos;
};

static const struct remat_op *peek(const struct seg_parser *sp)
{
    return sp->pos < sp->s->n_ops ? &sp->s->ops[sp->pos] : NULL;
}

static int expect(struct seg_parser *sp, int kind, size_t stage)
{
    const struct remat_op *o = peek(sp);
    if (o == NULL || o->kind != kind || o->stage != stage)
        return -1;
    sp->pos++;
    return 0;
}

static json_t *seg_item(size_t first, size_t last, int checkpoint)
{
    return json_pack("{s:[I,I],s:b}", "stages", (json_int_t)first, (json_int_t)last, "checkpoint",
                     checkpoint);
}

/* Parses the list of cell (i, l) into arr.  Returns 0, -1 when the schedule
 * is not of this shape, -2 when out of memory. */
static int parse_list(struct seg_parser *sp, size_t i, size_t l, json_t *arr)
{
    size_t depth = 0;
    /* Forward parts, pushed as (first stage, last stage or tagged end). */
    size_t *stack = malloc((l - i + 2) * 2 * sizeof(size_t));
    if (stack == NULL)
        return -2;
    int rc = 0;
    while (i <= l) {
        const struct remat_op *o = peek(sp);
        if (o == NULL || o->stage != i) {
            rc = -1;
            break;
        }
        if (o->kind == REMAT_OP_F_ALL) {
            sp->pos++;
            stack[2 * depth] = i;
            stack[2 * depth + 1] = i;
            depth++;
            i++;
        } else if (o->kind == REMAT_OP_F_CK) {
            sp->pos++;
            size_t j = i + 1;
            while (j <= l && expect(sp, REMAT_OP_F_NONE, j) == 0)
                j++;
            if (j > l) {
                rc = -1;
                break;
            }
            stack[2 * depth] = i;
            stack[2 * depth + 1] = j - 1 + (l + 1); /* tagged: a segment [i, j-1] */
            depth++;
            i = j;
        } else {
            rc = -1;
            break;
        }
    }
    if (rc == 0 && l == sp->n && expect(sp, REMAT_OP_LOSS, sp->n) != 0)
        rc = -1;
    /* Items in order, then the backward parts right to left. */
    json_t **items = NULL;
    if (rc == 0 && depth > 0) {
        items = calloc(depth, sizeof(json_t *));
        if (items == NULL)
            rc = -2;
    }
    for (size_t k = depth; rc == 0 && k-- > 0;) {
        size_t a = stack[2 * k], tag = stack[2 * k + 1];
        if (tag <= l) {
            if (expect(sp, REMAT_OP_B, a) != 0) {
                rc = -1;
                break;
            }
            items[k] = seg_item(a, a, 0);
            if (items[k] == NULL)
                rc = -2;
        } else {
            size_t e = tag - (l + 1);
            items[k] = seg_item(a, e, 1);
            json_t *inner = items[k] != NULL ? json_array() : NULL;
            /* json_object_set_new takes inner even when it fails. */
            if (inner == NULL || json_object_set_new(items[k], "inner", inner) != 0) {
                rc = -2;
                break;
            }
            rc = parse_list(sp, a, e, inner);
        }
    }
    /* Merge runs of stages kept with grad into one item. */
    for (size_t k = 0; rc == 0 && k < depth; k++) {
        json_t *it = items[k];
        if (json_is_true(json_object_get(it, "checkpoint"))) {
            if (json_array_append(arr, it) != 0)
                rc = -2;
            continue;
        }
        size_t e = k;
        while (e + 1 < depth && !json_is_true(json_object_get(items[e + 1], "checkpoint")))
            e++;
        json_t *run = seg_item(stack[2 * k], stack[2 * e], 0);
        if (run == NULL || json_array_append_new(arr, run) != 0)
            rc = -2;
        k = e;
    }
    if (items != NULL)
        for (size_t k = 0; k < depth; k++)
            json_decref(items[k]);
    free(items);
    free(stack);
    return rc;
}

json_t *remat__nested_segments_json(const struct remat_profile *p, const struct remat_plan *plan)
{
    json_t *arr = json_array();
    if (arr == NULL)
        return NULL;
    struct seg_parser sp = {&plan->schedule, p->n_stages, 0};
    int rc = p->n_stages > 0 ? parse_list(&sp, 1, p->n_stages, arr) : -1;
    if (rc == 0 && sp.pos != plan->schedule.n_ops)
        rc = -1;
    if (rc == -2) {
        json_decref(arr);
        return NULL;
    }
    if (rc == -1) {
        /* Not a persistent schedule: there is no nesting to describe. */
        json_array_clear(arr);
    }
    return arr;
}
