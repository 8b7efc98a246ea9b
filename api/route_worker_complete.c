/* POST /v1/worker/jobs/{id}/complete: store the result once per lease.  A
 * profile job's result must be a valid remat.profile/v1, checked here so a
 * broken measurement never becomes a done job. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "plan_common.h"
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
    char kind[16];
    enum rematd_store_result got = rematd_store_job_kind(r->srv->store, r->id, kind);
    if (got != REMATD_STORE_OK) {
        rematd_worker_answer(r, got, NULL);
        return REMATD_HANDLED;
    }
    if (strcmp(kind, "profile") == 0) {
        struct remat_error err = {0};
        struct remat_profile *p = remat_profile_from_json(res, "/result", &err);
        if (!p) {
            rematd_answer_remat_error(r, err.code ? err.code : REMAT_EINVAL, &err, NULL);
            return REMATD_HANDLED;
        }
        remat_profile_free(p);
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
