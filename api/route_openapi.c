/* GET /openapi.yaml: the contract, embedded in the binary at build time. */
#include "config.h"

#include "rematd.h"

static enum rematd_handled openapi(struct rematd_request *r)
{
    rq_text(r, 200, "application/yaml", (char *)rematd_openapi_yaml, rematd_openapi_yaml_len, 1);
    return HANDLED;
}

const struct remat_route route_openapi = {
    .method = "GET", .pattern = "/openapi.yaml", .name = "openapi", .handler = openapi};
