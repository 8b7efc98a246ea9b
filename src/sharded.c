/* sharded.c - the memory of one rank of a data-parallel job: weights,
 * gradients and optimizer state sharded as each strategy shards them, the
 * buffers the strategy adds, and the plan's activations (docs/scheduling.md,
 * "Sharded jobs", derives every term).  Pure arithmetic on the spec: no
 * profile, no allocation.
 *
 * Ψ parameters, N = data ranks, S = the ranks one copy is sharded over (N,
 * or the shard group of HSDP), p, g = bytes per element of the weights the
 * forward uses and of the gradients reduced, K = the optimizer's bytes per
 * parameter (mixed-precision Adam: fp32 master, exp_avg, exp_avg_sq: 12),
 * after the ZeRO paper (Rajbhandari et al. 2020, section 3.1, 2Ψ + 2Ψ + KΨ):
 *
 *   strategy   weights   gradients  optimizer  gathered           buckets
 *   ddp        pΨ        gΨ         KΨ         0                  gΨ (no view)
 *   zero1      pΨ        gΨ         KΨ/N       0                  gΨ (no view)
 *   zero2      pΨ        gΨ/N       KΨ/N       0                  min(2B, gΨ)
 *   zero3/fsdp pΨ/N      gΨ/N       KΨ/N       2pU + gU           0
 *   hsdp       pΨ/S      gΨ/S       KΨ/S       2pU + gU           0
 *
 * A shard is ceil(Ψ/S) elements: the flat parameter is padded to a multiple
 * of S (FSDP's FlatParameter, DeepSpeed's partitions). */
#include <inttypes.h>
#include <stdio.h>

#include "remat_private.h"

static const char *const names[REMAT_SHARD_COUNT] = {"ddp",   "zero1", "zero2",
                                                     "zero3", "fsdp",  "hsdp"};

const char *remat_shard_name(int strategy)
{
    return strategy >= 0 && strategy < REMAT_SHARD_COUNT ? names[strategy] : "?";
}

int remat_shard_parse(const char *name, enum remat_shard_strategy *out)
{
    for (int k = 0; name != NULL && k < REMAT_SHARD_COUNT; k++)
        if (strcmp(name, names[k]) == 0) {
            *out = (enum remat_shard_strategy)k;
            return REMAT_OK;
        }
    return REMAT_EINVAL;
}

void remat_shard_spec_init(struct remat_shard_spec *s)
{
    memset(s, 0, sizeof *s);
    s->strategy = REMAT_SHARD_DDP;
    s->data = 1;
    s->param_bytes = 4;
    s->grad_bytes = 4;
    s->bucket_bytes = REMAT_SHARD_DEFAULT_BUCKET;
}

static int elem_ok(int v)
{
    return v == 1 || v == 2 || v == 4 || v == 8;
}

/* ceil(n / d) elements of `bytes` each; n <= 2^50, bytes <= 64. */
static int64_t shard(int64_t n, int64_t d, int64_t bytes)
{
    return (n / d + (n % d != 0)) * bytes;
}

int remat_shard_memory(const struct remat_shard_spec *s, struct remat_shard_breakdown *out,
                       struct remat_error *err)
{
    memset(out, 0, sizeof *out);
    if (s == NULL)
        return remat__error(err, REMAT_EINVAL, "/parallel", "no spec");
    if ((int)s->strategy < 0 || s->strategy >= REMAT_SHARD_COUNT)
        return remat__error(err, REMAT_EINVAL, "/parallel/strategy",
                            "strategy must be ddp, zero1, zero2, zero3, fsdp or hsdp");
    if (s->data < 1 || s->data > REMAT_SHARD_MAX_RANKS)
        return remat__error(err, REMAT_EINVAL, "/parallel/data", "data must be in 1..2^20");
    int64_t group = s->data;
    if (s->strategy == REMAT_SHARD_HSDP) {
        group = s->shard_group;
        if (group < 1 || group > s->data || s->data % group != 0)
            return remat__error(err, REMAT_EINVAL, "/parallel/shard_group",
                                "shard_group must divide data (1..data)");
    }
    if (s->params < 0 || s->params > REMAT_SHARD_MAX_PARAMS)
        return remat__error(err, REMAT_EINVAL, "/params", "params must be in [0, 2^50]");
    if (s->largest_unit < 0 || s->largest_unit > s->params)
        return remat__error(err, REMAT_EINVAL, "/largest_unit",
                            "largest_unit must be in [0, params]");
    if (!elem_ok(s->param_bytes))
        return remat__error(err, REMAT_EINVAL, "/param_dtype", "param_bytes must be 1, 2, 4 or 8");
    if (!elem_ok(s->grad_bytes))
        return remat__error(err, REMAT_EINVAL, "/reduce_dtype", "grad_bytes must be 1, 2, 4 or 8");
    if (s->optim_bytes < 0 || s->optim_bytes > 64)
        return remat__error(err, REMAT_EINVAL, "/optimizer", "optim_bytes must be in [0, 64]");
    if (s->bucket_bytes < 1 || s->bucket_bytes > REMAT_MAX_BYTES)
        return remat__error(err, REMAT_EINVAL, "/parallel/bucket_cap_mb",
                            "the bucket must be in [1, 2^60] bytes");
    if (s->activations < 0 || s->activations > REMAT_MAX_BYTES)
        return remat__error(err, REMAT_EINVAL, "/activations", "activations must be in [0, 2^60]");
    if (s->step_tmp < 0 || s->step_tmp > REMAT_MAX_BYTES)
        return remat__error(err, REMAT_EINVAL, "/step_tmp", "step_tmp must be in [0, 2^60]");

