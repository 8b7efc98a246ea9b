/* exports.c - a plan said in the knobs PyTorch users already have.
 *
 * Plan JSON's "exports" object: for each framework knob, either
 * {"available": true, ...its values} when setting that knob runs exactly the
 * plan's op list, or {"available": false, "reason": ...}.  Everything here
 * is derived from the schedule and the profile's sizes, never from stage
 * names, so that rematd renders a stored plan (which keeps no names) to the
 * same bytes.  docs/python.md says what each knob runs. */
#include <stdio.h>
#include <stdlib.h>

#include "remat_private.h"

/* Forward kind of each stage (index 1..n) when the ops before the loss are
 * exactly one forward per stage in order; 0 when they are not. */
static int forward_kinds(const struct remat_schedule *s, size_t n, uint8_t *fk)
{
    if (s->n_ops < n + 1)
        return 0;
    for (size_t i = 1; i <= n; i++) {
        const struct remat_op *o = &s->ops[i - 1];
        if (o->stage != i || o->kind == REMAT_OP_LOSS || o->kind == REMAT_OP_B)
            return 0;
        fk[i] = o->kind;
    }
    return s->ops[n].kind == REMAT_OP_LOSS;
}

static int same_ops(const struct remat_schedule *a, const struct remat_schedule *b)
{
    if (a->n_ops != b->n_ops)
        return 0;
    for (size_t k = 0; k < a->n_ops; k++)
        if (a->ops[k].kind != b->ops[k].kind || a->ops[k].stage != b->ops[k].stage)
            return 0;
    return 1;
}

/* Whether the schedule is what wrapping each stage i with fk[i] == F_ck in
 * its own torch.utils.checkpoint runs: forward, loss, then from the last
 * stage down, a wrapped stage recomputed with grad right before its B. */
static int per_module_schedule(const struct remat_schedule *s, size_t n, const uint8_t *fk)
{
    size_t k = n + 1;
    for (size_t i = 1; i <= n; i++)
        if (fk[i] == REMAT_OP_F_NONE)
            return 0;
    for (size_t i = n; i >= 1; i--) {
        if (fk[i] == REMAT_OP_F_CK) {
            if (k >= s->n_ops || s->ops[k].kind != REMAT_OP_F_ALL || s->ops[k].stage != i)
                return 0;
            k++;
        }
        if (k >= s->n_ops || s->ops[k].kind != REMAT_OP_B || s->ops[k].stage != i)
            return 0;
        k++;
    }
    return k == s->n_ops;
}

static json_t *absent(const char *reason)
{
    return json_pack("{s:b, s:s}", "available", 0, "reason", reason);
}

