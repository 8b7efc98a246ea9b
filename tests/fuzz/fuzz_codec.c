/* fuzz_codec.c - rematd's stored plan record (api/plan_codec.c) on any
 * bytes: a record is refused or decoded, never a crash; a decoded one is
 * what GET /v1/plans/{id} and the timeline make of it (remat_plan_dumps,
 * the traced replay of its schedule) without a crash, and its encoding
 * decodes to the same profile and plan and encodes again to the same
 * bytes. */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "fuzz_check.h"
#include "plan_codec.h"
#include "remat.h"

static int same_double(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct remat_profile *p = NULL;
    struct remat_plan plan;
    if (rematd_plan_decode(data, size, &p, &plan) < 0) {
        FUZZ_CHECK(p == NULL && plan.schedule.ops == NULL && plan.checkpoints == NULL,
                   "a refused record left something behind");
        return 0;
    }
    FUZZ_CHECK(remat_profile_validate(p, NULL) == REMAT_OK, "a decoded profile does not validate");
    char *text = remat_plan_dumps(p, &plan, NULL);
    free(text);
    struct remat_sim sim = {0};
    struct remat_error err = {0};
    if (remat_simulate(p, REMAT_MODEL_TRACED, &plan.schedule, 1, &sim, &err) == REMAT_OK)
        FUZZ_CHECK(sim.timeline != NULL && sim.n_phases == plan.schedule.n_ops,
                   "a replay without its timeline");
    remat_sim_clear(&sim);
    size_t len = 0, len2 = 0;
    unsigned char *enc = rematd_plan_encode(p, &plan, &len);
    FUZZ_CHECK(enc != NULL, "encode failed");
    struct remat_profile *p2 = NULL;
    struct remat_plan plan2;
    FUZZ_CHECK(rematd_plan_decode(enc, len, &p2, &plan2) == 0, "its own encoding refused");
    FUZZ_CHECK(p2->n_stages == p->n_stages && p2->input_bytes == p->input_bytes, "profile changed");
    for (size_t i = 0; i < p->n_stages; i++) {
        const struct remat_stage *a = &p->stages[i], *b = &p2->stages[i];
        FUZZ_CHECK(a->out_bytes == b->out_bytes && a->saved_bytes == b->saved_bytes &&
                       a->fwd_tmp_bytes == b->fwd_tmp_bytes &&
                       a->bwd_tmp_bytes == b->bwd_tmp_bytes && a->param_bytes == b->param_bytes &&
                       same_double(a->fwd_ms, b->fwd_ms) && same_double(a->bwd_ms, b->bwd_ms),
                   "stage %zu changed", i + 1);
    }
    FUZZ_CHECK(
        plan2.algorithm == plan.algorithm && plan2.objective_model == plan.objective_model &&
            plan2.single_level == plan.single_level &&
            plan2.objective_value == plan.objective_value && plan2.peak_bytes == plan.peak_bytes &&
            plan2.store_all_peak_bytes == plan.store_all_peak_bytes &&
            same_double(plan2.recompute_ms, plan.recompute_ms) &&
            same_double(plan2.total_ms, plan.total_ms) && plan2.budget_bytes == plan.budget_bytes &&
            plan2.min_budget_bytes == plan.min_budget_bytes,
        "plan fields changed");
    FUZZ_CHECK(
        plan2.n_checkpoints == plan.n_checkpoints &&
            (plan.n_checkpoints == 0 || memcmp(plan2.checkpoints, plan.checkpoints,
                                               plan.n_checkpoints * sizeof *plan.checkpoints) == 0),
        "checkpoints changed");
    FUZZ_CHECK(plan2.schedule.n_ops == plan.schedule.n_ops, "schedule length changed");
    for (size_t k = 0; k < plan.schedule.n_ops; k++)
        FUZZ_CHECK(plan2.schedule.ops[k].stage == plan.schedule.ops[k].stage &&
                       plan2.schedule.ops[k].kind == plan.schedule.ops[k].kind,
                   "op %zu changed", k);
    unsigned char *enc2 = rematd_plan_encode(p2, &plan2, &len2);
    FUZZ_CHECK(enc2 != NULL && len2 == len && memcmp(enc, enc2, len) == 0,
               "encoding is not stable");
    free(enc);
    free(enc2);
    remat_profile_free(p2);
    remat_plan_clear(&plan2);
    remat_profile_free(p);
    remat_plan_clear(&plan);
    return 0;
}