    int64_t n = s->params, u = s->largest_unit, p = s->param_bytes, g = s->grad_bytes;
    int64_t opt_shards = 1;
    /* Every product below is at most 2^50 * 64 = 2^56. */
    switch (s->strategy) {
    case REMAT_SHARD_DDP:
    case REMAT_SHARD_ZERO1:
        out->weights = n * p;
        out->gradients = n * g;
        opt_shards = s->strategy == REMAT_SHARD_DDP ? 1 : s->data;
        /* DDP's Reducer copies each gradient into its bucket's flat
         * tensor unless the gradients are views of the buckets. */
        out->buckets = s->bucket_view ? 0 : n * g;
        break;
    case REMAT_SHARD_ZERO2: {
        out->weights = n * p;
        out->gradients = shard(n, s->data, g);
        opt_shards = s->data;
        /* Gradients reduce-scattered a bucket at a time, one bucket
         * filling while the one before is reduced: two buckets, or the
         * whole gradient when it is smaller. */
        out->buckets = 2 * s->bucket_bytes < n * g ? 2 * s->bucket_bytes : n * g;
        break;
    }
    default: /* zero3, fsdp, hsdp: all three sharded over the group */
        out->weights = shard(n, group, p);
        out->gradients = shard(n, group, g);
        opt_shards = group;
        /* The unit in use and the next one prefetched, unsharded, and the
         * unit's full gradient before its reduce-scatter. */
        out->gathered = 2 * u * p + u * g;
        break;
    }
    out->optimizer = shard(n, opt_shards, s->optim_bytes);
    out->activations = s->activations;
    /* The step's transient: the foreach step's is over every tensor this
     * rank updates; the single-tensor loop's is the largest tensor's,
     * which sharding by tensors does not make smaller. */
    int64_t step = s->step_tmp_per_tensor ? s->step_tmp : shard(s->step_tmp, opt_shards, 1);
    /* The step runs after the last backward has freed the activations:
     * only what it needs beyond them adds to the peak. */
    out->step_tmp = step > s->activations ? step - s->activations : 0;
    int64_t sum = out->weights + out->gradients + out->optimizer + out->gathered + out->buckets;
    if (sum > REMAT_MAX_BYTES || out->activations + out->step_tmp > REMAT_MAX_BYTES - sum) {
        memset(out, 0, sizeof *out);
        return remat__error(err, REMAT_ELIMIT, "/parallel", "a rank's bytes are over 2^60");
    }
    out->peak = sum + out->activations + out->step_tmp;
    return REMAT_OK;
}

int remat_dtype_bytes(const char *name)
{
    static const struct {
        const char *name;
        int bytes;
    } t[] = {{"float64", 8}, {"float32", 4}, {"bfloat16", 2}, {"float16", 2},
             {"fp64", 8},    {"fp32", 4},    {"bf16", 2},     {"fp16", 2}};
    for (size_t k = 0; name != NULL && k < sizeof t / sizeof t[0]; k++)
        if (strcmp(name, t[k].name) == 0)
            return t[k].bytes;
    return 0;
}

void remat_shard_job_init(struct remat_shard_job *j)
{
    memset(j, 0, sizeof *j);
    j->strategy = REMAT_SHARD_DDP;
    j->data = 1;
    j->master_weights = -1;
}

