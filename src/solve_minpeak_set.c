/*
 * solve_minpeak_set.c - min-peak's checkpoint set, read off the values M(i)
 * that solve_minpeak.c finds.  From state (i, P), P the checkpoint bytes
 * live (x_0 included), a move to j is allowed when its segment fits the
 * optimum K and the rest can still be finished within it:
 * P + T(i,j) <= K and P + x_j + M(j) <= K (M(i) <= K - P promises one).
 * Take the last segment as soon as it fits (the least recompute among the
 * optimal plans that share the checkpoints so far); else the least allowed j
 * after which the last segment fits (the plan ends there); else the farthest
 * allowed j (few checkpoints).  No j beyond the first with
 * P + B(i,j) - Sb_i > K can be allowed (B only grows with j), so the scan
 * stops there.  Those scans can overlap; past WORK_PER_STAGE * n scanned
 * stages the rest of the path takes the nearest allowed j instead, whose
 * scans do not overlap, so the whole is O(n).  docs/min-peak.md says
 * exactly what this guarantees.
 */
#include <stdint.h>
#include <stdlib.h>

#include "solve_minpeak_chain.h"

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

/* remat__recompute_ms(p, a) == remat__recompute_ms(p, b) for a <= b, in one
 * walk over stages 1..b: the sum to a is the same floats added in the same
 * order, so the same value, and a million stages are not read twice. */
static int same_recompute(const struct remat_profile *p, size_t a, size_t b)
{
    double t = 0;
    size_t j = 1;
    for (; j <= a; j++)
        t += p->stages[j - 1].fwd_ms;
    double ta = t;
    for (; j <= b; j++)
        t += p->stages[j - 1].fwd_ms;
    return ta == t;
}

/* The set: the greedy scan's, or the least-recompute pass's when that one
 * finishes and comes first in the tie order (remat__tie_cmp). */
int remat__mp_choose_set(const struct chain *c, const struct remat_profile *p, size_t budget,
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
    if (same_recompute(p, first, cm))
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
