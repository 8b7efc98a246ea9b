/* jobs_common.h - shared by the profile and validation routes. */
#ifndef REMATD_JOBS_COMMON_H
#define REMATD_JOBS_COMMON_H

#include "http/http.h"
#include "store.h"

/* "cpu", "cuda" or "cuda:N". */
int rematd_device_ok(const char *device);
/* Stores a queued job with spec (stolen) and answers 202 + Location, or a
 * replay when the Idempotency-Key was recorded meanwhile. */
void rematd_queue_job(struct rematd_request *r, const char *kind, json_t *spec);
/* The same, storing the job's reuse key (may be NULL). */
void rematd_queue_job_keyed(struct rematd_request *r, const char *kind, json_t *spec,
                            const char *reuse_key);
/* The job as GET /v1/profiles/{id} or /v1/validations/{id} shows it, with
 * its link: new, or NULL (no memory). */
json_t *rematd_job_view(const struct rematd_job *j);
/* A profile request's body (POST /v1/profiles' fields, "reuse" aside)
 * checked and normalised into the job's spec: new, or NULL after answering
 * the problem (route_profiles_create.c). */
json_t *rematd_profile_spec(struct rematd_request *r, json_t *body);
/* The reuse key of a normalised profile spec: 64 hex digits and a NUL.
 * 0, or -1 when out of memory. */
int rematd_profile_reuse_key(const json_t *spec, char key[65]);
/* GET of a job of one kind. */
enum rematd_handled rematd_get_job(struct rematd_request *r, const char *kind);

#endif