/* Optimizer state buffers per parameter of each kind (optimizer.c). */
static int buffers(int kind)
{
    return kind == REMAT_OPTIM_ADAM || kind == REMAT_OPTIM_ADAMW ? 2
           : kind == REMAT_OPTIM_SGD_MOMENTUM                    ? 1
                                                                 : 0;
}

/* The rank's spec for profile q: Ψ and U from its weights, the byte sizes
 * from the job, the step's transient from the optimizer's model. */
static int job_spec(const struct remat_profile *q, const struct remat_shard_job *j,
                    struct remat_shard_spec *s, struct remat_error *err)
{
    remat_shard_spec_init(s);
    s->strategy = j->strategy;
    s->data = j->data;
    s->shard_group = j->shard_group;
    s->bucket_bytes = j->bucket_bytes > 0 ? j->bucket_bytes : REMAT_SHARD_DEFAULT_BUCKET;
    s->bucket_view = j->bucket_view != 0;
    int pe = remat_dtype_bytes(q->dtype);
    pe = pe ? pe : 4;
    int64_t total = 0, largest = 0;
    for (size_t i = 0; i < q->n_stages; i++) {
        int64_t w = q->stages[i].param_bytes;
        if (total > REMAT_MAX_BYTES - w)
            return remat__error(err, REMAT_ELIMIT, "/profiles/0/stages",
                                "the weights add up past 2^60");
        total += w;
        largest = w > largest ? w : largest;
    }
    s->params = total / pe;
    s->largest_unit = largest / pe;
    s->param_bytes = j->param_bytes ? j->param_bytes : pe;
    s->grad_bytes = j->grad_bytes ? j->grad_bytes : s->param_bytes;
    /* Mixed precision keeps an fp32 master copy unless told otherwise;
     * weights trained in fp32 are their own master. */
    int master = j->master_weights >= 0 ? j->master_weights != 0 : s->param_bytes < 4;
    int se = j->state_bytes ? j->state_bytes : 4;
    if (se != 1 && se != 2 && se != 4 && se != 8)
        return remat__error(err, REMAT_EINVAL, "/optimizer/state_elem_bytes",
                            "state_elem_bytes must be 1, 2, 4 or 8");
    const struct remat_optimizer *o = &q->optimizer;
    s->optim_bytes = (int64_t)buffers(o->kind) * se + (master ? 4 : 0);
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
    struct remat_shard_breakdown b;
    return remat_shard_memory(s, &b, err);
}

/* A copy of p without its weights and optimizer (stage names borrowed). */
static struct remat_profile *activations_only(const struct remat_profile *p,
                                              struct remat_error *err)
{
    struct remat_profile *c = remat_profile_new(p->n_stages, err);
    if (c == NULL)
        return NULL;
    c->input_bytes = p->input_bytes;
    c->batch_size = p->batch_size;
    for (size_t i = 0; i < p->n_stages; i++) {
        c->stages[i] = p->stages[i];
        c->stages[i].param_bytes = 0;
    }
    return c;
}

