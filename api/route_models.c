/* GET /v1/models: the built-in zoo a profile job can name, with the input
 * shape each expects (batch dimension excluded) and its options.  The zoo
 * itself is src/rematx/zoo.c, which the worker's builder reads too. */
#include "config.h"

#include "rematd.h"
#include "rematx/rematx.h"

static enum rematd_handled models(struct rematd_request *r)
{
    json_t *body = rematx_zoo_list_json();
    if (!body) {
        rematd_req_problem(r, 500, "internal", NULL, "out of memory");
        return REMATD_HANDLED;
    }
    rematd_req_json(r, 200, body);
    return REMATD_HANDLED;
}

const struct rematd_route rematd_route_models = {.method = "GET",
                                                 .pattern = "/v1/models",
                                                 .name = "models",
                                                 .auth = REMATD_AUTH_CLIENT,
                                                 .handler = models};
