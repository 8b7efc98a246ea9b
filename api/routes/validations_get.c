/* GET /v1/validations/{id}: a validation job's status, progress and, when
 * done, the measured against the predicted peak. */
#include "config.h"

#include "jobs_common.h"

static enum rematd_handled get(struct rematd_request *r)
{
    return rematd_get_job(r, "validation");
}

const struct rematd_route rematd_route_validations_get = {.method = "GET",
                                                          .pattern = "/v1/validations/{id}",
                                                          .name = "validations_get",
                                                          .auth = REMATD_AUTH_CLIENT,
                                                          .handler = get};
