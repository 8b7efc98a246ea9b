/*
 * POST /v1/validations: queue a job that runs a plan on a device and
 * measures its peak against the prediction.  The body names a done profile
 * job and the plan: a stored plan_id, an explicit checkpoint list, or an
 * algorithm (with its options) solved here.  rematd builds the worker's
 * spec from the profile job (the spec of a lease, openapi.yaml).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs_common.h"
#include "plan_common.h"
#include "request_limits.h"

static const char *const fields[] = {"profile_id", "plan_id",      "checkpoints", "algorithm",
                                     "segments",   "budget_bytes", "model",       "mem_slots",
                                     "repeats",    "store_all",    "timeline",    NULL};

/* The single-level plan of an explicit checkpoint list, as plan JSON. */
static json_t *plan_of_checkpoints(struct rematd_request *r, const struct remat_profile *p,
                                   json_t *list)
{
    size_t n = json_array_size(list);
    if (!json_is_array(list) || n >= p->n_stages) {
        rematd_req_problem(r, 400, "validation", "/checkpoints",
                           "checkpoints is an array of at most n-1 stage indices");
        return NULL;
    }
    struct remat_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.checkpoints = calloc(n ? n : 1, sizeof *plan.checkpoints);
    if (!plan.checkpoints) {
        rematd_req_problem(r, 500, "internal", NULL, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(list, i);
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) >= (json_int_t)p->n_stages) {
            char ptr[48];
            snprintf(ptr, sizeof ptr, "/checkpoints/%zu", i);
            rematd_req_problem(r, 400, "validation", ptr, "a checkpoint is a stage index in 1..%zu",
                               p->n_stages - 1);
            free(plan.checkpoints);
            return NULL;
        }
        plan.checkpoints[i] = (size_t)json_integer_value(v);
    }
    plan.algorithm = REMAT_ALG_STORE_ALL;
    plan.n_stages = p->n_stages;
    plan.n_checkpoints = n;
    plan.single_level = 1;
    plan.objective_model = REMAT_MODEL_TRACED;
    remat_schedule_init(&plan.schedule);
    struct remat_error err = {0};
    struct remat_sim sim = {0}, base = {0};
    int rc = remat_schedule_from_checkpoints(p, plan.checkpoints, n, &plan.schedule, &err);
    if (rc == REMAT_OK)
        rc = remat_simulate(p, REMAT_MODEL_TRACED, &plan.schedule, 0, &sim, &err);
    if (rc == REMAT_OK)
        rc = remat_simulate_checkpoints(p, REMAT_MODEL_TRACED, NULL, 0, 0, &base, &err);
    if (rc != REMAT_OK) {
        if (strncmp(err.pointer, "/checkpoints", 12) != 0 && !err.pointer[0])
            snprintf(err.pointer, sizeof err.pointer, "/checkpoints");
        rematd_answer_remat_error(r, rc, &err, NULL);
        remat_plan_clear(&plan);
        return NULL;
    }
    plan.objective_value = plan.peak_bytes = sim.peak_bytes;
    plan.store_all_peak_bytes = base.peak_bytes;
    plan.recompute_ms = sim.recompute_ms;
    plan.total_ms = sim.total_ms;
    remat_sim_clear(&sim);
    remat_sim_clear(&base);
    json_t *j = remat_plan_to_json(p, &plan);
    remat_plan_clear(&plan);
    if (j)
        json_object_set_new(j, "algorithm", json_string("checkpoints"));
    return j;
}

/* Whether the stored plan plan_id was made for this profile: made from the
 * same profile job, or from a profile with the same sizes and times stage
 * by stage (what the stored record keeps).  A plan of another model would
 * be run on this one and its prediction compared with the wrong thing.
 * Returns 1, or 0 after answering. */
