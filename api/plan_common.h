/* plan_common.h - shared by the plan, timeline and validation routes
 * (plans/request.h reads the request). */
#ifndef REMATD_PLAN_COMMON_H
#define REMATD_PLAN_COMMON_H

#include "plan_codec.h"
#include "plans/request.h"
#include "read_ctx.h"
#include "http/http.h"
#include "store.h"

/* The done profile job's result as a profile (new), or NULL after answering. */
struct remat_profile *rematd_profile_by_id(struct rematd_request *r, const char *id,
                                           const char *pointer);
/* The same for the request req (a struct rematd_request *: its store and
 * tenant), filling prob instead of answering: the lookup readers are given
 * (struct rematd_read_ctx). */
struct remat_profile *rematd_profile_lookup(void *req, const char *id, const char *pointer,
                                            struct rematd_problem *prob);
/* A reader's context for the request r: the stage limit, and the profile
 * jobs and models r's tenant owns. */
void rematd_read_ctx_init(struct rematd_read_ctx *ctx, struct rematd_request *r);
void rematd_answer_remat_error(struct rematd_request *r, int rc, const struct remat_error *err,
                               const struct remat_plan *plan);
/* remat_solve under the service's bounds: the solver's memory bound
 * (remat_solve_memory_bound) is reserved from --solve-memory-bytes first
 * (422 solve-memory when one request is over it, 503 solve-memory with
 * Retry-After while others hold it), and the solve is canceled at
 * --solve-timeout-ms (422 solve-deadline), when the client closes its
 * connection, or when shutdown's drain time is over (503 shutting-down).
 * Returns 0 with *plan filled, or -1 after answering the problem (any
 * libremat error included). */
int rematd_plan_solve(struct rematd_request *r, const struct remat_profile *p,
                      const struct remat_options *opts, struct remat_plan *plan);

/* The same bounds around other work (POST /v1/fits): begin reserves need
 * bytes (or fills p with 422/503 solve-memory and returns -1; what names
 * the work in the problem's detail); rematd_solve_cancel(g) is the cancel
 * hook (deadline, client gone, shutdown); end gives the bytes back and,
 * when rc is REMAT_ECANCELED, fills p with why (422 solve-deadline or 503)
 * and returns -1; else 0.  Neither answers: the caller sends p. */
struct rematd_solve_guard {
    struct rematd_request *r;
    int64_t need;
    double t0, deadline; /* rematd_mono() */
    double next_peek;    /* when to look at the client's socket next */
    int why;             /* 0 go on, 1 deadline, 2 client gone, 3 shutdown */
};
int rematd_solve_begin(struct rematd_request *r, int64_t need, const char *what,
                       struct rematd_solve_guard *g, struct rematd_problem *p);
int rematd_solve_cancel(void *g);
int rematd_solve_end(struct rematd_solve_guard *g, int rc, const char *what,
                     struct rematd_problem *p);

/* remat_frontier_compute under the same bounds (min-time's memory bound,
 * the deadline, the client, shutdown).  Returns 0 with *f filled
 * (remat_frontier_clear), or -1 after answering the problem. */
int rematd_frontier_solve(struct rematd_request *r, const struct remat_profile *p, size_t mem_slots,
                          struct remat_frontier *f);

/* A plan answer's text up to its closing brace: remat_plan_dumps's object,
 * then "profile_id" when the profile came from a profile job.  POST and
 * GET /v1/plans both answer through it, so they agree byte for byte.
 * Returns new text of *len bytes (NUL-terminated), or NULL (no memory). */
char *rematd_plan_text(const struct remat_profile *p, const struct remat_plan *plan,
                       const char *profile_id, size_t *len);
/* text (len bytes) with id, created_at, links and the closing brace: the
 * answer.  Returns new, or NULL. */
char *rematd_plan_finish(const char *text, size_t len, const char *id, const char *created_at);
/* A stored plan's answer as it was first given (new text in *body).
 * Returns 1, 0 when there is no such plan, -1 when the store failed, -2
 * when the stored record cannot be read (logged). */
int rematd_plan_load(struct rematd_request *r, const char *id, char **body);

#endif
