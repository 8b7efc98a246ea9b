/* jobs_common.c - queueing and reading jobs for the client routes. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs_common.h"

int rematd_device_ok(const char *d)
{
    if (!d)
        return 0;
    if (strcmp(d, "cpu") == 0 || strcmp(d, "cuda") == 0)
        return 1;
    if (strncmp(d, "cuda:", 5) != 0 || !d[5] || strlen(d) > 8)
        return 0;
    for (const char *p = d + 5; *p; p++)
        if (*p < '0' || *p > '9')
            return 0;
    return 1;
}

void rematd_queue_job(struct rematd_request *r, const char *kind, json_t *spec,
                      const char *location_fmt)
{
    char *text = json_dumps(spec, JSON_COMPACT);
    struct rematd_job_new job = {
        .kind = kind,
        .device = json_string_value(json_object_get(spec, "device")),
        .spec = text,
        .idem_scope = r->route->name,
        .idem_key = r->idem_key,
        .body_hash = r->body_hash,
        .location_fmt = location_fmt,
    };
    if (!job.device)
        job.device = "cpu";
    char id[REMATD_ID_LEN + 1];
    json_t *resp = NULL;
    int rc = text ? rematd_store_create_job(r->srv->store, &job, id, &resp) : -1;
    free(text);
    json_decref(spec);
    if (rc < 0) {
        rematd_req_problem(r, 503, "unavailable", NULL, "the job could not be stored");
        return;
    }
    if (rc == 1) {
        /* Another request with this key committed between our check and our
         * write: answer as a replay of it (or 422 when the bodies differ). */
        if (strcmp(json_string_value(json_object_get(resp, "body_hash")), r->body_hash) != 0) {
            rematd_req_problem(r, 422, "idempotency-key-reused", NULL,
                               "this Idempotency-Key was first used with a different body");
        } else {
            const char *loc = json_string_value(json_object_get(resp, "location"));
            if (loc)
                rematd_req_header(r, "Location", loc);
            rematd_req_header(r, "Idempotent-Replayed", "true");
            const char *b = json_string_value(json_object_get(resp, "body"));
            rematd_req_text(r, (int)json_integer_value(json_object_get(resp, "status")),
                            "application/json", strdup(b), strlen(b), 0);
        }
        json_decref(resp);
        return;
    }
    char loc[96];
    snprintf(loc, sizeof loc, location_fmt, id);
    rematd_req_header(r, "Location", loc);
    rematd_req_header(r, "Retry-After", "2");
    rematd_req_json(r, 202, resp);
}

enum rematd_handled rematd_get_job(struct rematd_request *r, const char *kind)
{
    json_t *j = rematd_store_get_job(r->srv->store, r->id, kind);
    if (!j) {
        rematd_req_problem(r, 404, "not-found", NULL, "no %s job with id %s", kind, r->id);
        return REMATD_HANDLED;
    }
    const char *st = json_string_value(json_object_get(j, "status"));
    if (st && (strcmp(st, "queued") == 0 || strcmp(st, "running") == 0))
        rematd_req_header(r, "Retry-After", "2");
    rematd_req_json(r, 200, j);
    return REMATD_HANDLED;
}