static int plan_fits_profile(struct rematd_request *r, const char *plan_id, const char *profile_id,
                             const struct remat_profile *profile)
{
    struct rematd_stored_plan sp;
    memset(&sp, 0, sizeof sp);
    enum rematd_store_result got = rematd_store_get_plan(r->srv->store, plan_id, &sp);
    if (got == REMATD_STORE_OK && !rematd_req_owns(r, sp.tenant)) {
        rematd_stored_plan_clear(&sp);
        got = REMATD_STORE_NOT_FOUND; /* another tenant's: as if none */
    }
    if (got != REMATD_STORE_OK) {
        if (got == REMATD_STORE_NOT_FOUND)
            rematd_req_problem(r, 404, "not-found", "/plan_id", "no plan with this id");
        else
            rematd_req_problem(r, 503, "unavailable", "/plan_id", "the store did not answer");
        return 0;
    }
    int fits = 0;
    if (sp.profile_id[0]) {
        fits = strcmp(sp.profile_id, profile_id) == 0;
    } else if (sp.record) {
        struct remat_profile *p = NULL;
        struct remat_plan plan;
        if (rematd_plan_decode(sp.record, sp.record_len, &p, &plan) == 0) {
            fits = p->n_stages == profile->n_stages && p->input_bytes == profile->input_bytes;
            for (size_t i = 0; fits && i < p->n_stages; i++) {
                const struct remat_stage *a = &p->stages[i], *b = &profile->stages[i];
                fits = a->out_bytes == b->out_bytes && a->saved_bytes == b->saved_bytes &&
                       a->fwd_tmp_bytes == b->fwd_tmp_bytes &&
                       remat_stage_fwd_grad_tmp_bytes(a) == remat_stage_fwd_grad_tmp_bytes(b) &&
                       a->bwd_tmp_bytes == b->bwd_tmp_bytes &&
                       a->bwd_freed_bytes == b->bwd_freed_bytes &&
                       a->param_bytes == b->param_bytes && a->fwd_ms == b->fwd_ms &&
                       a->bwd_ms == b->bwd_ms;
            }
            remat_profile_free(p);
            remat_plan_clear(&plan);
        }
    }
    rematd_stored_plan_clear(&sp);
    if (!fits)
        rematd_req_problem(r, 422, "plan-profile-mismatch", "/plan_id",
                           "plan %s was not made for profile %s", plan_id, profile_id);
    return fits;
}

