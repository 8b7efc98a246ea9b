/*
 * solve_minpeak.c - min-peak: the checkpoint set of least `traced` peak.
 *
 * docs/min-peak.md is the design note: it derives the per-segment cost T
 * from the rules of docs/memory-model.md, proves the suffix recurrence
 *
 *   M(i) = min( Tlast(i), min_{i<j<n} max(T(i,j), x_j + M(j)) ),
 *   peak = W + x_0 + M(0),
 *
 * and proves the O(n log n) sweep below.  In short, for a non-last segment
 * (i, j] and a profile where every saved_bytes >= out_bytes,
 *
 *   T(i,j) = max(gam_j + U(i,j), B(i,j)) - Sb_i,
 *
 * where U and B are running maxima over the stages of the segment (forward
 * with grad, backward), gam_j = x_j + (weight gradients of stages > j) is a
 * term of j alone that is not monotone in j, and Sb is the prefix sum of the
 * saved bytes.  The sweep keeps every candidate next checkpoint j in a
 * segment tree indexed by j.  A candidate is "uncrossed" while T(i,j) < x_j +
 * M(j) (its cost is then x_j + M(j)) and "crossed" after (its cost is
 * T(i,j)); T only grows as i falls, so it crosses once.  U and B change by
 * prefix assignments, which the tree takes lazily; the least crossed cost is
 * found by one descent because B is non-decreasing in j.
 *
 * The checkpoint set is then read off the values M(i) by a forward greedy
 * scan that is exact for the lexicographic tie-break (docs/min-peak.md).
 */
#include "minpeak.h"

#include <stdint.h>

/* Byte counts above this total are refused so that no sum below can
 * overflow: every value the solver forms is at most a few totals. */
#define TOTAL_LIMIT (INT64_C(1) << 58)
/* Larger than any real value (each is at most 4 * TOTAL_LIMIT = 2^60), and
 * INF plus or minus a real value still fits in 64 bits. */
#define INF (INT64_C(1) << 61)
#define NONE INT64_MIN

/* Below this many stages the quadratic program is faster than building the
 * tree (measured with bench/solve_bench; both are exact). */
