/* schedule.c - op sequences, and the single-level schedule of a checkpoint
 * set (docs/memory-model.md, "The single-level plan of a checkpoint set"). */
#include <stdio.h>

#include "remat_private.h"

#define NAME(kind, name) name,
static const char *const op_names[REMAT__N_OP_KINDS] = {REMAT__FOR_EACH_OP(NAME)};
#undef NAME

const char *remat_op_name(int kind)
{
    return kind >= 0 && kind < REMAT__N_OP_KINDS ? op_names[kind] : "?";
}

int remat_op_parse(const char *name, enum remat_op_kind *out)
{
    for (int k = 0; name && k < REMAT__N_OP_KINDS; k++)
        if (strcmp(name, op_names[k]) == 0) {
            *out = (enum remat_op_kind)k;
            return REMAT_OK;
        }
    return REMAT_EINVAL;
}

void remat_schedule_init(struct remat_schedule *s)
{
    s->n_ops = 0;
    s->cap = 0;
    s->ops = NULL;
}

void remat_schedule_clear(struct remat_schedule *s)
{
    if (s == NULL)
        return;
    free(s->ops);
    remat_schedule_init(s);
}

int remat__schedule_reserve(struct remat_schedule *s, size_t more)
{
    if (more > REMAT__MAX_OPS || s->n_ops > REMAT__MAX_OPS - more)
        return REMAT_ELIMIT;
    size_t need = s->n_ops + more;
    if (need <= s->cap)
        return REMAT_OK;
    size_t cap = s->cap < 16 ? 16 : s->cap;
    while (cap < need)
        cap = cap > REMAT__MAX_OPS / 2 ? REMAT__MAX_OPS : cap * 2;
    struct remat_op *ops = realloc(s->ops, cap * sizeof *ops);
    if (ops == NULL)
        return REMAT_ENOMEM;
    s->ops = ops;
    s->cap = cap;
    return REMAT_OK;
}

int remat_schedule_push(struct remat_schedule *s, enum remat_op_kind kind, uint32_t stage)
{
    if (s->n_ops == s->cap) {
        int rc = remat__schedule_reserve(s, 1);
        if (rc < 0)
            return rc;
    }
    s->ops[s->n_ops].stage = stage;
    s->ops[s->n_ops].kind = (uint8_t)kind;
    s->n_ops++;
    return REMAT_OK;
}

/* Appends without a capacity check: the caller reserved. */
static void put(struct remat_schedule *s, enum remat_op_kind kind, size_t stage)
{
    s->ops[s->n_ops].stage = (uint32_t)stage;
    s->ops[s->n_ops].kind = (uint8_t)kind;
    s->n_ops++;
}

int remat_schedule_from_checkpoints(const struct remat_profile *profile, const size_t *checkpoints,
                                    size_t n_checkpoints, struct remat_schedule *out,
                                    struct remat_error *err)
{
    size_t n = profile->n_stages;
    if (n == 0 || n > REMAT_MAX_STAGES)
        return remat__error(err, REMAT_EINVAL, "/stages", "the profile has %zu stages", n);
    if (n_checkpoints > n - 1)
        return remat__error(err, REMAT_EINVAL, "/checkpoints",
                            "%zu checkpoints for %zu stages: at most n-1 fit", n_checkpoints, n);
    for (size_t k = 0; k < n_checkpoints; k++) {
        size_t c = checkpoints[k];
        if (c < 1 || c > n - 1 || (k > 0 && c <= checkpoints[k - 1])) {
            char ptr[64];
            snprintf(ptr, sizeof ptr, "/checkpoints/%zu", k);
            return remat__error(err, REMAT_EINVAL, ptr,
                                "checkpoint %zu: checkpoints must ascend strictly within 1..%zu", c,
                                n - 1);
        }
    }
    size_t last = n_checkpoints > 0 ? checkpoints[n_checkpoints - 1] : 0;
    out->n_ops = 0;
    int rc = remat__schedule_reserve(out, 2 * n + 1 + last);
    if (rc < 0)
        return remat__error(err, rc, "", "no room for a schedule of %zu stages", n);
    /* Forward: every segment but the last without grad, keeping its input. */
    size_t start = 0;
    for (size_t k = 0; k < n_checkpoints; k++) {
        size_t end = checkpoints[k];
        put(out, REMAT_OP_F_CK, start + 1);
        for (size_t j = start + 2; j <= end; j++)
            put(out, REMAT_OP_F_NONE, j);
        start = end;
    }
    for (size_t j = last + 1; j <= n; j++)
        put(out, REMAT_OP_F_ALL, j);
    put(out, REMAT_OP_LOSS, n);
    for (size_t j = n; j > last; j--)
        put(out, REMAT_OP_B, j);
    /* Backward of the checkpointed segments, last to first, each recomputed
     * with grad from its kept input first. */
    for (size_t k = n_checkpoints; k > 0; k--) {
        size_t end = checkpoints[k - 1];
        size_t begin = k >= 2 ? checkpoints[k - 2] : 0;
        for (size_t j = begin + 1; j <= end; j++)
            put(out, REMAT_OP_F_ALL, j);
        for (size_t j = end; j > begin; j--)
            put(out, REMAT_OP_B, j);
    }
    return REMAT_OK;
}
