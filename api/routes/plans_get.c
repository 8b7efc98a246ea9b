/* GET /v1/plans/{id}: a stored plan, exactly as it was first answered. */
#include "config.h"

#include <string.h>

#include "plan_common.h"

static enum rematd_handled get(struct rematd_request *r)
{
    char *body;
    int got = rematd_plan_load(r, r->id, &body);
    if (got == 0)
        rematd_req_problem(r, 404, "not-found", NULL, "no plan with id %s", r->id);
    else if (got == -2)
        rematd_req_problem(r, 500, "internal", NULL, "the stored plan cannot be read");
    else if (got < 0)
        rematd_req_problem(r, 503, "unavailable", NULL, "the store did not answer");
    else
        rematd_req_text(r, 200, "application/json", body, strlen(body), 0);
    return REMATD_HANDLED;
}

const struct rematd_route rematd_route_plans_get = {.method = "GET",
                                                    .pattern = "/v1/plans/{id}",
                                                    .name = "plans_get",
                                                    .auth = REMATD_AUTH_CLIENT,
                                                    .handler = get};
