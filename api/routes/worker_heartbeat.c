/* POST /v1/worker/jobs/{id}/heartbeat: renew the lease and record progress;
 * 409 tells the worker to abandon the job. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "worker_common.h"
#include "rematx/real.h"

/* What the worker is doing: "activity", or "phase", its deprecated name
 * (workers of remat 0.1 send it; "phase" means an op index everywhere else
 * in remat).  Both may come if they agree.  The progress kept has both,
 * so that readers of either name see it.  Returns 0, or -1 after the 400. */
static int activity(struct rematd_request *r, json_t *pr)
{
    json_t *a = json_object_get(pr, "activity"), *ph = json_object_get(pr, "phase");
    const char *which = a ? "/progress/activity" : "/progress/phase";
    json_t *v = a ? a : ph;
    const char *s = v ? json_string_value(v) : "measuring";
    if (!s || (strcmp(s, "measuring") && strcmp(s, "validating") && strcmp(s, "building") &&
               strcmp(s, "fetching"))) {
        rematd_req_problem(r, 400, "validation", which,
                           "%s is measuring, validating, building or fetching", which + 10);
        return -1;
    }
    if (a && ph && !json_equal(a, ph)) {
        rematd_req_problem(r, 400, "validation", "/progress/phase",
                           "phase is the old name of activity: give one, or both equal");
        return -1;
    }
    if (v) {
        json_t *copy = json_string(s); /* s dies with the member it replaces */
        json_object_set(pr, "activity", copy);
        json_object_set(pr, "phase", copy);
        json_decref(copy);
    }
    return 0;
}

static enum rematd_handled heartbeat(struct rematd_request *r)
{
    static const char *const fields[] = {"lease_id", "progress", NULL};
    const char *lease_id = rematd_worker_body(r, fields);
    if (!lease_id)
        return REMATD_HANDLED;
    json_t *pr = json_object_get(r->json, "progress");
    char *text = NULL;
    if (pr) {
        static const char *const pf[] = {"stage", "stages", "activity", "phase", NULL};
        if (!json_is_object(pr)) {
            rematd_req_problem(r, 400, "validation", "/progress", "progress is an object");
            return REMATD_HANDLED;
        }
        if (rematd_req_reject_unknown(r, pr, "/progress", pf) < 0)
            return REMATD_HANDLED;
        json_t *k = json_object_get(pr, "stage"), *n = json_object_get(pr, "stages");
        if ((k && (!json_is_integer(k) || json_integer_value(k) < 0)) ||
            (n && (!json_is_integer(n) || json_integer_value(n) < 0)) ||
            (k && n && json_integer_value(k) > json_integer_value(n))) {
            rematd_req_problem(r, 400, "validation",
                               k && !json_is_integer(k) ? "/progress/stage" : "/progress/stages",
                               "stage and stages are integers with 0 <= stage <= stages");
            return REMATD_HANDLED;
        }
        if (activity(r, pr) < 0)
            return REMATD_HANDLED;
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
