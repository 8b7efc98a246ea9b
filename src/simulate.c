/* simulate.c - the memory simulator: replays a schedule under a model and
 * reports the peak, the timeline and the times (docs/memory-model.md).
 *
 * One pass over the ops, O(1) work each, and one byte of state per stage
 * output.  The three models share the state machine that decides whether a
 * schedule is valid; they differ only in how many bytes each value weighs,
 * which the traced_* functions (the calibration point) and their sum/prefix
 * counterparts below say. */
#include <stdio.h>

#include "remat_private.h"

/* State of x_i (and δ_i), one byte per index 0..n. */
enum {
    ST_PLAIN = 1,  /* x_i live as a plain activation (made by F_∅ / F_ck) */
    ST_SAVED = 2,  /* x̄_i live (made by F_all); it holds x_i */
    ST_KEPT = 4,   /* a plain x_i that F_ck made a checkpoint: F_∅ does not free it */
    ST_GRAD = 8,   /* δ_i live */
    ST_FWD = 16,   /* stage i has run forward once: a second run is recomputation */
    ST_MEMBER = 32 /* sum model: i ∈ {0} ∪ C ∪ {n}, counted for the whole run */
};

struct sim_ctx {
    const struct remat_profile *p;
    enum remat_model model;
    uint8_t *st;
};

/* ---- traced: the full accounting (Rotor's model, docs/memory-model.md) ----
 * Keep every traced rule in these functions: calibration changes them only. */
static int64_t traced_act(const struct remat_profile *p, size_t i)
{
    return remat__d(p, i);
}
static int64_t traced_saved(const struct remat_profile *p, size_t i)
{
    return p->stages[i - 1].saved_bytes;
}
/* The forward's transient: with grad (F_all) or without (F_∅, F_ck).  A
 * block that saves its internals for backward holds them as a transient
 * when it runs without grad, so the two differ. */
static int64_t traced_fwd_tmp(const struct remat_profile *p, size_t i, int grad)
{
    const struct remat_stage *s = &p->stages[i - 1];
    return grad ? remat_stage_fwd_grad_tmp_bytes(s) : s->fwd_tmp_bytes;
}
/* The backward's transient above its inputs and the gradients it makes,
 * and what it has freed of x̄_i and δ_i by its peak: their difference, the
 * net transient, is below zero for a block that frees saved tensors before
 * it makes all its gradients.  It is at least -(x̄_i + x_i)
 * (remat_profile_validate), so the peak during B(i) is never below the
 * live bytes after it.  Each is added on its own, with its own check. */
static int64_t traced_bwd_tmp(const struct remat_profile *p, size_t i)
{
    return p->stages[i - 1].bwd_tmp_bytes;
}
static int64_t traced_bwd_freed(const struct remat_profile *p, size_t i)
{
    return p->stages[i - 1].bwd_freed_bytes;
}
static int64_t traced_param(const struct remat_profile *p, size_t i)
{
    return p->stages[i - 1].param_bytes;
}
static int64_t traced_grad(const struct remat_profile *p, size_t i)
{
    return remat__d(p, i); /* δ_i is as large as x_i */
}
/* The optimizer's state is live from before the first op (it outlives the
 * step); its step runs after the last backward (optimizer.c). */
static int64_t traced_optim_state(const struct remat_profile *p)
{
    return p->optimizer.state_bytes;
}
static int64_t traced_optim_step_tmp(const struct remat_profile *p)
{
    return p->optimizer.step_tmp_bytes;
}

