/* GET /readyz: readiness.  200 when the store answers, the server is not
 * draining and, with supervised workers (--workers), at least one of them
 * is alive; 503 from SIGTERM on, so the load balancer stops sending, and
 * while every supervised worker is down (jobs would wait unanswered). */
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
    int supervised = atomic_load(&r->srv->workers.supervised);
    int alive = atomic_load(&r->srv->workers.alive);
    if (supervised > 0 && alive == 0) {
        rematd_req_header(r, "Retry-After", "5");
        rematd_req_problem(r, 503, "unavailable", NULL,
                           "no worker is alive: the %d supervised (--workers) are restarting "
                           "(%ld exits, %ld crashes since start)",
                           supervised, atomic_load(&r->srv->workers.exits),
                           atomic_load(&r->srv->workers.crashes));
        return REMATD_HANDLED;
    }
    json_t *checks = json_pack("{s:s}", "store", "ok");
    if (supervised > 0 && checks)
        json_object_set_new(checks, "workers", json_sprintf("%d of %d alive", alive, supervised));
    rematd_req_json(r, 200, json_pack("{s:s, s:o}", "status", "ready", "checks", checks));
    return REMATD_HANDLED;
}

const struct rematd_route rematd_route_readyz = {.method = "GET",
                                                 .pattern = "/readyz",
                                                 .name = "readyz",
                                                 .health_probe = 1,
                                                 .health_port = 1,
                                                 .handler = readyz};
