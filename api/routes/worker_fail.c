/* POST /v1/worker/jobs/{id}/fail: a retryable failure puts the job back in
 * the queue (an attempt counted, failed after max attempts); otherwise it
 * is failed now with the reason. */
#include "config.h"

#include "worker_common.h"

static enum rematd_handled fail(struct rematd_request *r)
{
    static const char *const fields[] = {"lease_id", "reason", "retryable", NULL};
    const char *lease_id = rematd_worker_body(r, fields);
    if (!lease_id)
        return REMATD_HANDLED;
    json_t *reason = json_object_get(r->json, "reason");
    json_t *retry = json_object_get(r->json, "retryable");
    if (!json_is_string(reason) || json_string_length(reason) == 0 ||
        json_string_length(reason) > 4096) {
        rematd_req_problem(r, 400, "validation", "/reason", "reason is a string of 1..4096 bytes");
        return REMATD_HANDLED;
    }
    if (retry && !json_is_boolean(retry)) {
        rematd_req_problem(r, 400, "validation", "/retryable", "retryable is true or false");
        return REMATD_HANDLED;
    }
    enum rematd_store_result rc = rematd_store_fail_job(
        r->srv->store, r->id, lease_id, json_string_value(reason), retry && json_is_true(retry));
    rematd_worker_answer(r, rc, NULL);
    return REMATD_HANDLED;
}

const struct rematd_route rematd_route_worker_fail = {.method = "POST",
                                                      .pattern = "/v1/worker/jobs/{id}/fail",
                                                      .name = "worker_fail",
                                                      .auth = REMATD_AUTH_WORKER,
                                                      .handler = fail};
