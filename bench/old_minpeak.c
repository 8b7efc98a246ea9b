/* old_minpeak.c - min-peak (src/solve_minpeak.c and solve_minpeak_set.c) as it was before the
 * changes that bench/solve_bench measures against it (commit bc3f384),
 * kept callable so that `make bench` prints the old path beside the new one
 * in the same run.  Not part of libremat: the bench alone links it.  Its
 * only entry point is bench_old_min_peak_with (bench/solve_old.h). */
#include "solve_minpeak.h"
#include "solve_old.h"

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
static int old_choose_set(const struct chain *c, const struct remat_profile *p, size_t budget,
                          int spend, struct remat_plan *plan, struct remat_error *err);

#include <stdint.h>

/* The direct scans may look at SCAN_PER_STAGE * n + SCAN_BASE candidates in
 * all before the sweep moves to the tree (dp_fast).  They usually stop after
 * a few candidates each and are several times faster than the tree, but on
 * chains with long optimal segments they run out and the tree takes over;
 * SCAN_BASE keeps chains of a few hundred stages on the scans. */
#define SCAN_PER_STAGE 32
#define SCAN_BASE 4096
/* The least-recompute pass (least_recompute_set) may look at
 * FWD_PER_STAGE * n + SCAN_BASE (predecessor, stage) pairs before it gives
 * up: enough for every chain of up to ~90 stages and for most of a thousand
 * on the benchmarks.  A pass that would give up is not run (its count is
 * known in O(n) beforehand, solve_minpeak_set.c). */
#define FWD_PER_STAGE 16
/* Up to this many stages the default method runs the quadratic program: it
 * allocates less and is quicker there (bench: about 1.5 against 2.2 us at
 * n = 50). */
#define SMALL_N 64

static void chain_free(struct chain *c)
{
    free(c->mem);
    c->mem = NULL;
}

static int add_checked(int64_t *acc, int64_t v)
{
    if (v < 0 || __builtin_add_overflow(*acc, v, acc) || *acc > TOTAL_LIMIT)
        return -1;
    return 0;
}

static int chain_build(const struct remat_profile *p, struct chain *c, struct remat_error *err)
{
    size_t n = p->n_stages;
    int64_t total = 0;

    memset(c, 0, sizeof(*c));
    if (n == 0)
        return remat__error(err, REMAT_EINVAL, "/stages", "a chain needs at least one stage");
    /* Checked first, so every sum below is known to fit. */
    if (add_checked(&total, p->input_bytes))
        goto too_big;
    for (size_t i = 0; i < n; i++) {
        const struct remat_stage *s = &p->stages[i];
        /* bwd_freed_bytes only takes away, but it must not take away more
         * than x̄_i + x_i (remat_profile_validate), so no value below falls
         * under minus a total. */
        if (add_checked(&total, s->out_bytes) || add_checked(&total, s->saved_bytes) ||
            add_checked(&total, s->fwd_tmp_bytes) ||
            add_checked(&total, remat_stage_fwd_grad_tmp_bytes(s)) ||
            add_checked(&total, s->bwd_tmp_bytes) || add_checked(&total, s->param_bytes) ||
            add_checked(&total, s->param_bytes) || s->bwd_freed_bytes < 0 ||
            s->bwd_freed_bytes > s->saved_bytes + s->out_bytes)
            goto too_big;
    }
    if (add_checked(&total, p->optimizer.state_bytes) ||
        add_checked(&total, p->optimizer.step_tmp_bytes))
        goto too_big;

    size_t len = n + 1;
    c->mem = remat__big_alloc(8 * len * sizeof(int64_t));
    if (!c->mem)
        return remat__error(err, REMAT_ENOMEM, "", "out of memory for %zu stages", n);
    c->n = n;
    c->x = c->mem;
    c->sb = c->x + len;
    c->u = c->sb + len;
    c->beta = c->u + len;
    c->gam = c->beta + len;
    c->g = c->gam + len;
    c->m = c->g + len;
    c->tl = c->m + len;

    c->x[0] = p->input_bytes;
    c->sb[0] = 0;
    c->saved_ge_out = 1;
    c->w = 0;
    for (size_t i = 1; i <= n; i++) {
        const struct remat_stage *s = &p->stages[i - 1];
        c->x[i] = s->out_bytes;
        c->sb[i] = c->sb[i - 1] + s->saved_bytes;
        c->w += s->param_bytes;
        /* Lemma 2 of docs/min-peak.md: x̄_l >= x_l, and the forward with
         * grad holds at least what the one without does. */
        if (s->saved_bytes < s->out_bytes ||
            s->saved_bytes + remat_stage_fwd_grad_tmp_bytes(s) < s->out_bytes + s->fwd_tmp_bytes)
            c->saved_ge_out = 0;
    }
    /* The optimizer's state is live throughout, like the weights. */
    c->w += p->optimizer.state_bytes;
    /* G_{>=l} is a suffix sum: walk down, gsuf = G_{>l} before adding p_l. */
    int64_t gsuf = 0;
    for (size_t l = n; l >= 1; l--) {
        const struct remat_stage *s = &p->stages[l - 1];
        c->gam[l] = c->x[l] + gsuf;
        gsuf += s->param_bytes;
        c->u[l] = c->sb[l] + remat_stage_fwd_grad_tmp_bytes(s);
        c->beta[l] = c->sb[l] + c->x[l] + gsuf + (l > 1 ? c->x[l - 1] : 0) + s->bwd_tmp_bytes -
                     s->bwd_freed_bytes;
        c->g[l] = c->x[l] + s->fwd_tmp_bytes;
    }
    c->loss = c->sb[n] + c->x[n];
    return REMAT_OK;

too_big:
    return remat__error(err, REMAT_ELIMIT, "",
                        "the profile's byte counts add up to more than 2^58 bytes");
}

