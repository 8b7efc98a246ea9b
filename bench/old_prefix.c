/* old_prefix.c - paper-linear (src/solve_prefix.c) as it was before the
 * changes that bench/solve_bench measures against it (commit bc3f384),
 * kept callable so that `make bench` prints the old path beside the new one
 * in the same run.  Not part of libremat: the bench alone links it.  Its
 * only entry point is bench_old_paper_linear (bench/solve_old.h). */
#include "remat_private.h"
#include "solve_old.h"

struct prefix_work {
    int64_t *S;      /* S[j] = d_0 + ... + d_j */
    double *F;       /* F[i] = fwd_ms of stages 1..i in stage order */
    int64_t *V;      /* V(j) = d_j + M(j) for 0 < j < n */
    uint32_t *last;  /* the last checkpoint of the path chosen from i (i itself if none) */
    uint32_t *cnt;   /* checkpoints on the path chosen from i, after i */
    uint32_t *next;  /* the next checkpoint chosen from i (n: none) */
    uint32_t *queue; /* paper-linear's queue, then the forward pass's deque */
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
    char *mem = remat__big_alloc(3 * wide + 4 * narrow);
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
    w->last = (uint32_t *)(mem + 3 * wide);
    w->cnt = (uint32_t *)(mem + 3 * wide + narrow);
    w->next = (uint32_t *)(mem + 3 * wide + 2 * narrow);
    w->queue = (uint32_t *)(mem + 3 * wide + 3 * narrow);
    w->S[0] = p->input_bytes;
    w->F[0] = 0;
    for (size_t j = 1; j <= n; j++) {
        w->S[j] = w->S[j - 1] + p->stages[j - 1].out_bytes;
        w->F[j] = w->F[j - 1] + p->stages[j - 1].fwd_ms;
    }
    return REMAT_OK;
}

/* Records the choice next(i) = j of value M(i) = val, with its tie keys. */
static void take(const struct remat_profile *p, struct prefix_work *w, size_t i, size_t j,
                 int64_t val)
{
    size_t n = p->n_stages;
    if (i > 0)
        w->V[i] = (w->S[i] - w->S[i - 1]) + val; /* d_i, without a read of the stage */
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
}

/* Is next = a (value va) before next = b (value vb) from i? */
static int before(const struct prefix_work *w, size_t n, size_t i, size_t a, int64_t va, size_t b,
                  int64_t vb)
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
 * amortised O(1): O(n) in all.  Writes the set into out (n entries of room)
 * and returns its size. */
static size_t least_recompute_last(const struct remat_profile *p, struct prefix_work *w,
                                   int64_t pstar)
{
    size_t n = p->n_stages;
    const int64_t *S = w->S;
    int64_t *P = w->V;      /* P(c); the DP's V is no longer needed */
    uint32_t *cnt = w->cnt; /* checkpoints on the path to c, c included */
    uint32_t *pred = w->next;
    uint32_t *dq = w->queue;
    size_t head = 0, tail = 0;
    P[0] = p->input_bytes;
    cnt[0] = 0;
    dq[tail++] = 0;
    size_t last = 0;
    int have = S[n] <= pstar; /* the empty set: one segment, B = S_n */
    for (size_t c = 1; c < n; c++) {
        while (head < tail && P[dq[head]] - S[dq[head]] > pstar - S[c])
            head++;
        if (head == tail)
            break; /* no later stage is reachable either */
        size_t i = dq[head];
        P[c] = P[i] + (S[c] - S[c - 1]); /* d_c */
        cnt[c] = cnt[i] + 1;
        pred[c] = (uint32_t)i;
        while (head < tail &&
               (P[dq[tail - 1]] > P[c] || (P[dq[tail - 1]] == P[c] && cnt[dq[tail - 1]] >= cnt[c])))
            tail--;
        dq[tail++] = (uint32_t)c;
        if (P[c] + S[n] - S[c] <= pstar &&
            (!have || w->F[c] < w->F[last] || (w->F[c] == w->F[last] && cnt[c] < cnt[last]))) {
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

int bench_old_paper_linear(const struct remat_profile *p, struct remat_plan *plan,
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
        take(p, &w, i, best, val);
    }
    rc = finish(p, &w, plan, err);
    free(w.mem);
    return rc;
}
