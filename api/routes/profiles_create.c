/*
 * POST /v1/profiles: queue a profiling job (docs/jobs.md).  The body is
 * a zoo model name, a JSON layer list or an uploaded model (model_id, with
 * its input and optionally its stages), with batch size, input shape,
 * dtype and device; jobs/profile_spec.c checks it and fills the defaults,
 * and this route stores the normalised spec, which is what the worker
 * receives: 202 + Location, or 200 with a done job of the same spec
 * (reuse).
 */
#include "config.h"

#include <stdio.h>

#include "jobs_common.h"
#include "read_ctx.h"

static enum rematd_handled create(struct rematd_request *r)
{
    json_t *body = rematd_req_body_json(r);
    if (!body)
        return REMATD_HANDLED;
    json_t *reuse = json_object_get(body, "reuse");
    if (reuse != NULL && !json_is_boolean(reuse)) {
        rematd_req_problem(r, 400, "validation", "/reuse", "reuse must be true or false");
        return REMATD_HANDLED;
    }
    struct rematd_read_ctx ctx;
    struct rematd_problem prob = {0};
    rematd_read_ctx_init(&ctx, r);
    json_t *spec = rematd_profile_spec(&ctx, body, &prob);
    if (!spec) {
        rematd_req_send_problem(r, &prob);
        return REMATD_HANDLED;
    }
    char key[65];
    if (rematd_profile_reuse_key(spec, key) < 0) {
        json_decref(spec);
        rematd_req_problem(r, 500, "internal", NULL, "out of memory");
        return REMATD_HANDLED;
    }
    rematd_tenant_reuse_key(r, key);
    if (reuse == NULL || json_is_true(reuse)) {
        struct rematd_job j;
        enum rematd_store_result got =
            rematd_store_find_reusable(r->srv->store, "profile", key, &j);
        if (got == REMATD_STORE_ERROR) {
            json_decref(spec);
            rematd_req_problem(r, 503, "unavailable", NULL, "the store did not answer");
            return REMATD_HANDLED;
        }
        if (got == REMATD_STORE_OK) {
            json_t *view = rematd_job_view(&j);
            char loc[64];
            snprintf(loc, sizeof loc, "/v1/profiles/%s", j.id);
            rematd_job_clear(&j);
            json_decref(spec);
            if (view == NULL || json_object_set_new(view, "cached", json_true()) < 0) {
                json_decref(view);
                rematd_req_problem(r, 500, "internal", NULL, "the stored job cannot be shown");
                return REMATD_HANDLED;
            }
            rematd_req_header(r, "Content-Location", loc);
            rematd_req_json(r, 200, view);
            return REMATD_HANDLED;
        }
    }
    rematd_queue_job_keyed(r, "profile", spec, key);
    return REMATD_HANDLED;
}

const struct rematd_route rematd_route_profiles_create = {.method = "POST",
                                                          .pattern = "/v1/profiles",
                                                          .name = "profiles_create",
                                                          .auth = REMATD_AUTH_CLIENT,
                                                          .created_status = 202,
                                                          .handler = create};
