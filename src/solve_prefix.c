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
    int64_t *S;      /* S[j] = d_0 + ... + d_j */
    double *F;       /* F[i] = fwd_ms of stages 1..i in stage order */
    int64_t *V;      /* V(j) = d_j + M(j) for 0 < j < n: the reference's (paper-linear
                      * keeps those of its queue's entries only, in qv) */
    uint32_t *last;  /* the last checkpoint of the path chosen from i (i itself if none) */
    uint32_t *cnt;   /* checkpoints on the path chosen from i, after i */
    uint32_t *next;  /* the next checkpoint chosen from i (n: none) */
    uint32_t *queue; /* paper-linear's queue, then the forward pass's deque */
    int64_t *qv;     /* beside queue: V of each entry, then the deque's P */
    int64_t m0;      /* M(0) */
    void *mem;       /* one allocation behind the arrays: a million stages fault in once */
};

static int work_alloc(const struct remat_profile *p, struct prefix_work *w, struct remat_error *err)
{
    size_t n = p->n_stages;
    memset(w, 0, sizeof *w);
    if (n > UINT32_MAX - 2)
        return remat__error(err, REMAT_ELIMIT, "/stages", "too many stages");
    size_t wide = (n + 1) * sizeof(int64_t), narrow = (n + 2) * sizeof(uint32_t);
    /* V and qv are carved out whole but paper-linear writes only the few
     * pages of qv its queue and deque reach, and the reference only V: a
     * page never written is never faulted in. */
    char *mem = remat__big_alloc(4 * wide + 4 * narrow);
    if (mem == NULL)
        return remat__error(err, REMAT_ENOMEM, "", "out of memory for %zu stages", n);
    w->mem = mem;
    w->S = (int64_t *)mem;
    /* The arrays are carved from one allocation at offsets aligned for
     * their types and used only as those types: no value is read as
     * another type, which is what cppcheck's invalidPointerCast is about. */
    /* cppcheck-suppress invalidPointerCast */
    w->F = (double *)(mem + wide);
    w->V = (int64_t *)(mem + 2 * wide);
    w->qv = (int64_t *)(mem + 3 * wide);
    w->last = (uint32_t *)(mem + 4 * wide);
    w->cnt = (uint32_t *)(mem + 4 * wide + narrow);
    w->next = (uint32_t *)(mem + 4 * wide + 2 * narrow);
    w->queue = (uint32_t *)(mem + 4 * wide + 3 * narrow);
    w->S[0] = p->input_bytes;
    w->F[0] = 0;
    for (size_t j = 1; j <= n; j++) {
        w->S[j] = w->S[j - 1] + p->stages[j - 1].out_bytes;
        w->F[j] = w->F[j - 1] + p->stages[j - 1].fwd_ms;
    }
    return REMAT_OK;
}

/* Records the choice next(i) = j of value M(i) = val, with its tie keys,
 * and returns V(i) = d_i + M(i) (0 for i = 0, whose M(0) is kept). */
static inline int64_t take(const struct remat_profile *p, struct prefix_work *w, size_t i, size_t j,
                           int64_t val)
{
    size_t n = p->n_stages;
    int64_t v = 0;
    if (i > 0)
        v = (w->S[i] - w->S[i - 1]) + val; /* d_i, without a read of the stage */
    else
        w->m0 = val;
    w->next[i] = (uint32_t)j;
    if (j == n) {
        w->last[i] = (uint32_t)i;
        w->cnt[i] = 0;
    } else {
        w->last[i] = w->last[j];
        w->cnt[i] = w->cnt[j] + 1;
    }
    return v;
}

/* Is next = a (value va) before next = b (value vb) from i? */
static inline int before(const struct prefix_work *w, size_t n, size_t i, size_t a, int64_t va,
                         size_t b, int64_t vb)
{
    if (va != vb)
        return va < vb;
    double ra = w->F[a == n ? i : w->last[a]], rb = w->F[b == n ? i : w->last[b]];
    if (ra != rb)
        return ra < rb;
    uint32_t ca = a == n ? 0 : w->cnt[a] + 1, cb = b == n ? 0 : w->cnt[b] + 1;
    if (ca != cb)
        return ca < cb;
    return a < b;
}

/* The forward pass behind the first tie key.  With P* = d_0 + M(0) known, a
 * set is optimal iff every segment term P_k + S_{c_{k+1}} - S_{c_k} is at
 * most P*.  Keeping, per stage c, the least prefix P(c) over feasible paths
 * 0 -> ... -> c (then the fewest checkpoints) decides exactly which stages
 * can be the last checkpoint of an optimal set: c can iff
 * P(c) + S_n - S_c <= P*, since a smaller prefix never hurts a later term.
 * The candidates i of c are those with P(i) - S_i <= P* - S_c; that bound
 * falls as c grows, so a candidate that fails once fails for good, and a
 * later candidate with a key (P, count) no larger dominates an earlier one.
 * A deque sorted by key from the front therefore gives each P(c) in
 * amortised O(1): O(n) in all.  Each deque entry carries its P beside its
 * index (in qv), so that the comparisons read the deque alone.  Returns the
 * last checkpoint of the set; its path is in next (as predecessors) and its
 * size in cnt. */