/* ---- per-model weights ---- */
static int64_t w_act(const struct sim_ctx *c, size_t i)
{
    switch (c->model) {
    case REMAT_MODEL_TRACED:
        return traced_act(c->p, i);
    case REMAT_MODEL_PREFIX:
        return remat__d(c->p, i);
    default: /* sum: members of b are counted once, up front */
        return (c->st[i] & ST_MEMBER) ? 0 : remat__d(c->p, i);
    }
}
static int64_t w_saved(const struct sim_ctx *c, size_t i)
{
    return c->model == REMAT_MODEL_TRACED ? traced_saved(c->p, i) : w_act(c, i);
}
static int64_t w_fwd_tmp(const struct sim_ctx *c, size_t i, int grad)
{
    return c->model == REMAT_MODEL_TRACED ? traced_fwd_tmp(c->p, i, grad) : 0;
}
static int64_t w_bwd_tmp(const struct sim_ctx *c, size_t i)
{
    return c->model == REMAT_MODEL_TRACED ? traced_bwd_tmp(c->p, i) : 0;
}
static int64_t w_bwd_freed(const struct sim_ctx *c, size_t i)
{
    return c->model == REMAT_MODEL_TRACED ? traced_bwd_freed(c->p, i) : 0;
}
static int64_t w_param(const struct sim_ctx *c, size_t i)
{
    return c->model == REMAT_MODEL_TRACED ? traced_param(c->p, i) : 0;
}
static int64_t w_grad(const struct sim_ctx *c, size_t i)
{
    return c->model == REMAT_MODEL_TRACED ? traced_grad(c->p, i) : 0;
}

const char *remat_model_name(enum remat_model m)
{
    switch (m) {
    case REMAT_MODEL_SUM:
        return "sum";
    case REMAT_MODEL_PREFIX:
        return "prefix";
    case REMAT_MODEL_TRACED:
        return "traced";
    }
    return "unknown";
}

