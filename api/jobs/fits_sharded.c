/*
 * jobs/fits_sharded.c - POST /v1/fits for one rank of a data-parallel job
 * (docs/scheduling.md, "Sharded jobs"): "parallel", "param_dtype",
 * "reduce_dtype" and "master_weights" read, and the answer per memory with
 * the weights, gradients, optimizer and strategy buffers of
 * remat_shard_memory taken off the memory before the activations' fit, and
 * each answer's per-rank breakdown.  Pure, as fits_read.c.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "jobs/fits.h"

static const char *const parallel_fields[] = {
    "data", "strategy", "shard_group", "bucket_cap_mb", "gradient_as_bucket_view", NULL};

static int fail(struct remat_error *err, int code, const char *msg)
{
    err->code = code;
    err->pointer[0] = '\0';
    snprintf(err->message, sizeof err->message, "%s", msg);
    return code;
}

static int bad(struct rematd_problem *p, const char *ptr, const char *msg)
{
    rematd_problem_set(p, 400, "validation", ptr, "%s", msg);
    return -1;
}

/* Bytes per element of a dtype name, 0 for none known. */
static int dtype_bytes(const char *d)
{
    static const struct {
        const char *name;
        int bytes;
    } t[] = {{"float64", 8}, {"float32", 4}, {"bfloat16", 2}, {"float16", 2},
             {"fp64", 8},    {"fp32", 4},    {"bf16", 2},     {"fp16", 2}};
    for (size_t k = 0; d != NULL && k < sizeof t / sizeof t[0]; k++)
        if (strcmp(d, t[k].name) == 0)
            return t[k].bytes;
    return 0;
}

static int get_dtype(struct rematd_problem *pr, json_t *body, const char *name, int *out)
{
    json_t *v = json_object_get(body, name);
    if (v == NULL)
        return 0;
    char ptr[32];
    snprintf(ptr, sizeof ptr, "/%s", name);
    *out = dtype_bytes(json_string_value(v));
    if (*out == 0)
        return bad(pr, ptr,
                   "must be float32, bfloat16, float16 or float64 (or fp32, bf16, fp16, fp64)");
    return 0;
}

