/* solve_mintime_bound.c - a bound from below on the time of every
 * persistent schedule within a budget: what the long-chain solve's
 * optimality_gap is measured against (docs/min-time.md, "The bound from
 * below").
 *
 * Every stage forwards and backwards at least once: Σ (t^f + t^b).  A stage
 * that forwards only once must do it with grad (F_all: its backward reads
 * x̄_k), in the first pass, so its x̄_k is live from before the loss until
 * B(k); the backwards run from n down to 1.  So at B(k), for every k, the
 * x̄_j of every stage j < k forwarded once are live beside what B(k) itself
 * holds (x̄_k, δ_k, δ_{k-1}, its transient, the weight gradients of k..n):
 *
 *     Σ_{j < k, j once} x̄_j  <=  budget - base - D_k,
 *
 * D_k being chain_bwd_bytes(k, n) of the table (docs/min-time.md), and at
 * the loss Σ_{j < n, j once} x̄_j <= budget - base - x̄_n - x_n.  Every
 * stage not forwarded once costs at least one more forward.  The most
 * forward time the once-forwarded stages can have is at most the optimum
 * of the linear relaxation (z_j = x̄_j y_j, 0 <= y_j <= 1): capacities on
 * nested prefixes and on single stages form a laminar family, so their
 * polytope is a polymatroid, on which the greedy (largest t^f per byte
 * first, each as much as every constraint containing it leaves) is
 * optimal (Edmonds 1970).  The bound is
 *
 *     Σ (t^f + t^b) + Σ t^f - (that optimum).
 *
 * The leftover room of the constraints is a segment tree over k with a
 * range add and a range minimum: O(n log n).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "solve_mintime.h"

struct by_rate {
    double tf;
    int64_t xb;
    size_t k; /* 1-based stage */
};

/* Most forward time per saved byte first; ties by stage, so the order is
 * the same on every machine. */
static int cmp_rate(const void *a, const void *b)
{
    const struct by_rate *x = a, *y = b;
    double l = x->tf * (double)y->xb, r = y->tf * (double)x->xb;
    if (l != r)
        return l > r ? -1 : 1;
    return x->k < y->k ? -1 : x->k > y->k;
}

/* Minimum over a range with a range add: room[k] for k in 1..n. */
struct tree {
    size_t size; /* leaves, a power of two */
    int64_t *mn, *add;
};

static int64_t tree_min(const struct tree *t, size_t node, size_t lo, size_t hi, size_t a, size_t b)
{
    if (b < lo || hi < a)
        return INT64_MAX;
    if (a <= lo && hi <= b)
        return t->mn[node];
    size_t mid = lo + (hi - lo) / 2;
    int64_t l = tree_min(t, 2 * node, lo, mid, a, b),
            r = tree_min(t, 2 * node + 1, mid + 1, hi, a, b);
    int64_t m = l < r ? l : r;
    return m == INT64_MAX ? m : m + t->add[node];
}

static void tree_add(struct tree *t, size_t node, size_t lo, size_t hi, size_t a, size_t b,
                     int64_t v)
{
    if (b < lo || hi < a)
        return;
    if (a <= lo && hi <= b) {
        t->add[node] += v;
        t->mn[node] += v;
        return;
    }
    size_t mid = lo + (hi - lo) / 2;
    tree_add(t, 2 * node, lo, mid, a, b, v);
    tree_add(t, 2 * node + 1, mid + 1, hi, a, b, v);
    int64_t l = t->mn[2 * node], r = t->mn[2 * node + 1];
    t->mn[node] = (l < r ? l : r) + t->add[node];
}

double remat__mt_time_bound(const struct remat_profile *p, int64_t budget_bytes)
{
    size_t n = p->n_stages;
    const struct remat_stage *st = p->stages;
    double all = 0, fwd = 0;
    int64_t base = p->input_bytes + p->optimizer.state_bytes, w = 0;
    for (size_t k = 0; k < n; k++) {
        all += st[k].fwd_ms + st[k].bwd_ms;
        fwd += st[k].fwd_ms;
        w += st[k].param_bytes;
    }
    base += w;
    struct tree t = {1, NULL, NULL};
    while (t.size < n)
        t.size *= 2;
    t.mn = calloc(2 * t.size, sizeof(int64_t));
    t.add = calloc(2 * t.size, sizeof(int64_t));
    struct by_rate *r = malloc((n ? n : 1) * sizeof *r);
    if (t.mn == NULL || t.add == NULL || r == NULL) {
        free(t.mn);
        free(t.add);
        free(r);
        return all; /* out of memory: the weaker bound, still a bound */
    }
    /* room[k] = budget - base - D_k (the loss's constraint folded into
     * k = n); leaves past n stay at INT64_MAX's stand-in. */
    int64_t wk = w; /* weight gradients of k..n */
    int feasible = 1;
    for (size_t k = 1; k <= t.size; k++) {
        int64_t room = INT64_MAX / 4;
        if (k <= n) {
            const struct remat_stage *s = &st[k - 1];
            int64_t d = s->saved_bytes + s->out_bytes + (s->bwd_tmp_bytes - s->bwd_freed_bytes) +
                        wk + (k > 1 ? st[k - 2].out_bytes : 0);
            room = budget_bytes - base - d;
            if (k == n) {
                int64_t loss = budget_bytes - base - s->saved_bytes - s->out_bytes;
                room = loss < room ? loss : room;
            }
            if (room < 0)
                feasible = 0;
            wk -= s->param_bytes;
        }
        t.mn[t.size + k - 1] = room;
    }
    for (size_t node = t.size - 1; node >= 1; node--)
        t.mn[node] = t.mn[2 * node] < t.mn[2 * node + 1] ? t.mn[2 * node] : t.mn[2 * node + 1];
    double once = 0;
    size_t nr = 0;
    for (size_t k = 1; k <= n; k++) {
        if (st[k - 1].saved_bytes == 0)
            once += st[k - 1].fwd_ms; /* holds nothing: never has to forward again */
        else
            r[nr++] = (struct by_rate){st[k - 1].fwd_ms, st[k - 1].saved_bytes, k};
    }
    qsort(r, nr, sizeof *r, cmp_rate);
    for (size_t i = 0; i < nr && feasible; i++) {
        size_t k = r[i].k;
        if (k == n)
            continue; /* no constraint holds x̄_n among those before it: at most once */
        /* The constraints that hold x̄_k: those of k + 1 .. n. */
        int64_t room = tree_min(&t, 1, 1, t.size, k + 1, n);
        if (room <= 0)
            continue;
        int64_t z = r[i].xb < room ? r[i].xb : room;
        once += r[i].tf * ((double)z / (double)r[i].xb);
        tree_add(&t, 1, 1, t.size, k + 1, n, -z);
    }
    /* Stage n forwards once in the best case: its x̄_n is in every one of
     * its own constraints already. */
    if (n > 0 && st[n - 1].saved_bytes != 0)
        once += st[n - 1].fwd_ms;
    free(t.mn);
    free(t.add);
    free(r);
    if (!feasible)
        return HUGE_VAL;
    return all + (fwd - once);
}
