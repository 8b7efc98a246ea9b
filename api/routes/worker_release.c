/* POST /v1/worker/jobs/{id}/release: a worker shutting down gives its job
 * back; the attempt is not counted. */
#include "config.h"

#include "worker_common.h"

static enum rematd_handled release(struct rematd_request *r)
{
    static const char *const fields[] = {"lease_id", NULL};
    const char *lease_id = rematd_worker_body(r, fields);
    if (!lease_id)
        return REMATD_HANDLED;
    enum rematd_store_result rc = rematd_store_release_job(r->srv->store, r->id, lease_id);
    rematd_worker_answer(r, rc, NULL);
    return REMATD_HANDLED;
}

const struct rematd_route rematd_route_worker_release = {.method = "POST",
                                                         .pattern = "/v1/worker/jobs/{id}/release",
                                                         .name = "worker_release",
                                                         .auth = REMATD_AUTH_WORKER,
                                                         .handler = release};
