/* POST /v1/worker/jobs/{id}/complete: store the result once per lease.  The
 * result is checked against the job it answers (worker_check.h): a profile
 * for another model, batch, dtype, device or stage count, or a validation
 * result that is malformed or measures another plan, is refused (400) and
 * the job stays leased, so a broken or forged measurement never becomes a
 * done job.  One refusal also fails the job: a profile of an uploaded model
 * whose stage count is not the one rematd recorded for the model at upload
 * (the archive run was not the one stored). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_common.h"
#include "worker_check.h"
#include "worker_common.h"
#include "rematx/real.h"

/* A profile job on an uploaded model that lists no stages runs the
 * module's top-level children, which rematd counted at upload: the count
 * joins spec (REMATD_RECORDED_STAGES) for the check.  1 when it did. */
static int recorded_stages(struct rematd_request *r, json_t *spec)
{
    const char *model_id = json_string_value(json_object_get(spec, "model_id"));
    if (!model_id || json_array_size(json_object_get(spec, "stages")) > 0)
        return 0;
    struct rematd_model m;
    if (rematd_store_get_model(r->srv->store, model_id, &m) != REMATD_STORE_OK)
        return 0;
    json_t *meta = m.meta ? json_loads(m.meta, 0, NULL) : NULL;
    json_int_t n = json_integer_value(json_object_get(json_object_get(meta, "stages"), "count"));
    json_decref(meta);
    rematd_model_clear(&m);
    return n > 0 && json_object_set_new(spec, REMATD_RECORDED_STAGES, json_integer(n)) == 0;
}

static enum rematd_handled complete(struct rematd_request *r)
{
    static const char *const fields[] = {"lease_id", "result", NULL};
    const char *lease_id = rematd_worker_body(r, fields);
    if (!lease_id)
        return REMATD_HANDLED;
    json_t *res = json_object_get(r->json, "result");
    if (!json_is_object(res)) {
        rematd_req_problem(r, 400, "validation", "/result", "result is an object");
        return REMATD_HANDLED;
    }
    /* The lease first: only its holder's result is read at all, and a
     * worker whose lease is gone is told to abandon the job (409) whatever
     * it sends.  Renewing is the check (a completing worker is alive). */
    double until;
    enum rematd_store_result got =
        rematd_store_renew_lease(r->srv->store, r->id, lease_id, NULL, &until);
    if (got != REMATD_STORE_OK) {
        rematd_worker_answer(r, got, NULL);
        return REMATD_HANDLED;
    }
    struct rematd_job job = {0};
    got = rematd_store_get_job(r->srv->store, r->id, &job);
    if (got != REMATD_STORE_OK) {
        rematd_job_clear(&job);
        rematd_worker_answer(r, got, NULL);
        return REMATD_HANDLED;
    }
    json_t *spec = job.spec ? json_loads(job.spec, 0, NULL) : NULL;
    int recorded = strcmp(job.kind, "profile") == 0 && recorded_stages(r, spec);
    struct remat_error err = {0};
    int checked = rematd_check_result(job.kind, spec, res, &err);
    json_decref(spec);
    rematd_job_clear(&job);
    if (checked != REMAT_OK) {
        /* The archive the worker ran is not the one rematd stored (a
         * poisoned cache, or an archive read two ways): no attempt on any
         * worker is worth more, and the job says why. */
        if (recorded && strcmp(err.pointer, "/result/stages") == 0) {
            char reason[600];
            snprintf(reason, sizeof reason, "the worker's result was refused: %s", err.message);
            rematd_store_fail_job(r->srv->store, r->id, lease_id, reason, 0);
        }
        rematd_answer_remat_error(r, checked, &err, NULL);
        return REMATD_HANDLED;
    }
    char *text = rematx_json_dumps(res, JSON_COMPACT);
    enum rematd_store_result rc =
        text ? rematd_store_complete_job(r->srv->store, r->id, lease_id, text) : REMATD_STORE_ERROR;
    free(text);
    rematd_worker_answer(r, rc, NULL);
    return REMATD_HANDLED;
}

const struct rematd_route rematd_route_worker_complete = {.method = "POST",
                                                          .pattern =
                                                              "/v1/worker/jobs/{id}/complete",
                                                          .name = "worker_complete",
                                                          .auth = REMATD_AUTH_WORKER,
                                                          .handler = complete};
