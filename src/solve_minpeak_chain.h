/* solve_minpeak_chain.h - the per-stage quantities of min-peak's
 * recurrence (docs/min-peak.md), shared by the sweep that finds the values
 * M(i) (solve_minpeak.c) and the reading of the checkpoint set off them
 * (solve_minpeak_set.c).  Private to those two. */
#ifndef REMAT_SOLVE_MINPEAK_CHAIN_H
#define REMAT_SOLVE_MINPEAK_CHAIN_H
#include "solve_minpeak.h"

/* Byte counts above this total are refused so that no sum below can
 * overflow: every value the solver forms is at most a few totals. */
#define TOTAL_LIMIT (INT64_C(1) << 58)
/* Larger than any real value (each is at most 4 * TOTAL_LIMIT = 2^60), and
 * INF plus or minus a real value still fits in 64 bits. */
#define INF (INT64_C(1) << 61)
#define NONE INT64_MIN

static inline int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

static inline int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* The per-stage quantities of docs/min-peak.md, indices 0..n (index 0 only
 * where it means something), all relative to W, the weights. */
struct chain {
    size_t n;
    int64_t w;        /* W: the weights, live throughout */
    int64_t loss;     /* Sb_n + x_n: the LOSS op of the last segment */
    int saved_ge_out; /* every x̄_i >= x_i and x̄_i + f^g_i >= x_i + f_i: the no-grad
                       * forward term is dominated (Lemma 2) */
    int64_t *x;       /* x_i, out_bytes; x_0 the input */
    int64_t *sb;      /* Sb_i = x̄_1 + ... + x̄_i */
    int64_t *u;       /* u_l = Sb_l + f^g_l: F_all(l) during recompute */
    int64_t *beta;    /* beta_l = Sb_l + x_l + G_{>=l} + [l>1] x_{l-1} + b_l - r_l: B(l) */
    int64_t *gam; /* gam_j = x_j + G_{>j}: delta_j and dW live while segment (., j] recomputes */
    int64_t *g;   /* g_l = x_l + f_l: F_∅/F_ck(l); h_l = x_{l-1} + g_l when l is not first */
    int64_t *m;   /* M(i), i in 0..n-1 */
    int64_t *tl;  /* Tlast(i), i in 0..n-1 */
    int64_t *mem; /* the one allocation behind the arrays */
};

/* The checkpoint set of least peak read off c's values M (and Tlast), into
 * plan->checkpoints / n_checkpoints: the greedy scan's, or the
 * least-recompute pass's (at most `budget` steps; 0: not run) when that one
 * finishes and comes first in the tie order.  A pass that would give up is
 * not run, unless spend (then it runs until it gives up; the same set).
 * Returns REMAT_OK or REMAT_ENOMEM (plan cleared). */
int remat__mp_choose_set(const struct chain *c, const struct remat_profile *p, size_t budget,
                         int spend, struct remat_plan *plan, struct remat_error *err);
#endif