int remat_fits_sharded(const struct remat_profile *const *profiles, size_t n_profiles,
                       const int64_t *memory_bytes, size_t n_memories,
                       const struct remat_fits_options *opts, const struct remat_shard_job *job,
                       struct remat_fits_answer *out, struct remat_shard_breakdown *per_rank,
                       struct remat_shard_spec *spec, struct remat_error *err)
{
    struct remat_fits_options defaults;
    if (opts == NULL) {
        remat_fits_options_init(&defaults);
        opts = &defaults;
    }
    if (out != NULL && n_memories <= REMAT_FITS_MAX_MEMORIES)
        memset(out, 0, n_memories * sizeof *out);
    if (memory_bytes == NULL || out == NULL || per_rank == NULL || spec == NULL ||
        n_memories == 0 || n_memories > REMAT_FITS_MAX_MEMORIES)
        return remat__error(err, REMAT_EINVAL, "/memory", "1 to %d memory sizes",
                            REMAT_FITS_MAX_MEMORIES);
    if (job == NULL || profiles == NULL || n_profiles == 0 || profiles[0] == NULL ||
        n_profiles > REMAT_FITS_MAX_PROFILES)
        return remat__error(err, REMAT_EINVAL, "/profiles", "1 to %d profiles and a job",
                            REMAT_FITS_MAX_PROFILES);
    if (!(opts->margin_fraction >= 0 && opts->margin_fraction <= 0.9) || opts->margin_bytes < 0 ||
        opts->margin_bytes > REMAT_MAX_BYTES)
        return remat__error(err, REMAT_EINVAL, "/margin_bytes",
                            "margin_bytes in [0, 2^60], margin_fraction in [0, 0.9]");
    int rc = remat_profile_validate(profiles[0], err);
    if (rc < 0)
        return rc;
    rc = job_spec(profiles[0], job, spec, err);
    if (rc < 0)
        return rc;
    struct remat_profile *act[REMAT_FITS_MAX_PROFILES] = {0};
    size_t n_act = 0;
    for (; rc == REMAT_OK && n_act < n_profiles; n_act++) {
        if (profiles[n_act] == NULL) {
            rc = remat__error(err, REMAT_EINVAL, "/profiles", "profile %zu is missing", n_act);
            break;
        }
        act[n_act] = activations_only(profiles[n_act], err);
        if (act[n_act] == NULL)
            rc = err != NULL ? err->code : REMAT_ENOMEM;
    }
    struct remat_fits_options o = *opts;
    o.margin_bytes = 0;
    o.margin_fraction = 0;
    for (size_t k = 0; rc == REMAT_OK && k < n_memories; k++) {
        int64_t m = memory_bytes[k];
        if (m <= 0 || m > REMAT_MAX_BYTES) {
            char ptr[64];
            snprintf(ptr, sizeof ptr, "/memory/%zu", k);
            rc = remat__error(err, REMAT_EINVAL, ptr, "a memory size must be in [1, 2^60]");
            break;
        }
        int64_t usable = m - opts->margin_bytes - (int64_t)((double)m * opts->margin_fraction);
        if (usable <= 0) {
            rc = remat__error(err, REMAT_EINVAL, "/margin_bytes",
                              "the margins leave nothing of memory %zu", k);
            break;
        }
        /* What the rank holds besides the activations, and the step's
         * whole transient (step_tmp with no activations). */
        struct remat_shard_spec s = *spec;
        struct remat_shard_breakdown fixed;
        s.activations = 0;
        rc = remat_shard_memory(&s, &fixed, err);
        if (rc < 0)
            break;
        int64_t rest = fixed.peak - fixed.step_tmp;
        /* The activations' room: none when the rest, or the step beside
         * it, does not fit: a memory of one byte, in which no batch fits,
         * so that the answer still says what batch 1 needs. */
        int64_t room = usable > rest && fixed.step_tmp <= usable - rest ? usable - rest : 1;
        rc = remat_fits((const struct remat_profile *const *)act, n_profiles, &room, 1, &o, &out[k],
                        err);
        if (rc < 0)
            break;
        out[k].memory_bytes = m;
        out[k].usable_bytes = usable;
        s.activations = out[k].batch > 0 ? out[k].plan.peak_bytes : 0;
        rc = remat_shard_memory(&s, &per_rank[k], err);
        if (rc == REMAT_OK && out[k].batch > 0 && per_rank[k].peak > usable)
            rc = remat__error(err, REMAT_EINVAL, "", "internal error: the rank's peak is over");
    }
    for (size_t k = 0; k < n_act; k++)
        remat_profile_free(act[k]);
    if (rc < 0)
        for (size_t k = 0; k < n_memories; k++)
            remat_fits_answer_clear(&out[k]);
    return rc;
}