/* ------------------------------------------------------------------------
 * The reference: the suffix recurrence evaluated directly, O(n^2).
 */

static void dp_ref(struct chain *c)
{
    size_t n = c->n;
    int64_t ul = -INF, bl = -INF;

    for (size_t i = n; i-- > 0;) {
        ul = max64(ul, c->u[i + 1]);
        bl = max64(bl, c->beta[i + 1]);
        c->tl[i] = max64(max64(ul, bl), c->loss) - c->sb[i];
        int64_t best = c->tl[i];
        int64_t uu = -INF, bb = -INF, hh = -INF;
        for (size_t j = i + 1; j < n; j++) {
            uu = max64(uu, c->u[j]);
            bb = max64(bb, c->beta[j]);
            /* Every later candidate costs at least B(i,j) - Sb_i, which
             * only grows with j: nothing further can be strictly better. */
            if (bb - c->sb[i] >= best)
                break;
            if (j >= i + 2)
                hh = max64(hh, c->x[j - 1] + c->g[j]);
            int64_t t = max64(c->gam[j] + uu, bb) - c->sb[i];
            t = max64(t, max64(c->g[i + 1], hh));
            int64_t v = max64(t, c->x[j] + c->m[j]);
            if (v < best)
                best = v;
        }
        c->m[i] = best;
    }
}

/* ------------------------------------------------------------------------
 * The fast sweep: a segment tree over candidates j with two lazy range
 * assignments (U and B).
 *
 * Over the uncrossed leaves of a node: mgv = max(gam_j - V_j), mnv =
 * max(-V_j), k1 = max(gam_j - V_j + U_j), k2 = max(B_j - V_j); a leaf
 * crosses when max(k1, k2) >= Sb_i.  Over the crossed leaves: ming =
 * min gam_j, minx = min(gam_j + U_j).  Over all leaves: maxb = max B_j, which
 * is B at the node's last active leaf because B is non-decreasing in j (the
 * inactive leaves j <= i keep B = 0, below every real B).
 *
 * lzu/lzb: a pending assignment of the whole node (NONE when there is none);
 * at a leaf, its own U and B.  Assignments are "set", so along any path from
 * the root the pending assignment nearest the root is the newest and holds
 * for every leaf below it.  That lets the descents read without pushing
 * (they carry the nearest pending value down) and lets a leaf change be
 * pulled up without pushing (a node recombines its children, then re-applies
 * its own pending assignment from the fields that do not depend on U or B:
 * mgv, mnv, ming).  Only an assignment that covers part of a node pushes.
 */
struct node {
    int64_t k1, k2, mgv, mnv, ming, minx, maxb, pad; /* one cache line */
};

struct tree {
    size_t size; /* leaves, a power of two >= n */
    int log;
    struct node *nd;
    int64_t *lzu, *lzb;
    void *mem;
};

static int tree_init(struct tree *t, size_t n)
{
    t->size = 1;
    t->log = 0;
    while (t->size < n) {
        t->size <<= 1;
        t->log++;
    }
    size_t len = 2 * t->size;
    t->mem = remat__big_alloc(len * (sizeof(struct node) + 2 * sizeof(int64_t)));
    if (!t->mem)
        return -1;
    t->nd = t->mem;
    t->lzu = (int64_t *)(t->nd + len);
    t->lzb = t->lzu + len;
    for (size_t v = 1; v < len; v++) {
        struct node *x = &t->nd[v];
        x->k1 = x->k2 = x->mgv = x->mnv = -INF;
        x->ming = x->minx = INF;
        x->maxb = 0;
        x->pad = 0;
        /* Leaves start at U = B = 0, below every real value, so B stays
         * non-decreasing in j. */
        t->lzu[v] = t->lzb[v] = v >= t->size ? 0 : NONE;
    }
    return 0;
}

