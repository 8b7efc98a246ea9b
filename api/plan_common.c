/* plan_common.c - what the plan routes share: a done profile job's
 * profile, libremat's error codes as problem+json, and a plan's answer
 * text (plan_request.c reads the request itself). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_common.h"

void rematd_answer_remat_error(struct rematd_request *r, int rc, const struct remat_error *err,
                               const struct remat_plan *plan)
{
    const char *ptr = err->pointer[0] ? err->pointer : NULL;
    switch (rc) {
    case REMAT_EINVAL:
        rematd_req_problem(r, 400, "validation", ptr, "%s", err->message);
        break;
    case REMAT_ELIMIT:
        rematd_req_problem(r, 400, "limit-exceeded", ptr, "%s", err->message);
        break;
    case REMAT_EINFEASIBLE:
        rematd_req_problem_json(
            r, 422, "infeasible", ptr,
            json_pack("{s:I}", "min_budget_bytes", (json_int_t)(plan ? plan->min_budget_bytes : 0)),
            err->message[0] ? err->message : "no schedule fits the budget");
        break;
    case REMAT_EUNSUPPORTED:
        rematd_req_problem(r, 501, "unsupported", ptr, "%s",
                           err->message[0] ? err->message : "this solver cannot answer yet");
        break;
    default:
        rematd_req_problem(r, 500, "internal", NULL, "%s",
                           err->message[0] ? err->message : remat_strerror(rc));
    }
}

struct remat_profile *rematd_profile_by_id(struct rematd_request *r, const char *id,
                                           const char *pointer)
{
    if (!rematd_is_id(id)) {
        rematd_req_problem(r, 400, "validation", pointer,
                           "ids are 32 lowercase hexadecimal characters");
        return NULL;
    }
    struct rematd_job job;
    enum rematd_store_result got = rematd_store_get_job(r->srv->store, id, &job);
    if (got == REMATD_STORE_OK && strcmp(job.kind, "profile") != 0) {
        rematd_job_clear(&job);
        got = REMATD_STORE_NOT_FOUND;
    }
    if (got != REMATD_STORE_OK) {
        int down = got == REMATD_STORE_ERROR;
        rematd_req_problem(r, down ? 503 : 404, down ? "unavailable" : "not-found", pointer,
                           down ? "the store did not answer" : "no profile job with this id");
        return NULL;
    }
    if (strcmp(job.status, "done") != 0) {
        rematd_req_problem(r, 409, "job-not-ready", pointer, "the profile job is %s, not done",
                           job.status);
        rematd_job_clear(&job);
        return NULL;
    }
    json_t *result = job.result ? json_loads(job.result, 0, NULL) : NULL;
    rematd_job_clear(&job);
    struct remat_error err = {0};
    struct remat_profile *p = remat_profile_from_json(result, pointer, &err);
    json_decref(result);
    if (!p)
        rematd_answer_remat_error(r, err.code ? err.code : REMAT_EINVAL, &err, NULL);
    return p;
}

char *rematd_plan_text(const struct remat_profile *p, const struct remat_plan *plan,
                       const char *profile_id, size_t *len)
{
    size_t n = 0;
    char *text = remat_plan_dumps(p, plan, &n);
    if (text == NULL)
        return NULL;
    n--; /* the closing brace */
    if (profile_id && profile_id[0]) {
        /* An id is 32 hexadecimal characters: nothing to escape. */
        char *t = realloc(text, n + 64);
        if (t == NULL) {
            free(text);
            return NULL;
        }
        text = t;
        n += (size_t)snprintf(text + n, 64, ",\"profile_id\":\"%s\"", profile_id);
    }
    text[n] = '\0';
    *len = n;
    return text;
}

char *rematd_plan_finish(const char *text, size_t len, const char *id, const char *created_at)
{
    /* ,"id":"ID","created_at":"TS","links":{"self":"/v1/plans/ID",
     * "timeline":"/v1/plans/ID/timeline.svg"}} written piece by piece: a
     * snprintf of it showed in the planning threads' profile. */
    size_t idl = strlen(id), tsl = strlen(created_at);
    char *b = malloc(len + 3 * idl + tsl + 128);
    if (!b)
        return NULL;
    char *q = b;
#define PUT(s, n)                                                                                  \
    do {                                                                                           \
        memcpy(q, (s), (n));                                                                       \
        q += (n);                                                                                  \
    } while (0)
#define LIT(s) PUT(s, sizeof(s) - 1)
    PUT(text, len);
    LIT(",\"id\":\"");
    PUT(id, idl);
    LIT("\",\"created_at\":\"");
    PUT(created_at, tsl);
    LIT("\",\"links\":{\"self\":\"/v1/plans/");
    PUT(id, idl);
    LIT("\",\"timeline\":\"/v1/plans/");
    PUT(id, idl);
    LIT("/timeline.svg\"}}");
#undef LIT
#undef PUT
    *q = '\0';
    return b;
}

int rematd_plan_load(struct rematd_request *r, const char *id, char **body)
{
    *body = NULL;
    struct rematd_stored_plan sp;
    enum rematd_store_result got = rematd_store_get_plan(r->srv->store, id, &sp);
    if (got != REMATD_STORE_OK)
        return got == REMATD_STORE_NOT_FOUND ? 0 : -1;
    if (sp.legacy_body) {
        *body = sp.legacy_body;
        sp.legacy_body = NULL;
        rematd_stored_plan_clear(&sp);
        return 1;
    }
    struct remat_profile *p;
    struct remat_plan plan;
    if (rematd_plan_decode(sp.record, sp.record_len, &p, &plan) < 0) {
        rematd_log("error", "stored plan unreadable", json_pack("{s:s}", "plan", id));
        rematd_stored_plan_clear(&sp);
        return -2;
    }
    size_t len = 0;
    char *text = rematd_plan_text(p, &plan, sp.profile_id, &len);
    if (text)
        *body = rematd_plan_finish(text, len, id, sp.created_at);
    free(text);
    remat_plan_clear(&plan);
    remat_profile_free(p);
    rematd_stored_plan_clear(&sp);
    return *body ? 1 : -1;
}
