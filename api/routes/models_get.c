/* GET /v1/models/{id}: an uploaded model's record (docs/models.md). */
#include "config.h"

#include "models_common.h"

static enum rematd_handled get(struct rematd_request *r)
{
    struct rematd_model m;
    if (rematd_model_by_id(r, &m) < 0)
        return REMATD_HANDLED;
    json_t *v = rematd_model_view(&m);
    rematd_model_clear(&m);
    if (!v)
        rematd_req_problem(r, 500, "internal", NULL, "out of memory");
    else
        rematd_req_json(r, 200, v);
    return REMATD_HANDLED;
}

const struct rematd_route rematd_route_models_get = {.method = "GET",
                                                     .pattern = "/v1/models/{id}",
                                                     .name = "models_get",
                                                     .auth = REMATD_AUTH_CLIENT,
                                                     .handler = get};
