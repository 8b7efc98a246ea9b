/* fuzz_solve.c - every solver on fuzzed small chains (1..10 stages), with
 * byte counts from tiny to near the 2^60 limit so that sums overflow only
 * when combined.  Each answer is re-simulated: its schedule's traced peak
 * is the plan's peak_bytes, its objective is what the simulator gives in
 * the objective's model, store_all_peak_bytes is store-all's peak, and
 * its total time is no less than one forward and one backward of every
 * stage.  min-peak's peak is never above another single-level planner's,
 * and min-time with min-peak's peak as its budget finds a plan within it.
 * One plan per input, picked by the input, is also rendered both ways
 * (the JSON tree and remat_plan_dumps) and the two compared: rendering
 * every plan cost more than all the solvers together. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_check.h"
#include "remat.h"
#include "rematx/real.h"

struct input {
    const uint8_t *p;
    size_t n;
};

static unsigned byte(struct input *in)
{
    if (in->n == 0)
        return 0;
    in->n--;
    return *in->p++;
}

static struct remat_profile *chain(struct input *in)
{
    size_t n = 1 + byte(in) % 10;
    /* The scale of the byte counts: unit, KiB, GiB, and 2^52 (sums of a
     * few stages near the 2^60 limit). */
    static const int shifts[] = {0, 10, 30, 52};
    int shift = shifts[byte(in) % 4];
    struct remat_profile *p = remat_profile_new(n, NULL);
    FUZZ_CHECK(p != NULL, "remat_profile_new(%zu)", n);
    p->input_bytes = (int64_t)byte(in) << shift;
    for (size_t i = 0; i < n; i++) {
        struct remat_stage *s = &p->stages[i];
        s->out_bytes = (int64_t)byte(in) << shift;
        s->saved_bytes = s->out_bytes + ((int64_t)byte(in) << shift);
        s->fwd_tmp_bytes = (int64_t)(byte(in) % 64) << shift;
        s->fwd_grad_tmp_bytes = (int64_t)(byte(in) % 64) << shift;
        s->bwd_tmp_bytes = (int64_t)(byte(in) % 64) << shift;
        s->bwd_freed_bytes = ((int64_t)byte(in) << shift) % (s->saved_bytes + s->out_bytes + 1);
        s->param_bytes = (int64_t)(byte(in) % 16) << shift;
        s->fwd_ms = byte(in) / 4.0;
        s->bwd_ms = byte(in) / 4.0;
    }
    return p;
}

/* The simulator's word on a plan; checks it and returns its traced peak. */
struct expect {
    int64_t store_all_peak; /* store-all's traced peak, simulated once */
    double one_pass_ms;     /* one forward and one backward of every stage */
    int render;             /* the algorithm whose plan is also rendered */
};

static int64_t check_plan(const struct remat_profile *p, const struct remat_plan *plan,
                          const struct expect *e, int alg_id, const char *alg)
{
    struct remat_error err = {0};
    struct remat_sim sim = {0};
    int rc = remat_simulate(p, REMAT_MODEL_TRACED, &plan->schedule, 0, &sim, &err);
    FUZZ_CHECK(rc == REMAT_OK, "%s: its own schedule does not replay: %s", alg, err.message);
    FUZZ_CHECK(sim.peak_bytes == plan->peak_bytes, "%s: peak %lld, simulated %lld", alg,
               (long long)plan->peak_bytes, (long long)sim.peak_bytes);
    FUZZ_CHECK(sim.total_ms >= e->one_pass_ms * (1 - 1e-12) - 1e-9,
               "%s: total %g below one pass %g", alg, sim.total_ms, e->one_pass_ms);
    remat_sim_clear(&sim);
    if (plan->single_level) {
        for (size_t k = 0; k < plan->n_checkpoints; k++)
            FUZZ_CHECK(plan->checkpoints[k] >= 1 && plan->checkpoints[k] < p->n_stages &&
                           (k == 0 || plan->checkpoints[k] > plan->checkpoints[k - 1]),
                       "%s: checkpoint %zu out of order or range", alg, k);
        rc = remat_simulate_checkpoints(p, plan->objective_model, plan->checkpoints,
                                        plan->n_checkpoints, 0, &sim, &err);
        FUZZ_CHECK(rc == REMAT_OK, "%s: its checkpoints do not replay: %s", alg, err.message);
        FUZZ_CHECK(sim.peak_bytes == plan->objective_value, "%s: objective %lld, simulated %lld",
                   alg, (long long)plan->objective_value, (long long)sim.peak_bytes);
        remat_sim_clear(&sim);
    }
    FUZZ_CHECK(e->store_all_peak == plan->store_all_peak_bytes,
               "%s: store_all_peak_bytes %lld, store-all simulated %lld", alg,
               (long long)plan->store_all_peak_bytes, (long long)e->store_all_peak);
    if (alg_id != e->render)
        return plan->peak_bytes;
    /* Both renderings of the answer exist and agree (reals printed
     * shortest, as every remat output prints them). */
    json_t *j = remat_plan_to_json(p, plan);
    char *a = j ? rematx_json_dumps(j, JSON_COMPACT) : NULL;
    char *b = remat_plan_dumps(p, plan, NULL);
    FUZZ_CHECK(a && b && strcmp(a, b) == 0, "%s: remat_plan_dumps differs from the tree", alg);
    free(a);
    free(b);
    json_decref(j);
    return plan->peak_bytes;
}