int rematd_fits_read_parallel(json_t *body, struct rematd_fits_req *f, struct rematd_problem *pr)
{
    json_t *par = json_object_get(body, "parallel");
    static const char *const needs[] = {"param_dtype", "reduce_dtype", "master_weights"};
    for (size_t k = 0; par == NULL && k < 3; k++)
        if (json_object_get(body, needs[k]) != NULL) {
            char ptr[32];
            snprintf(ptr, sizeof ptr, "/%s", needs[k]);
            return bad(pr, ptr, "mixed precision is read with parallel: give parallel too");
        }
    if (par == NULL)
        return 0;
    if (!json_is_object(par))
        return bad(pr, "/parallel", "parallel must be an object {data, strategy, ...}");
    if (rematd_problem_unknown(pr, par, "/parallel", parallel_fields) < 0)
        return -1;
    struct remat_shard_spec *s = &f->shard;
    remat_shard_spec_init(s);
    json_t *v = json_object_get(par, "data");
    if (!json_is_integer(v) || json_integer_value(v) < 1 ||
        json_integer_value(v) > REMAT_SHARD_MAX_RANKS)
        return bad(pr, "/parallel/data",
                   "data (the data-parallel ranks) must be an integer in "
                   "1..1048576");
    s->data = json_integer_value(v);
    v = json_object_get(par, "strategy");
    if (v != NULL &&
        (!json_is_string(v) || remat_shard_parse(json_string_value(v), &s->strategy) < 0))
        return bad(pr, "/parallel/strategy",
                   "strategy must be ddp, zero1, zero2, zero3, fsdp or hsdp");
    v = json_object_get(par, "shard_group");
    if (s->strategy == REMAT_SHARD_HSDP) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > s->data ||
            s->data % json_integer_value(v) != 0)
            return bad(pr, "/parallel/shard_group",
                       "hsdp needs shard_group, an integer that divides data");
        s->shard_group = json_integer_value(v);
    } else if (v != NULL) {
        return bad(pr, "/parallel/shard_group", "shard_group is for strategy hsdp only");
    }
    v = json_object_get(par, "bucket_cap_mb");
    if (v != NULL) {
        double mb = json_is_number(v) ? json_number_value(v) : -1;
        if (!(mb > 0 && mb <= 1048576))
            return bad(pr, "/parallel/bucket_cap_mb",
                       "bucket_cap_mb must be a number in (0, 2^20]");
        s->bucket_bytes = (int64_t)(mb * 1048576.0);
        s->bucket_bytes = s->bucket_bytes < 1 ? 1 : s->bucket_bytes;
    }
    v = json_object_get(par, "gradient_as_bucket_view");
    if (v != NULL && !json_is_boolean(v))
        return bad(pr, "/parallel/gradient_as_bucket_view", "must be true or false");
    s->bucket_view = json_is_true(v);
    f->param_bytes = 0;
    f->grad_bytes = 0;
    if (get_dtype(pr, body, "param_dtype", &f->param_bytes) < 0 ||
        get_dtype(pr, body, "reduce_dtype", &f->grad_bytes) < 0)
        return -1;
    v = json_object_get(body, "master_weights");
    if (v != NULL && !json_is_boolean(v))
        return bad(pr, "/master_weights", "master_weights must be true or false");
    f->master = v == NULL ? -1 : json_is_true(v);
    /* The state's precision, when the optimizer says (rematd_fits_read
     * checks it). */
    json_t *ov = json_object_get(body, "optimizer");
    v = json_is_object(ov) ? json_object_get(ov, "state_elem_bytes") : NULL;
    f->state_bytes = json_is_integer(v) ? (int)json_integer_value(v) : 0;
    f->sharded = 1;
    return 0;
}

/* The profiles' element size: their dtype (the worker writes fp32, bf16,
 * fp16), fp32 when they name none. */
static int profile_elem(const struct remat_profile *p)
{
    int e = dtype_bytes(p->dtype);
    return e ? e : 4;
}

/* Optimizer state buffers per parameter of each kind (optimizer.c). */
static int buffers(int kind)
{
    return kind == REMAT_OPTIM_ADAM || kind == REMAT_OPTIM_ADAMW ? 2
           : kind == REMAT_OPTIM_SGD_MOMENTUM                    ? 1
                                                                 : 0;
}

int rematd_fits_shard_prepare(struct rematd_fits_req *f, struct remat_error *err)
{
    struct remat_shard_spec *s = &f->shard;
    struct remat_profile *q = f->ps[0];
    int pe = profile_elem(q);
    int64_t total = 0, largest = 0;
    for (size_t i = 0; i < q->n_stages; i++) {
        int64_t w = q->stages[i].param_bytes;
        total += w; /* each <= 2^60 over at most REMAT_MAX_STAGES: validated */
        largest = w > largest ? w : largest;
    }
    s->params = total / pe;
    s->largest_unit = largest / pe;
    s->param_bytes = f->param_bytes ? f->param_bytes : pe;
    s->grad_bytes = f->grad_bytes ? f->grad_bytes : s->param_bytes;
    /* Mixed precision keeps an fp32 master copy unless told otherwise;
     * weights trained in fp32 are their own master. */
    int master = f->master >= 0 ? f->master : s->param_bytes < 4;
    const struct remat_optimizer *o = &q->optimizer;
    int se = f->state_bytes ? f->state_bytes : 4;
    s->optim_bytes = (int64_t)buffers(o->kind) * se + (master ? 4 : 0);
    /* The step's transient, for the weights in the state's precision. */
    struct remat_optim_spec os;
    remat_optim_spec_init(&os);
    os.kind = (enum remat_optim_kind)o->kind;
    os.foreach = o->foreach;
    os.param_elem_bytes = pe;
    os.state_elem_bytes = se;
    struct remat_optimizer est;
    int rc = remat_optim_estimate(q, &os, &est, err);
    if (rc < 0)
        return rc;
    s->step_tmp = est.step_tmp_bytes;
    s->step_tmp_per_tensor = !o->foreach;
    f->optim_kind = o->kind;
    /* The activations' fit: the same profiles without the weights and the
     * optimizer, which the breakdown counts as the strategy holds them. */
    for (size_t k = 0; k < f->n; k++) {
        for (size_t i = 0; i < f->ps[k]->n_stages; i++)
            f->ps[k]->stages[i].param_bytes = 0;
        memset(&f->ps[k]->optimizer, 0, sizeof f->ps[k]->optimizer);
    }
    struct remat_shard_breakdown b;
    return remat_shard_memory(s, &b, err);
}

