/* POST /v1/worker/lease: hand the oldest queued job that matches the
 * worker's kinds and devices to it for lease_seconds; 204 when none. */
#include "config.h"

#include <string.h>

#include "http/http.h"
#include "store.h"

#define MAX_LIST 64

/* Checks the array v and lists its strings in out, ending with NULL. */
static int string_list(struct rematd_request *r, json_t *v, const char *ptr, int kinds,
                       const char *out[MAX_LIST + 1])
{
    if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > MAX_LIST) {
        rematd_req_problem(r, 400, "validation", ptr, "a non-empty array of strings");
        return -1;
    }
    size_t i;
    json_t *s;
    json_array_foreach (v, i, s) {
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
        out[i] = t;
    }
    out[json_array_size(v)] = NULL;
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
    static const char *const all[] = {"profile", "validation", NULL};
    const char *kinds[MAX_LIST + 1], *devices[MAX_LIST + 1];
    json_t *k = json_object_get(body, "kinds");
    if (k && string_list(r, k, "/kinds", 1, kinds) < 0)
        return REMATD_HANDLED;
    if (string_list(r, json_object_get(body, "devices"), "/devices", 0, devices) < 0)
        return REMATD_HANDLED;
    struct rematd_lease l;
    enum rematd_store_result rc =
        rematd_store_lease_job(r->srv->store, json_string_value(wid), k ? kinds : all, devices, &l);
    if (rc == REMATD_STORE_NOT_FOUND) {
        rematd_req_text(r, 204, NULL, (char *)"", 0, 1);
        return REMATD_HANDLED;
    }
    if (rc != REMATD_STORE_OK) {
        rematd_req_problem(r, 503, "unavailable", NULL, "the store did not answer");
        return REMATD_HANDLED;
    }
    char exp[32];
    rematd_rfc3339(l.lease_expires_at, exp);
    json_t *spec = json_loads(l.spec, 0, NULL);
    json_t *out = json_pack("{s:s, s:s, s:s, s:i, s:i, s:s, s:o}", "job_id", l.job_id, "lease_id",
                            l.lease_id, "kind", l.kind, "attempt", l.attempt, "lease_seconds",
                            (int)r->srv->cfg.lease_seconds, "lease_expires_at", exp, "spec",
                            spec ? spec : json_object());
    rematd_lease_clear(&l);
    if (!out) {
        /* The job stays leased: its lease expires and it is queued again. */
        rematd_req_problem(r, 500, "internal", NULL, "out of memory");
        return REMATD_HANDLED;
    }
    rematd_req_json(r, 200, out);
    return REMATD_HANDLED;
}

const struct rematd_route rematd_route_worker_lease = {.method = "POST",
                                                       .pattern = "/v1/worker/lease",
                                                       .name = "worker_lease",
                                                       .auth = REMATD_AUTH_WORKER,
                                                       .handler = lease};