int remat_model_parse(const char *name, enum remat_model *out)
{
    static const enum remat_model all[] = {REMAT_MODEL_SUM, REMAT_MODEL_PREFIX, REMAT_MODEL_TRACED};
    for (size_t i = 0; name != NULL && i < sizeof all / sizeof all[0]; i++)
        if (strcmp(name, remat_model_name(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    return REMAT_EINVAL;
}

void remat_sim_clear(struct remat_sim *sim)
{
    if (sim == NULL)
        return;
    free(sim->timeline);
    memset(sim, 0, sizeof *sim);
}

static int bad_op(struct remat_error *err, size_t k, const struct remat_op *op, const char *why)
{
    char ptr[64];
    snprintf(ptr, sizeof ptr, "/schedule/%zu", k);
    return remat__error(err, REMAT_EINVAL, ptr, "op %zu (%s %u): %s", k, remat_op_name(op->kind),
                        (unsigned)op->stage, why);
}

/* Adds with a check.  A validated profile's byte counts add up to at most
 * 2^60 (remat_profile_validate), and the live bytes never hold a value
 * twice, so L stays below 4 * 2^60 < 2^63; the check guards profiles that
 * were filled in by hand and never validated. */
static int add(int64_t *acc, int64_t v)
{
    return __builtin_add_overflow(*acc, v, acc) ? -1 : 0;
}
static int sub(int64_t *acc, int64_t v)
{
    return __builtin_sub_overflow(*acc, v, acc) ? -1 : 0;
}

static int run(const struct remat_profile *p, enum remat_model model,
               const struct remat_schedule *s, const size_t *members, size_t n_members,
               int want_timeline, struct remat_sim *out, struct remat_error *err)
{
    memset(out, 0, sizeof *out);
    size_t n = p->n_stages;
    if (n == 0 || n > REMAT_MAX_STAGES || p->stages == NULL)
        return remat__error(err, REMAT_EINVAL, "/stages", "the profile has no stages");
    struct sim_ctx c = {.p = p, .model = model, .st = calloc(n + 1, 1)};
    if (c.st == NULL)
        return remat__error(err, REMAT_ENOMEM, "", "out of memory");
    int64_t *timeline = NULL;
    if (want_timeline && s->n_ops > 0) {
        timeline = malloc(s->n_ops * sizeof *timeline);
        if (timeline == NULL) {
            free(c.st);
            return remat__error(err, REMAT_ENOMEM, "", "out of memory for the timeline");
        }
    }
    int rc = REMAT_OK;
    int64_t live = 0; /* L */
    int overflow = 0;
    if (model == REMAT_MODEL_SUM) {
        c.st[0] |= ST_MEMBER;
        c.st[n] |= ST_MEMBER;
        for (size_t k = 0; k < n_members; k++)
            c.st[members[k]] |= ST_MEMBER;
        for (size_t i = 0; i <= n; i++)
            if (c.st[i] & ST_MEMBER)
                overflow |= add(&live, remat__d(p, i));
    } else {
        overflow |= add(&live, p->input_bytes);
        for (size_t i = 1; i <= n; i++)
            overflow |= add(&live, w_param(&c, i));
        if (model == REMAT_MODEL_TRACED)
            overflow |= add(&live, traced_optim_state(p));
    }
    int64_t peak = live;
    size_t peak_phase = 0;
    size_t n_live = 0; /* stage outputs x_1..x_n live, plain or saved */
    size_t next_b = n; /* B runs n, n-1, ..., 1 */
    int loss_done = 0;
    double total_ms = 0, recompute_ms = 0;
    c.st[0] |= ST_PLAIN; /* x_0 is the caller's and is never freed */

    for (size_t k = 0; k < s->n_ops && rc == REMAT_OK; k++) {
        const struct remat_op *op = &s->ops[k];
        size_t i = op->stage;
        int64_t during = live;
        if (i < 1 || i > n) {
            rc = bad_op(err, k, op, "no such stage");
            break;
        }
        switch (op->kind) {
        case REMAT_OP_F_NONE:
        case REMAT_OP_F_CK:
        case REMAT_OP_F_ALL: {
            if (!(c.st[i - 1] & (ST_PLAIN | ST_SAVED))) {
                rc = bad_op(err, k, op, "its input is not live");
                break;
            }
            if (c.st[i] & (ST_PLAIN | ST_SAVED)) {
                rc = bad_op(err, k, op, "its output is already live");
                break;
            }
            int saved = op->kind == REMAT_OP_F_ALL;
            int64_t made = saved ? w_saved(&c, i) : w_act(&c, i);
            overflow |= add(&during, made);
            overflow |= add(&during, w_fwd_tmp(&c, i, saved));
            overflow |= add(&live, made);
            /* A fresh value: a kept mark belonged to an earlier copy. */
            c.st[i] = (uint8_t)((c.st[i] & ~ST_KEPT) | (saved ? ST_SAVED : ST_PLAIN));
            n_live++;
            if (op->kind == REMAT_OP_F_CK && i >= 2)
                c.st[i - 1] |= ST_KEPT;
            if (op->kind == REMAT_OP_F_NONE && i >= 2 && (c.st[i - 1] & ST_PLAIN) &&
                !(c.st[i - 1] & ST_KEPT)) {
                live -= w_act(&c, i - 1);
                c.st[i - 1] &= (uint8_t) ~(ST_PLAIN | ST_KEPT);
                n_live--;
            }
            double ms = p->stages[i - 1].fwd_ms;
            total_ms += ms;
            if (c.st[i] & ST_FWD)
                recompute_ms += ms;
            c.st[i] |= ST_FWD;
            break;
        }
        case REMAT_OP_LOSS:
            if (i != n || loss_done || !(c.st[n] & ST_SAVED)) {
                rc = bad_op(err, k, op,
                            loss_done ? "the loss runs once"
                                      : "the loss needs x_n with its saved tensors, stage n");
                break;
            }
            overflow |= add(&during, w_grad(&c, n));
            overflow |= add(&live, w_grad(&c, n));
            c.st[n] |= ST_GRAD;
            loss_done = 1;
            break;
        case REMAT_OP_B: {
            if (!loss_done || i != next_b) {
                rc = bad_op(err, k, op, "backward must run once per stage, from n down to 1");
                break;
            }
            if (!(c.st[i] & ST_SAVED) || !(c.st[i] & ST_GRAD)) {
                rc = bad_op(err, k, op, "backward needs the stage's saved tensors and gradient");
                break;
            }
            if (!(c.st[i - 1] & (ST_PLAIN | ST_SAVED))) {
                rc = bad_op(err, k, op, "backward needs the stage's input");
                break;
            }
            int64_t made = (i > 1 ? w_grad(&c, i - 1) : 0) + w_param(&c, i);
            overflow |= add(&during, made);
            overflow |= add(&during, w_bwd_tmp(&c, i));
            overflow |= sub(&during, w_bwd_freed(&c, i));
            overflow |= add(&live, made);
            live -= w_saved(&c, i) + w_grad(&c, i);
            c.st[i] &= (uint8_t) ~(ST_SAVED | ST_GRAD | ST_KEPT);
            n_live--;
            if (i > 1)
                c.st[i - 1] |= ST_GRAD;
            if (i >= 2 && (c.st[i - 1] & ST_PLAIN)) {
                live -= w_act(&c, i - 1);
                c.st[i - 1] &= (uint8_t) ~(ST_PLAIN | ST_KEPT);
                n_live--;
            }
            total_ms += p->stages[i - 1].bwd_ms;
            next_b--;
            break;
        }
        default:
            rc = bad_op(err, k, op, "unknown op kind");
            break;
        }
        if (rc != REMAT_OK)
            break;
        if (overflow) {
            char ptr[64];
            snprintf(ptr, sizeof ptr, "/schedule/%zu", k);
            rc = remat__error(err, REMAT_ELIMIT, ptr, "live bytes overflow at op %zu", k);
            break;
        }
        if (during > peak) {
            peak = during;
            peak_phase = k;
        }
        if (timeline != NULL)
            timeline[k] = live;
    }
    if (rc == REMAT_OK && model == REMAT_MODEL_TRACED && p->optimizer.kind != REMAT_OPTIM_NONE) {
        /* The optimizer step: every activation is gone, every weight
         * gradient live. */
        int64_t during = live;
        overflow |= add(&during, traced_optim_step_tmp(p));
        if (!overflow && during > peak) {
            peak = during;
            peak_phase = s->n_ops;
        }
        total_ms += p->optimizer.step_ms;
    }
    if (rc == REMAT_OK && overflow)
        rc = remat__error(err, REMAT_ELIMIT, "", "live bytes overflow");
    if (rc == REMAT_OK && (!loss_done || next_b != 0 || n_live != 0)) {
        char ptr[64];
        snprintf(ptr, sizeof ptr, "/schedule/%zu", s->n_ops);
        rc = remat__error(err, REMAT_EINVAL, ptr, "the schedule ends with work left: %s",
                          !loss_done    ? "no loss"
                          : next_b != 0 ? "a stage never ran backward"
                                        : "a value is still live");
    }
    free(c.st);
    if (rc != REMAT_OK) {
        free(timeline);
        return rc;
    }
    out->peak_bytes = peak;
    out->peak_phase = peak_phase;
    out->total_ms = total_ms;
    out->recompute_ms = recompute_ms;
    out->n_phases = s->n_ops;
    out->timeline = timeline;
    return REMAT_OK;
}

/* run() on the store-all schedule (F_all 1..n, loss, B n..1) under the
 * traced model, without the schedule and the state: every op of that
 * schedule is valid, nothing is ever freed early, and the live bytes take
 * the same values in the same order as in run(), with the same overflow
 * checks, so the answer is run()'s to the bit (remat_solve asks for it on
 * every plan; tests/test_simulate_store_all compares the two).  A change to
 * run()'s state machine must be made here too; the weights are the traced_*
 * functions, as there. */
static int run_store_all_traced(const struct remat_profile *p, struct remat_sim *out,
                                struct remat_error *err)
{
    size_t n = p->n_stages;
    int64_t live = 0;
    int overflow = 0;
    overflow |= add(&live, p->input_bytes);
    for (size_t i = 1; i <= n; i++)
        overflow |= add(&live, traced_param(p, i));
    overflow |= add(&live, traced_optim_state(p));
    int64_t peak = live;
    size_t peak_phase = 0, k = 0;
    double total_ms = 0;
    for (size_t i = 1; i <= n; i++, k++) {
        int64_t during = live, made = traced_saved(p, i);
        overflow |= add(&during, made);
        overflow |= add(&during, traced_fwd_tmp(p, i, 1));
        overflow |= add(&live, made);
        total_ms += p->stages[i - 1].fwd_ms;
        if (overflow)
            goto overflowed;
        if (during > peak) {
            peak = during;
            peak_phase = k;
        }
    }
    {
        int64_t during = live;
        overflow |= add(&during, traced_grad(p, n));
        overflow |= add(&live, traced_grad(p, n));
        if (overflow)
            goto overflowed;
        if (during > peak) {
            peak = during;
            peak_phase = k;
        }
        k++;
    }
    for (size_t i = n; i >= 1; i--, k++) {
        int64_t during = live;
        int64_t made = (i > 1 ? traced_grad(p, i - 1) : 0) + traced_param(p, i);
        overflow |= add(&during, made);
        overflow |= add(&during, traced_bwd_tmp(p, i));
        overflow |= sub(&during, traced_bwd_freed(p, i));
        overflow |= add(&live, made);
        live -= traced_saved(p, i) + traced_grad(p, i);
        total_ms += p->stages[i - 1].bwd_ms;
        if (overflow)
            goto overflowed;
        if (during > peak) {
            peak = during;
            peak_phase = k;
        }
    }
    if (p->optimizer.kind != REMAT_OPTIM_NONE) {
        int64_t during = live;
        overflow |= add(&during, traced_optim_step_tmp(p));
        if (overflow)
            goto overflowed;
        if (during > peak) {
            peak = during;
            peak_phase = k;
        }
        total_ms += p->optimizer.step_ms;
    }
    out->peak_bytes = peak;
    out->peak_phase = peak_phase;
    out->total_ms = total_ms;
    out->recompute_ms = 0;
    out->n_phases = k;
    out->timeline = NULL;
    return REMAT_OK;
overflowed : {
    char ptr[64];
    snprintf(ptr, sizeof ptr, "/schedule/%zu", k);
    return remat__error(err, REMAT_ELIMIT, ptr, "live bytes overflow at op %zu", k);
}
}

int remat_simulate(const struct remat_profile *profile, enum remat_model model,
                   const struct remat_schedule *schedule, int want_timeline, struct remat_sim *out,
                   struct remat_error *err)
{
    memset(out, 0, sizeof *out);
    if (model == REMAT_MODEL_SUM)
        return remat__error(err, REMAT_EUNSUPPORTED, "/model",
                            "the sum model is defined on a checkpoint set: simulate the "
                            "checkpoints instead");
    if (model != REMAT_MODEL_PREFIX && model != REMAT_MODEL_TRACED)
        return remat__error(err, REMAT_EINVAL, "/model", "unknown model %d", (int)model);
    return run(profile, model, schedule, NULL, 0, want_timeline, out, err);
}

int remat_simulate_checkpoints(const struct remat_profile *profile, enum remat_model model,
                               const size_t *checkpoints, size_t n_checkpoints, int want_timeline,
                               struct remat_sim *out, struct remat_error *err)
{
    memset(out, 0, sizeof *out);
    if (model != REMAT_MODEL_SUM && model != REMAT_MODEL_PREFIX && model != REMAT_MODEL_TRACED)
        return remat__error(err, REMAT_EINVAL, "/model", "unknown model %d", (int)model);
    size_t n = profile->n_stages;
    if (model == REMAT_MODEL_TRACED && n_checkpoints == 0 && !want_timeline && n >= 1 &&
        n <= REMAT_MAX_STAGES && profile->stages != NULL)
        return run_store_all_traced(profile, out, err);
    struct remat_schedule s;
    remat_schedule_init(&s);
    int rc = remat_schedule_from_checkpoints(profile, checkpoints, n_checkpoints, &s, err);
    if (rc == REMAT_OK)
        rc = run(profile, model, &s, checkpoints, n_checkpoints, want_timeline, out, err);
    remat_schedule_clear(&s);
    return rc;
}