/* The memory left for the activations under memory m: 0 when the rest,
 * or the optimizer step's transient beside it, does not fit.  The step
 * runs once the activations are gone: the rank needs the rest plus the
 * larger of the two. */
static int64_t for_activations(const struct rematd_fits_req *f, int64_t m, int64_t *usable,
                               const struct remat_shard_breakdown *fixed)
{
    int64_t margin = f->o.margin_bytes + (int64_t)((double)m * f->o.margin_fraction);
    *usable = m - margin;
    /* With no activations, step_tmp is the whole transient. */
    int64_t rest = fixed->peak - fixed->step_tmp;
    if (*usable <= rest || fixed->step_tmp > *usable - rest)
        return 0;
    return *usable - rest;
}

static json_t *breakdown_json(const struct remat_shard_spec *s,
                              const struct remat_shard_breakdown *b)
{
    json_t *o =
        json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "strategy",
                  remat_shard_name(s->strategy), "data", (json_int_t)s->data, "weights",
                  (json_int_t)b->weights, "gradients", (json_int_t)b->gradients, "optimizer",
                  (json_int_t)b->optimizer, "gathered", (json_int_t)b->gathered, "buckets",
                  (json_int_t)b->buckets, "activations", (json_int_t)b->activations, "step_tmp",
                  (json_int_t)b->step_tmp, "peak_bytes", (json_int_t)b->peak);
    if (o != NULL && s->strategy == REMAT_SHARD_HSDP &&
        json_object_set_new(o, "shard_group", json_integer(s->shard_group)) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int rematd_fits_shard_answer(struct rematd_fits_req *f, size_t k, struct remat_fits_answer *a,
                             json_t **out, struct remat_error *err)
{
    *out = NULL;
    struct remat_shard_spec s = f->shard;
    struct remat_shard_breakdown fixed, b;
    s.activations = 0;
    int rc = remat_shard_memory(&s, &fixed, err);
    if (rc < 0)
        return rc;
    int64_t usable = 0, room = for_activations(f, f->mem[k], &usable, &fixed);
    struct remat_fits_options o = f->o;
    o.margin_bytes = 0;
    o.margin_fraction = 0;
    /* Nothing left for the activations: a memory of one byte, in which no
     * batch fits, and the answer says what batch 1 would need. */
    int64_t m = room > 0 ? room : 1;
    rc = remat_fits((const struct remat_profile *const *)f->ps, f->n, &m, 1, &o, a, err);
    if (rc < 0)
        return rc;
    a->memory_bytes = f->mem[k];
    a->usable_bytes = usable;
    s.activations = a->batch > 0 ? a->plan.peak_bytes : 0;
    rc = remat_shard_memory(&s, &b, err);
    if (rc < 0)
        return rc;
    if (a->batch > 0 && b.peak > usable)
        return fail(err, REMAT_EINVAL, "internal error: the rank's peak did not fit");
    json_t *ans = remat_fits_answer_to_json(a);
    json_t *br = breakdown_json(&s, &b);
    if (ans == NULL || br == NULL || json_object_set_new(ans, "per_rank", br) < 0) {
        json_decref(ans);
        return fail(err, REMAT_ENOMEM, "out of memory");
    }
    *out = ans;
    return REMAT_OK;
}