json_t *remat__plan_exports_json(const struct remat_profile *p, const struct remat_plan *plan)
{
    size_t n = p->n_stages;
    const struct remat_schedule *s = &plan->schedule;
    uint8_t *fk = calloc(n + 1, 1);
    size_t *ck = calloc(n > 0 ? n : 1, sizeof *ck);
    json_t *root = json_object();
    json_t *mods = json_array();
    struct remat_schedule single;
    remat_schedule_init(&single);
    int bad = fk == NULL || ck == NULL || root == NULL || mods == NULL;
    int chain = !bad && n > 0 && forward_kinds(s, n, fk);
    size_t m = 0, wrapped = 0, lead = 0;
    int is_single = 0, is_per_module = 0;
    if (chain) {
        /* The checkpoint set a single-level schedule would have: a kept
         * input starts a segment, and so does the first stage with grad. */
        for (size_t i = 2; i <= n; i++)
            if (fk[i] == REMAT_OP_F_CK || (fk[i] == REMAT_OP_F_ALL && fk[i - 1] != REMAT_OP_F_ALL))
                ck[m++] = i - 1;
        struct remat_error err;
        int rc = remat_schedule_from_checkpoints(p, ck, m, &single, &err);
        if (rc == REMAT_ENOMEM)
            bad = 1;
        is_single = rc == REMAT_OK && same_ops(s, &single);
        is_per_module = per_module_schedule(s, n, fk);
        for (size_t i = 1; !bad && i <= n; i++)
            if (fk[i] == REMAT_OP_F_CK) {
                bad |= json_array_append_new(mods, json_integer((json_int_t)i - 1)) < 0;
                wrapped++;
                if (lead == i - 1)
                    lead = i;
            }
    }
    remat_schedule_clear(&single);
    const char *not_chain = "the schedule is not one forward per stage before the loss";

    /* checkpoint_sequential(functions, K): modules in K runs of n // K, all
     * but the last checkpointed, the last run plainly (what remat's
     * single-level schedule does with its last segment). */
    size_t K = m + 1, len = n / K;
    int seq_ok = is_single && len >= 1;
    for (size_t j = 0; seq_ok && j < m; j++)
        seq_ok = ck[j] == len * (j + 1);
    bad |= json_object_set_new(
               root, "checkpoint_sequential",
               seq_ok ? json_pack("{s:b, s:I}", "available", 1, "segments", (json_int_t)K)
                      : absent(!chain ? not_chain
                               : !is_single
                                   ? "a multi-level schedule: checkpoint_sequential is single-level"
                                   : "the checkpoints are not every n // K modules, "
                                     "where checkpoint_sequential puts them")) < 0;

    /* One torch.utils.checkpoint per module (apply_activation_checkpointing's
     * check_fn, Hugging Face's per-layer gradient checkpointing). */
    if (is_per_module) {
        bad |= json_object_set_new(root, "per_module",
                                   json_pack("{s:b, s:O}", "available", 1, "modules", mods)) < 0;
    } else {
        bad |= json_object_set_new(
                   root, "per_module",
                   absent(!chain ? not_chain
                                 : "a recomputed segment spans several modules: wrapping "
                                   "modules one by one recomputes each alone")) < 0;
    }

    /* Megatron-LM: --recompute-method block checkpoints each of the first N
     * layers alone; uniform checkpoints every chunk, the last one included,
     * which no remat plan recomputes. */
    if (is_per_module && wrapped == lead && lead < n) {
        char num[24];
        snprintf(num, sizeof num, "%zu", lead);
        json_t *args =
            lead == 0 ? json_array()
                      : json_pack("[s,s,s,s,s,s]", "--recompute-granularity", "full",
                                  "--recompute-method", "block", "--recompute-num-layers", num);
        bad |= json_object_set_new(root, "megatron",
                                   json_pack("{s:b, s:o}", "available", 1, "args", args)) < 0;
    } else {
        bad |= json_object_set_new(
                   root, "megatron",
                   absent(!chain ? not_chain
                                 : "not the first N layers each recomputed alone (block); "
                                   "uniform also recomputes the last chunk, which this plan "
                                   "does not")) < 0;
    }

    /* DeepSpeed activation checkpointing: one checkpoint call per recomputed
     * segment, number_checkpoints of them kept. */
    bad |=
        json_object_set_new(
            root, "deepspeed",
            is_single ? json_pack("{s:b, s:I}", "available", 1, "number_checkpoints", (json_int_t)m)
                      : absent(!chain ? not_chain
                                      : "a multi-level schedule: DeepSpeed's checkpointing "
                                        "is single-level")) < 0;

    /* torch.compile's activation_memory_budget: the plan's activation bytes
     * (peak above weights and input) over store-all's.  A ratio for another
     * partitioner's choices, so only approximate. */
    int64_t base = p->input_bytes, a = 0, b = 0;
    int ovf = 0;
    for (size_t i = 0; i < n; i++)
        ovf |= __builtin_add_overflow(base, p->stages[i].param_bytes, &base);
    ovf |= __builtin_sub_overflow(plan->peak_bytes, base, &a);
    ovf |= __builtin_sub_overflow(plan->store_all_peak_bytes, base, &b);
    if (!ovf && b > 0 && a >= 0) {
        bad |= json_object_set_new(
                   root, "torch_compile",
                   json_pack("{s:b, s:b, s:f, s:I, s:I}", "available", 1, "approximate", 1,
                             "activation_memory_budget", (double)a / (double)b, "activation_bytes",
                             (json_int_t)a, "store_all_activation_bytes", (json_int_t)b)) < 0;
    } else {
        bad |= json_object_set_new(root, "torch_compile",
                                   absent("store-all keeps no activations above the weights")) < 0;
    }
    json_decref(mods);
    free(fk);
    free(ck);
    if (bad) {
        json_decref(root);
        return NULL;
    }
    return root;
}
