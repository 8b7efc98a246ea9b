/* table.c - the route table: every route rematd serves, handed to the
 * HTTP layer at setup (main.c: rematd_http_setup), as h2o's handlers are
 * registered on a path rather than listed in its core.  A route's index
 * here is its metrics slot; a route is matched in this order. */
#include "config.h"

#include "http/http.h"

extern const struct rematd_route rematd_route_healthz, rematd_route_readyz, rematd_route_openapi,
    rematd_route_metrics, rematd_route_models, rematd_route_plans_create, rematd_route_plans_get,
    rematd_route_plans_timeline, rematd_route_profiles_create, rematd_route_profiles_get,
    rematd_route_validations_create, rematd_route_validations_get, rematd_route_worker_lease,
    rematd_route_worker_heartbeat, rematd_route_worker_complete, rematd_route_worker_fail,
    rematd_route_worker_release, rematd_route_models_upload, rematd_route_models_get,
    rematd_route_models_delete, rematd_route_worker_models, rematd_route_fits,
    rematd_route_profiles_frontier, rematd_route_fits_get;

const struct rematd_route *const rematd_routes[] = {
    &rematd_route_healthz,
    &rematd_route_readyz,
    &rematd_route_openapi,
    &rematd_route_metrics,
    &rematd_route_models,
    &rematd_route_models_upload,
    &rematd_route_models_get,
    &rematd_route_models_delete,
    &rematd_route_plans_create,
    &rematd_route_plans_get,
    &rematd_route_plans_timeline,
    &rematd_route_profiles_create,
    &rematd_route_profiles_get,
    &rematd_route_fits,
    &rematd_route_validations_create,
    &rematd_route_validations_get,
    &rematd_route_worker_lease,
    &rematd_route_worker_heartbeat,
    &rematd_route_worker_complete,
    &rematd_route_worker_fail,
    &rematd_route_worker_release,
    &rematd_route_worker_models,
    &rematd_route_profiles_frontier,
    &rematd_route_fits_get,
};
const size_t rematd_n_routes = sizeof rematd_routes / sizeof rematd_routes[0];
