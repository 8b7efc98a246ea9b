/* GET /v1/profiles/{id}: a profile job's status, per-stage progress and,
 * when done, the measured profile. */
#include "config.h"

#include "jobs_common.h"

static enum rematd_handled get(struct rematd_request *r)
{
    return rematd_get_job(r, "profile");
}

const struct rematd_route rematd_route_profiles_get = {.method = "GET",
                                                       .pattern = "/v1/profiles/{id}",
                                                       .name = "profiles_get",
                                                       .auth = REMATD_AUTH_CLIENT,
                                                       .handler = get};
