/* plan_codec.c - the stored form of a plan (plan_codec.h says why). */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plan_codec.h"
#include "rematx/rematx.h"

/* Version 2 adds each stage's fwd_grad_tmp_bytes and bwd_freed_bytes; a
 * version 1 record is still read, with the meaning those fields' defaults
 * give (docs/profile.md).  Version 3 adds the plan's optimality_gap after
 * min_budget_bytes (min-time past 300 stages plans within a bound of the
 * optimum, docs/min-time.md); older records read it as 0, which is what
 * every plan they hold had. */
#define CODEC_VERSION 3

/* The largest record: REMAT_MAX_STAGES stages and their ops stay far
 * below it (about 40 bytes a stage). */
#define MAX_RECORD ((size_t)1 << 30)

/* The record being written, in the one bounded buffer (dynbuf.h): its
 * room check is inline, one comparison per value on the hot path; a
 * failure is sticky and found once, at the end. */
struct out {
    struct rematx_dynbuf d;
};

static inline void put_u(struct out *o, uint64_t v)
{
    unsigned char *q = (unsigned char *)rematx_dyn_room(&o->d, 10);
    if (q == NULL)
        return;
    unsigned char *b = q;
    while (v >= 0x80) {
        *q++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *q++ = (unsigned char)v;
    rematx_dyn_setlen(&o->d, o->d.len + (size_t)(q - b));
}

static inline void put_s(struct out *o, int64_t v)
{
    /* Zigzag: the sign spread over all bits, taken from the unsigned
     * value, as v >> 63 of a negative v is implementation-defined. */
    put_u(o, ((uint64_t)v << 1) ^ (0 - ((uint64_t)v >> 63)));
}

static const double pow10_tab[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9};
#define N_POW10 (sizeof pow10_tab / sizeof pow10_tab[0])

/* Short decimals as (k, m); anything else, and -0, as its 8 bytes.  The
 * decoder computes m / 10^(k-1) exactly as checked here, so the double
 * comes back bit for bit. */
static void put_d(struct out *o, double d)
{
    if (d >= 0 && d < 1e15 && !signbit(d)) {
        for (size_t k = 0; k < N_POW10; k++) {
            double scaled = d * pow10_tab[k];
            if (scaled >= 9007199254740992.0) /* 2^53 */
                break;
            uint64_t m = (uint64_t)scaled;
            /* Only a whole product can be the decimal; the division (the
             * decoder's own computation) then decides, once. */
            if ((double)m == scaled && (double)m / pow10_tab[k] == d) {
                put_u(o, k + 1);
                put_u(o, m);
                return;
            }
        }
    }
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    put_u(o, 0);
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)(bits >> (8 * i));
    rematx_dyn_addn(&o->d, le, sizeof le);
}

