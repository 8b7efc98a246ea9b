/* GET /v1/models/{id}: an uploaded model's record (docs/models.md). */
#include "config.h"

#include "models_common.h"

static enum rematd_handled get(struct rematd_request *r)
{
    struct rematd_model m;
    enum rematd_store_result got = rematd_store_get_model(r->srv->store, r->id, &m);
    if (got == REMATD_STORE_NOT_FOUND) {
        rematd_req_problem(r, 404, "not-found", NULL, "no uploaded model with id %s", r->id);
        return REMATD_HANDLED;
    }
    if (got != REMATD_STORE_OK) {
        rematd_req_problem(r, 503, "unavailable", NULL, "the store did not answer");
        return REMATD_HANDLED;
    }
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
