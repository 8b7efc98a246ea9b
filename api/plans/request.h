/* plans/request.h - reading a plan request: the profile (inline or by
 * profile_id) and the solver options, for POST /v1/plans and for the other
 * routes that take the same fields (the timeline's query, a validation's
 * plan).  Pure: no HTTP, no store; what is wrong fills a struct
 * rematd_problem (problem.h), and a profile job is looked up through the
 * context (struct rematd_read_ctx), so that tests/api/test_plan_request.c
 * and tests/fuzz/fuzz_plan_request.c call these as they are. */
#ifndef REMATD_PLANS_REQUEST_H
#define REMATD_PLANS_REQUEST_H

#include <jansson.h>

#include "problem.h"
#include "remat.h"

/* A request read and checked. */
struct rematd_plan_req {
    struct remat_profile *profile; /* owned */
    struct remat_options opts;
    json_t *options; /* the normalised options, owned */
};

/* Reads POST /v1/plans's body (len bytes at text), once: the "profile"
 * member in place with libremat's streaming reader and the small rest with
 * jansson; a body that reader would not take the same way (see
 * plans/request.c) is read whole by jansson instead, with the same
 * problems.  Returns 0 with *out filled (rematd_plan_req_clear), or -1 with
 * prob filled (*out empty). */
int rematd_plan_req_read(const struct rematd_read_ctx *ctx, const char *text, size_t len,
                         struct rematd_plan_req *out, struct rematd_problem *prob);
void rematd_plan_req_clear(struct rematd_plan_req *pr);

/* Reads {profile | profile_id, algorithm, segments, budget_bytes, model,
 * mem_slots} from a parsed body.  Returns 0 with *profile (new) and
 * *options_json (new: the normalised options), or -1 with prob filled
 * (nothing left to free). */
int rematd_plan_request(const struct rematd_read_ctx *ctx, json_t *body,
                        struct remat_profile **profile, struct remat_options *opts,
                        json_t **options_json, struct rematd_problem *prob);
/* The same, where body's "profile" member is a placeholder and `parsed`
 * (new, stolen; may be NULL for the plain path) is the profile already
 * read from the request text. */
int rematd_plan_request_parsed(const struct rematd_read_ctx *ctx, json_t *body,
                               struct remat_profile *parsed, struct remat_profile **profile,
                               struct remat_options *opts, json_t **options_json,
                               struct rematd_problem *prob);

#endif
