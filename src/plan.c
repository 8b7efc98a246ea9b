/* plan.c - plans: names of the algorithms, freeing, and the JSON that
 * `remat plan` and the service print. */
#include "solve_mintime.h"

static const char *const alg_names[REMAT_ALG_COUNT] = {
    [REMAT_ALG_STORE_ALL] = "store-all",     [REMAT_ALG_SQRT] = "sqrt",
    [REMAT_ALG_UNIFORM] = "uniform",         [REMAT_ALG_ACG] = "acg",
    [REMAT_ALG_PAPER_CUBIC] = "paper-cubic", [REMAT_ALG_PAPER_LINEAR] = "paper-linear",
    [REMAT_ALG_MIN_PEAK] = "min-peak",       [REMAT_ALG_MIN_TIME] = "min-time",
};

const char *remat_algorithm_name(enum remat_algorithm a)
{
    return (unsigned)a < REMAT_ALG_COUNT ? alg_names[a] : "unknown";
}

int remat_algorithm_parse(const char *name, enum remat_algorithm *out)
{
    for (int a = 0; name != NULL && a < REMAT_ALG_COUNT; a++)
        if (strcmp(name, alg_names[a]) == 0) {
            *out = (enum remat_algorithm)a;
            return 0;
        }
    return REMAT_EINVAL;
}

enum remat_model remat_algorithm_model(enum remat_algorithm a)
{
    switch (a) {
    case REMAT_ALG_ACG:
    case REMAT_ALG_PAPER_CUBIC:
        return REMAT_MODEL_SUM;
    case REMAT_ALG_PAPER_LINEAR:
        return REMAT_MODEL_PREFIX;
    default:
        return REMAT_MODEL_TRACED;
    }
}

void remat_options_init(struct remat_options *o)
{
    memset(o, 0, sizeof *o);
    o->algorithm = REMAT_ALG_MIN_PEAK;
    o->model = REMAT_MODEL_TRACED;
}

void remat_plan_clear(struct remat_plan *plan)
{
    if (plan == NULL)
        return;
    free(plan->checkpoints);
    remat_schedule_clear(&plan->schedule);
    memset(plan, 0, sizeof *plan);
    remat_schedule_init(&plan->schedule);
    plan->single_level = 1;
}

int remat__plan_set_checkpoints(struct remat_plan *plan, const size_t *ck, size_t m,
                                struct remat_error *err)
{
    size_t *copy = malloc((m > 0 ? m : 1) * sizeof *copy);
    if (copy == NULL)
        return remat__error(err, REMAT_ENOMEM, "", "out of memory");
    if (m > 0)
        memcpy(copy, ck, m * sizeof *copy);
    free(plan->checkpoints);
    plan->checkpoints = copy;
    plan->n_checkpoints = m;
    return REMAT_OK;
}

/* Appends [a, b] to arr; nonzero on failure. */
static int append_pair(json_t *arr, json_int_t a, json_int_t b)
{
    json_t *pair = json_pack("[I, I]", a, b);
    return pair == NULL || json_array_append_new(arr, pair) < 0;
}

static json_t *schedule_json(const struct remat_schedule *s)
{
    json_t *arr = json_array();
    for (size_t k = 0; arr != NULL && k < s->n_ops; k++) {
        uint8_t kind = s->ops[k].kind;
        json_t *op = json_pack("{s:s, s:I}", "op", remat_op_name(kind), "stage",
                               (json_int_t)s->ops[k].stage);
        if (op == NULL || json_array_append_new(arr, op) < 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

static int set_new(json_t *obj, const char *key, json_t *v)
{
    return v == NULL || json_object_set_new(obj, key, v) < 0;
}

json_t *remat_plan_to_json(const struct remat_profile *profile, const struct remat_plan *plan)
{
    json_t *root = json_object();
    if (root == NULL)
        return NULL;
    int bad = set_new(root, "algorithm", json_string(remat_algorithm_name(plan->algorithm)));
    if (plan->single_level) {
        json_t *ck = json_array();
        json_t *seg = json_array();
        json_t *torch = json_array();
        bad |= ck == NULL || seg == NULL || torch == NULL;
        size_t prev = 0;
        for (size_t k = 0; !bad && k <= plan->n_checkpoints; k++) {
            size_t end = k < plan->n_checkpoints ? plan->checkpoints[k] : plan->n_stages;
            if (k < plan->n_checkpoints)
                bad |= json_array_append_new(ck, json_integer((json_int_t)end)) < 0;
            /* Segment (prev, end] of stages is stages prev+1..end, modules
             * prev..end-1 of an nn.Sequential whose module k is stage k+1. */
            bad |= append_pair(seg, (json_int_t)prev + 1, (json_int_t)end);
            bad |= append_pair(torch, (json_int_t)prev, (json_int_t)end);
            prev = end;
        }
        bad |= set_new(root, "checkpoints", ck);
        bad |= set_new(root, "segments", seg);
        bad |= set_new(root, "torch_segments", torch);
    } else {
        bad |= set_new(root, "nested_segments", remat__nested_segments_json(profile, plan));
    }
    bad |= set_new(root, "objective",
                   json_pack("{s:s, s:I}", "model", remat_model_name(plan->objective_model),
                             "value", (json_int_t)plan->objective_value));
    bad |= set_new(root, "peak_bytes", json_integer(plan->peak_bytes));
    bad |= set_new(root, "store_all_peak_bytes", json_integer(plan->store_all_peak_bytes));
    bad |= set_new(root, "recompute_ms", json_real(plan->recompute_ms));
    bad |= set_new(root, "total_ms", json_real(plan->total_ms));
    if (plan->algorithm == REMAT_ALG_MIN_TIME) {
        bad |= set_new(root, "budget_bytes", json_integer(plan->budget_bytes));
        bad |= set_new(root, "optimality_gap", json_real(plan->optimality_gap));
    }
    bad |= set_new(root, "schedule", schedule_json(&plan->schedule));
    bad |= set_new(root, "exports", remat__plan_exports_json(profile, plan));
    if (bad) {
        json_decref(root);
        return NULL;
    }
    return root;
}
