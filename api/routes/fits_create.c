/*
 * POST /v1/fits: what a cluster scheduler asks (docs/scheduling.md).  From
 * profiles of one model at a few batch sizes (inline, or done profile jobs
 * by id) and one or more memory sizes (bytes or GPU names), answers, per
 * memory, the largest batch whose min-peak plan fits with that plan and the
 * peak at batch + 1, store-all's largest batch, and the throughput-best
 * batch with its min-time plan (remat_fits).  Synchronous, 200: nothing is
 * stored.  The work (a few dozen solves) runs on a planning thread, under
 * the bounds of POST /v1/plans (rematd_solve_begin).  A model spec instead
 * of profiles makes a fits job when a profile it needs is not measured
 * yet (GET /v1/fits/{id}, routes/fits_get.c).  jobs/fits.h reads the
 * request and makes the answer.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/fits.h"
#include "jobs_common.h"
#include "plan_common.h"

/* POST /v1/fits with a model spec: 200 at once when every profile it needs
 * is cached (and nothing is to be confirmed), else a fits job (202). */
static void fits_model(struct rematd_request *r, json_t *body)
{
    if (json_object_get(body, "profiles") || json_object_get(body, "profile_ids")) {
        rematd_req_problem(r, 400, "validation",
                           json_object_get(body, "profiles") ? "/profiles" : "/profile_ids",
                           "give profiles, profile_ids or a model spec, one of them");
        return;
    }
    json_t *c = json_object_get(body, "confirm");
    if (c != NULL && !json_is_boolean(c)) {
        rematd_req_problem(r, 400, "validation", "/confirm", "confirm must be true or false");
        return;
    }
    struct rematd_fits_req f;
    memset(&f, 0, sizeof f);
    json_int_t b[REMATD_FITS_MAX_BATCHES];
    size_t nb = 0;
    struct rematd_problem prob = {0};
    if (rematd_fits_read_options(body, &f, &prob) < 0 ||
        rematd_fits_read_batches(body, b, &nb, &prob) < 0) {
        rematd_req_send_problem(r, &prob);
        return;
    }
    json_t *request = json_deep_copy(body);
    json_t *profiles = json_object();
    size_t queued = 0;
    if (!request || !profiles) {
        rematd_req_problem(r, 500, "internal", NULL, "out of memory");
        goto out;
    }
    for (size_t k = 0; k < nb; k++) {
        char id[REMATD_ID_LEN + 1], key[32];
        int done = 0;
        if (rematd_fits_profile_job(r, body, b[k], id, &done) < 0)
            goto out;
        snprintf(key, sizeof key, "%lld", (long long)b[k]);
        json_object_set_new(profiles, key, json_string(id));
        queued += !done;
    }
    int confirmed = 0;
    if (queued == 0) {
        size_t pending = 0;
        json_t *ans = NULL;
        if (rematd_fits_from_jobs(r, request, profiles, &ans, &pending, &prob) < 0) {
            rematd_req_send_problem(r, &prob);
            goto out;
        }
        int added = json_is_true(c) ? rematd_fits_confirm(r, request, ans, profiles) : 0;
        confirmed = 1;
        if (added <= 0) {
            if (added == 0)
                rematd_req_json(r, 200, ans);
            else
                json_decref(ans);
            goto out;
        }
        json_decref(ans);
    }
    /* A job: the request, its profile jobs by batch, and whether the
     * confirming profiles were queued already. */
    json_t *dev = json_object_get(body, "device");
    json_t *spec =
        json_pack("{s:O, s:O, s:b, s:s}", "request", request, "profiles", profiles, "confirmed",
                  confirmed, "device", json_is_string(dev) ? json_string_value(dev) : "cuda");
    if (spec == NULL) {
        rematd_req_problem(r, 500, "internal", NULL, "out of memory");
        goto out;
    }
    rematd_queue_job(r, "fits", spec);
out:
    json_decref(request);
    json_decref(profiles);
}

static void fits_job(struct rematd_request *r)
{
    json_t *body = rematd_req_body_json(r);
    if (body != NULL && rematd_req_reject_unknown(r, body, "", rematd_fits_fields) == 0) {
        struct rematd_fits_req f;
        memset(&f, 0, sizeof f);
        if (json_object_get(body, "model") || json_object_get(body, "layers") ||
            json_object_get(body, "model_id") || json_object_get(body, "hf_config")) {
            fits_model(r, body);
        } else {
            static const char *const model_only[] = {
                "model_options", "input_shape", "input",   "stages",  "dtype",  "device",
                "warmup",        "repeats",     "batches", "confirm", "seq_len"};
            for (size_t k = 0; k < sizeof model_only / sizeof model_only[0]; k++)
                if (json_object_get(body, model_only[k])) {
                    char p[32];
                    snprintf(p, sizeof p, "/%s", model_only[k]);
                    rematd_req_problem(r, 400, "validation", p,
                                       "this field goes with a model spec (model, layers, "
                                       "model_id or hf_config)");
                    break;
                }
            struct rematd_read_ctx ctx;
            struct rematd_problem prob = {0};
            rematd_read_ctx_init(&ctx, r);
            json_t *out = NULL;
            if (!rematd_req_answered(r)) {
                if (rematd_fits_read(&ctx, body, &f, &prob) == 0)
                    out = rematd_fits_answer(r, &f, &prob);
                if (out != NULL)
                    rematd_req_json(r, 200, out);
                else
                    rematd_req_send_problem(r, &prob);
            }
        }
        rematd_fits_req_free(&f);
    }
    rematd_req_end_job(r);
}

const struct rematd_route rematd_route_fits = {.method = "POST",
                                               .pattern = "/v1/fits",
                                               .name = "fits",
                                               .auth = REMATD_AUTH_CLIENT,
                                               /* a model spec without cached profiles */
                                               .created_status = 202,
                                               .job = fits_job};
