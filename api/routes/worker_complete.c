/* POST /v1/worker/jobs/{id}/complete: store the result once per lease.  The
 * result is checked against the job it answers (worker_check.h): a profile
 * for another model, batch, dtype, device or stage count, or a validation
 * result that is malformed or measures another plan, is refused (400) and
 * the job stays leased, so a broken or forged measurement never becomes a
 * done job.  An uploaded model's stages, when its job lists none, are found
 * by the worker in the module's forward graph, which rematd does not read:
 * their count is not checked here. */
#include "config.h"

#include <stdlib.h>

#include "plan_common.h"
#include "worker_check.h"
#include "worker_common.h"
#include "rematx/real.h"

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
    struct remat_error err = {0};
    int checked = rematd_check_result(job.kind, spec, res, &err);
    json_decref(spec);
    rematd_job_clear(&job);
    if (checked != REMAT_OK) {
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
