/* GET /readyz: readiness.  200 when the store answers and the server is not
 * draining; 503 from SIGTERM on, so the load balancer stops sending. */
#include "config.h"

#include "http/http.h"
#include "store.h"

static enum rematd_handled readyz(struct rematd_request *r)
{
    if (atomic_load(&r->srv->draining)) {
        rematd_req_problem(r, 503, "unavailable", NULL, "shutting down");
        return REMATD_HANDLED;
    }
    if (rematd_store_ready(r->srv->store) != REMATD_STORE_OK) {
        rematd_req_problem(r, 503, "unavailable", NULL, "the store does not answer");
        return REMATD_HANDLED;
    }
    rematd_req_json(r, 200,
                    json_pack("{s:s, s:{s:s}}", "status", "ready", "checks", "store", "ok"));
    return REMATD_HANDLED;
}

const struct rematd_route rematd_route_readyz = {
    .method = "GET", .pattern = "/readyz", .name = "readyz", .health_probe = 1, .handler = readyz};