static inline void apply_u(struct tree *t, size_t v, int64_t c)
{
    t->nd[v].k1 = t->nd[v].mgv + c;
    t->nd[v].minx = t->nd[v].ming + c;
    t->lzu[v] = c;
}

static inline void apply_b(struct tree *t, size_t v, int64_t c)
{
    t->nd[v].k2 = t->nd[v].mnv + c;
    t->nd[v].maxb = c;
    t->lzb[v] = c;
}

static inline void push(struct tree *t, size_t v)
{
    if (t->lzu[v] != NONE) {
        apply_u(t, 2 * v, t->lzu[v]);
        apply_u(t, 2 * v + 1, t->lzu[v]);
        t->lzu[v] = NONE;
    }
    if (t->lzb[v] != NONE) {
        apply_b(t, 2 * v, t->lzb[v]);
        apply_b(t, 2 * v + 1, t->lzb[v]);
        t->lzb[v] = NONE;
    }
}

static inline void pull(struct tree *t, size_t v)
{
    const struct node *l = &t->nd[2 * v], *r = l + 1;
    struct node *x = &t->nd[v];
    x->mgv = max64(l->mgv, r->mgv);
    x->mnv = max64(l->mnv, r->mnv);
    x->ming = min64(l->ming, r->ming);
    if (t->lzu[v] == NONE) {
        x->k1 = max64(l->k1, r->k1);
        x->minx = min64(l->minx, r->minx);
    } else {
        x->k1 = x->mgv + t->lzu[v];
        x->minx = x->ming + t->lzu[v];
    }
    if (t->lzb[v] == NONE) {
        x->k2 = max64(l->k2, r->k2);
        x->maxb = max64(l->maxb, r->maxb);
    } else {
        x->k2 = x->mnv + t->lzb[v];
        x->maxb = t->lzb[v];
    }
}

static inline void pull_path(struct tree *t, size_t leaf)
{
    for (size_t v = leaf >> 1; v >= 1; v >>= 1)
        pull(t, v);
}

/* Leaf j becomes an uncrossed candidate of cost v, with U_j = u and B_j = b.
 * No assignment pending above it: every earlier one covered only leaves of
 * larger j, so no node above leaf j was covered whole. */
static void tree_activate(struct tree *t, size_t j, int64_t gam, int64_t v, int64_t u, int64_t b)
{
    size_t leaf = t->size + j;
    struct node *x = &t->nd[leaf];
    x->mgv = gam - v;
    x->mnv = -v;
    x->k1 = x->mgv + u;
    x->k2 = x->mnv + b;
    x->maxb = b;
    t->lzu[leaf] = u;
    t->lzb[leaf] = b;
    pull_path(t, leaf);
}

/* Leaf j, an X-free candidate that the tree does not hold, still carries
 * U_j = u and B_j = b, so that B stays non-decreasing over the leaves. */
static void tree_set_empty(struct tree *t, size_t j, int64_t u, int64_t b)
{
    size_t leaf = t->size + j;
    struct node *x = &t->nd[leaf];
    x->k1 = x->mgv + u;
    x->k2 = x->mnv + b;
    x->minx = x->ming + u;
    x->maxb = b;
    t->lzu[leaf] = u;
    t->lzb[leaf] = b;
    pull_path(t, leaf);
}

/* Assigns U (which = 0) or B (which = 1) = c on leaves [lo, hi), lo < hi. */
static void tree_assign(struct tree *t, int which, size_t lo, size_t hi, int64_t c)
{
    size_t l = lo + t->size, r = hi + t->size;
    for (int s = t->log; s >= 1; s--) {
        if (((l >> s) << s) != l)
            push(t, l >> s);
        if (((r >> s) << s) != r)
            push(t, (r - 1) >> s);
    }
    for (size_t a = l, b = r; a < b; a >>= 1, b >>= 1) {
        if (a & 1) {
            which ? apply_b(t, a, c) : apply_u(t, a, c);
            a++;
        }
        if (b & 1) {
            --b;
            which ? apply_b(t, b, c) : apply_u(t, b, c);
        }
    }
    for (int s = 1; s <= t->log; s++) {
        if (((l >> s) << s) != l)
            pull(t, l >> s);
        if (((r >> s) << s) != r)
            pull(t, (r - 1) >> s);
    }
}

/* The fields of node v as its nearest pending ancestor assignment (eu, eb;
 * NONE for none) makes them. */
