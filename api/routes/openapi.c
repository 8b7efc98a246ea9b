/* GET /openapi.yaml: the contract, embedded in the binary at build time. */
#include "config.h"

#include "http/http.h"

static enum rematd_handled openapi(struct rematd_request *r)
{
    rematd_req_text(r, 200, "application/yaml", (char *)rematd_openapi_yaml,
                    rematd_openapi_yaml_len, 1);
    return REMATD_HANDLED;
}

const struct rematd_route rematd_route_openapi = {
    .method = "GET", .pattern = "/openapi.yaml", .name = "openapi", .handler = openapi};
