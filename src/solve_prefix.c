/* solve_prefix.c - exact solvers of the paper's revised objective (the
 * `prefix` model, paper-notes.md §3.2-3.4):
 *
 *   B(C) = max over segments k of [ P_k + Σ_{c_k < j ≤ c_{k+1}} d_j ],
 *   P_k = d_0 + d_{c_1} + ... + d_{c_k}.
 *
 * Every later segment pays the same P, so the suffix value
 *   M(i) = min( A(i, n), min_{i<j<n} max(A(i, j), d_j + M(j)) ),  A(i, j) = S_j - S_i
 * gives the optimum d_0 + M(0).  remat__prefix_ref evaluates it directly in
 * O(n^2); paper-linear keeps the candidates j in a monotone queue (j
 * ascending, V(j) = d_j + M(j) strictly descending) and the boundary between
 * those with A < V and those with A ≥ V only moves toward the front as i
 * falls, so each i costs amortised O(1): O(n) in all (§3.4, proved there).
 *
 * Ties: see docs/memory-model.md, "Tie-breaking in the solvers".  Both keep,
 * per i, the recompute time and checkpoint count of the path they chose and
 * break a tie in M(i) by (recompute, count, smaller j); paper-linear only
 * sees the two candidates its queue leaves (the last uncrossed one and the
 * first crossed one), the reference sees every j. */
#include "remat_private.h"

struct prefix_work {
    int64_t *S; /* S[j] = d_0 + ... + d_j */
    double *F;  /* F[i] = fwd_ms of stages 1..i in stage order */
    int64_t *M;
    int64_t *V;
    double *rec;
    uint32_t *cnt;
    uint32_t *next;
    uint32_t *queue;
};

static void work_free(struct prefix_work *w)
{
    free(w->S);
    free(w->F);
    free(w->M);
    free(w->V);
    free(w->rec);
    free(w->cnt);
    free(w->next);
    free(w->queue);
}

static int work_alloc(const struct remat_profile *p, struct prefix_work *w, struct remat_error *err)
{
    size_t n = p->n_stages;
    memset(w, 0, sizeof *w);
    if (n > UINT32_MAX - 2)
        return remat__error(err, REMAT_ELIMIT, "/stages", "too many stages");
    w->S = malloc((n + 1) * sizeof *w->S);
    w->F = malloc((n + 1) * sizeof *w->F);
    w->M = malloc((n + 1) * sizeof *w->M);
    w->V = malloc((n + 1) * sizeof *w->V);
    w->rec = malloc((n + 1) * sizeof *w->rec);
    w->cnt = malloc((n + 1) * sizeof *w->cnt);
    w->next = malloc((n + 1) * sizeof *w->next);
    w->queue = malloc((n + 2) * sizeof *w->queue);
    if (w->S == NULL || w->F == NULL || w->M == NULL || w->V == NULL || w->rec == NULL ||
        w->cnt == NULL || w->next == NULL || w->queue == NULL) {
        work_free(w);
        return remat__error(err, REMAT_ENOMEM, "", "out of memory for %zu stages", n);
    }
    w->S[0] = p->input_bytes;
    w->F[0] = 0;
    for (size_t j = 1; j <= n; j++) {
        w->S[j] = w->S[j - 1] + p->stages[j - 1].out_bytes;
        w->F[j] = w->F[j - 1] + p->stages[j - 1].fwd_ms;
    }
    return REMAT_OK;
}

/* Records the choice next(i) = j of value val, with its tie keys. */
static void take(struct prefix_work *w, size_t n, size_t i, size_t j, int64_t val)
{
    w->M[i] = val;
    w->next[i] = (uint32_t)j;
    if (j == n) {
        w->rec[i] = w->F[i];
        w->cnt[i] = 0;
    } else {
        w->rec[i] = w->rec[j];
        w->cnt[i] = w->cnt[j] + 1;
    }
}

