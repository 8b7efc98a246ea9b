/* POST /v1/worker/lease: hand the oldest queued job that matches the
 * worker's kinds and devices to it for lease_seconds; 204 when none. */
#include "config.h"

#include <string.h>

#include "rematd.h"

static int string_list(struct rematd_request *r, json_t *v, const char *ptr, int kinds)
{
    if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > 64) {
        rematd_req_problem(r, 400, "validation", ptr, "a non-empty array of strings");
        return -1;
    }
    size_t i;
    json_t *s;
    json_array_foreach(v, i, s)
    {
        const char *t = json_string_value(s);
        int ok = t && (kinds ? strcmp(t, "profile") == 0 || strcmp(t, "validation") == 0
                             : strlen(t) < 32);
        if (!ok) {
            char p[48];
            snprintf(p, sizeof p, "%s/%zu", ptr, i);
            rematd_req_problem(r, 400, "validation", p,
                               kinds ? "kinds are profile or validation" : "a device name");
            return -1;
        }
    }
    return 0;
}

static enum rematd_handled lease(struct rematd_request *r)
{
    static const char *const fields[] = {"worker_id", "kinds", "devices", NULL};
    json_t *body = rematd_req_body_json(r);
    if (!body || rematd_req_reject_unknown(r, body, "", fields) < 0)
        return REMATD_HANDLED;
    json_t *wid = json_object_get(body, "worker_id");
    if (!json_is_string(wid) || json_string_length(wid) == 0 || json_string_length(wid) > 128) {
        rematd_req_problem(r, 400, "validation", "/worker_id",
                           "worker_id is a string of 1..128 bytes");
        return REMATD_HANDLED;
    }
    json_t *kinds = json_object_get(body, "kinds");
    json_t *all = NULL;
    if (!kinds)
        kinds = all = json_pack("[s,s]", "profile", "validation");
    else if (string_list(r, kinds, "/kinds", 1) < 0)
        return REMATD_HANDLED;
    json_t *devices = json_object_get(body, "devices");
    if (string_list(r, devices, "/devices", 0) < 0) {
        json_decref(all);
        return REMATD_HANDLED;
    }
    json_t *out = NULL;
    int rc = rematd_store_lease(r->srv->store, json_string_value(wid), kinds, devices, &out);
    json_decref(all);
    if (rc == 1) {
        rematd_req_text(r, 204, NULL, (char *)"", 0, 1);
    } else if (rc == 0) {
        rematd_req_json(r, 200, out);
    } else {
        rematd_req_problem(r, 503, "unavailable", NULL, "the store did not answer");
    }
    return REMATD_HANDLED;
}

const struct rematd_route rematd_route_worker_lease = {.method = "POST",
                                                       .pattern = "/v1/worker/lease",
                                                       .name = "worker_lease",
                                                       .auth = REMATD_AUTH_WORKER,
                                                       .handler = lease};
