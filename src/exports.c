/* exports.c - a plan said in the knobs PyTorch users already have.
 *
 * Plan JSON's "exports" object: for each framework knob, either
 * {"available": true, ...its values} when setting that knob runs exactly the
 * plan's op list, or {"available": false, "reason": ...}.  Everything here
 * is derived from the schedule and the profile's sizes, never from stage
 * names, so that rematd renders a stored plan (which keeps no names) to the
 * same bytes.  docs/python.md says what each knob runs. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remat_private.h"
#include "rematx/dynbuf.h"
#include "rematx/real.h"

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

/* Whether op k of the schedule is (kind, stage); steps k past it if so. */
static int op_is(const struct remat_schedule *s, size_t *k, enum remat_op_kind kind, size_t stage)
{
    if (*k >= s->n_ops || s->ops[*k].kind != kind || s->ops[*k].stage != stage)
        return 0;
    ++*k;
    return 1;
}

/* Whether the schedule is, op for op, the single-level one that
 * remat_schedule_from_checkpoints makes of the checkpoints ck[0..m-1]
 * (ascending, within 1..n-1): each segment but the last forward without
 * grad from its kept input, the last with grad, the loss, its backward,
 * then each earlier segment, last to first, recomputed with grad and
 * backward. */
static int single_level_schedule(const struct remat_schedule *s, size_t n, const size_t *ck,
                                 size_t m)
{
    size_t k = 0, start = 0, last = m > 0 ? ck[m - 1] : 0;
    for (size_t j = 0; j < m; j++) {
        if (!op_is(s, &k, REMAT_OP_F_CK, start + 1))
            return 0;
        for (size_t i = start + 2; i <= ck[j]; i++)
            if (!op_is(s, &k, REMAT_OP_F_NONE, i))
                return 0;
        start = ck[j];
    }
    for (size_t i = last + 1; i <= n; i++)
        if (!op_is(s, &k, REMAT_OP_F_ALL, i))
            return 0;
    if (!op_is(s, &k, REMAT_OP_LOSS, n))
        return 0;
    for (size_t i = n; i > last; i--)
        if (!op_is(s, &k, REMAT_OP_B, i))
            return 0;
    for (size_t j = m; j > 0; j--) {
        size_t end = ck[j - 1], begin = j >= 2 ? ck[j - 2] : 0;
        for (size_t i = begin + 1; i <= end; i++)
            if (!op_is(s, &k, REMAT_OP_F_ALL, i))
                return 0;
        for (size_t i = end; i > begin; i--)
            if (!op_is(s, &k, REMAT_OP_B, i))
                return 0;
    }
    return k == s->n_ops;
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

/* The text is written once, here, in jansson's compact layout with reals
 * printed shortest (rematx_real_text): remat_plan_dumps appends it as is,
 * and the tree (remat_plan_to_json) is that text read back, so the two
 * renderings cannot drift apart and the plan's fast writer builds no tree.
 * The reasons are plain ASCII that JSON needs no escape for. */
static void lit(struct rematx_dynbuf *b, const char *s)
{
    rematx_dyn_addn(b, s, strlen(s));
}

static void absent(struct rematx_dynbuf *b, const char *key, const char *reason)
{
    rematx_dyn_addf(b, "\"%s\":{\"available\":false,\"reason\":\"%s\"}", key, reason);
}

int remat__plan_exports_text(const struct remat_profile *p, const struct remat_plan *plan,
                             struct rematx_dynbuf *b)
{
    size_t n = p->n_stages;
    const struct remat_schedule *s = &plan->schedule;
    uint8_t *fk = calloc(n + 1, 1);
    size_t *ck = calloc(n > 0 ? n : 1, sizeof *ck);
    size_t *mods = calloc(n > 0 ? n : 1, sizeof *mods);
    int bad = fk == NULL || ck == NULL || mods == NULL;
    int chain = !bad && n > 0 && forward_kinds(s, n, fk);
    size_t m = 0, wrapped = 0, lead = 0;
    int is_single = 0, is_per_module = 0;
    if (chain) {
        /* The checkpoint set a single-level schedule would have: a kept
         * input starts a segment, and so does the first stage with grad. */
        for (size_t i = 2; i <= n; i++)
            if (fk[i] == REMAT_OP_F_CK || (fk[i] == REMAT_OP_F_ALL && fk[i - 1] != REMAT_OP_F_ALL))
                ck[m++] = i - 1;
        is_single = single_level_schedule(s, n, ck, m);
        is_per_module = per_module_schedule(s, n, fk);
        for (size_t i = 1; i <= n; i++)
            if (fk[i] == REMAT_OP_F_CK) {
                mods[wrapped++] = i - 1;
                if (lead == i - 1)
                    lead = i;
            }
    }
    const char *not_chain = "the schedule is not one forward per stage before the loss";
    lit(b, "{");

    /* checkpoint_sequential(functions, K): modules in K runs of n // K, all
     * but the last checkpointed, the last run plainly (what remat's
     * single-level schedule does with its last segment). */
    size_t K = m + 1, len = n / K;
    int seq_ok = is_single && len >= 1;
    for (size_t j = 0; seq_ok && j < m; j++)
        seq_ok = ck[j] == len * (j + 1);
    if (seq_ok)
        rematx_dyn_addf(b, "\"checkpoint_sequential\":{\"available\":true,\"segments\":%zu}", K);
    else
        absent(b, "checkpoint_sequential",
               !chain       ? not_chain
               : !is_single ? "a multi-level schedule: checkpoint_sequential is single-level"
                            : "the checkpoints are not every n // K modules, "
                              "where checkpoint_sequential puts them");

    /* One torch.utils.checkpoint per module (apply_activation_checkpointing's
     * check_fn, Hugging Face's per-layer gradient checkpointing). */
    lit(b, ",");
    if (is_per_module) {
        lit(b, "\"per_module\":{\"available\":true,\"modules\":[");
        for (size_t k = 0; k < wrapped; k++)
            rematx_dyn_addf(b, k ? ",%zu" : "%zu", mods[k]);
        lit(b, "]}");
    } else {
        absent(b, "per_module",
               !chain ? not_chain
                      : "a recomputed segment spans several modules: wrapping "
                        "modules one by one recomputes each alone");
    }

    /* Megatron-LM: --recompute-method block checkpoints each of the first N
     * layers alone; uniform checkpoints every chunk, the last one included,
     * which no remat plan recomputes. */
    lit(b, ",");
    if (is_per_module && wrapped == lead && lead < n) {
        if (lead == 0)
            lit(b, "\"megatron\":{\"available\":true,\"args\":[]}");
        else
            rematx_dyn_addf(
                b,
                "\"megatron\":{\"available\":true,\"args\":[\"--recompute-granularity\","
                "\"full\",\"--recompute-method\",\"block\",\"--recompute-num-layers\","
                "\"%zu\"]}",
                lead);
    } else {
        absent(b, "megatron",
               !chain ? not_chain
                      : "not the first N layers each recomputed alone (block); "
                        "uniform also recomputes the last chunk, which this plan "
                        "does not");
    }

    /* DeepSpeed activation checkpointing: one checkpoint call per recomputed
     * segment, number_checkpoints of them kept. */
    lit(b, ",");
    if (is_single)
        rematx_dyn_addf(b, "\"deepspeed\":{\"available\":true,\"number_checkpoints\":%zu}", m);
    else
        absent(b, "deepspeed",
               !chain ? not_chain
                      : "a multi-level schedule: DeepSpeed's checkpointing "
                        "is single-level");

    /* torch.compile's activation_memory_budget: the plan's activation bytes
     * (peak above weights and input) over store-all's.  A ratio for another
     * partitioner's choices, so only approximate. */
    int64_t base = p->input_bytes, a = 0, bb = 0;
    int ovf = 0;
    for (size_t i = 0; i < n; i++)
        ovf |= __builtin_add_overflow(base, p->stages[i].param_bytes, &base);
    ovf |= __builtin_sub_overflow(plan->peak_bytes, base, &a);
    ovf |= __builtin_sub_overflow(plan->store_all_peak_bytes, base, &bb);
    lit(b, ",");
    if (!ovf && bb > 0 && a >= 0) {
        char r[REMATX_REAL_MAX];
        rematx_real_text((double)a / (double)bb, r);
        rematx_dyn_addf(b,
                        "\"torch_compile\":{\"available\":true,\"approximate\":true,"
                        "\"activation_memory_budget\":%s,\"activation_bytes\":%" PRId64
                        ",\"store_all_activation_bytes\":%" PRId64 "}",
                        r, a, bb);
    } else {
        absent(b, "torch_compile", "store-all keeps no activations above the weights");
    }
    lit(b, "}");
    free(fk);
    free(ck);
    free(mods);
    if (bad)
        return REMAT_ENOMEM;
    return rematx_dyn_error(b) ? rematx_dyn_error(b) : REMAT_OK;
}

json_t *remat__plan_exports_json(const struct remat_profile *p, const struct remat_plan *plan)
{
    struct rematx_dynbuf b;
    rematx_dyn_init(&b, (size_t)1 << 30);
    json_t *j = NULL;
    if (remat__plan_exports_text(p, plan, &b) == REMAT_OK)
        j = json_loadb(rematx_dyn_ptr(&b), rematx_dyn_len(&b), 0, NULL);
    rematx_dyn_free(&b);
    return j;
}
