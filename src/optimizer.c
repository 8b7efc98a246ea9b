/* optimizer.c - the optimizer of a training step: its names, a model of its
 * memory from the weights alone, and the floor its step puts under a plan.
 *
 * The simulator (simulate.c) keeps profile->optimizer.state_bytes live from
 * the first op and adds the step's transient after the last backward, when
 * every weight gradient is live and every activation is gone; this file says
 * what those numbers are when a worker has not measured them
 * (docs/scheduling.md, "The optimizer").  The rules follow PyTorch's
 * optimizers (torch/optim/{sgd,adam,adamw}.py):
 *
 *  - state: sgd none, sgd-momentum one buffer per weight, adam and adamw two
 *    (exp_avg, exp_avg_sq), in the state precision; an fp32 master copy of
 *    the weights adds four bytes per element.  Adam's per-tensor `step`
 *    scalars are a few bytes per tensor and are left out.
 *  - step transient, the single-tensor loop (PyTorch's default off the GPU):
 *    adam makes `exp_avg_sq.sqrt()` and its quotient, two temporaries the
 *    size of one tensor; L2 weight decay (adam, sgd) makes `grad + wd * p`,
 *    one more.  The largest tensor is not in a profile, so the largest
 *    stage's weights stand for it: an upper bound.
 *  - the foreach step makes the same temporaries for every tensor at once:
 *    the totals instead of the largest.
 * The worker measures both numbers on the device (worker/optim.cpp); a
 * measured profile's numbers replace these. */
#include "remat_private.h"

static const char *const names[REMAT_OPTIM_COUNT] = {"none", "sgd", "sgd-momentum", "adam",
                                                     "adamw"};

const char *remat_optim_name(int kind)
{
    return kind >= 0 && kind < REMAT_OPTIM_COUNT ? names[kind] : "?";
}

int remat_optim_parse(const char *name, enum remat_optim_kind *out)
{
    for (int k = 0; name != NULL && k < REMAT_OPTIM_COUNT; k++)
        if (strcmp(name, names[k]) == 0) {
            *out = (enum remat_optim_kind)k;
            return REMAT_OK;
        }
    return REMAT_EINVAL;
}

void remat_optim_spec_init(struct remat_optim_spec *spec)
{
    memset(spec, 0, sizeof *spec);
    spec->kind = REMAT_OPTIM_NONE;
}

static int elem_ok(int v)
{
    return v == 0 || v == 1 || v == 2 || v == 4 || v == 8;
}

/* bytes * num / den without overflow for bytes <= 2^60 and num, den <= 8. */
static int64_t scale(int64_t bytes, int num, int den)
{
    return bytes / den * num + bytes % den * num / den;
}