static inline int64_t eff_key(const struct tree *t, size_t v, int64_t eu, int64_t eb)
{
    const struct node *x = &t->nd[v];
    int64_t k1 = eu == NONE ? x->k1 : x->mgv + eu;
    int64_t k2 = eb == NONE ? x->k2 : x->mnv + eb;
    return max64(k1, k2);
}

/* Crosses one uncrossed leaf with max(k1, k2) >= thr (the root has one). */
static void tree_cross_one(struct tree *t, const int64_t *gam, int64_t thr)
{
    size_t v = 1;
    int64_t eu = NONE, eb = NONE;
    while (v < t->size) {
        if (eu == NONE)
            eu = t->lzu[v];
        if (eb == NONE)
            eb = t->lzb[v];
        v *= 2;
        if (eff_key(t, v, eu, eb) < thr)
            v++;
    }
    size_t j = v - t->size;
    struct node *x = &t->nd[v];
    int64_t u = eu == NONE ? t->lzu[v] : eu;
    x->mgv = x->mnv = x->k1 = x->k2 = -INF;
    x->ming = gam[j];
    x->minx = gam[j] + u;
    pull_path(t, v);
}

/* min over crossed j of max(gam_j + U_j, B_j), INF when none: with Q_t the
 * least gam_j + U_j over crossed j <= t (non-increasing in t) and B_t
 * non-decreasing, it is min(B_t*, Q_{t*-1}) at the first t* with
 * B_t* >= Q_t*, or Q at the end when there is no such t*. */
static int64_t tree_crossed_min(const struct tree *t)
{
    if (t->nd[1].maxb < t->nd[1].minx)
        return t->nd[1].minx;
    size_t v = 1;
    int64_t q = INF, eu = NONE, eb = NONE;
    while (v < t->size) {
        if (eu == NONE)
            eu = t->lzu[v];
        if (eb == NONE)
            eb = t->lzb[v];
        v *= 2;
        const struct node *x = &t->nd[v];
        int64_t minx = eu == NONE ? x->minx : x->ming + eu;
        int64_t maxb = eb == NONE ? x->maxb : eb;
        if (maxb < min64(q, minx)) {
            q = min64(q, minx);
            v++;
        }
    }
    return min64(eb == NONE ? t->nd[v].maxb : eb, q);
}

/* Monotone stack of blocks of candidates with equal running maximum, left
 * (smallest j) on top, plus a union-find over the same blocks (each block's
 * root is its first candidate) so that any candidate's running maximum is
 * one find away.  blocks_push returns the end of the block that the new
 * stage's value now covers. */
struct blocks {
    size_t top;
    size_t *start;
    int64_t *val;     /* per stack entry */
    size_t *parent;   /* per candidate */
    int64_t *rootval; /* per block root */
};

static size_t blocks_push(struct blocks *s, size_t j, int64_t v, size_t n)
{
    while (s->top > 0 && s->val[s->top - 1] <= v) {
        s->top--;
        s->parent[s->start[s->top]] = j;
    }
    size_t r = s->top > 0 ? s->start[s->top - 1] : n;
    s->start[s->top] = j;
    s->val[s->top] = v;
    s->top++;
    s->parent[j] = j;
    s->rootval[j] = v;
    return r;
}

/* The running maximum over (i, j] for a candidate j > i (path halving). */
static inline int64_t blocks_value(struct blocks *s, size_t j)
{
    size_t *parent = s->parent;
    while (parent[j] != j) {
        parent[j] = parent[parent[j]];
        j = parent[j];
    }
    return s->rootval[j];
}

/* The tree for step i built from scratch: every candidate j in (i, n) that
 * is not X-free with U(i,j) and B(i,j) from the blocks and its crossed state
 * tested directly.  O(size). */
static void tree_build(struct tree *t, const struct chain *c, size_t i, const uint8_t *xfree,
                       const struct blocks *su, const struct blocks *sbk)
{
    size_t n = c->n;
    int64_t *uv = t->lzu + t->size, *bv = t->lzb + t->size;
    for (size_t k = 0; k < su->top; k++)
        for (size_t j = su->start[k], e = k > 0 ? su->start[k - 1] : n; j < e; j++)
            uv[j] = su->val[k];
    for (size_t k = 0; k < sbk->top; k++)
        for (size_t j = sbk->start[k], e = k > 0 ? sbk->start[k - 1] : n; j < e; j++)
            bv[j] = sbk->val[k];
    for (size_t j = i + 1; j < n; j++) {
        struct node *x = &t->nd[t->size + j];
        x->maxb = bv[j];
        if (xfree[j])
            continue;
        int64_t v = c->x[j] + c->m[j];
        if (max64(c->gam[j] + uv[j], bv[j]) - c->sb[i] >= v) {
            x->ming = c->gam[j];
            x->minx = c->gam[j] + uv[j];
        } else {
            x->mgv = c->gam[j] - v;
            x->mnv = -v;
            x->k1 = x->mgv + uv[j];
            x->k2 = x->mnv + bv[j];
        }
    }
    for (size_t v = t->size - 1; v >= 1; v--)
        pull(t, v);
}

