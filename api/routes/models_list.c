/* GET /v1/models: the built-in zoo a profile job can name, with the input
 * shape each expects (batch dimension excluded) and its options, and the
 * models uploaded with POST /v1/models under "uploaded" (oldest first, at
 * most 1000).  The zoo itself is src/rematx/zoo.c, which the worker's
 * builder reads too. */
#include "config.h"

#include "models_common.h"
#include "rematx/rematx.h"

#define MAX_LISTED 1000

static enum rematd_handled models(struct rematd_request *r)
{
    json_t *body = rematx_zoo_list_json();
    json_t *up = json_array();
    struct rematd_model *list = NULL;
    size_t n = 0;
    if (rematd_store_list_models(r->srv->store, r->tenant, MAX_LISTED, &list, &n) !=
        REMATD_STORE_OK) {
        json_decref(body);
        json_decref(up);
        rematd_req_problem(r, 503, "unavailable", NULL, "the store did not answer");
        return REMATD_HANDLED;
    }
    int bad = !body || !up;
    for (size_t i = 0; !bad && i < n; i++)
        bad = json_array_append_new(up, rematd_model_view(&list[i])) < 0;
    rematd_models_free(list, n);
    if (bad || json_object_set_new(body, "uploaded", up) < 0) {
        json_decref(body);
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
