/* jobs_common.h - shared by the profile and validation routes. */
#ifndef REMATD_JOBS_COMMON_H
#define REMATD_JOBS_COMMON_H

#include "http/http.h"
#include "jobs/profile_spec.h"
#include "store.h"

/* Stores a queued job with spec (stolen) and answers 202 + Location, or a
 * replay when the Idempotency-Key was recorded meanwhile. */
void rematd_queue_job(struct rematd_request *r, const char *kind, json_t *spec);
/* The same, storing the job's reuse key (may be NULL). */
void rematd_queue_job_keyed(struct rematd_request *r, const char *kind, json_t *spec,
                            const char *reuse_key);
/* The job as GET /v1/profiles/{id} or /v1/validations/{id} shows it, with
 * its link: new, or NULL (no memory). */
json_t *rematd_job_view(const struct rematd_job *j);
/* key (a profile's reuse key, 64 hex digits) made the request's tenant's:
 * unchanged for "default", whose jobs kept theirs, else the SHA-256 of
 * "<key>/<tenant>", so that one tenant's done profile is never another's
 * answer (its id would then be a 404 to it). */
void rematd_tenant_reuse_key(const struct rematd_request *r, char key[65]);
/* GET of a job of one kind. */
enum rematd_handled rematd_get_job(struct rematd_request *r, const char *kind);

#endif