json_t *remat_shard_breakdown_to_json(const struct remat_shard_spec *s,
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

/* Whether batch 1 of the job at `data` ranks fits `usable` bytes, its
 * activations (the same at any rank count) given. */
static int fits_at(const struct remat_profile *q, const struct remat_shard_job *job, int64_t data,
                   int64_t act, int64_t usable, int *yes, struct remat_error *err)
{
    struct remat_shard_job j = *job;
    j.data = data;
    struct remat_shard_spec s;
    struct remat_shard_breakdown b;
    int rc = job_spec(q, &j, &s, err);
    if (rc < 0)
        return rc;
    s.activations = act;
    rc = remat_shard_memory(&s, &b, err);
    *yes = rc == REMAT_OK && b.peak <= usable;
    return rc;
}

int remat_fits_least_data(const struct remat_profile *const *profiles, size_t n_profiles,
                          int64_t memory_bytes, const struct remat_fits_options *opts,
                          const struct remat_shard_job *job, int64_t max_data, int64_t *least,
                          struct remat_error *err)
{
    *least = 0;
    if (job == NULL)
        return remat__error(err, REMAT_EINVAL, "/parallel", "no job");
    if (max_data < 1 || max_data > REMAT_SHARD_MAX_RANKS)
        return remat__error(err, REMAT_EINVAL, "/global_batch", "max_data must be in 1..2^20");
    if (memory_bytes <= 0 || memory_bytes > REMAT_MAX_BYTES)
        return remat__error(err, REMAT_EINVAL, "/memory", "a memory size must be in [1, 2^60]");
    struct remat_fits_options o;
    if (opts == NULL)
        remat_fits_options_init(&o);
    else
        o = *opts;
    int64_t usable =
        memory_bytes - o.margin_bytes - (int64_t)((double)memory_bytes * o.margin_fraction);
    /* hsdp runs on whole shard groups: k groups of M ranks. */
    int64_t step = job->strategy == REMAT_SHARD_HSDP ? job->shard_group : 1;
    if (step < 1)
        return remat__error(err, REMAT_EINVAL, "/parallel/shard_group",
                            "shard_group must divide data (1..data)");
    int64_t lo = 0, hi = max_data / step; /* fits at hi * step; not at lo * step */
    if (hi == 0)
        return REMAT_OK;
    /* Batch 1's activations (its min-peak plan) do not depend on the
     * ranks: solved once, then each rank count is arithmetic. */
    struct remat_shard_job j = *job;
    j.data = hi * step;
    struct remat_shard_breakdown one;
    int rc = remat_fits_sharded_at(profiles, n_profiles, &j, 1, &one, err);
    if (rc < 0)
        return rc;
    int yes = 0;
    rc = fits_at(profiles[0], job, hi * step, one.activations, usable, &yes, err);
    if (rc < 0 || !yes)
        return rc;
    /* Each rank's bytes do not grow with the ranks (shards of ceil(Ψ/N)),
     * so "fits" is monotone in N and bisection finds the least. */
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        rc = fits_at(profiles[0], job, mid * step, one.activations, usable, &yes, err);
        if (rc < 0)
            return rc;
        if (yes)
            hi = mid;
        else
            lo = mid;
    }
    *least = hi * step;
    return REMAT_OK;
}

int remat_fits_sharded_at(const struct remat_profile *const *profiles, size_t n_profiles,
                          const struct remat_shard_job *job, int64_t batch,
                          struct remat_shard_breakdown *out, struct remat_error *err)
{
    memset(out, 0, sizeof *out);
    if (job == NULL || profiles == NULL || n_profiles == 0 || profiles[0] == NULL ||
        n_profiles > REMAT_FITS_MAX_PROFILES)
        return remat__error(err, REMAT_EINVAL, "/profiles", "1 to %d profiles and a job",
                            REMAT_FITS_MAX_PROFILES);
    int rc = remat_profile_validate(profiles[0], err);
    if (rc < 0)
        return rc;
    struct remat_shard_spec s;
    rc = job_spec(profiles[0], job, &s, err);
    if (rc < 0)
        return rc;
    struct remat_profile *act[REMAT_FITS_MAX_PROFILES] = {0};
    size_t n_act = 0;
    for (; rc == REMAT_OK && n_act < n_profiles; n_act++) {
        act[n_act] = profiles[n_act] ? activations_only(profiles[n_act], err) : NULL;
        if (act[n_act] == NULL)
            rc = remat__error(err, REMAT_EINVAL, "/profiles", "profile %zu is missing", n_act);
    }
    struct remat_profile *at = NULL;
    if (rc == REMAT_OK) {
        at = remat_profile_at_batch((const struct remat_profile *const *)act, n_profiles, batch,
                                    NULL, err);
        if (at == NULL)
            rc = err != NULL && err->code < 0 ? err->code : REMAT_EINVAL;
    }
    if (rc == REMAT_OK) {
        /* The least peak of the batch: its min-peak plan. */
        struct remat_options o;
        remat_options_init(&o);
        struct remat_plan plan;
        rc = remat_solve(at, &o, &plan, err);
        if (rc == REMAT_OK) {
            s.activations = plan.peak_bytes;
            rc = remat_shard_memory(&s, out, err);
        }
        remat_plan_clear(&plan);
    }
    remat_profile_free(at);
    for (size_t k = 0; k < n_act; k++)
        remat_profile_free(act[k]);
    return rc;
}

