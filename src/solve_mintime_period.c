/*
 * solve_mintime_period.c - chains of repeated blocks: the period over which
 * the min-time table's cells repeat, and the layout that stores each
 * repeated cell once (docs/min-time.md, "Chains of repeated blocks").
 *
 * A stack of identical layers cut into the same stages repeats its stage
 * records with a period p.  Cell (i, l) reads only the records of stages
 * i - 1..l and whether i > 1 and l < n, so where those repeat, p stages
 * later, the cell is the one p before over again: the same numbers by the
 * same expressions, hence the same doubles.  The table then keeps the rows
 * that start in the first period (and before it) and the columns that end
 * after the last one; every other cell is one of those moved by a whole
 * number of periods (solve_mintime_table.h, cell()).
 */
#include <string.h>

#include "solve_mintime_table.h"

/* Whether stages s and s + p have the same record, as the table reads it. */
static int same_stage(const struct remat__mt *t, size_t s, size_t p)
{
    size_t r = s + p;
    return t->x[s] == t->x[r] && t->xb[s] == t->xb[r] && t->ft[s] == t->ft[r] &&
           t->fg[s] == t->fg[r] && t->bt[s] == t->bt[r] &&
           t->pp[s] - t->pp[s - 1] == t->pp[r] - t->pp[r - 1] && t->tf[s] == t->tf[r] &&
           t->tb[s] == t->tb[r];
}

void remat__mt_no_period(struct remat__mt *t)
{
    t->per_p = t->per_a = t->per_e = t->per_l0 = 0;
    t->per_r = t->n + 1;
    t->ncell = (t->n + 2) * (t->n + 1);
}

void remat__mt_find_period(struct remat__mt *t)
{
    size_t n = t->n, best = 0;
    remat__mt_no_period(t);
    /* With the stretch [a, e], the cells (i, l) with a + p < i <= l <=
     * min(e + p, n - 1) are shared: K(K + 1)/2 of them, K = min(e + p, n -
     * 1) - a - p.  K is at most n - 2 - p, which bounds the search. */
    for (size_t p = 1; p + 2 < n && n - 2 - p > best; p++) {
        size_t s = 1;
        while (s + p <= n) {
            if (!same_stage(t, s, p)) {
                s++;
                continue;
            }
            size_t a = s;
            while (s + p <= n && same_stage(t, s, p))
                s++;
            size_t e = s - 1, top = e + p < n - 1 ? e + p : n - 1;
            size_t k = top > a + p ? top - a - p : 0;
            if (k > best) {
                best = k;
                t->per_p = p;
                t->per_a = a;
                t->per_e = e;
            }
        }
    }
    if (t->per_p == 0) {
        remat__mt_no_period(t);
        return;
    }
    /* The rows 0..per_r, then the columns per_l0 + 1..n (i from per_r + 1
     * to l + 1, indexed by i for simplicity). */
    t->per_r = t->per_a + t->per_p;
    t->per_l0 = t->per_e + t->per_p < n - 1 ? t->per_e + t->per_p : n - 1;
    t->ncell = (t->per_r + 1) * (n + 1) + (n - t->per_l0) * (n + 2);
}

int remat__mt_check_stages(size_t table_stages, size_t n, struct remat_error *err)
{
    if (table_stages > REMAT_MT_TABLE_MAX_STAGES || n > REMAT_MT_MAX_STAGES)
        return remat__error(err, REMAT_ELIMIT, "/stages", "one table takes at most %d stages",
                            REMAT_MT_TABLE_MAX_STAGES);
    return REMAT_OK;
}

int remat__mt_check_cells(const struct remat__mt *t, struct remat_error *err)
{
    size_t most = (size_t)(REMAT_MT_TABLE_MAX_STAGES + 2) * (REMAT_MT_TABLE_MAX_STAGES + 1);
    if (t->ncell > most)
        return remat__error(err, REMAT_ELIMIT, "/stages",
                            "one table takes at most %d stages (a stack of repeated blocks: as "
                            "many cells)",
                            REMAT_MT_TABLE_MAX_STAGES);
    return REMAT_OK;
}

int remat__mt_profile_shares(const struct remat_profile *p, struct remat_error *err)
{
    struct remat__mt t;
    memset(&t, 0, sizeof t);
    int rc = remat__mt_load_stages(&t, p, err);
    if (rc == REMAT_OK) {
        remat__mt_find_period(&t);
        /* Worth the plain table when what is left to fill, its cells
         * weighted by their O(n) options, is no more than a 300-stage
         * chain's whole table: a stack of many copies of a block, not a
         * long chain with a short repeat in it. */
        size_t n = t.n, top = t.per_e + t.per_p < n - 1 ? t.per_e + t.per_p : n - 1;
        size_t k = t.per_p != 0 && top > t.per_a + t.per_p ? top - t.per_a - t.per_p : 0;
        double left = ((double)n * (double)(n + 1) - (double)k * (double)(k + 1)) / 2 * (double)n;
        double room = (double)REMAT_MT_EXACT_STAGES * (REMAT_MT_EXACT_STAGES + 1) / 2 *
                      (double)REMAT_MT_EXACT_STAGES;
        rc = t.per_p != 0 && left <= room;
    }
    free(t.buf_i64);
    free(t.buf_f64);
    return rc;
}

size_t remat__mt_period(const struct remat__mt *t)
{
    return t->per_p;
}
