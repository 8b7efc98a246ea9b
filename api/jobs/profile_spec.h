/* jobs/profile_spec.h - a profile job's spec from a request body (POST
 * /v1/profiles, and the profile jobs POST /v1/fits queues for a model
 * spec): pure, tested by tests/api/test_job_readers.c as it is. */
#ifndef REMATD_JOBS_PROFILE_SPEC_H
#define REMATD_JOBS_PROFILE_SPEC_H

#include <jansson.h>

#include "problem.h"

/* A profile request's body (POST /v1/profiles' fields, "reuse" aside)
 * checked and normalised into the job's spec: new, or NULL with p filled.
 * An uploaded model (model_id) is looked up through ctx. */
json_t *rematd_profile_spec(const struct rematd_read_ctx *ctx, json_t *body,
                            struct rematd_problem *p);
/* The reuse key of a normalised profile spec: 64 hex digits and a NUL.
 * 0, or -1 when out of memory. */
int rematd_profile_reuse_key(const json_t *spec, char key[65]);
/* "cpu", "cuda" or "cuda:N". */
int rematd_device_ok(const char *device);

#endif
