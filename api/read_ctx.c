/* read_ctx.c - what readers look up in rematd (problem.h's struct
 * rematd_read_ctx): done profile jobs and uploaded models in the store,
 * and the server's stage limit.  The readers themselves stay pure. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "http/http.h"
#include "read_ctx.h"
#include "store.h"

struct remat_profile *rematd_profile_lookup(void *req, const char *id, const char *pointer,
                                            struct rematd_problem *prob)
{
    struct rematd_request *r = req;
    if (!rematd_is_id(id)) {
        rematd_problem_set(prob, 400, "validation", pointer,
                           "ids are 32 lowercase hexadecimal characters");
        return NULL;
    }
    struct rematd_job job;
    enum rematd_store_result got = rematd_store_get_job(r->srv->store, id, &job);
    if (got == REMATD_STORE_OK &&
        (strcmp(job.kind, "profile") != 0 || !rematd_req_owns(r, job.tenant))) {
        rematd_job_clear(&job);
        got = REMATD_STORE_NOT_FOUND;
    }
    if (got != REMATD_STORE_OK) {
        int down = got == REMATD_STORE_ERROR;
        rematd_problem_set(prob, down ? 503 : 404, down ? "unavailable" : "not-found", pointer,
                           "%s", down ? "the store did not answer" : "no profile job with this id");
        return NULL;
    }
    if (job.status != REMATD_JOB_DONE) {
        rematd_problem_set(prob, 409, "job-not-ready", pointer, "the profile job is %s, not done",
                           rematd_job_status_name(job.status));
        rematd_job_clear(&job);
        return NULL;
    }
    json_t *result = job.result ? json_loads(job.result, 0, NULL) : NULL;
    rematd_job_clear(&job);
    struct remat_error err = {0};
    struct remat_profile *p = remat_profile_from_json(result, pointer, &err);
    json_decref(result);
    if (!p)
        rematd_problem_remat(prob, err.code ? err.code : REMAT_EINVAL, &err, NULL);
    return p;
}

static int model_lookup(void *req, const char *id, struct rematd_read_model *out,
                        struct rematd_problem *p)
{
    struct rematd_request *r = req;
    struct rematd_model m;
    enum rematd_store_result got = rematd_store_get_model(r->srv->store, id, &m);
    if (got == REMATD_STORE_OK && !rematd_req_owns(r, m.tenant)) {
        rematd_model_clear(&m);
        got = REMATD_STORE_NOT_FOUND;
    }
    if (got != REMATD_STORE_OK) {
        if (got == REMATD_STORE_NOT_FOUND)
            rematd_problem_set(p, 404, "not-found", "/model_id", "no uploaded model with id %s",
                               id);
        else
            rematd_problem_set(p, 503, "unavailable", NULL, "the store did not answer");
        return -1;
    }
    snprintf(out->id, sizeof out->id, "%s", m.id);
    snprintf(out->sha256, sizeof out->sha256, "%s", m.sha256);
    out->bytes = m.bytes;
    rematd_model_clear(&m);
    return 0;
}

void rematd_read_ctx_init(struct rematd_read_ctx *ctx, struct rematd_request *r)
{
    ctx->max_stages = r->srv->cfg.max_stages;
    ctx->profile_by_id = rematd_profile_lookup;
    ctx->model_by_id = model_lookup;
    ctx->cls = r;
}