static size_t least_recompute_last(const struct remat_profile *p, struct prefix_work *w,
                                   int64_t pstar)
{
    size_t n = p->n_stages;
    const int64_t *S = w->S;
    const double *F = w->F;
    uint32_t *cnt = w->cnt; /* checkpoints on the path to c, c included */
    uint32_t *pred = w->next;
    uint32_t *dq = w->queue; /* the deque: dq[head..tail), P(dq[t]) in P[t] */
    int64_t *P = w->qv;
    size_t head = 0, tail = 0;
    cnt[0] = 0;
    dq[tail] = 0;
    P[tail] = p->input_bytes;
    tail++;
    size_t last = 0;
    int have = S[n] <= pstar; /* the empty set: one segment, B = S_n */
    for (size_t c = 1; c < n; c++) {
        int64_t sc = S[c];
        while (head < tail && P[head] - S[dq[head]] > pstar - sc)
            head++;
        if (head == tail)
            break; /* no later stage is reachable either */
        size_t i = dq[head];
        int64_t pc = P[head] + (sc - S[c - 1]); /* d_c */
        uint32_t cc = cnt[i] + 1;
        cnt[c] = cc;
        pred[c] = (uint32_t)i;
        while (head < tail && (P[tail - 1] > pc || (P[tail - 1] == pc && cnt[dq[tail - 1]] >= cc)))
            tail--;
        dq[tail] = (uint32_t)c;
        P[tail] = pc;
        tail++;
        if (pc + S[n] - sc <= pstar &&
            (!have || F[c] < F[last] || (F[c] == F[last] && cc < cnt[last]))) {
            last = c;
            have = 1;
        }
    }
    return last;
}

/* remat__tie_cmp's order, reading recompute times off F: F[c] adds the same
 * floats in the same order as remat__recompute_ms(p, c), without its O(c). */
static int set_before(const struct prefix_work *w, const size_t *a, size_t na, const size_t *b,
                      size_t nb)
{
    double ra = w->F[na > 0 ? a[na - 1] : 0], rb = w->F[nb > 0 ? b[nb - 1] : 0];
    if (ra != rb)
        return ra < rb;
    if (na != nb)
        return na < nb;
    for (size_t k = 0; k < na; k++)
        if (a[k] != b[k])
            return a[k] < b[k];
    return 0;
}

static int finish(const struct remat_profile *p, struct prefix_work *w, struct remat_plan *plan,
                  struct remat_error *err)
{
    size_t n = p->n_stages;
    size_t m = w->cnt[0];
    int64_t pstar = p->input_bytes + w->m0;
    size_t *ck = malloc((m > 0 ? m : 1) * sizeof *ck);
    if (ck == NULL)
        return remat__error(err, REMAT_ENOMEM, "", "out of memory");
    m = 0;
    for (size_t i = w->next[0]; i < n; i = w->next[i])
        ck[m++] = i;
    /* Both sets are optimal; keep the one first in the tie order. */
    size_t last = least_recompute_last(p, w, pstar);
    size_t m_alt = last == 0 ? 0 : w->cnt[last];
    size_t *alt = malloc((m_alt > 0 ? m_alt : 1) * sizeof *alt);
    if (alt == NULL) {
        free(ck);
        return remat__error(err, REMAT_ENOMEM, "", "out of memory");
    }
    for (size_t c = last, k = m_alt; k > 0; c = w->next[c])
        alt[--k] = c;
    if (set_before(w, alt, m_alt, ck, m)) {
        free(ck);
        ck = alt;
        m = m_alt;
    } else {
        free(alt);
    }
    free(plan->checkpoints);
    plan->checkpoints = ck;
    plan->n_checkpoints = m;
    plan->objective_value = pstar;
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
        w.V[i] = take(p, &w, i, best, best_val);
    }
    rc = finish(p, &w, plan, err);
    free(w.mem);
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
    /* The queue Q lives in queue[head..n+1): Q[t] = queue[head + t], pushed
     * at the front, with V(Q[t]) beside it in qv[head + t].  j = n sits at
     * the back for good (V(n) = -inf).  V(i + 1), the one to push next, is
     * the last value taken. */
    uint32_t *Q = w.queue;
    int64_t *QV = w.qv;
    size_t head = n;
    Q[n] = (uint32_t)n;
    QV[n] = INT64_MIN;
    int64_t vj = 0;
    size_t k = 0; /* Q[0..k) are uncrossed: A(i, j) < V(j) */
    for (size_t i = n; i-- > 0;) {
        if (i + 1 < n) {
            size_t j = i + 1;
            size_t h0 = head;
            while (head < n && QV[head] >= vj)
                head++;
            size_t popped = head - h0;
            k = k > popped ? k - popped : 0;
            head--;
            Q[head] = (uint32_t)j;
            QV[head] = vj;
            k++;
        }
        int64_t si = S[i];
        while (k > 0 && S[Q[head + k - 1]] - si >= QV[head + k - 1])
            k--;
        /* j*(i) = Q[k], the first crossed candidate (it exists: n is always
         * crossed), against the last uncrossed one, Q[k-1]. */
        size_t js = Q[head + k];
        int64_t val = S[js] - si;
        size_t best = js;
        if (k > 0) {
            size_t jp = Q[head + k - 1];
            int64_t vp = QV[head + k - 1];
            if (before(&w, n, i, jp, vp, best, val)) {
                best = jp;
                val = vp;
            }
        }
        vj = take(p, &w, i, best, val);
    }
    rc = finish(p, &w, plan, err);
    free(w.mem);
    return rc;
}
