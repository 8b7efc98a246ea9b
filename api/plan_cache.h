/* plan_cache.h - POST /v1/plans's answer to a repeated request.
 *
 * Solvers are deterministic and a profile_id names an immutable done
 * profile, so a byte-identical body gets the same plan: clients repeating
 * a request (schedulers polling, retries) skip reading, solving and
 * printing.  Each thread that plans remembers the last request it answered
 * (its body, the answer's text up to id and created_at, the stored record
 * and the options), in thread-local storage freed when the thread ends. */
#ifndef REMATD_PLAN_CACHE_H
#define REMATD_PLAN_CACHE_H

#include "http/http.h"
#include "store.h"

/* When r's body is the one this thread answered last: fills w's body
 * (with w's id and created_at), options, record, profile_id and algorithm
 * from it, sets *alg and returns 1.  w's buffers may be NULL afterwards
 * when out of memory (the caller checks them, as after a solve).  0 when
 * this thread has no answer to r's body. */
int rematd_plan_cache_answer(struct rematd_request *r, struct rematd_plan_write *w,
                             enum remat_algorithm *alg);

/* Remembers w (complete but for its id and created_at) as this thread's
 * answer to r's body.  Copying the body and the text of every distinct
 * request showed in the planning threads' profile, so the cache takes
 * them: r's body (r reads it no more; the cache's previous one goes back
 * to r, to be freed with it) and *text (set to NULL), text_len bytes of
 * rematd_plan_text.  On any failure the cache is just left empty. */
void rematd_plan_cache_store(struct rematd_request *r, const struct rematd_plan_write *w,
                             char **text, size_t text_len, enum remat_algorithm alg);

#endif
