/* solve_sum.c - exact solvers of the paper's first objective (the `sum`
 * model, ACG's linear-graph cost, paper-notes.md §2.3-2.4 and §5.2):
 *
 *   A(C) = Σ_{c ∈ {0} ∪ C ∪ {n}} d_c + max over segments of the interior sum.
 *
 * Both fix the max term B in turn.  For a fixed B the rest is a shortest
 * path over the chain whose edges (i, j) are the segments with interior
 * U(i, j) = S_{j-1} - S_i ≤ B, each node weighing d_j.  Every optimum's max
 * term is one of the U values, so the least of d_0 + path(B) + B over the
 * candidates is the optimum.
 *
 *  - paper-cubic solves each path with a suffix DP over a monotone deque
 *    (the feasible next checkpoints of i are a window that slides left as i
 *    falls): O(n) per candidate, O(n^3) in all.
 *  - acg is Feng & Huang's LinearSolver: the same candidates, each path found
 *    by relaxing every edge of the accessibility graph: O(n^2) per candidate.
 *
 * Ties (docs/memory-model.md): the path DP orders paths by (cost, recompute
 * time of the last checkpoint, number of checkpoints, first next checkpoint);
 * those keys combine lexicographically along a path, so each candidate's path
 * is the canonical one among its least-cost paths, and the candidates whose
 * total equals the optimum are compared with remat__tie_cmp.  An optimal set
 * C is a least-cost path at B = its own max term, so the result is exactly
 * the canonical optimum.
 *
 * Candidates are taken in ascending order and the search stops once
 * B + d_0 + d_n exceeds the best total found: no larger B can do better. */
#include <math.h>

#include "remat_private.h"

/* The canonical path per candidate: keys and next pointers, reused. */
struct path_dp {
    size_t n;
    const struct remat_profile *p;
    const int64_t *S; /* S[j] = d_0 + ... + d_j */
    const double *F;  /* F[i] = fwd_ms of stages 1..i, in stage order */
    int64_t *cost;    /* Σ d over the path's nodes after i, n included */
    double *rec;      /* recompute time of the path from i */
    uint32_t *cnt;    /* checkpoints after i */
    uint32_t *next;   /* the next checkpoint after i (n: none) */
    uint32_t *deque;
};

/* Is (c1, r1, n1, j1) before (c2, r2, n2, j2)? */
static int key_less(int64_t c1, double r1, uint32_t n1, size_t j1, int64_t c2, double r2,
                    uint32_t n2, size_t j2)
{
    if (c1 != c2)
        return c1 < c2;
    if (r1 != r2)
        return r1 < r2;
    if (n1 != n2)
        return n1 < n2;
    return j1 < j2;
}

/* Key of going from i straight to j < n (independent of i). */
static int j_before(const struct path_dp *dp, size_t a, size_t b)
{
    return key_less(remat__d(dp->p, a) + dp->cost[a], dp->rec[a], dp->cnt[a] + 1, a,
                    remat__d(dp->p, b) + dp->cost[b], dp->rec[b], dp->cnt[b] + 1, b);
}

/* Takes next = j for node i (j == n: no further checkpoint). */
static void take(struct path_dp *dp, size_t i, size_t j)
{
    size_t n = dp->n;
    if (j == n) {
        dp->cost[i] = remat__d(dp->p, n);
        dp->rec[i] = dp->F[i];
        dp->cnt[i] = 0;
    } else {
        dp->cost[i] = remat__d(dp->p, j) + dp->cost[j];
        dp->rec[i] = dp->rec[j];
        dp->cnt[i] = dp->cnt[j] + 1;
    }
    dp->next[i] = (uint32_t)j;
}

/* Least-key choice between "straight to n" (when allowed) and j < n. */
static void choose(struct path_dp *dp, size_t i, int n_ok, size_t j, int j_ok)
{
    size_t n = dp->n;
    if (n_ok &&
        (!j_ok || key_less(remat__d(dp->p, n), dp->F[i], 0, n, remat__d(dp->p, j) + dp->cost[j],
                           dp->rec[j], dp->cnt[j] + 1, j)))
        take(dp, i, n);
    else
        take(dp, i, j);
}