static int solve(const struct remat_profile *p, const struct remat_options *o,
                 struct remat_plan *plan, const char *alg)
{
    struct remat_error err = {0};
    memset(plan, 0, sizeof *plan);
    int rc = remat_solve(p, o, plan, &err);
    FUZZ_CHECK(rc == REMAT_OK || rc == REMAT_EINVAL || rc == REMAT_ELIMIT ||
                   rc == REMAT_EINFEASIBLE || rc == REMAT_EUNSUPPORTED,
               "%s: code %d (%s)", alg, rc, err.message);
    FUZZ_CHECK(rc == REMAT_OK || err.message[0], "%s: code %d without a message", alg, rc);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct input in = {data, size};
    unsigned segments = byte(&in), slots = byte(&in);
    struct remat_profile *p = chain(&in);
    if (remat_profile_validate(p, NULL) != REMAT_OK) {
        /* Over the limits (the sum past 2^60): every solver refuses it. */
        struct remat_options o;
        remat_options_init(&o);
        struct remat_plan plan;
        FUZZ_CHECK(solve(p, &o, &plan, "min-peak") != REMAT_OK, "solved an invalid profile");
        remat_plan_clear(&plan);
        remat_profile_free(p);
        return 0;
    }
    struct expect e = {0};
    /* After the chain, so that the corpus's chains read as they did. */
    e.render = (int)(byte(&in) % REMAT_ALG_COUNT);
    for (size_t i = 0; i < p->n_stages; i++)
        e.one_pass_ms += p->stages[i].fwd_ms + p->stages[i].bwd_ms;
    struct remat_error err = {0};
    struct remat_sim sim = {0};
    int src = remat_simulate_checkpoints(p, REMAT_MODEL_TRACED, NULL, 0, 0, &sim, &err);
    /* A store-all peak past the limit is refused, as min-peak refuses it
     * below; otherwise it is every plan's store_all_peak_bytes. */
    FUZZ_CHECK(src == REMAT_OK || src == REMAT_ELIMIT, "store-all does not simulate: %s",
               err.message);
    e.store_all_peak = sim.peak_bytes;
    remat_sim_clear(&sim);
    struct remat_options o;
    remat_options_init(&o);
    o.algorithm = REMAT_ALG_MIN_PEAK;
    struct remat_plan best;
    int rc = solve(p, &o, &best, "min-peak");
    if (rc == REMAT_ELIMIT) {
        /* A valid profile whose peak (weights and their gradients, saved
         * tensors and temporaries together) passes 2^60: refused with a
         * reason, not overflowed. */
        remat_plan_clear(&best);
        remat_profile_free(p);
        return 0;
    }
    FUZZ_CHECK(rc == REMAT_OK, "min-peak refused a valid profile (%d)", rc);
    FUZZ_CHECK(src == REMAT_OK, "store-all refused (%d) where min-peak solved", src);
    int64_t least = check_plan(p, &best, &e, REMAT_ALG_MIN_PEAK, "min-peak");
    remat_plan_clear(&best);
    for (int a = 0; a < REMAT_ALG_COUNT; a++) {
        if (a == REMAT_ALG_MIN_PEAK || a == REMAT_ALG_MIN_TIME)
            continue;
        remat_options_init(&o);
        o.algorithm = (enum remat_algorithm)a;
        if (a == REMAT_ALG_UNIFORM)
            o.segments = 1 + segments % (p->n_stages + 1);
        struct remat_plan plan;
        const char *name = remat_algorithm_name((enum remat_algorithm)a);
        if (solve(p, &o, &plan, name) == REMAT_OK) {
            int64_t peak = check_plan(p, &plan, &e, a, name);
            FUZZ_CHECK(plan.single_level, "%s: not single-level", name);
            FUZZ_CHECK(least <= peak, "min-peak %lld above %s's %lld", (long long)least, name,
                       (long long)peak);
        }
        remat_plan_clear(&plan);
    }
    /* min-time within min-peak's peak: a plan that fits. */
    remat_options_init(&o);
    o.algorithm = REMAT_ALG_MIN_TIME;
    o.budget_bytes = least;
    o.mem_slots = 2 + slots % 64;
    struct remat_plan mt;
    rc = solve(p, &o, &mt, "min-time");
    FUZZ_CHECK(rc == REMAT_OK, "min-time infeasible at min-peak's peak %lld (least budget %lld)",
               (long long)least, (long long)mt.min_budget_bytes);
    FUZZ_CHECK(check_plan(p, &mt, &e, REMAT_ALG_MIN_TIME, "min-time") <= least,
               "min-time above its budget");
    remat_plan_clear(&mt);
    remat_profile_free(p);
    return 0;
}
