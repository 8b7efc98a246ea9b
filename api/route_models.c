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
        rq_problem(r, 500, "internal", NULL, "out of memory");
        return HANDLED;
    }
    rq_json(r, 200, body);
    return HANDLED;
}

const struct remat_route route_models = {.method = "GET",
                                         .pattern = "/v1/models",
                                         .name = "models",
                                         .auth = AUTH_CLIENT,
                                         .handler = models};