unsigned char *rematd_plan_encode(const struct remat_profile *p, const struct remat_plan *plan,
                                  size_t *len)
{
    struct out o;
    rematx_dyn_init(&o.d, MAX_RECORD);
    /* ~20 bytes a stage and 2 an op cover the usual record in one go. */
    if (rematx_dyn_grow(&o.d,
                        64 + 24 * p->n_stages + 3 * plan->schedule.n_ops + 3 * plan->n_checkpoints))
        return NULL;
    unsigned char version = CODEC_VERSION;
    rematx_dyn_addn(&o.d, &version, 1);
    put_u(&o, p->n_stages);
    put_u(&o, (uint64_t)p->input_bytes);
    for (size_t i = 0; i < p->n_stages; i++) {
        const struct remat_stage *s = &p->stages[i];
        put_u(&o, (uint64_t)s->out_bytes);
        /* saved >= out in every valid profile: the difference is short. */
        put_s(&o, s->saved_bytes - s->out_bytes);
        put_u(&o, (uint64_t)s->fwd_tmp_bytes);
        /* Mostly equal to fwd_tmp_bytes: the difference is short. */
        put_s(&o, remat_stage_fwd_grad_tmp_bytes(s) - s->fwd_tmp_bytes);
        put_u(&o, (uint64_t)s->bwd_tmp_bytes);
        put_u(&o, (uint64_t)s->bwd_freed_bytes);
        put_u(&o, (uint64_t)s->param_bytes);
        put_d(&o, s->fwd_ms);
        put_d(&o, s->bwd_ms);
    }
    put_u(&o, (uint64_t)plan->algorithm);
    put_u(&o, (uint64_t)plan->objective_model);
    put_u(&o, plan->single_level ? 1 : 0);
    put_s(&o, plan->objective_value);
    put_s(&o, plan->peak_bytes);
    put_s(&o, plan->store_all_peak_bytes);
    put_d(&o, plan->recompute_ms);
    put_d(&o, plan->total_ms);
    put_s(&o, plan->budget_bytes);
    put_s(&o, plan->min_budget_bytes);
    put_d(&o, plan->optimality_gap);
    put_u(&o, plan->n_checkpoints);
    size_t prev = 0;
    for (size_t k = 0; k < plan->n_checkpoints; k++) {
        put_u(&o, plan->checkpoints[k] - prev);
        prev = plan->checkpoints[k];
    }
    put_u(&o, plan->schedule.n_ops);
    for (size_t k = 0; k < plan->schedule.n_ops; k++) {
        const struct remat_op *op = &plan->schedule.ops[k];
        put_u(&o, (uint64_t)op->stage * 5 + op->kind);
    }
    /* rematx_dyn_take is NULL after any failure (the text is freed). */
    return (unsigned char *)rematx_dyn_take(&o.d, len);
}

/* ---- decoding ----------------------------------------------------------- */

struct in {
    const unsigned char *p, *end;
    int bad;
};

static uint64_t get_u(struct in *in)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (in->p >= in->end) {
            in->bad = 1;
            return 0;
        }
        unsigned char c = *in->p++;
        if (shift == 63 && c > 1) {
            in->bad = 1;
            return 0;
        }
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            return v;
    }
    in->bad = 1;
    return 0;
}

