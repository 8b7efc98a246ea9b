/*
 * solve_mintime_load.c - the stage records the min-time table reads, in
 * flat 1-based arrays: the profile's own stages (remat__mt_load_stages),
 * or runs of them as single stages (remat__mt_load_groups, the long-chain
 * table of docs/min-time.md), and the expansion of a schedule over runs
 * back into the profile's ops.
 */
#include <stdint.h>
#include <string.h>

#include "solve_mintime_table.h"

int remat__mt_load_stages(struct remat__mt *t, const struct remat_profile *p,
                          struct remat_error *err)
{
    size_t n = p->n_stages;
    t->n = n;
    t->buf_i64 = malloc(8 * (n + 2) * sizeof(int64_t));
    t->buf_f64 = malloc(2 * (n + 2) * sizeof(double));
    if (t->buf_i64 == NULL || t->buf_f64 == NULL)
        return remat__error(err, REMAT_ENOMEM, "", "out of memory");
    int64_t *x = t->buf_i64, *xb = x + (n + 2), *ft = xb + (n + 2), *fg = ft + (n + 2);
    int64_t *bt = fg + (n + 2), *pp = bt + (n + 2);
    double *tf = t->buf_f64, *tb = tf + (n + 2);
    /* 2^61 bounds the sum of everything: every amount the program adds
     * is a sum of distinct fields, so int64 never overflows. */
    const int64_t cap = INT64_C(1) << 61;
    int64_t total = p->input_bytes;
    x[0] = p->input_bytes;
    xb[0] = ft[0] = fg[0] = bt[0] = pp[0] = 0;
    tf[0] = tb[0] = 0;
    for (size_t k = 1; k <= n; k++) {
        const struct remat_stage *s = &p->stages[k - 1];
        x[k] = s->out_bytes;
        xb[k] = s->saved_bytes;
        ft[k] = s->fwd_tmp_bytes;
        fg[k] = remat_stage_fwd_grad_tmp_bytes(s);
        bt[k] = s->bwd_tmp_bytes - s->bwd_freed_bytes;
        pp[k] = pp[k - 1] + s->param_bytes;
        tf[k] = s->fwd_ms;
        tb[k] = s->bwd_ms;
        /* What bt takes away is at most x̄_k + x_k (remat_profile_validate),
         * so no amount below falls under minus the total either. */
        if (s->bwd_freed_bytes < 0 || s->bwd_freed_bytes > s->saved_bytes + s->out_bytes)
            return remat__error(err, REMAT_EINVAL, "", "stage %zu frees more than it holds", k);
        int64_t add[6] = {x[k], xb[k], ft[k], fg[k], s->bwd_tmp_bytes, 2 * s->param_bytes};
        for (int a = 0; a < 6; a++) {
            if (add[a] < 0 || add[a] > cap || total > cap - add[a])
                return remat__error(err, REMAT_ELIMIT, "", "byte sizes add up past 2^61");
            total += add[a];
        }
    }
    int64_t opt[2] = {p->optimizer.state_bytes, p->optimizer.step_tmp_bytes};
    for (int a = 0; a < 2; a++) {
        if (opt[a] < 0 || opt[a] > cap || total > cap - opt[a])
            return remat__error(err, REMAT_ELIMIT, "", "byte sizes add up past 2^61");
        total += opt[a];
    }
    x[n + 1] = xb[n + 1] = ft[n + 1] = fg[n + 1] = bt[n + 1] = 0;
    pp[n + 1] = pp[n];
    tf[n + 1] = tb[n + 1] = 0;
    t->x = x;
    t->xb = xb;
    t->ft = ft;
    t->fg = fg;
    t->bt = bt;
    t->pp = pp;
    t->tf = tf;
    t->tb = tb;
    int64_t *f0 = pp + (n + 2), *f1 = f0 + (n + 2);
    for (size_t k = 0; k <= n + 1; k++) {
        f0[k] = x[k] + ft[k];
        f1[k] = (k == 0 ? 0 : x[k - 1]) + x[k] + ft[k];
    }
    t->f0 = f0;
    t->f1 = f1;
    return REMAT_OK;
}