/* M(i) for every i, in two parts whose minimum is M(i).
 *
 * X-free candidates (gam_j <= min_{l<=j} (beta_l - u_l), or
 * gam_j + max_{l<=j} u_l <= beta_j: either way gam_j + U(i,j) <= B(i,j) for
 * every i, and T(i,j) = B(i,j) - Sb_i is non-decreasing in j) sit in the paper's monotone deque: j
 * ascending, V strictly descending, the crossed ones (T >= V) a suffix whose boundary only moves
 * toward the front.  Every candidate is X-free when no stage has forward temporaries.
 *
 * The other candidates, kept in a list by ascending j, are first scanned
 * directly, stopping as soon as B(i,j) - Sb_i reaches the best value found
 * (no later j can beat it).  When the scans have looked at `budget`
 * candidates in all, they move to the tree, built once for the step at hand.
 * Total O(n log n + budget).  use_deque 0 sends every candidate the second
 * way, and budget 0 starts with the tree (the tests use both). */
static int dp_fast(struct chain *c, size_t budget, int use_deque)
{
    size_t n = c->n;
    struct tree t = {0};
    size_t *zs = remat__big_alloc(6 * n * sizeof(size_t));
    int64_t *zv = remat__big_alloc(4 * n * sizeof(int64_t));
    uint8_t *xfree = malloc(n);
    if (!zs || !zv || !xfree) {
        free(zs);
        free(zv);
        free(xfree);
        return -1;
    }
    struct blocks su = {0, zs, zv, zs + n, zv + n};
    struct blocks sbk = {0, zs + 2 * n, zv + 2 * n, zs + 3 * n, zv + 3 * n};
    size_t *dq = zs + 4 * n;     /* the deque: dq[lo .. lo + len) */
    size_t *others = zs + 5 * n; /* next non-X-free candidate after j, n for none */
    size_t lo = n, len = 0, k = 0, head = n;

    /* Either test below makes gam_j + u_l <= max(beta_l, beta_j) <= B(i,j)
     * for every l in (i, j]; the second always holds without forward
     * temporaries (u_l = Sb_l <= Sb_j). */
    int64_t pm = INF, pu = -INF;
    xfree[0] = 0;
    for (size_t j = 1; j < n; j++) {
        pm = min64(pm, c->beta[j] - c->u[j]);
        pu = max64(pu, c->u[j]);
        xfree[j] = use_deque && (c->gam[j] <= pm || c->gam[j] + pu <= c->beta[j]);
    }

    int tree_mode = 0;
    size_t work = 0;
    int64_t ul = -INF, bl = -INF;
    for (size_t i = n; i-- > 0;) {
        ul = max64(ul, c->u[i + 1]);
        bl = max64(bl, c->beta[i + 1]);
        c->tl[i] = max64(max64(ul, bl), c->loss) - c->sb[i];
        if (i + 1 == n) {
            c->m[i] = c->tl[i];
            continue;
        }
        /* Stage j = i + 1 joins every segment (i, j'] and j is the new
         * candidate: U(i, j) = u_j, B(i, j) = beta_j. */
        size_t j = i + 1;
        int64_t uj = c->u[j], bj = c->beta[j], vj = c->x[j] + c->m[j];
        size_t ru = blocks_push(&su, j, uj, n), rb = blocks_push(&sbk, j, bj, n);
        int64_t thr = c->sb[i];
        int64_t best = c->tl[i];

        if (xfree[j]) {
            size_t popped = 0;
            while (len > 0 && c->x[dq[lo]] + c->m[dq[lo]] >= vj) {
                lo++;
                len--;
                popped++;
            }
            k = k > popped ? k - popped : 0;
            dq[--lo] = j;
            len++;
            k++;
            if (tree_mode)
                tree_set_empty(&t, j, uj, bj);
        } else {
            others[j] = head;
            head = j;
            if (tree_mode)
                tree_activate(&t, j, c->gam[j], vj, uj, bj);
        }
        if (tree_mode) {
            if (ru > j + 1)
                tree_assign(&t, 0, j + 1, ru, uj);
            if (rb > j + 1)
                tree_assign(&t, 1, j + 1, rb, bj);
        }

        /* The deque: move the boundary, then its two candidates. */
        while (k > 0) {
            size_t q = dq[lo + k - 1];
            if (blocks_value(&sbk, q) - thr < c->x[q] + c->m[q])
                break;
            k--;
        }
        if (k < len)
            best = min64(best, blocks_value(&sbk, dq[lo + k]) - thr);
        if (k > 0)
            best = min64(best, c->x[dq[lo + k - 1]] + c->m[dq[lo + k - 1]]);

        if (!tree_mode) {
            size_t q = head;
            for (; q < n && work < budget; q = others[q], work++) {
                int64_t bb = blocks_value(&sbk, q);
                if (bb - thr >= best)
                    break;
                int64_t x = max64(c->gam[q] + blocks_value(&su, q), bb) - thr;
                best = min64(best, max64(x, c->x[q] + c->m[q]));
            }
            if (q >= n || work < budget) {
                c->m[i] = best;
                continue;
            }
            if (tree_init(&t, n)) {
                free(zs);
                free(zv);
                free(xfree);
                return -1;
            }
            tree_build(&t, c, i, xfree, &su, &sbk);
            tree_mode = 1;
        } else {
            while (max64(t.nd[1].k1, t.nd[1].k2) >= thr)
                tree_cross_one(&t, c->gam, thr);
        }
        best = min64(best, -t.nd[1].mnv);
        int64_t cr = tree_crossed_min(&t);
        if (cr < INF)
            best = min64(best, cr - thr);
        c->m[i] = best;
    }
    free(zs);
    free(zv);
    free(xfree);
    free(t.mem);
    return 0;
}