/* paper-cubic's path for one B: a sliding-window minimum over a deque.  The
 * window of i is j in [i+1, R(i)] with U(i, j) ≤ B; as i falls, j = i+1
 * enters at the front and the far end R(i) only moves left. */
static size_t path_deque(struct path_dp *dp, int64_t B)
{
    size_t n = dp->n;
    const int64_t *S = dp->S;
    size_t head = n, tail = n; /* deque[head..tail): j ascending, keys descending */
    for (size_t i = n; i-- > 0;) {
        if (i + 1 < n) {
            size_t j = i + 1;
            /* Equal keys: the newcomer has the smaller j, so it wins. */
            while (head < tail && !j_before(dp, dp->deque[head], j))
                head++;
            dp->deque[--head] = (uint32_t)j;
        }
        while (head < tail && S[dp->deque[tail - 1] - 1] - S[i] > B)
            tail--;
        int n_ok = S[n - 1] - S[i] <= B;
        choose(dp, i, n_ok, head < tail ? dp->deque[tail - 1] : 0, head < tail);
    }
    return 2 * n; /* each j enters and leaves the deque once */
}

/* acg's path for one B: every edge of the accessibility graph relaxed. */
static size_t path_edges(struct path_dp *dp, int64_t B)
{
    size_t n = dp->n;
    const int64_t *S = dp->S;
    size_t steps = n;
    for (size_t i = n; i-- > 0;) {
        size_t best = 0;
        int have = 0;
        for (size_t j = i + 1; j < n && S[j - 1] - S[i] <= B; j++) {
            steps++;
            if (!have || j_before(dp, j, best)) {
                best = j;
                have = 1;
            }
        }
        choose(dp, i, S[n - 1] - S[i] <= B, best, have);
    }
    return steps;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int solve_sum(const struct remat_profile *p, struct remat_plan *plan, int use_deque,
                     size_t max_steps, const struct remat__cancel *cancel, struct remat_error *err)
{
    size_t n = p->n_stages;
    size_t max_n = use_deque ? REMAT__CUBIC_MAX_STAGES : REMAT__ACG_MAX_STAGES;
    if (n > max_n)
        return remat__error(err, REMAT_ELIMIT, "/stages",
                            "%s takes at most %zu stages (this chain has %zu); use "
                            "paper-linear or min-peak",
                            use_deque ? "paper-cubic" : "acg", max_n, n);
    int64_t *S = malloc((n + 1) * sizeof *S);
    double *F = malloc((n + 1) * sizeof *F);
    struct path_dp dp = {.n = n, .p = p, .S = S, .F = F};
    dp.cost = malloc((n + 1) * sizeof *dp.cost);
    dp.rec = malloc((n + 1) * sizeof *dp.rec);
    dp.cnt = malloc((n + 1) * sizeof *dp.cnt);
    dp.next = malloc((n + 1) * sizeof *dp.next);
    dp.deque = malloc((n + 1) * sizeof *dp.deque);
    size_t *best_set = malloc((n + 1) * sizeof *best_set);
    size_t *cur_set = malloc((n + 1) * sizeof *cur_set);
    int64_t *cand = NULL;
    int rc = REMAT_OK;
    if (S == NULL || F == NULL || dp.cost == NULL || dp.rec == NULL || dp.cnt == NULL ||
        dp.next == NULL || dp.deque == NULL || best_set == NULL || cur_set == NULL) {
        rc = remat__error(err, REMAT_ENOMEM, "", "out of memory");
        goto out;
    }
    S[0] = remat__d(p, 0);
    F[0] = 0;
    for (size_t j = 1; j <= n; j++) {
        S[j] = S[j - 1] + remat__d(p, j);
        F[j] = F[j - 1] + p->stages[j - 1].fwd_ms;
    }
    /* Any set's value bounds the optimum, and so the useful candidates:
     * B ≤ A(set) - d_0 - d_n.  The sqrt set keeps that list near n^1.5
     * long instead of n^2 / 2; collect those U values only. */
    size_t k = (size_t)lround(sqrt((double)n));
    size_t m0 = 0;
    cur_set[0] = 0;
    for (size_t c = 1; c < k; c++)
        cur_set[m0++] = c * (n / k);
    int64_t ub = remat__sum_value(p, cur_set, m0);
    if (S[n] < ub)
        ub = S[n];
    int64_t limit = ub - remat__d(p, 0) - remat__d(p, n);
    size_t n_cand = 0, cap = 0;
    for (size_t a = 0; a < n; a++)
        for (size_t b = a + 1; b <= n && S[b - 1] - S[a] <= limit; b++) {
            if (n_cand == cap) {
                size_t ncap = cap ? 2 * cap : 1024;
                int64_t *g = realloc(cand, ncap * sizeof *g);
                if (g == NULL) {
                    rc = remat__error(err, REMAT_ENOMEM, "", "out of memory for %zu candidates",
                                      ncap);
                    goto out;
                }
                cand = g;
                cap = ncap;
            }
            cand[n_cand++] = S[b - 1] - S[a];
        }
    qsort(cand, n_cand, sizeof *cand, cmp_i64);
    int64_t best = INT64_MAX;
    size_t best_m = 0;
    int64_t ends = remat__d(p, 0) + remat__d(p, n);
    size_t steps = 0; /* work done, against REMAT__SUM_MAX_STEPS */
    for (size_t c = 0; c < n_cand; c++) {
        int64_t B = cand[c];
        if (c > 0 && B == cand[c - 1])
            continue;
        if (B + ends > best)
            break;
        if (steps > max_steps) {
            rc = remat__error(err, REMAT_ELIMIT, "/stages",
                              "%s gives up on this chain after %zu steps (long segments make it "
                              "slow); use paper-linear or min-peak",
                              use_deque ? "paper-cubic" : "acg", steps);
            goto out;
        }
        /* One bound's path is O(n^2) steps at most: milliseconds. */
        if (remat__cancelled(cancel)) {
            rc = remat__error(err, REMAT_ECANCELED, "", "the solve was canceled");
            goto out;
        }
        steps += use_deque ? path_deque(&dp, B) : path_edges(&dp, B);
        int64_t total = remat__d(p, 0) + dp.cost[0] + B;
        if (total > best)
            continue;
        size_t m = 0;
        for (size_t i = dp.next[0]; i < n; i = dp.next[i])
            cur_set[m++] = i;
        if (total < best || remat__tie_cmp(p, cur_set, m, best_set, best_m) < 0) {
            best = total;
            memcpy(best_set, cur_set, m * sizeof *cur_set);
            best_m = m;
        }
    }
    rc = remat__plan_set_checkpoints(plan, best_set, best_m, err);
    plan->objective_value = best;
out:
    free(S);
    free(F);
    free(dp.cost);
    free(dp.rec);
    free(dp.cnt);
    free(dp.next);
    free(dp.deque);
    free(best_set);
    free(cur_set);
    free(cand);
    return rc;
}

int remat__solve_paper_cubic(const struct remat_profile *p, struct remat_plan *plan,
                             struct remat_error *err)
{
    return solve_sum(p, plan, 1, REMAT__SUM_MAX_STEPS, NULL, err);
}

int remat__solve_acg(const struct remat_profile *p, struct remat_plan *plan,
                     struct remat_error *err)
{
    return solve_sum(p, plan, 0, REMAT__SUM_MAX_STEPS, NULL, err);
}

int remat__solve_sum_steps(const struct remat_profile *p, struct remat_plan *plan, int cubic,
                           size_t max_steps, struct remat_error *err)
{
    return solve_sum(p, plan, cubic, max_steps, NULL, err);
}

int remat__solve_sum_cancel(const struct remat_profile *p, struct remat_plan *plan, int cubic,
                            const struct remat__cancel *cancel, struct remat_error *err)
{
    return solve_sum(p, plan, cubic, REMAT__SUM_MAX_STEPS, cancel, err);
}
