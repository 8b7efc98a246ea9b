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
