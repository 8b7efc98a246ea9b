/* GET /healthz: liveness.  200 while the process and its event loop answer;
 * it depends on nothing else, so a slow store never restarts the pod. */
#include "config.h"

#include "http/http.h"

static enum rematd_handled healthz(struct rematd_request *r)
{
    static char ok[] = "{\"status\":\"ok\"}";
    rematd_req_text(r, 200, "application/json", ok, sizeof ok - 1, 1);
    return REMATD_HANDLED;
}

const struct rematd_route rematd_route_healthz = {.method = "GET",
                                                  .pattern = "/healthz",
                                                  .name = "healthz",
                                                  .health_probe = 1,
                                                  .health_port = 1,
                                                  .handler = healthz};