static int64_t get_s(struct in *in)
{
    uint64_t u = get_u(in);
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

/* A size: at most libremat's limit, so every later sum stays in range. */
static int64_t get_size(struct in *in)
{
    uint64_t u = get_u(in);
    if (u > (uint64_t)REMAT_MAX_BYTES) {
        in->bad = 1;
        return 0;
    }
    return (int64_t)u;
}

static double get_d(struct in *in)
{
    uint64_t k = get_u(in);
    if (k > N_POW10) {
        in->bad = 1;
        return 0;
    }
    if (k > 0) {
        uint64_t m = get_u(in);
        if (m >= ((uint64_t)1 << 53)) {
            in->bad = 1;
            return 0;
        }
        return (double)m / pow10_tab[k - 1];
    }
    if (in->end - in->p < 8) {
        in->bad = 1;
        return 0;
    }
    uint64_t bits = 0;
    for (int i = 0; i < 8; i++)
        bits |= (uint64_t)in->p[i] << (8 * i);
    in->p += 8;
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

int rematd_plan_decode(const unsigned char *buf, size_t len, struct remat_profile **profile,
                       struct remat_plan *plan)
{
    struct in in = {buf, buf + len, 0};
    struct remat_profile *p = NULL;
    *profile = NULL;
    memset(plan, 0, sizeof *plan);
    remat_schedule_init(&plan->schedule);
    plan->single_level = 1;
    if (len < 1 || buf[0] < 1 || buf[0] > CODEC_VERSION)
        return -1;
    int v1 = buf[0] == 1, v3 = buf[0] >= 3;
    in.p++;
    uint64_t n = get_u(&in);
    /* Each stage takes at least 7 bytes: a count the record cannot hold is
     * refused before anything is allocated for it. */
    if (in.bad || n == 0 || n > REMAT_MAX_STAGES || n > (size_t)(in.end - in.p) / 7)
        return -1;
    p = remat_profile_new((size_t)n, NULL);
    if (p == NULL)
        return -1;
    p->input_bytes = get_size(&in);
    for (size_t i = 0; i < p->n_stages && !in.bad; i++) {
        struct remat_stage *s = &p->stages[i];
        s->out_bytes = get_size(&in);
        int64_t extra = get_s(&in);
        /* Checked before the sum: a damaged count must not overflow it. */
        if (extra < 0 || s->out_bytes < 0 || s->out_bytes > REMAT_MAX_BYTES ||
            extra > REMAT_MAX_BYTES - s->out_bytes)
            in.bad = 1;
        else
            s->saved_bytes = s->out_bytes + extra;
        s->fwd_tmp_bytes = get_size(&in);
        s->fwd_grad_tmp_bytes = s->fwd_tmp_bytes;
        if (!v1) {
            int64_t dg = get_s(&in);
            /* Checked before the sum, as above. */
            if (s->fwd_tmp_bytes < 0 || s->fwd_tmp_bytes > REMAT_MAX_BYTES ||
                dg < -s->fwd_tmp_bytes || dg > REMAT_MAX_BYTES - s->fwd_tmp_bytes)
                in.bad = 1;
            else
                s->fwd_grad_tmp_bytes = s->fwd_tmp_bytes + dg;
        }
        s->bwd_tmp_bytes = get_size(&in);
        s->bwd_freed_bytes = v1 ? 0 : get_size(&in);
        s->param_bytes = get_size(&in);
        s->fwd_ms = get_d(&in);
        s->bwd_ms = get_d(&in);
    }
    if (in.bad || remat_profile_validate(p, NULL) != REMAT_OK)
        goto bad;
    uint64_t alg = get_u(&in), model = get_u(&in), single = get_u(&in);
    if (alg >= REMAT_ALG_COUNT || model > REMAT_MODEL_TRACED || single > 1)
        goto bad;
    plan->algorithm = (enum remat_algorithm)alg;
    plan->objective_model = (enum remat_model)model;
    plan->single_level = (int)single;
    plan->n_stages = p->n_stages;
    plan->objective_value = get_s(&in);
    plan->peak_bytes = get_s(&in);
    plan->store_all_peak_bytes = get_s(&in);
    plan->recompute_ms = get_d(&in);
    plan->total_ms = get_d(&in);
    plan->budget_bytes = get_s(&in);
    plan->min_budget_bytes = get_s(&in);
    plan->optimality_gap = v3 ? get_d(&in) : 0.0;
    uint64_t m = get_u(&in);
    if (in.bad || m >= p->n_stages || m > (size_t)(in.end - in.p))
        goto bad;
    plan->checkpoints = malloc((m > 0 ? m : 1) * sizeof *plan->checkpoints);
    if (plan->checkpoints == NULL)
        goto bad;
    plan->n_checkpoints = (size_t)m;
    uint64_t at = 0;
    for (size_t k = 0; k < m; k++) {
        uint64_t step = get_u(&in);
        if (in.bad || step == 0 || step >= p->n_stages - at)
            goto bad;
        at += step;
        plan->checkpoints[k] = (size_t)at;
    }
    uint64_t n_ops = get_u(&in);
    /* One byte at least per op. */
    if (in.bad || n_ops > (size_t)(in.end - in.p) ||
        rematx_schedule_reserve(&plan->schedule, (size_t)n_ops) != REMAT_OK)
        goto bad;
    for (size_t k = 0; k < n_ops; k++) {
        uint64_t v = get_u(&in);
        uint64_t stage = v / 5, kind = v % 5;
        if (in.bad || stage == 0 || stage > p->n_stages)
            goto bad;
        plan->schedule.ops[k].stage = (uint32_t)stage;
        plan->schedule.ops[k].kind = (uint8_t)kind;
        plan->schedule.n_ops = k + 1;
    }
    if (in.p != in.end || !isfinite(plan->recompute_ms) || !isfinite(plan->total_ms) ||
        !isfinite(plan->optimality_gap) || plan->optimality_gap < 0)
        goto bad;
    *profile = p;
    return 0;
bad:
    remat_profile_free(p);
    remat_plan_clear(plan);
    return -1;
}
