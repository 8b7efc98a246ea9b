/* jobs_common.c - queueing and reading jobs for the client routes: the
 * job as the API shows it (with its link) is made here from what the
 * store returns. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs_common.h"
#include "rematx/real.h"

/* Where a job of this kind is read: its route's collection. */
static const char *collection(const char *kind)
{
    return strcmp(kind, "profile") == 0 ? "/v1/profiles"
           : strcmp(kind, "fits") == 0  ? "/v1/fits"
                                        : "/v1/validations";
}

static json_t *parse_text(const char *t)
{
    return t ? json_loads(t, 0, NULL) : NULL;
}

/* A job whose uploaded model calls an operator outside the worker's
 * allow-list failed for a reason the client can act on: its model must
 * change.  The worker says so in one fixed form (worker/opcheck.cpp):
 *   the model calls OP in method NAME of submodule 'PATH'[ (via ...)]: WHY
 *   (remat's operator allow-list refuses it: docs/security.md, Operators)
 * (" of the model" for the root's own method; "via" names the functions
 * the method called on the way to the op), and the job shows it
 * also as a problem: 422 op-not-allowed with op, method and submodule ("":
 * the model's own).  NULL for any other reason.  Read from the reason, so
 * that neither the fail call nor the store changes; a model that forges
 * the form in its own failure shows it only in its own job. */
static json_t *op_problem(const char *reason)
{
    static const char lead[] = "the model calls ", in[] = " in method ", sub[] = " of submodule '",
                      root[] = " of the model",
                      mark[] = " (remat's operator allow-list refuses it: ";
    if (strncmp(reason, lead, sizeof lead - 1) != 0 || strstr(reason, mark) == NULL)
        return NULL;
    const char *op = reason + sizeof lead - 1, *op_end = strchr(op, ' ');
    if (op_end == NULL || op_end == op || strncmp(op_end, in, sizeof in - 1) != 0)
        return NULL;
    const char *m = op_end + sizeof in - 1, *m_end = strchr(m, ' ');
    if (m_end == NULL || m_end == m)
        return NULL;
    const char *s = "", *s_end = s;
    if (strncmp(m_end, sub, sizeof sub - 1) == 0) {
        s = m_end + sizeof sub - 1;
        s_end = strchr(s, '\'');
        if (s_end == NULL)
            return NULL;
    } else if (strncmp(m_end, root, sizeof root - 1) != 0) {
        return NULL;
    }
    return json_pack("{s:s, s:s, s:i, s:s, s:o, s:o, s:o}", "type", "/problems/op-not-allowed",
                     "title", rematd_problem_title("op-not-allowed"), "status", 422, "detail",
                     reason, "op", json_stringn(op, (size_t)(op_end - op)), "method",
                     json_stringn(m, (size_t)(m_end - m)), "submodule",
                     json_stringn(s, (size_t)(s_end - s)));
}

json_t *rematd_job_view(const struct rematd_job *j)
{
    char created[32], updated[32], self[64];
    rematd_rfc3339(j->created_at, created);
    rematd_rfc3339(j->updated_at, updated);
    snprintf(self, sizeof self, "%s/%s", collection(j->kind), j->id);
    const char *status = rematd_job_status_name(j->status);
    json_t *v =
        json_pack("{s:s, s:s, s:s, s:i, s:s, s:s, s:o*, s:o, s:{s:s}}", "id", j->id, "kind",
                  j->kind, "status", status, "attempts", j->attempts, "created_at", created,
                  "updated_at", updated, "spec", parse_text(j->spec), "progress",
                  j->progress ? parse_text(j->progress) : json_null(), "links", "self", self);
    if (v && j->status == REMATD_JOB_DONE) {
        json_t *res = parse_text(j->result);
        json_object_set_new(v, strcmp(j->kind, "profile") == 0 ? "profile" : "result",
                            res ? res : json_null());
    }
    if (v && j->status == REMATD_JOB_FAILED && j->reason) {
        json_object_set_new(v, "error", json_string(j->reason));
        json_t *problem = op_problem(j->reason);
        if (problem)
            json_object_set_new(v, "problem", problem);
    }
    if (v && j->status == REMATD_JOB_RUNNING) {
        char le[32];
        rematd_rfc3339(j->lease_expires_at, le);
        json_object_set_new(v, "lease_expires_at", json_string(le));
    }
    return v;
}

void rematd_tenant_reuse_key(const struct rematd_request *r, char key[65])
{
    if (!r->tenant || strcmp(r->tenant, REMATD_TENANT_DEFAULT) == 0)
        return;
    char keyed[65 + 1 + REMATD_TENANT_MAX + 1];
    int n = snprintf(keyed, sizeof keyed, "%s/%s", key, r->tenant);
    rematd_sha256_hex(keyed, (size_t)n, key);
}