int remat__mt_load_groups(struct remat__mt *t, const struct remat_profile *p, const size_t *ends,
                          size_t g, struct remat_error *err)
{
    size_t n = p->n_stages;
    if (g == 0 || ends[0] != 0 || ends[g] != n)
        return remat__error(err, REMAT_EINVAL, "", "the runs do not cover the chain");
    for (size_t k = 1; k <= g; k++)
        if (ends[k] <= ends[k - 1])
            return remat__error(err, REMAT_EINVAL, "", "the runs do not cover the chain");
    /* The profile's own stages first (the overflow checks), then the runs'
     * amounts over them. */
    struct remat__mt s;
    memset(&s, 0, sizeof s);
    int rc = remat__mt_load_stages(&s, p, err);
    if (rc == REMAT_OK) {
        t->n = g;
        t->buf_i64 = malloc(8 * (g + 2) * sizeof(int64_t));
        t->buf_f64 = malloc(2 * (g + 2) * sizeof(double));
        t->gend = malloc((g + 1) * sizeof(size_t));
        if (t->buf_i64 == NULL || t->buf_f64 == NULL || t->gend == NULL)
            rc = remat__error(err, REMAT_ENOMEM, "", "out of memory");
    }
    if (rc != REMAT_OK) {
        free(s.buf_i64);
        free(s.buf_f64);
        return rc;
    }
    memcpy(t->gend, ends, (g + 1) * sizeof(size_t));
    int64_t *x = t->buf_i64, *xb = x + (g + 2), *ft = xb + (g + 2), *fg = ft + (g + 2);
    int64_t *bt = fg + (g + 2), *pp = bt + (g + 2), *f0 = pp + (g + 2), *f1 = f0 + (g + 2);
    double *tf = t->buf_f64, *tb = tf + (g + 2);
    memset(t->buf_i64, 0, 8 * (g + 2) * sizeof(int64_t));
    memset(t->buf_f64, 0, 2 * (g + 2) * sizeof(double));
    x[0] = s.x[0];
    for (size_t k = 1; k <= g; k++) {
        size_t a = ends[k - 1] + 1, e = ends[k];
        x[k] = s.x[e];
        pp[k] = s.pp[e];
        /* The run's F_all keeps every x̄ of it; F_all(c)'s peak lies P_c
         * (the x̄ of the run's stages before c) above the run's entry, and
         * so does B(c)'s, which runs with the same x̄ live. */
        int64_t sum = 0, own = 0, bwd = 0, fk = s.f0[a], fn = 0;
        for (size_t c = a; c <= e; c++) {
            int64_t o = sum + s.xb[c] + s.fg[c];
            int64_t b = sum + s.xb[c] + s.x[c] - s.pp[c - 1] + s.bt[c] + (c > 1 ? s.x[c - 1] : 0);
            own = c == a || o > own ? o : own;
            bwd = c == a || b > bwd ? b : bwd;
            sum += s.xb[c];
            tf[k] += s.tf[c];
            tb[k] += s.tb[c];
            if (c > a && s.f1[c] > fk)
                fk = s.f1[c];
            if (c == a || s.f1[c] > fn)
                fn = s.f1[c];
        }
        xb[k] = sum;
        fg[k] = own - sum;
        /* chain_bwd_bytes(k, l) is then bwd + pp[l] - [l < g] x[l]. */
        bt[k] = bwd - (sum + x[k] - pp[k - 1] + (k > 1 ? x[k - 1] : 0));
        f0[k] = fk; /* F_ck(a), then F_∅ over the rest of the run */
        f1[k] = fn; /* F_∅ over the whole run */
        ft[k] = 0;  /* read through f0 and f1 only */
    }
    pp[g + 1] = pp[g];
    free(s.buf_i64);
    free(s.buf_f64);
    t->x = x;
    t->xb = xb;
    t->ft = ft;
    t->fg = fg;
    t->bt = bt;
    t->pp = pp;
    t->tf = tf;
    t->tb = tb;
    t->f0 = f0;
    t->f1 = f1;
    return REMAT_OK;
}

int remat__mt_expand(const size_t *ends, size_t g, size_t n, const struct remat_schedule *s,
                     struct remat_schedule *out)
{
    int rc = REMAT_OK;
    for (size_t o = 0; o < s->n_ops && rc == REMAT_OK; o++) {
        size_t k = s->ops[o].stage;
        if (k < 1 || k > g)
            return REMAT_EINVAL;
        size_t a = ends[k - 1] + 1, e = ends[k];
        switch (s->ops[o].kind) {
        case REMAT_OP_LOSS:
            rc = remat_schedule_push(out, REMAT_OP_LOSS, (uint32_t)n);
            break;
        case REMAT_OP_B:
            for (size_t c = e; c >= a && rc == REMAT_OK; c--)
                rc = remat_schedule_push(out, REMAT_OP_B, (uint32_t)c);
            break;
        case REMAT_OP_F_CK:
            rc = remat_schedule_push(out, REMAT_OP_F_CK, (uint32_t)a);
            for (size_t c = a + 1; c <= e && rc == REMAT_OK; c++)
                rc = remat_schedule_push(out, REMAT_OP_F_NONE, (uint32_t)c);
            break;
        default: /* F_all, F_∅: the run's stages one after the other */
            for (size_t c = a; c <= e && rc == REMAT_OK; c++)
                rc = remat_schedule_push(out, s->ops[o].kind, (uint32_t)c);
            break;
        }
    }
    return rc;
}
