/* plan_request.h - reading a plan request: the profile (inline or by
 * profile_id) and the solver options, for POST /v1/plans and for the other
 * routes that take the same fields (the timeline's query, a validation's
 * plan). */
#ifndef REMATD_PLAN_REQUEST_H
#define REMATD_PLAN_REQUEST_H

#include "rematd.h"

/* A request read and checked. */
struct rematd_plan_req {
    struct remat_profile *profile; /* owned */
    struct remat_options opts;
    json_t *options; /* the normalised options, owned */
};

/* Reads POST /v1/plans's body, once: the "profile" member in place with
 * libremat's streaming reader and the small rest with jansson; a body that
 * reader would not take the same way (see plan_request.c) is read whole
 * by jansson instead, with the same answers.  Returns 0 with *out filled
 * (rematd_plan_req_clear), or -1 after answering the problem. */
int rematd_plan_req_read(struct rematd_request *r, struct rematd_plan_req *out);
void rematd_plan_req_clear(struct rematd_plan_req *pr);

/* Reads {profile | profile_id, algorithm, segments, budget_bytes, model,
 * mem_slots} from a parsed body.  Returns 0 with *profile (new) and
 * *options_json (new: the normalised options), or -1 after answering the
 * problem. */
int rematd_plan_request(struct rematd_request *r, json_t *body, struct remat_profile **profile,
                        struct remat_options *opts, json_t **options_json);
/* The same, where body's "profile" member is a placeholder and `parsed`
 * (new, stolen; may be NULL for the plain path) is the profile already
 * read from the request text. */
int rematd_plan_request_parsed(struct rematd_request *r, json_t *body, struct remat_profile *parsed,
                               struct remat_profile **profile, struct remat_options *opts,
                               json_t **options_json);

#endif
