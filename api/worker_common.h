/* worker_common.h - shared by the /v1/worker routes (jobs-protocol.md). */
#ifndef REMATD_WORKER_COMMON_H
#define REMATD_WORKER_COMMON_H

#include "rematd.h"

/* Reads {"lease_id": ...} plus the fields in allowed; returns the lease id
 * (borrowed from the body) or NULL after answering. */
const char *rematd_worker_body(struct rematd_request *r, const char *const *allowed);
/* Answers a store result: 0 → 200 with body (stolen), 1 → 409, 2 → 404. */
void rematd_worker_answer(struct rematd_request *r, int rc, json_t *body);

#endif