int remat_optim_estimate(const struct remat_profile *p, const struct remat_optim_spec *spec,
                         struct remat_optimizer *out, struct remat_error *err)
{
    memset(out, 0, sizeof *out);
    if (p == NULL || spec == NULL)
        return remat__error(err, REMAT_EINVAL, "", "no profile or no optimizer");
    if ((int)spec->kind < 0 || spec->kind >= REMAT_OPTIM_COUNT)
        return remat__error(err, REMAT_EINVAL, "/optimizer", "unknown optimizer %d",
                            (int)spec->kind);
    if (!elem_ok(spec->param_elem_bytes))
        return remat__error(err, REMAT_EINVAL, "/param_elem_bytes",
                            "param_elem_bytes must be 1, 2, 4 or 8");
    if (!elem_ok(spec->state_elem_bytes))
        return remat__error(err, REMAT_EINVAL, "/state_elem_bytes",
                            "state_elem_bytes must be 1, 2, 4 or 8");
    if (!(spec->step_ms >= 0 && spec->step_ms <= 1e12))
        return remat__error(err, REMAT_EINVAL, "/step_ms", "step_ms must be in [0, 1e12]");
    out->kind = spec->kind;
    out->foreach = spec->foreach != 0;
    out->step_ms = spec->step_ms;
    if (spec->kind == REMAT_OPTIM_NONE)
        return REMAT_OK;
    int pe = spec->param_elem_bytes ? spec->param_elem_bytes : 4;
    int se = spec->state_elem_bytes ? spec->state_elem_bytes : pe;
    int64_t total = 0, largest = 0;
    for (size_t i = 0; i < p->n_stages; i++) {
        int64_t w = p->stages[i].param_bytes;
        if (w < 0 || w > REMAT_MAX_BYTES || total > REMAT_MAX_BYTES - w)
            return remat__error(err, REMAT_ELIMIT, "/stages", "the weights add up past 2^60");
        total += w;
        largest = w > largest ? w : largest;
    }
    /* State and temporaries in the state precision, from the weights'. */
    int64_t t_state = scale(total, se, pe), l_state = scale(largest, se, pe);
    int64_t buffers = 0; /* state buffers per weight */
    int64_t tmps = 0;    /* state-sized temporaries of the step */
    int64_t decay = 0;   /* weight-sized temporaries (L2 decay) */
    switch (spec->kind) {
    case REMAT_OPTIM_SGD:
        decay = spec->weight_decay != 0;
        break;
    case REMAT_OPTIM_SGD_MOMENTUM:
        buffers = 1;
        decay = spec->weight_decay != 0;
        break;
    case REMAT_OPTIM_ADAM:
        buffers = 2;
        tmps = 2;
        decay = spec->weight_decay != 0;
        break;
    case REMAT_OPTIM_ADAMW:
        buffers = 2;
        tmps = 2;
        break;
    default:
        break;
    }
    int64_t tmp_base = spec->foreach ? t_state : l_state;
    int64_t w_base = spec->foreach ? total : largest;
    /* Each product is at most 3 * 2^60 * 2 (state at twice the weights'
     * precision): below 2^63. */
    out->state_bytes = buffers * t_state + (spec->master_weights ? scale(total, 4, pe) : 0);
    out->step_tmp_bytes = tmps * tmp_base + decay * w_base;
    if (out->state_bytes > REMAT_MAX_BYTES || out->step_tmp_bytes > REMAT_MAX_BYTES)
        return remat__error(err, REMAT_ELIMIT, "/optimizer", "the optimizer's bytes are over 2^60");
    return REMAT_OK;
}

int64_t remat_optim_step_peak_bytes(const struct remat_profile *p)
{
    if (p == NULL || p->optimizer.kind == REMAT_OPTIM_NONE)
        return 0;
    int64_t w = 0;
    for (size_t i = 0; i < p->n_stages; i++)
        w += p->stages[i].param_bytes;
    /* Bounded by a validated profile's total (remat__profile_total_bytes). */
    return p->input_bytes + 2 * w + p->optimizer.state_bytes + p->optimizer.step_tmp_bytes;
}

int remat__optimizer_validate(const struct remat_profile *p, struct remat_error *err)
{
    const struct remat_optimizer *o = &p->optimizer;
    if (o->kind < 0 || o->kind >= REMAT_OPTIM_COUNT)
        return remat__error(err, REMAT_EINVAL, "/optimizer/name", "unknown optimizer %d", o->kind);
    if (o->state_bytes < 0 || o->state_bytes > REMAT_MAX_BYTES)
        return remat__error(err, REMAT_EINVAL, "/optimizer/state_bytes",
                            "state_bytes must be in [0, 2^60]");
    if (o->step_tmp_bytes < 0 || o->step_tmp_bytes > REMAT_MAX_BYTES)
        return remat__error(err, REMAT_EINVAL, "/optimizer/step_tmp_bytes",
                            "step_tmp_bytes must be in [0, 2^60]");
    if (!(o->step_ms >= 0 && o->step_ms <= 1e12))
        return remat__error(err, REMAT_EINVAL, "/optimizer/step_ms",
                            "step_ms must be in [0, 1e12]");
    if (o->kind == REMAT_OPTIM_NONE && (o->state_bytes != 0 || o->step_tmp_bytes != 0))
        return remat__error(err, REMAT_EINVAL, "/optimizer/name",
                            "optimizer \"none\" has no state and no step");
    return REMAT_OK;
}