void rematd_queue_job(struct rematd_request *r, const char *kind, json_t *spec)
{
    rematd_queue_job_keyed(r, kind, spec, NULL);
}

void rematd_queue_job_keyed(struct rematd_request *r, const char *kind, json_t *spec,
                            const char *reuse_key)
{
    char *text = rematx_json_dumps(spec, JSON_COMPACT);
    const char *device = json_string_value(json_object_get(spec, "device"));
    /* The answer is the job as GET will show it now: made here, before the
     * job is stored, since with an Idempotency-Key it is stored with it. */
    struct rematd_job j = {.attempts = 0, .spec = text};
    rematd_new_id(j.id);
    snprintf(j.kind, sizeof j.kind, "%s", kind);
    j.status = REMATD_JOB_QUEUED;
    j.created_at = j.updated_at = rematd_now();
    json_t *view = text ? rematd_job_view(&j) : NULL;
    char *answer = view ? rematx_json_dumps(view, JSON_COMPACT) : NULL;
    json_decref(view);
    /* The uploaded model the job runs (a validation's is its profile's):
     * the store keeps it from being deleted while the job waits or runs. */
    json_t *mid = json_object_get(spec, "model_id");
    if (!mid)
        mid = json_object_get(json_object_get(spec, "model_spec"), "model_id");
    struct rematd_job_new job = {
        .model_id = json_string_value(mid),
        .id = j.id,
        .created_at = j.created_at,
        .kind = kind,
        .device = device ? device : "cpu",
        .spec = text,
        .idem_key = r->idem_key,
        .idem_scope = r->idem_scope,
        .body_hash = r->body_hash,
        .body = answer,
        .reuse_key = reuse_key,
        .tenant = r->tenant,
    };
    struct rematd_idem existing;
    enum rematd_store_result rc =
        answer ? rematd_store_create_job(r->srv->store, &job, &existing) : REMATD_STORE_ERROR;
    free(text);
    if (rc == REMATD_STORE_OK) {
        json_decref(spec);
        rematd_req_created(r, j.id, answer, strlen(answer));
        return;
    }
    free(answer);
    if (rc == REMATD_STORE_NOT_FOUND) {
        rematd_req_problem(r, 409, "model-deleted", NULL, "model %s was deleted; upload it again",
                           json_string_value(mid));
    } else if (rc == REMATD_STORE_CONFLICT) {
        rematd_req_replay(r, &existing); /* recorded meanwhile by another request */
    } else if (rc == REMATD_STORE_FULL) {
        rematd_req_header(r, "Retry-After", "30");
        rematd_req_problem(r, 503, "queue-full", NULL, "%s; try again later",
                           r->idem_key
                               ? "the job queue or the Idempotency-Key records are full"
                                 " (--max-queued-jobs, --max-idempotency-keys, or this tenant's"
                                 " share, --tenant-max-queued-jobs, --tenant-max-idempotency-keys)"
                               : "the job queue is full (--max-queued-jobs, or this tenant's"
                                 " share, --tenant-max-queued-jobs)");
    } else {
        rematd_req_header(r, "Retry-After", "5");
        rematd_req_problem(r, 503, "unavailable", NULL, "the job could not be stored");
    }
    json_decref(spec);
}

enum rematd_handled rematd_get_job(struct rematd_request *r, const char *kind)
{
    struct rematd_job j;
    enum rematd_store_result got = rematd_store_get_job(r->srv->store, r->id, &j);
    if (got == REMATD_STORE_ERROR) {
        rematd_req_problem(r, 503, "unavailable", NULL, "the store did not answer");
        return REMATD_HANDLED;
    }
    if (got != REMATD_STORE_OK || strcmp(j.kind, kind) != 0 || !rematd_req_owns(r, j.tenant)) {
        if (got == REMATD_STORE_OK)
            rematd_job_clear(&j);
        rematd_req_problem(r, 404, "not-found", NULL, "no %s job with id %s", kind, r->id);
        return REMATD_HANDLED;
    }
    json_t *v = rematd_job_view(&j);
    int pending = j.status == REMATD_JOB_QUEUED || j.status == REMATD_JOB_RUNNING;
    rematd_job_clear(&j);
    if (!v) {
        rematd_req_problem(r, 500, "internal", NULL, "the stored job cannot be shown");
        return REMATD_HANDLED;
    }
    if (pending)
        rematd_req_header(r, "Retry-After", "2");
    rematd_req_json(r, 200, v);
    return REMATD_HANDLED;
}