#define WORK_PER_STAGE 8

static int pick_set(const struct chain *c, struct remat_plan *plan, struct remat_error *err)
{
    size_t n = c->n, count = 0;
    size_t *cps = n > 1 ? malloc((n - 1) * sizeof(size_t)) : NULL;
    if (n > 1 && !cps)
        return remat__error(err, REMAT_ENOMEM, "", "out of memory for the checkpoint list");
    int64_t k = c->x[0] + c->m[0];
    int64_t pl = c->x[0];
    size_t i = 0, work = 0, budget = WORK_PER_STAGE * n;
    while (pl + c->tl[i] > k) {
        int nearest = work > budget;
        int64_t uu = -INF, bb = -INF, hh = -INF;
        size_t pick = n, finish = n;
        for (size_t j = i + 1; j < n; j++) {
            uu = max64(uu, c->u[j]);
            bb = max64(bb, c->beta[j]);
            if (pl + bb - c->sb[i] > k)
                break;
            if (j >= i + 2)
                hh = max64(hh, c->x[j - 1] + c->g[j]);
            int64_t t = max64(c->gam[j] + uu, bb) - c->sb[i];
            t = max64(t, max64(c->g[i + 1], hh));
            work++;
            if (pl + t <= k && pl + c->x[j] + c->m[j] <= k) {
                pick = j;
                if (nearest)
                    break;
                if (pl + c->x[j] + c->tl[j] <= k) {
                    finish = j;
                    break;
                }
            }
        }
        if (finish < n)
            pick = finish;
        if (pick >= n) {
            /* Unreachable when M is right: M(i) <= k - pl promises a move. */
            free(cps);
            return remat__error(err, REMAT_EINVAL, "", "min-peak: no move fits the optimum");
        }
        cps[count++] = pick;
        pl += c->x[pick];
        i = pick;
    }
    if (count == 0) {
        free(cps);
        cps = NULL;
    }
    plan->checkpoints = cps;
    plan->n_checkpoints = count;
    plan->objective_value = c->w + k;
    return REMAT_OK;
}

/* The least recompute among the optimal sets, exactly, when it is cheap
 * enough.  With K known, a set is optimal iff every segment fits:
 * P_k + T_k <= K.  Keep, per stage c, the least checkpoint bytes P(c) over
 * the paths 0 -> ... -> c whose segments all fit (then the fewest
 * checkpoints); a smaller P never hurts a later segment, so c can be the last
 * checkpoint of an optimal set iff P(c) + Tlast(c) <= K, and the least
 * recompute time is the least fwd-time prefix F(c) over those c.  The
 * predecessors i of c are scanned from c-1 down, stopping where
 * x_0 + B(i,c) - Sb_i > K (every P is at least x_0 and B only grows as i
 * falls).  Only stages c < stop are looked at (stop <= n: the greedy set's
 * last checkpoint, which nothing later can beat).  Past `budget` scanned
 * pairs, or when no optimal set ends before stop, it returns 0; else it
 * writes the path to the best c into out (n entries) and returns 1.
 * -1: out of memory. */
