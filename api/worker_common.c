/* worker_common.c - lease checking and answers shared by the worker routes. */
#include "config.h"

#include <string.h>

#include "worker_common.h"

const char *rematd_worker_body(struct rematd_request *r, const char *const *allowed)
{
    json_t *body = rematd_req_body_json(r);
    if (!body)
        return NULL;
    if (rematd_req_reject_unknown(r, body, "", allowed) < 0)
        return NULL;
    json_t *l = json_object_get(body, "lease_id");
    if (!json_is_string(l) || !rematd_is_id(json_string_value(l))) {
        rematd_req_problem(r, 400, "validation", "/lease_id",
                           "lease_id (from the lease) is needed");
        return NULL;
    }
    return json_string_value(l);
}

void rematd_worker_answer(struct rematd_request *r, enum rematd_store_result rc, json_t *body)
{
    if (rc == REMATD_STORE_OK) {
        rematd_req_json(r, 200, body ? body : json_pack("{s:s}", "status", "ok"));
        return;
    }
    json_decref(body);
    if (rc == REMATD_STORE_CONFLICT)
        rematd_req_problem(
            r, 409, "lease-conflict", NULL,
            "the lease is stale or expired, or the job is no longer running; abandon it");
    else if (rc == REMATD_STORE_NOT_FOUND)
        rematd_req_problem(r, 404, "not-found", NULL, "no job with id %s", r->id);
    else
        rematd_req_problem(r, 503, "unavailable", NULL, "the store did not answer");
}
