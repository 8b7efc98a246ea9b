/*
 * GET /v1/fits/{id}: a fits job, advanced when read.  While its profiles
 * are measured it is queued, its progress counting the done ones; when they
 * are all done the answer is made (on a planning thread, under the solve
 * bounds).  With "confirm": true an answer outside the measured batches
 * first queues a profile at each chosen batch, once, and waits for them.
 * Then it is done with the answer as its result, or failed when a profile
 * failed or the answer cannot be made (a 422 of the answer): then this GET
 * shows the failed job, as every later one does.  The answer is decided
 * before anything is sent (rematd_fits_from_jobs fills a problem), so that
 * nothing answered has to be taken back.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/fits.h"
#include "jobs_common.h"
#include "plan_common.h"

/* Advances the queued job whose spec (the request, its profile jobs by
 * batch, whether confirming profiles were queued) is spec.  Returns 0 with
 * *pending the profile jobs still to wait for (the job shown next), or -1
 * after answering. */
static int advance(struct rematd_request *r, json_t *spec, size_t *pending)
{
    json_t *request = json_object_get(spec, "request");
    json_t *profiles = json_object_get(spec, "profiles");
    json_t *ans = NULL;
    struct rematd_problem prob = {0};
    if (rematd_fits_from_jobs(r, request, profiles, &ans, pending, &prob) < 0) {
        if (prob.status != 422) {
            rematd_req_send_problem(r, &prob);
            return -1;
        }
        /* A profile failed, or the answer cannot be made: so fails the
         * job, and this GET shows it. */
        rematd_problem_clear(&prob);
        rematd_store_advance_job(r->srv->store, r->id, REMATD_JOB_FAILED, NULL, NULL,
                                 "a profile job failed or the answer could not be made");
        return 0;
    }
    if (ans == NULL)
        return 0;
    int added = 0;
    if (json_is_true(json_object_get(request, "confirm")) &&
        !json_is_true(json_object_get(spec, "confirmed"))) {
        added = rematd_fits_confirm(r, request, ans, profiles);
        json_object_set_new(spec, "confirmed", json_true());
        if (added >= 0) {
            char *text = json_dumps(spec, JSON_COMPACT);
            if (text == NULL || rematd_store_advance_job(r->srv->store, r->id, REMATD_JOB_QUEUED,
                                                         text, NULL, NULL) != REMATD_STORE_OK)
                added = -1;
            free(text);
            if (added < 0 && !rematd_req_answered(r))
                rematd_req_problem(r, 503, "unavailable", NULL, "the store did not answer");
        }
        if (added < 0) {
            json_decref(ans);
            return -1;
        }
        *pending = (size_t)added;
    }
    if (added == 0) {
        char *text = json_dumps(ans, JSON_COMPACT);
        int stored = text != NULL && rematd_store_advance_job(r->srv->store, r->id, REMATD_JOB_DONE,
                                                              NULL, text, NULL) == REMATD_STORE_OK;
        free(text);
        if (!stored) {
            json_decref(ans);
            rematd_req_problem(r, 503, "unavailable", NULL, "the store did not answer");
            return -1;
        }
    }
    json_decref(ans);
    return 0;
}

static void get_job(struct rematd_request *r)
{
    struct rematd_job j;
    enum rematd_store_result got = rematd_store_get_job(r->srv->store, r->id, &j);
    if (got == REMATD_STORE_ERROR) {
        rematd_req_problem(r, 503, "unavailable", NULL, "the store did not answer");
        goto end;
    }
    if (got != REMATD_STORE_OK || strcmp(j.kind, "fits") != 0 || !rematd_req_owns(r, j.tenant)) {
        if (got == REMATD_STORE_OK)
            rematd_job_clear(&j);
        rematd_req_problem(r, 404, "not-found", NULL, "no fits job with id %s", r->id);
        goto end;
    }
    json_t *spec = j.status == REMATD_JOB_QUEUED ? json_loads(j.spec, 0, NULL) : NULL;
    rematd_job_clear(&j);
    size_t pending = 0;
    int rc = spec != NULL ? advance(r, spec, &pending) : 0;
    json_decref(spec);
    if (rc < 0)
        goto end;
    got = rematd_store_get_job(r->srv->store, r->id, &j);
    json_t *v = got == REMATD_STORE_OK ? rematd_job_view(&j) : NULL;
    int waiting = got == REMATD_STORE_OK && j.status == REMATD_JOB_QUEUED;
    json_t *sp = waiting ? json_loads(j.spec, 0, NULL) : NULL;
    if (got == REMATD_STORE_OK)
        rematd_job_clear(&j);
    if (v == NULL) {
        json_decref(sp);
        rematd_req_problem(r, 503, "unavailable", NULL, "the store did not answer");
        goto end;
    }
    if (waiting) {
        size_t total = json_object_size(json_object_get(sp, "profiles"));
        json_object_set_new(v, "progress",
                            json_pack("{s:I, s:I, s:s, s:s}", "stage",
                                      (json_int_t)(total - pending), "stages", (json_int_t)total,
                                      "activity", "measuring", "phase", "measuring"));
        rematd_req_header(r, "Retry-After", "2");
    }
    json_decref(sp);
    rematd_req_json(r, 200, v);
end:
    rematd_req_end_job(r);
}

const struct rematd_route rematd_route_fits_get = {.method = "GET",
                                                   .pattern = "/v1/fits/{id}",
                                                   .name = "fits_get",
                                                   .auth = REMATD_AUTH_CLIENT,
                                                   .job = get_job};
