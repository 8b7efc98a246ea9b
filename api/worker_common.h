/* worker_common.h - shared by the /v1/worker routes (openapi.yaml, docs/jobs.md). */
#ifndef REMATD_WORKER_COMMON_H
#define REMATD_WORKER_COMMON_H

#include "http/http.h"
#include "store.h"

/* Reads {"lease_id": ...} plus the fields in allowed; returns the lease id
 * (borrowed from the body) or NULL after answering. */
const char *rematd_worker_body(struct rematd_request *r, const char *const *allowed);
/* Answers a lease call's result: OK → 200 with body (stolen; NULL for
 * {"status":"ok"}), CONFLICT → 409 lease-conflict, NOT_FOUND → 404,
 * ERROR → 503. */
void rematd_worker_answer(struct rematd_request *r, enum rematd_store_result rc, json_t *body);

#endif
