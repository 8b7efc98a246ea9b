/* problem.h - what a reader found wrong with a request, as data (after
 * jansson's json_error_t and libremat's struct remat_error).
 *
 * Readers and validators (plans/request.c, jobs/profile_spec.c) fill a
 * caller-owned struct rematd_problem and return -1; they do no I/O and
 * know nothing of HTTP, so that cmocka tests and fuzz targets call them as
 * they are.  A route sends what they filled with rematd_req_send_problem
 * (http/http.h), which turns it into the problem+json answer. */
#ifndef REMATD_PROBLEM_H
#define REMATD_PROBLEM_H

#include <stddef.h>

#include <jansson.h>

#include "remat.h"

struct rematd_problem {
    int status;              /* the HTTP status; 0 while nothing is wrong */
    const char *slug;        /* the type after /problems/, a static string */
    char pointer[160];       /* JSON pointer of the field at fault, "" when none */
    char detail[512];        /* one line */
    json_t *extra;           /* owned: members added to the answer (min_budget_bytes), or NULL */
    const char *retry_after; /* a static Retry-After value to send with it, or NULL */
};

/* Fills p (pointer may be NULL for none).  Whatever p held is cleared. */
void rematd_problem_set(struct rematd_problem *p, int status, const char *slug, const char *pointer,
                        const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Gives back p->extra; p is empty after. */
void rematd_problem_clear(struct rematd_problem *p);

/* libremat's error rc (err's pointer and message) as a problem: 400
 * validation or limit-exceeded, 422 infeasible (with min_budget_bytes from
 * plan, which may be NULL), 501 unsupported, else 500. */
void rematd_problem_remat(struct rematd_problem *p, int rc, const struct remat_error *err,
                          const struct remat_plan *plan);

/* 400 validation at prefix/<key> for the first member of obj not in
 * allowed (NULL-terminated).  Returns 0, or -1 with p filled. */
int rematd_problem_unknown(struct rematd_problem *p, json_t *obj, const char *prefix,
                           const char *const *allowed);

/* Whether v is an array of 1..max items: 0, or -1 with p filled: 400
 * validation at pointer saying `empty` when it is not an array or has
 * none, 400 limit-exceeded "N <noun>; at most max" when it has more.  The
 * one bound check of the request readers' arrays, so that they word it
 * alike. */
int rematd_problem_array(struct rematd_problem *p, json_t *v, const char *pointer, size_t max,
                         const char *empty, const char *noun);

/* obj's member `name`, when there is one, into *out: an integer in
 * lo..hi.  0 (*out unchanged when there is none), or -1 with 400
 * validation at /name: "NAME must be an integer in RANGE", RANGE being
 * range or, when NULL, lo..hi in digits.  The request readers' one
 * integer field reader. */
int rematd_problem_int(struct rematd_problem *p, json_t *obj, const char *name, json_int_t lo,
                       json_int_t hi, const char *range, json_int_t *out);

/* An uploaded model as a profile spec names it. */
struct rematd_read_model {
    char id[33];
    char sha256[65];
    long long bytes;
};

/* What a reader may look up beyond the request: the server's limit on
 * stages, done profile jobs and uploaded models by id (read_ctx.c's
 * lookups over the store in rematd; a table in a test).  profile_by_id
 * returns the profile (new), or NULL with p filled; model_by_id returns 0
 * with *m filled, or -1 with p filled.  A NULL lookup knows nothing (404). */
struct rematd_read_ctx {
    size_t max_stages;
    struct remat_profile *(*profile_by_id)(void *cls, const char *id, const char *pointer,
                                           struct rematd_problem *p);
    int (*model_by_id)(void *cls, const char *id, struct rematd_read_model *m,
                       struct rematd_problem *p);
    void *cls;
};

/* ctx's profile of job id, or NULL with p filled. */
struct remat_profile *rematd_read_profile_by_id(const struct rematd_read_ctx *ctx, const char *id,
                                                const char *pointer, struct rematd_problem *p);

/* ctx's uploaded model id (the pointer is /model_id): 0, or -1 with p
 * filled. */
int rematd_read_model_by_id(const struct rematd_read_ctx *ctx, const char *id,
                            struct rematd_read_model *m, struct rematd_problem *p);

/* JSON depth allowed in request bodies: far below jansson's 2048, deep
 * enough for every document remat accepts (layer lists nest "sequential"). */
#define REMATD_MAX_JSON_DEPTH 32

/* A request body (len bytes at text) as a JSON object: new, or NULL with p
 * filled (400 invalid-json: empty, a NUL byte, malformed, not an object;
 * 400 json-too-deep). */
json_t *rematd_body_parse(const char *text, size_t len, struct rematd_problem *p);

#endif