#define SMALL_N 96

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
    int64_t w;     /* W: the weights, live throughout */
    int64_t loss;  /* Sb_n + x_n: the LOSS op of the last segment */
    int saved_ge_out; /* every x̄_i >= x_i: the no-grad forward term is dominated */
    int64_t *x;    /* x_i, out_bytes; x_0 the input */
    int64_t *sb;   /* Sb_i = x̄_1 + ... + x̄_i */
    int64_t *u;    /* u_l = Sb_l + f_l: F_all(l) during recompute */
    int64_t *beta; /* beta_l = Sb_l + x_l + G_{>=l} + [l>1] x_{l-1} + b_l: B(l) */
    int64_t *gam;  /* gam_j = x_j + G_{>j}: delta_j and dW live while segment (., j] recomputes */
    int64_t *g;    /* g_l = x_l + f_l: F_∅/F_ck(l); h_l = x_{l-1} + g_l when l is not first */
    int64_t *m;    /* M(i), i in 0..n-1 */
    int64_t *tl;   /* Tlast(i), i in 0..n-1 */
    int64_t *mem;  /* the one allocation behind the arrays */
};

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
        if (add_checked(&total, s->out_bytes) || add_checked(&total, s->saved_bytes) ||
            add_checked(&total, s->fwd_tmp_bytes) || add_checked(&total, s->bwd_tmp_bytes) ||
            add_checked(&total, s->param_bytes) || add_checked(&total, s->param_bytes))
            goto too_big;
    }

    size_t len = n + 1;
    c->mem = malloc(8 * len * sizeof(int64_t));
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
        if (s->saved_bytes < s->out_bytes)
            c->saved_ge_out = 0;
    }
    /* G_{>=l} is a suffix sum: walk down, gsuf = G_{>l} before adding p_l. */
    int64_t gsuf = 0;
    for (size_t l = n; l >= 1; l--) {
        const struct remat_stage *s = &p->stages[l - 1];
        c->gam[l] = c->x[l] + gsuf;
        gsuf += s->param_bytes;
        c->u[l] = c->sb[l] + s->fwd_tmp_bytes;
        c->beta[l] = c->sb[l] + c->x[l] + gsuf + (l > 1 ? c->x[l - 1] : 0) + s->bwd_tmp_bytes;
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
 * The fast sweep: a segment tree over candidates j with two lazy prefix
 * assignments (U and B).  Arrays of structure-of-arrays, one allocation.
 *
 * Over the uncrossed leaves of a node: mgv = max(gam_j - V_j), mnv =
 * max(-V_j), k1 = max(gam_j - V_j + U_j), k2 = max(B_j - V_j); a leaf
 * crosses when max(k1, k2) >= Sb_i.  Over the crossed leaves: ming =
 * min gam_j, minx = min(gam_j + U_j).  Over all leaves: maxb = max B_j, which
 * is B at the node's last real leaf because B is non-decreasing in j.
 * lzu/lzb: pending assignments of an internal node; at a leaf, its U and B.
 */
struct tree {
    size_t size; /* leaves, a power of two >= n */
    int log;
    int64_t *mgv, *mnv, *k1, *k2, *ming, *minx, *maxb, *lzu, *lzb;
    int64_t *mem;
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
    t->mem = malloc(9 * len * sizeof(int64_t));
    if (!t->mem)
        return -1;
    t->mgv = t->mem;
    t->mnv = t->mgv + len;
    t->k1 = t->mnv + len;
    t->k2 = t->k1 + len;
    t->ming = t->k2 + len;
    t->minx = t->ming + len;
    t->maxb = t->minx + len;
    t->lzu = t->maxb + len;
    t->lzb = t->lzu + len;
    for (size_t v = 1; v < len; v++) {
        t->mgv[v] = t->mnv[v] = t->k1[v] = t->k2[v] = -INF;
        t->ming[v] = t->minx[v] = INF;
        /* Leaves start at U = B = 0, at most any real value, so B stays
         * non-decreasing in j; every real leaf is assigned before it is
         * read.  Internal nodes start with nothing pending. */
        t->maxb[v] = 0;
        t->lzu[v] = t->lzb[v] = v >= t->size ? 0 : NONE;
    }
    return 0;
}

static inline void apply_u(struct tree *t, size_t v, int64_t c)
{
    t->k1[v] = t->mgv[v] + c;
    t->minx[v] = t->ming[v] + c;
    t->lzu[v] = c;
}

static inline void apply_b(struct tree *t, size_t v, int64_t c)
{
    t->k2[v] = t->mnv[v] + c;
    t->maxb[v] = c;
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
    size_t l = 2 * v, r = l + 1;
    t->mgv[v] = max64(t->mgv[l], t->mgv[r]);
    t->mnv[v] = max64(t->mnv[l], t->mnv[r]);
    t->k1[v] = max64(t->k1[l], t->k1[r]);
    t->k2[v] = max64(t->k2[l], t->k2[r]);
    t->ming[v] = min64(t->ming[l], t->ming[r]);
    t->minx[v] = min64(t->minx[l], t->minx[r]);
    t->maxb[v] = max64(t->maxb[l], t->maxb[r]);
}

static inline void push_path(struct tree *t, size_t leaf)
{
    for (int s = t->log; s >= 1; s--)
        push(t, leaf >> s);
}

static inline void pull_path(struct tree *t, size_t leaf)
{
    for (int s = 1; s <= t->log; s++)
        pull(t, leaf >> s);
}

/* Leaf j becomes an uncrossed candidate of cost V. */
static void tree_activate(struct tree *t, size_t j, int64_t gam, int64_t v)
{
    size_t leaf = t->size + j;
    push_path(t, leaf);
    t->mgv[leaf] = gam - v;
    t->mnv[leaf] = -v;
    t->k1[leaf] = t->mgv[leaf] + t->lzu[leaf];
    t->k2[leaf] = t->mnv[leaf] + t->lzb[leaf];
    pull_path(t, leaf);
}

/* Assigns U (which = 0) or B (which = 1) = c on leaves [0, r). */
static void tree_assign_prefix(struct tree *t, int which, size_t r, int64_t c)
{
    size_t lo = t->size, hi = t->size + r;
    for (int s = t->log; s >= 1; s--)
        if (((hi >> s) << s) != hi)
            push(t, (hi - 1) >> s);
    for (size_t a = lo, b = hi; a < b; a >>= 1, b >>= 1) {
        if (a & 1) {
            which ? apply_b(t, a, c) : apply_u(t, a, c);
            a++;
        }
        if (b & 1) {
            --b;
            which ? apply_b(t, b, c) : apply_u(t, b, c);
        }
    }
    for (int s = 1; s <= t->log; s++)
        if (((hi >> s) << s) != hi)
            pull(t, (hi - 1) >> s);
}

/* Crosses one uncrossed leaf with max(k1, k2) >= thr (the root has one). */
static void tree_cross_one(struct tree *t, const int64_t *gam, int64_t thr)
{
    size_t v = 1;
    while (v < t->size) {
        push(t, v);
        v *= 2;
        if (max64(t->k1[v], t->k2[v]) < thr)
            v++;
    }
    size_t j = v - t->size;
    t->mgv[v] = t->mnv[v] = t->k1[v] = t->k2[v] = -INF;
    t->ming[v] = gam[j];
    t->minx[v] = gam[j] + t->lzu[v];
    pull_path(t, v);
}

/* min over crossed j of max(gam_j + U_j, B_j), INF when none: with Q_t the
 * least gam_j + U_j over crossed j <= t (non-increasing) and B_t
 * non-decreasing, it is min(B_t*, Q_{t*-1}) at the first t* with
 * B_t* >= Q_t*, or Q at the end when there is no such t*. */
static int64_t tree_crossed_min(struct tree *t)
{
    if (t->maxb[1] < t->minx[1])
        return t->minx[1];
    size_t v = 1;
    int64_t q = INF;
    while (v < t->size) {
        push(t, v);
        v *= 2;
        if (t->maxb[v] < min64(q, t->minx[v])) {
            q = min64(q, t->minx[v]);
            v++;
        }
    }
    return min64(t->maxb[v], q);
}

/* Monotone stack of blocks of candidates with equal running maximum, left
 * (smallest j) on top: push_stage returns the end of the block that the
 * new stage's value now covers. */
struct blocks {
    size_t top;
    size_t *start;
    int64_t *val;
};

static size_t blocks_push(struct blocks *s, size_t j, int64_t v, size_t n)
{
    while (s->top > 0 && s->val[s->top - 1] <= v)
        s->top--;
    size_t r = s->top > 0 ? s->start[s->top - 1] : n;
    s->start[s->top] = j;
    s->val[s->top] = v;
    s->top++;
    return r;
}

static int dp_fast(struct chain *c)
{
    size_t n = c->n;
    struct tree t;
    if (tree_init(&t, n))
        return -1;
    size_t *bstart = malloc(2 * n * sizeof(size_t));
    int64_t *bval = malloc(2 * n * sizeof(int64_t));
    if (!bstart || !bval) {
        free(bstart);
        free(bval);
        free(t.mem);
        return -1;
    }
    struct blocks su = {0, bstart, bval}, sbk = {0, bstart + n, bval + n};

    int64_t ul = -INF, bl = -INF;
    for (size_t i = n; i-- > 0;) {
        ul = max64(ul, c->u[i + 1]);
        bl = max64(bl, c->beta[i + 1]);
        c->tl[i] = max64(max64(ul, bl), c->loss) - c->sb[i];
        if (i + 1 == n) {
            c->m[i] = c->tl[i];
            continue;
        }
        size_t j = i + 1; /* the new candidate and the new stage of every segment */
        tree_activate(&t, j, c->gam[j], c->x[j] + c->m[j]);
        tree_assign_prefix(&t, 0, blocks_push(&su, j, c->u[j], n), c->u[j]);
        tree_assign_prefix(&t, 1, blocks_push(&sbk, j, c->beta[j], n), c->beta[j]);

        int64_t thr = c->sb[i];
        while (max64(t.k1[1], t.k2[1]) >= thr)
            tree_cross_one(&t, c->gam, thr);

        int64_t best = min64(c->tl[i], -t.mnv[1]);
        int64_t cr = tree_crossed_min(&t);
        if (cr < INF)
            best = min64(best, cr - thr);
        c->m[i] = best;
    }
    free(bstart);
    free(bval);
    free(t.mem);
    return 0;
}

/* ------------------------------------------------------------------------
 * The checkpoint set: from state (i, P), P the checkpoint bytes live (x_0
 * included), take the last segment if it fits, else the least j whose
 * segment fits and from which the rest can still be finished within the
 * optimum (P + x_j + M(j) <= K).  docs/min-peak.md: this is the
 * lexicographically smallest optimal list.  O(n) in all: each scan stops
 * at the checkpoint it picks, and the next one starts after it.
 */
static int pick_set(const struct chain *c, struct remat_plan *plan, struct remat_error *err)
{
    size_t n = c->n, count = 0;
    size_t *cps = n > 1 ? malloc((n - 1) * sizeof(size_t)) : NULL;
    if (n > 1 && !cps)
        return remat__error(err, REMAT_ENOMEM, "", "out of memory for the checkpoint list");
    int64_t k = c->x[0] + c->m[0];
    int64_t pl = c->x[0];
    size_t i = 0;
    while (pl + c->tl[i] > k) {
        int64_t uu = -INF, bb = -INF, hh = -INF;
        size_t j = i + 1;
        for (; j < n; j++) {
            uu = max64(uu, c->u[j]);
            bb = max64(bb, c->beta[j]);
            if (j >= i + 2)
                hh = max64(hh, c->x[j - 1] + c->g[j]);
            int64_t t = max64(c->gam[j] + uu, bb) - c->sb[i];
            t = max64(t, max64(c->g[i + 1], hh));
            if (pl + t <= k && pl + c->x[j] + c->m[j] <= k)
                break;
        }
        if (j >= n) {
            /* Unreachable when M is right: M(i) <= k - pl promises a move. */
            free(cps);
            return remat__error(err, REMAT_EINVAL, "", "min-peak: no move fits the optimum");
        }
        cps[count++] = j;
        pl += c->x[j];
        i = j;
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

int remat__min_peak_with(const struct remat_profile *p, enum remat__minpeak_method method,
                         struct remat_plan *plan, struct remat_error *err)
{
    struct chain c;
    int rc = chain_build(p, &c, err);
    if (rc)
        return rc;
    int quadratic = method == REMAT__MINPEAK_REF || (method == REMAT__MINPEAK_AUTO && c.n <= SMALL_N);
    /* The tree needs the no-grad forward term to be dominated (every
     * saved_bytes >= out_bytes, as docs/memory-model.md defines x̄); the
     * quadratic program keeps that term and is exact either way. */
    if (quadratic || !c.saved_ge_out) {
        dp_ref(&c);
    } else if (dp_fast(&c)) {
        chain_free(&c);
        return remat__error(err, REMAT_ENOMEM, "", "out of memory for %zu stages", p->n_stages);
    }
    rc = pick_set(&c, plan, err);
    chain_free(&c);
    return rc;
}

int remat__solve_min_peak(const struct remat_profile *p, struct remat_plan *plan,
                          struct remat_error *err)
{
    return remat__min_peak_with(p, REMAT__MINPEAK_AUTO, plan, err);
}

int remat__min_peak_ref(const struct remat_profile *p, struct remat_plan *plan,
                        struct remat_error *err)
{
    return remat__min_peak_with(p, REMAT__MINPEAK_REF, plan, err);
}