static int least_recompute_set(const struct chain *c, const struct remat_profile *p, size_t budget,
                               size_t stop, size_t *out, size_t *out_m)
{
    size_t n = stop;
    int64_t k = c->x[0] + c->m[0];
    void *mem = remat__big_alloc(n * (sizeof(int64_t) + sizeof(double) + 2 * sizeof(uint32_t) + 1));
    if (!mem)
        return -1;
    int64_t *pl = mem;
    /* One allocation carved into typed arrays, each at an offset aligned
     * for its type (8-byte ones first), and each used only as that type:
     * cppcheck's invalidPointerCast (reading one type's bits as another)
     * does not happen here. */
    /* cppcheck-suppress invalidPointerCast */
    double *fw = (double *)(pl + n);
    /* cppcheck-suppress invalidPointerCast */
    uint32_t *cnt = (uint32_t *)(fw + n), *pred = cnt + n;
    uint8_t *reach = (uint8_t *)(pred + n);

    pl[0] = c->x[0];
    cnt[0] = 0;
    reach[0] = 1;
    fw[0] = 0;
    size_t last = 0, work = 0;
    int have = pl[0] + c->tl[0] <= k;
    /* The no-grad forward term, dominated when saved >= out (Lemma 2). */
    int need_f = !c->saved_ge_out;
    for (size_t e = 1; e < n; e++) {
        fw[e] = fw[e - 1] + p->stages[e - 1].fwd_ms;
        reach[e] = 0;
        int64_t uu = -INF, bb = -INF, hh = -INF, bestp = INF;
        size_t from = n;
        for (size_t i = e; i-- > 0;) {
            uu = max64(uu, c->u[i + 1]);
            bb = max64(bb, c->beta[i + 1]);
            if (need_f && i + 2 <= e)
                hh = max64(hh, c->x[i + 1] + c->g[i + 2]);
            if (c->x[0] + bb - c->sb[i] > k)
                break;
            if (++work > budget) {
                free(mem);
                return 0;
            }
            if (!reach[i])
                continue;
            int64_t t = max64(c->gam[e] + uu, bb) - c->sb[i];
            if (need_f)
                t = max64(t, max64(c->g[i + 1], hh));
            if (pl[i] + t <= k && (pl[i] < bestp || (pl[i] == bestp && cnt[i] < cnt[from]))) {
                bestp = pl[i];
                from = i;
            }
        }
        if (from == n)
            continue;
        reach[e] = 1;
        pl[e] = bestp + c->x[e];
        cnt[e] = cnt[from] + 1;
        pred[e] = (uint32_t)from;
        if (pl[e] + c->tl[e] <= k &&
            (!have || fw[e] < fw[last] || (fw[e] == fw[last] && cnt[e] < cnt[last]))) {
            last = e;
            have = 1;
        }
    }
    if (!have) {
        /* No optimal set ends before `stop`: the greedy set stays. */
        free(mem);
        return 0;
    }
    size_t m = last == 0 ? 0 : cnt[last];
    for (size_t e = last, q = m; q > 0; e = pred[e])
        out[--q] = e;
    *out_m = m;
    free(mem);
    return 1;
}

/* Whether least_recompute_set(c, ..., budget, stop, ...) would give up on
 * its budget, known in O(stop) without its work: it counts, for each e, the
 * i below e it scans before x_0 + B(i,e) - Sb_i > K stops it (reached or
 * not), and that test, B(i,e) being the running maximum of beta over
 * (i, e], only turns true as i falls and, for a given i, as e grows.  So
 * the least i that it scans, f(e), never falls as e grows: one pointer and
 * a queue of beta's running maxima over (f, e] give every count.  At a
 * million stages the pass gave up after 16 million pairs (about 40% of
 * min-peak's time) on chains whose optimal segments are long.  Returns 1
 * when it would give up, 0 when not, -1 when out of memory. */
static int recompute_pass_gives_up(const struct chain *c, size_t budget, size_t stop)
{
    int64_t k = c->x[0] + c->m[0];
    size_t *q = remat__big_alloc((stop > 0 ? stop : 1) * sizeof *q);
    if (q == NULL)
        return -1;
    size_t head = 0, tail = 0, f = 0, work = 0;
    int over = 0;
    for (size_t e = 1; e < stop && !over; e++) {
        /* The window of candidate i = f is beta over (f, e]. */
        while (tail > head && c->beta[q[tail - 1]] <= c->beta[e])
            tail--;
        q[tail++] = e;
        while (f < e) {
            while (q[head] <= f)
                head++;
            if (c->x[0] + c->beta[q[head]] - c->sb[f] <= k)
                break;
            f++;
        }
        work += e - f;
        over = work > budget;
    }
    free(q);
    return over;
}

/* The set: the greedy scan's, or the least-recompute pass's when that one
 * finishes and comes first in the tie order (remat__tie_cmp). */
