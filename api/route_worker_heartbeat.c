/* POST /v1/worker/jobs/{id}/heartbeat: renew the lease and record progress;
 * 409 tells the worker to abandon the job. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "worker_common.h"
#include "rematx/real.h"

static enum rematd_handled heartbeat(struct rematd_request *r)
{
    static const char *const fields[] = {"lease_id", "progress", NULL};
    const char *lease_id = rematd_worker_body(r, fields);
    if (!lease_id)
        return REMATD_HANDLED;
    json_t *pr = json_object_get(r->json, "progress");
    char *text = NULL;
    if (pr) {
        static const char *const pf[] = {"stage", "stages", "phase", NULL};
        if (!json_is_object(pr)) {
            rematd_req_problem(r, 400, "validation", "/progress", "progress is an object");
            return REMATD_HANDLED;
        }
        if (rematd_req_reject_unknown(r, pr, "/progress", pf) < 0)
            return REMATD_HANDLED;
        json_t *k = json_object_get(pr, "stage"), *n = json_object_get(pr, "stages");
        json_t *ph = json_object_get(pr, "phase");
        if ((k && (!json_is_integer(k) || json_integer_value(k) < 0)) ||
            (n && (!json_is_integer(n) || json_integer_value(n) < 0)) ||
            (k && n && json_integer_value(k) > json_integer_value(n))) {
            rematd_req_problem(r, 400, "validation",
                               k && !json_is_integer(k) ? "/progress/stage" : "/progress/stages",
                               "stage and stages are integers with 0 <= stage <= stages");
            return REMATD_HANDLED;
        }
        const char *p = ph ? json_string_value(ph) : "measuring";
        if (!p || (strcmp(p, "measuring") && strcmp(p, "validating") && strcmp(p, "building"))) {
            rematd_req_problem(r, 400, "validation", "/progress/phase",
                               "phase is measuring, validating or building");
            return REMATD_HANDLED;
        }
        text = rematx_json_dumps(pr, JSON_COMPACT);
    }
    double until = 0;
    enum rematd_store_result rc =
        rematd_store_renew_lease(r->srv->store, r->id, lease_id, text, &until);
    free(text);
    json_t *out = NULL;
    if (rc == REMATD_STORE_OK) {
        char exp[32];
        rematd_rfc3339(until, exp);
        out = json_pack("{s:s, s:i}", "lease_expires_at", exp, "lease_seconds",
                        (int)r->srv->cfg.lease_seconds);
        if (!out)
            rc = REMATD_STORE_ERROR;
    }
    rematd_worker_answer(r, rc, out);
    return REMATD_HANDLED;
}

const struct rematd_route rematd_route_worker_heartbeat = {.method = "POST",
                                                           .pattern =
                                                               "/v1/worker/jobs/{id}/heartbeat",
                                                           .name = "worker_heartbeat",
                                                           .auth = REMATD_AUTH_WORKER,
                                                           .handler = heartbeat};
