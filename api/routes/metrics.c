/* GET /metrics: Prometheus text exposition (metrics.c). */
#include "config.h"

#include "http/http.h"

static enum rematd_handled metrics(struct rematd_request *r)
{
    size_t len = 0;
    char *text = rematd_metrics_render(r->srv, &len);
    if (!text) {
        rematd_req_problem(r, 500, "internal", NULL, "out of memory");
        return REMATD_HANDLED;
    }
    rematd_req_text(r, 200, "text/plain; version=0.0.4; charset=utf-8", text, len, 0);
    return REMATD_HANDLED;
}

const struct rematd_route rematd_route_metrics = {.method = "GET",
                                                  .pattern = "/metrics",
                                                  .name = "metrics",
                                                  .health_port = 1,
                                                  .handler = metrics};
