/* DELETE /v1/models/{id}: removes an uploaded model, its record and then
 * its file; 409 model-in-use while a queued or running job names it (the
 * store decides that in the transaction that would remove it). */
#include "config.h"

#include <unistd.h>

#include "models_common.h"

static enum rematd_handled del(struct rematd_request *r)
{
    struct rematd_model m;
    enum rematd_store_result rc = rematd_store_get_model(r->srv->store, r->id, &m);
    if (rc == REMATD_STORE_OK && !rematd_req_owns(r, m.tenant)) {
        rematd_model_clear(&m);
        rc = REMATD_STORE_NOT_FOUND; /* another tenant's: as if none */
    }
    if (rc == REMATD_STORE_OK) {
        char path[1200];
        rematd_models_lock();
        rc = rematd_store_delete_model(r->srv->store, r->id);
        /* The file goes with the last record naming it: tenants that
         * uploaded the same bytes share it. */
        if (rc == REMATD_STORE_OK &&
            rematd_store_model_sha_used(r->srv->store, m.sha256) == REMATD_STORE_NOT_FOUND &&
            rematd_model_path(&r->srv->cfg, m.sha256, path, sizeof path) == 0)
            unlink(path);
        rematd_models_unlock();
        rematd_model_clear(&m);
    }
    if (rc == REMATD_STORE_OK) {
        rematd_log("info", "model deleted", json_pack("{s:s}", "id", r->id));
        rematd_req_text(r, 204, NULL, NULL, 0, 1);
    } else if (rc == REMATD_STORE_NOT_FOUND) {
        rematd_req_problem(r, 404, "not-found", NULL, "no uploaded model with id %s", r->id);
    } else if (rc == REMATD_STORE_CONFLICT) {
        rematd_req_problem(r, 409, "model-in-use", NULL,
                           "a queued or running job uses model %s; delete it once they end", r->id);
    } else {
        rematd_req_problem(r, 503, "unavailable", NULL, "the store did not answer");
    }
    return REMATD_HANDLED;
}

const struct rematd_route rematd_route_models_delete = {.method = "DELETE",
                                                        .pattern = "/v1/models/{id}",
                                                        .name = "models_delete",
                                                        .auth = REMATD_AUTH_CLIENT,
                                                        .handler = del};