static int old_choose_set(const struct chain *c, const struct remat_profile *p, size_t budget,
                          int spend, struct remat_plan *plan, struct remat_error *err)
{
    int rc = pick_set(c, plan, err);
    if (rc || budget == 0 || c->n < 2 || plan->n_checkpoints == 0)
        return rc;
    /* A necessary condition on a last checkpoint c of an optimal set: its
     * last segment fits with at least x_0 + x_c held.  When the greedy set's
     * last checkpoint already has the recompute time of the first c that
     * passes it, nothing can do better. */
    size_t cm = plan->checkpoints[plan->n_checkpoints - 1], first = 0;
    int64_t k = c->x[0] + c->m[0];
    while (first < cm && c->x[0] + (first > 0 ? c->x[first] : 0) + c->tl[first] > k)
        first++;
    if (remat__recompute_ms(p, first) == remat__recompute_ms(p, cm))
        return REMAT_OK;
    int over = spend ? 0 : recompute_pass_gives_up(c, budget, cm);
    if (over > 0)
        return REMAT_OK;
    size_t *alt = over == 0 ? malloc((c->n - 1) * sizeof(size_t)) : NULL, m = 0;
    int got = alt ? least_recompute_set(c, p, budget, cm, alt, &m) : -1;
    if (got < 0) {
        free(alt);
        remat_plan_clear(plan);
        return remat__error(err, REMAT_ENOMEM, "", "out of memory for the checkpoint list");
    }
    if (got && remat__tie_cmp(p, alt, m, plan->checkpoints, plan->n_checkpoints) < 0) {
        free(plan->checkpoints);
        plan->checkpoints = m > 0 ? alt : NULL;
        plan->n_checkpoints = m;
        if (m == 0)
            free(alt);
    } else {
        free(alt);
    }
    return REMAT_OK;
}

/* The optimizer step is a floor under every set's peak (optimizer.c): the
 * peak is the larger of the two.  When the floor reaches store-all's peak,
 * every set is optimal and store-all, with no recompute, is the canonical
 * one.  Between the two, sets other than the one chosen may reach the same
 * peak with less recompute; min-time at that budget finds the fastest
 * (docs/scheduling.md). */
static int step_floor(const struct remat_profile *p, struct remat_plan *plan,
                      struct remat_error *err)
{
    int64_t floor = remat_optim_step_peak_bytes(p);
    if (floor == 0 || floor < plan->objective_value)
        return REMAT_OK;
    plan->objective_value = floor;
    if (plan->n_checkpoints == 0)
        return REMAT_OK;
    struct remat_sim sim;
    int rc = remat_simulate_checkpoints(p, REMAT_MODEL_TRACED, NULL, 0, 0, &sim, err);
    if (rc != REMAT_OK) {
        remat_plan_clear(plan);
        return rc;
    }
    if (sim.peak_bytes <= floor) {
        free(plan->checkpoints);
        plan->checkpoints = NULL;
        plan->n_checkpoints = 0;
    }
    remat_sim_clear(&sim);
    return REMAT_OK;
}

int bench_old_min_peak_with(const struct remat_profile *p, enum remat__minpeak_method method,
                            struct remat_plan *plan, struct remat_error *err)
{
    struct chain c;
    int rc = chain_build(p, &c, err);
    if (rc)
        return rc;
    size_t n = c.n;
    size_t budget = method == REMAT__MINPEAK_TREE           ? 0
                    : method == REMAT__MINPEAK_EARLY_SWITCH ? n
                                                            : SCAN_PER_STAGE * n + SCAN_BASE;
    /* The sweep needs the no-grad forward term to be dominated (every
     * saved_bytes >= out_bytes, as docs/memory-model.md defines x̄ and
     * remat_profile_validate checks, and no stage whose forward without
     * grad holds more than x̄ + its forward with grad); the quadratic
     * program keeps that term and is exact either way. */
    if (method == REMAT__MINPEAK_REF || !c.saved_ge_out ||
        (method == REMAT__MINPEAK_AUTO && n <= SMALL_N)) {
        dp_ref(&c);
    } else if (dp_fast(&c, budget, method != REMAT__MINPEAK_TREE)) {
        chain_free(&c);
        return remat__error(err, REMAT_ENOMEM, "", "out of memory for %zu stages", n);
    }
    /* EARLY_SWITCH also leaves out the least-recompute pass, so that the
     * tests see the greedy set alone. */
    size_t set_budget = method == REMAT__MINPEAK_EARLY_SWITCH ? 0 : FWD_PER_STAGE * n + SCAN_BASE;
    rc = old_choose_set(&c, p, set_budget, method == REMAT__MINPEAK_SPENT_PASS, plan, err);
    chain_free(&c);
    if (rc == REMAT_OK)
        rc = step_floor(p, plan, err);
    return rc;
}