/* The request, read into r->json by create(). */
static void create_now(struct rematd_request *r)
{
    json_t *body = r->json;
    if (rematd_req_reject_unknown(r, body, "", fields) < 0)
        return;
    json_t *pid = json_object_get(body, "profile_id");
    if (!json_is_string(pid)) {
        rematd_req_problem(r, 400, "validation", "/profile_id",
                           "profile_id (a done profile job) is needed");
        return;
    }
    json_t *rep = json_object_get(body, "repeats");
    if (rep && (!json_is_integer(rep) || json_integer_value(rep) < 1 ||
                json_integer_value(rep) > REMATD_MAX_REPEATS)) {
        rematd_req_problem(r, 400, "validation", "/repeats", "repeats must be an integer in 1..%d",
                           REMATD_MAX_REPEATS);
        return;
    }
    /* "store_all": false runs the plan alone, without store-all beside it
     * (and without comparing gradients): what a device sized for the plan
     * but not for store-all can run. */
    json_t *sa = json_object_get(body, "store_all");
    if (sa && !json_is_boolean(sa)) {
        rematd_req_problem(r, 400, "validation", "/store_all", "store_all must be true or false");
        return;
    }
    /* The worker's per-op timeline, which GET /v1/plans/{id}/timeline.svg
     * draws over the prediction. */
    json_t *want_tl = json_object_get(body, "timeline");
    if (want_tl && !json_is_boolean(want_tl)) {
        rematd_req_problem(r, 400, "validation", "/timeline", "timeline is true or false");
        return;
    }
    json_t *plan_id = json_object_get(body, "plan_id");
    json_t *cks = json_object_get(body, "checkpoints");
    if (plan_id && cks) {
        rematd_req_problem(r, 400, "validation", "/checkpoints",
                           "give plan_id or checkpoints, not both");
        return;
    }
    if (plan_id || cks) {
        /* Solver options beside a plan that is already made would be
         * silently ignored: the request says two different things. */
        static const char *const solver[] = {"algorithm", "segments", "budget_bytes", "model",
                                             "mem_slots"};
        for (size_t i = 0; i < sizeof solver / sizeof solver[0]; i++)
            if (json_object_get(body, solver[i])) {
                char ptr[32];
                snprintf(ptr, sizeof ptr, "/%s", solver[i]);
                rematd_req_problem(r, 400, "validation", ptr,
                                   "%s solves a plan; with %s the plan is given already", solver[i],
                                   plan_id ? "plan_id" : "checkpoints");
                return;
            }
    }
    const char *id = json_string_value(pid);
    if (!rematd_is_id(id)) {
        rematd_req_problem(r, 400, "validation", "/profile_id",
                           "ids are 32 lowercase hexadecimal characters");
        return;
    }
    struct remat_profile *profile = rematd_profile_by_id(r, id, "/profile_id");
    if (!profile)
        return;
    /* The job again, for the spec it was measured with and the profile
     * as JSON (rematd_profile_by_id found it done). */
    struct rematd_job job;
    if (rematd_store_get_job(r->srv->store, id, &job) != REMATD_STORE_OK) {
        remat_profile_free(profile);
        rematd_req_problem(r, 503, "unavailable", NULL, "the store did not answer");
        return;
    }
    json_t *model_spec = json_loads(job.spec, 0, NULL);
    json_t *result = job.result ? json_loads(job.result, 0, NULL) : NULL;
    rematd_job_clear(&job);
    json_t *plan = NULL;
    if (plan_id) {
        char *pbody = NULL;
        int ok_id = json_is_string(plan_id) && rematd_is_id(json_string_value(plan_id));
        if (ok_id && !plan_fits_profile(r, json_string_value(plan_id), id, profile)) {
            remat_profile_free(profile);
            json_decref(model_spec);
            json_decref(result);
            return;
        }
        int got = ok_id ? rematd_plan_load(r, json_string_value(plan_id), &pbody) : 0;
        if (got == 0)
            rematd_req_problem(r, 404, "not-found", "/plan_id", "no plan with this id");
        else if (got < 0)
            rematd_req_problem(
                r, got == -2 ? 500 : 503, got == -2 ? "internal" : "unavailable", "/plan_id",
                got == -2 ? "the stored plan cannot be read" : "the store did not answer");
        else
            plan = json_loads(pbody, 0, NULL);
        free(pbody);
    } else if (cks) {
        plan = plan_of_checkpoints(r, profile, cks);
    } else {
        /* Solve here with the request's algorithm options. */
        json_t *sub = json_deep_copy(body);
        json_object_del(sub, "repeats");
        json_object_del(sub, "store_all");
        json_object_del(sub, "timeline");
        struct remat_profile *p2 = NULL;
        struct remat_options opts;
        json_t *oj = NULL;
        struct rematd_read_ctx ctx;
        struct rematd_problem prob = {0};
        rematd_read_ctx_init(&ctx, r);
        if (rematd_plan_request(&ctx, sub, &p2, &opts, &oj, &prob) < 0) {
            rematd_req_send_problem(r, &prob);
        } else {
            /* Under the bounds of every solve (plan_common.h): a deadline,
             * the memory estimate, cancellation. */
            struct remat_plan pl;
            if (rematd_plan_solve(r, p2, &opts, &pl) == 0) {
                plan = remat_plan_to_json(p2, &pl);
                remat_plan_clear(&pl);
            }
        }
        remat_profile_free(p2);
        json_decref(oj);
        json_decref(sub);
    }
    remat_profile_free(profile);
    if (!plan) {
        json_decref(model_spec);
        json_decref(result);
        if (!rematd_req_answered(r))
            rematd_req_problem(r, 500, "internal", NULL, "out of memory");
        return;
    }
    json_t *device = json_object_get(model_spec, "device");
    json_t *spec = json_pack("{s:o, s:o, s:o, s:O, s:I}", "model_spec", model_spec, "profile",
                             result, "plan", plan, "device", device ? device : json_null(),
                             "repeats", rep ? json_integer_value(rep) : (json_int_t)3);
    /* Which profile and plan it measures, for the pictures (the worker
     * reads neither). */
    int bad = !spec || json_object_set_new(spec, "profile_id", json_string(id)) < 0 ||
              (plan_id && json_object_set(spec, "plan_id", plan_id) < 0) ||
              (json_is_true(want_tl) && json_object_set_new(spec, "timeline", json_true()) < 0);
    if (bad) {
        json_decref(spec);
        rematd_req_problem(r, 500, "internal", NULL, "out of memory");
        return;
    }
    if (json_is_false(sa))
        json_object_set_new(spec, "store_all", json_false());
    char key[REMATD_ID_LEN + 16];
    snprintf(key, sizeof key, "profile:%s", id);
    rematd_queue_job_keyed(r, "validation", spec, key);
}

/* On a planning thread: the request with a solve (rematd_req_defer). */
static void create_job(struct rematd_request *r)
{
    create_now(r);
    rematd_req_end_job(r);
}

/* A request that names its plan (plan_id, checkpoints) is answered here; one
 * that asks for a plan to be solved goes to a planning thread, as POST
 * /v1/plans does with a slow solver, so that no polling thread stalls the
 * connections it holds for as long as --solve-timeout-ms. */
static enum rematd_handled create(struct rematd_request *r)
{
    json_t *body = rematd_req_body_json(r);
    if (!body)
        return REMATD_HANDLED;
    if (!json_object_get(body, "plan_id") && !json_object_get(body, "checkpoints"))
        return rematd_req_defer(r, create_job) < 0 ? REMATD_HANDLED : REMATD_SUSPENDED;
    create_now(r);
    return REMATD_HANDLED;
}

const struct rematd_route rematd_route_validations_create = {.method = "POST",
                                                             .pattern = "/v1/validations",
                                                             .name = "validations_create",
                                                             .auth = REMATD_AUTH_CLIENT,
                                                             .created_status = 202,
                                                             .handler = create};