int remat_fits_schedule(const struct remat_profile *const *profiles, size_t n_profiles,
                        const struct remat_fits_options *opts, const struct remat_shard_job *job,
                        int64_t global_batch, const struct remat_fits_answer *a,
                        const struct remat_shard_breakdown *b, struct remat_fits_schedule *out,
                        struct remat_error *err)
{
    memset(out, 0, sizeof *out);
    if (job == NULL || a == NULL || b == NULL)
        return remat__error(err, REMAT_EINVAL, "/parallel", "no job or no answer");
    if (global_batch < 1 || global_batch > REMAT_FITS_MAX_GLOBAL_BATCH)
        return remat__error(err, REMAT_EINVAL, "/global_batch", "global_batch must be in 1..2^40");
    int64_t n = job->data, g = global_batch;
    if (n < 1 || n > REMAT_SHARD_MAX_RANKS)
        return remat__error(err, REMAT_EINVAL, "/parallel/data", "data must be in 1..2^20");
    int64_t max_data = g < REMAT_SHARD_MAX_RANKS ? g : REMAT_SHARD_MAX_RANKS;
    int rc = remat_fits_least_data(profiles, n_profiles, a->memory_bytes, opts, job, max_data,
                                   &out->least_data, err);
    if (rc < 0)
        return rc;
    out->global_batch = g;
    out->ranks = n;
    int64_t peak = b->peak;
    if (a->batch > 0) {
        int64_t share = g / n + (g % n != 0); /* samples per rank per step */
        out->micro_batch = a->batch < share ? a->batch : share;
        out->accumulation_steps = share / out->micro_batch + (share % out->micro_batch != 0);
        out->samples_per_step = out->micro_batch * n * out->accumulation_steps;
        /* Below the largest batch, the micro-batch's min-peak plan needs
         * less than the memory holds. */
        if (share < a->batch) {
            struct remat_shard_breakdown at;
            rc = remat_fits_sharded_at(profiles, n_profiles, job, share, &at, err);
            if (rc < 0) {
                memset(out, 0, sizeof *out);
                return rc;
            }
            peak = at.peak;
        }
        out->micro_peak_bytes = peak;
    }
    /* The device memory a rank needs: that peak, the margins, and the 1
     * GiB of CUDA context the GPU table takes off each card
     * (remat_gpu_memory_bytes). */
    out->device_memory_bytes = peak + (a->memory_bytes - a->usable_bytes) + (INT64_C(1) << 30);
    return REMAT_OK;
}

json_t *remat_fits_schedule_to_json(const struct remat_fits_schedule *s, const char *gpu)
{
    json_t *o = json_object();
    int bad = o == NULL;
    bad |= json_object_set_new(o, "global_batch", json_integer(s->global_batch)) < 0;
    bad |= json_object_set_new(o, "least_data",
                               s->least_data ? json_integer(s->least_data) : json_null()) < 0;
    if (s->micro_batch > 0) {
        bad |= json_object_set_new(o, "micro_batch", json_integer(s->micro_batch)) < 0;
        bad |=
            json_object_set_new(o, "accumulation_steps", json_integer(s->accumulation_steps)) < 0;
        bad |= json_object_set_new(o, "samples_per_step", json_integer(s->samples_per_step)) < 0;
        bad |= json_object_set_new(o, "micro_peak_bytes", json_integer(s->micro_peak_bytes)) < 0;
    }
    int64_t need = s->device_memory_bytes;
    int64_t gib = (need + (INT64_C(1) << 30) - 1) >> 30;
    int64_t gb = (need + 999999999) / 1000000000;
    char dra[160], sky[64], skymem[64];
    snprintf(dra, sizeof dra,
             "device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"%" PRId64
             "Gi\")) >= 0",
             gib);
    snprintf(skymem, sizeof skymem, "NVIDIA:%" PRId64 "GB+:%" PRId64, gb, s->ranks);
    const char *name = remat_gpu_skypilot(gpu);
    snprintf(sky, sizeof sky, "%s:%" PRId64, name ? name : "", s->ranks);
    json_t *req =
        json_pack("{s:I, s:I, s:{s:I}, s:s, s:s}", "device_memory_bytes", (json_int_t)need, "ranks",
                  (json_int_t)s->ranks, "kubernetes", "nvidia.com/gpu", (json_int_t)s->ranks,
                  "dra_selector", dra, "skypilot_memory", skymem);
    bad |= req == NULL;
    if (req != NULL && name != NULL)
        bad |= json_object_set_new(req, "skypilot", json_string(sky)) < 0;
    bad |= req == NULL || json_object_set_new(o, "requests", req) < 0;
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}