/* Is next = a (value va) before next = b (value vb) from i? */
static int before(const struct prefix_work *w, size_t n, size_t i, size_t a, int64_t va, size_t b,
                  int64_t vb)
{
    if (va != vb)
        return va < vb;
    double ra = a == n ? w->F[i] : w->rec[a], rb = b == n ? w->F[i] : w->rec[b];
    if (ra != rb)
        return ra < rb;
    uint32_t ca = a == n ? 0 : w->cnt[a] + 1, cb = b == n ? 0 : w->cnt[b] + 1;
    if (ca != cb)
        return ca < cb;
    return a < b;
}

static int finish(const struct remat_profile *p, struct prefix_work *w, struct remat_plan *plan,
                  struct remat_error *err)
{
    size_t n = p->n_stages;
    size_t m = 0;
    /* The chosen path is written into queue, which is no longer needed. */
    for (size_t i = w->next[0]; i < n; i = w->next[i])
        w->queue[m++] = (uint32_t)i;
    size_t *ck = malloc((m > 0 ? m : 1) * sizeof *ck);
    if (ck == NULL)
        return remat__error(err, REMAT_ENOMEM, "", "out of memory");
    for (size_t k = 0; k < m; k++)
        ck[k] = w->queue[k];
    free(plan->checkpoints);
    plan->checkpoints = ck;
    plan->n_checkpoints = m;
    plan->objective_value = p->input_bytes + w->M[0];
    return REMAT_OK;
}

int remat__prefix_ref(const struct remat_profile *p, struct remat_plan *plan,
                      struct remat_error *err)
{
    struct prefix_work w;
    int rc = work_alloc(p, &w, err);
    if (rc < 0)
        return rc;
    size_t n = p->n_stages;
    const int64_t *S = w.S;
    for (size_t i = n; i-- > 0;) {
        size_t best = n;
        int64_t best_val = S[n] - S[i];
        w.next[i] = (uint32_t)n;
        for (size_t j = i + 1; j < n; j++) {
            int64_t a = S[j] - S[i], v = w.V[j];
            int64_t val = a > v ? a : v;
            if (before(&w, n, i, j, val, best, best_val)) {
                best = j;
                best_val = val;
            }
        }
        take(&w, n, i, best, best_val);
        if (i > 0)
            w.V[i] = remat__d(p, i) + w.M[i];
    }
    rc = finish(p, &w, plan, err);
    work_free(&w);
    return rc;
}

int remat__solve_paper_linear(const struct remat_profile *p, struct remat_plan *plan,
                              struct remat_error *err)
{
    struct prefix_work w;
    int rc = work_alloc(p, &w, err);
    if (rc < 0)
        return rc;
    size_t n = p->n_stages;
    const int64_t *S = w.S;
    const int64_t *V = w.V;
    /* The queue Q lives in queue[head..n+1): Q[t] = queue[head + t], pushed
     * at the front.  j = n sits at the back for good (V(n) = -inf). */
    uint32_t *Q = w.queue;
    size_t head = n, len = 1;
    Q[n] = (uint32_t)n;
    w.V[n] = INT64_MIN;
    size_t k = 0; /* Q[0..k) are uncrossed: A(i, j) < V(j) */
    for (size_t i = n; i-- > 0;) {
        if (i + 1 < n) {
            size_t j = i + 1;
            size_t popped = 0;
            while (len > 0 && V[Q[head]] >= V[j]) {
                head++;
                len--;
                popped++;
            }
            k = k > popped ? k - popped : 0;
            Q[--head] = (uint32_t)j;
            len++;
            k++;
        }
        while (k > 0 && S[Q[head + k - 1]] - S[i] >= V[Q[head + k - 1]])
            k--;
        /* j*(i) = Q[k], the first crossed candidate (it exists: n is always
         * crossed), against the last uncrossed one, Q[k-1]. */
        size_t js = Q[head + k];
        int64_t val = S[js] - S[i];
        size_t best = js;
        if (k > 0) {
            size_t jp = Q[head + k - 1];
            if (before(&w, n, i, jp, V[jp], best, val)) {
                best = jp;
                val = V[jp];
            }
        }
        take(&w, n, i, best, val);
        if (i > 0)
            w.V[i] = remat__d(p, i) + w.M[i];
    }
    rc = finish(p, &w, plan, err);
    work_free(&w);
    return rc;
}
