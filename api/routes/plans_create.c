/*
 * POST /v1/plans: plan synchronously, store, answer 201 with the plan.
 *
 * The handler: plans/request.c reads the body, plan_cache.c answers a
 * repeated one, this file chooses the thread and stores the plan.  Small
 * requests for the fast solvers are planned on the polling thread
 * (microseconds); anything that can take long (a large body to read, a
 * min-time table, acg or paper-cubic) is planned on a planning thread
 * (pool.c) with the connection suspended, so that no polling thread
 * stalls.  Storing does not fsync per request: the plan is queued for the
 * writer thread's next group commit; the writer resumes the connection once
 * the batch holding the plan is durable, and only then does the 201 go out.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_cache.h"
#include "plan_common.h"
#include "plans/request.h"
#include "store.h"

/* The route's state, owned by the request (r->route_state, freed by
 * state_free when the request ends): the plan being stored, and the
 * request read on the polling thread and carried to a planning thread. */
struct plan_state {
    struct rematd_plan_write w;
    struct rematd_plan_req req;
};

static void state_free(void *v)
{
    struct plan_state *st = v;
    free(st->w.options);
    free(st->w.body);
    free(st->w.record);
    rematd_idem_clear(&st->w.existing);
    rematd_plan_req_clear(&st->req);
    free(st);
}

/* Solves, and fills w with the stored record, the options and the answer.
 * Takes req's contents.  Returns 0, or -1 after answering the problem. */
static int make_plan(struct rematd_request *r, struct rematd_plan_write *w,
                     struct rematd_plan_req *req)
{
    struct remat_profile *p = req->profile;
    json_t *options = req->options;
    req->profile = NULL;
    req->options = NULL;
    struct remat_plan plan;
    if (rematd_plan_solve(r, p, &req->opts, &plan) < 0) {
        remat_profile_free(p);
        json_decref(options);
        return -1;
    }
    json_t *pid = json_object_get(options, "profile_id");
    if (json_is_string(pid))
        snprintf(w->profile_id, sizeof w->profile_id, "%s", json_string_value(pid));
    size_t len = 0;
    char *text = rematd_plan_text(p, &plan, w->profile_id, &len);
    w->record = rematd_plan_encode(p, &plan, &w->record_len);
    remat_plan_clear(&plan);
    remat_profile_free(p);
    w->options = json_dumps(options, JSON_COMPACT);
    json_decref(options);
    w->algorithm = remat_algorithm_name(req->opts.algorithm);
    if (text && w->options && w->record) {
        w->body = rematd_plan_finish(text, len, w->id, w->created_at);
        rematd_plan_cache_store(r, w, &text, len, req->opts.algorithm);
    }
    free(text);
    return 0;
}

/* Planned on the polling thread itself: requests whose body is at most
 * INLINE_BODY bytes and whose solver is O(n log n) or less on at most
 * INLINE_STAGES stages, i.e. well under a millisecond.  Handing those to a
 * planning thread cost ~4 us of CPU each (the queue and the wakeup) and
 * bought nothing; a long solve on a polling thread would stall every
 * connection it holds, health probes included (liveness.sh). */
#define INLINE_BODY (64 * 1024)
#define INLINE_STAGES 2000

static int cheap(const struct rematd_plan_req *req)
{
    switch (req->opts.algorithm) {
    case REMAT_ALG_STORE_ALL:
    case REMAT_ALG_SQRT:
    case REMAT_ALG_UNIFORM:
    case REMAT_ALG_PAPER_LINEAR:
    case REMAT_ALG_MIN_PEAK:
        return req->profile->n_stages <= INLINE_STAGES;
    default:
        return 0;
    }
}

static void committed(struct rematd_plan_write *w)
{
    rematd_req_resume(w->cls);
}

/* st->w is complete: count it, suspend the connection (unless a planning
 * thread has it suspended already) and queue the plan for the writer,
 * which resumes the connection once the plan is committed. */
static enum rematd_handled submit(struct rematd_request *r, struct plan_state *st,
                                  enum remat_algorithm alg)
{
    struct rematd_plan_write *w = &st->w;
    if (!w->body || !w->options || !w->record) {
        rematd_req_problem(r, 500, "internal", NULL, "out of memory");
        return REMATD_HANDLED;
    }
    memcpy(w->body_hash, r->body_hash, sizeof w->body_hash);
    w->idem_key = r->idem_key;
    w->idem_scope = r->idem_scope;
    w->tenant = r->tenant;
    w->done = committed;
    w->cls = r;
    atomic_fetch_add(
        &r->srv->plans_by_algorithm[(int)alg < REMAT_ALG_COUNT ? (int)alg : REMAT_ALG_COUNT], 1);
    if (!rematd_req_suspended(r))
        rematd_req_suspend(r);
    /* The last use of r here: the writer may commit and resume it (and
     * MHD free it) before this returns. */
    rematd_store_enqueue_plan(r->srv->store, w);
    return REMATD_SUSPENDED;
}

/* Solves the request read into st->req and submits it. */
static enum rematd_handled solve(struct rematd_request *r, struct plan_state *st)
{
    enum remat_algorithm alg = st->req.opts.algorithm;
    if (make_plan(r, &st->w, &st->req) < 0)
        return REMATD_HANDLED;
    return submit(r, st, alg);
}

/* On a planning thread (rematd_req_defer): answers are recorded, and a problem
 * resumes the connection to be sent; a plan handed to the writer is resumed
 * by it. */
static void finish_job(struct rematd_request *r, enum rematd_handled h)
{
    if (h != REMATD_SUSPENDED)
        rematd_req_end_job(r);
}

static void solve_job(struct rematd_request *r)
{
    finish_job(r, solve(r, r->route_state));
}

/* Plans the request: on the polling thread (on_pool 0), which hands the
 * solve to a planning thread unless it is cheap, or on a planning thread
 * (on_pool 1) for a large body, whose reading alone can take milliseconds. */
static enum rematd_handled plan(struct rematd_request *r, int on_pool)
{
    struct plan_state *st = calloc(1, sizeof *st);
    if (!st) {
        rematd_req_problem(r, 500, "internal", NULL, "out of memory");
        return REMATD_HANDLED;
    }
    r->route_state = st;
    r->route_state_free = state_free;
    rematd_new_ordered_id(st->w.id);
    rematd_rfc3339(rematd_now(), st->w.created_at);
    enum remat_algorithm alg;
    if (rematd_plan_cache_answer(r, &st->w, &alg))
        return submit(r, st, alg);
    /* The reader fills a problem rather than answering (plans/request.h);
     * both live on this stack frame, nothing is allocated for them. */
    struct rematd_read_ctx ctx;
    struct rematd_problem prob = {0};
    rematd_read_ctx_init(&ctx, r);
    if (rematd_plan_req_read(&ctx, rematx_dyn_ptr(&r->body), rematx_dyn_len(&r->body), &st->req,
                             &prob) < 0) {
        rematd_req_send_problem(r, &prob);
        return REMATD_HANDLED;
    }
    if (!on_pool && !cheap(&st->req))
        return rematd_req_defer(r, solve_job) < 0 ? REMATD_HANDLED : REMATD_SUSPENDED;
    return solve(r, st);
}

static void plan_job(struct rematd_request *r)
{
    finish_job(r, plan(r, 1));
}

static enum rematd_handled create(struct rematd_request *r)
{
    if (rematx_dyn_len(&r->body) > INLINE_BODY)
        return rematd_req_defer(r, plan_job) < 0 ? REMATD_HANDLED : REMATD_SUSPENDED;
    return plan(r, 0);
}

static void resumed(struct rematd_request *r)
{
    struct plan_state *st = r->route_state;
    struct rematd_plan_write *w = &st->w;
    if (w->result == REMATD_STORE_CONFLICT) {
        /* Another request with this Idempotency-Key was stored first
         * (since our check, or in the same batch): its answer. */
        rematd_req_replay(r, &w->existing);
        return;
    }
    if (w->result == REMATD_STORE_FULL) {
        rematd_req_header(r, "Retry-After", "60");
        rematd_req_problem(r, 503, "queue-full", NULL,
                           "the Idempotency-Key records are full (--max-idempotency-keys, or"
                           " this tenant's share, --tenant-max-idempotency-keys); try again"
                           " later");
        return;
    }
    if (w->result != REMATD_STORE_OK) {
        rematd_req_header(r, "Retry-After", "5");
        rematd_req_problem(r, 503, "unavailable", NULL, "the plan could not be stored");
        return;
    }
    char *b = w->body;
    w->body = NULL;
    rematd_req_created(r, w->id, b, strlen(b));
}

const struct rematd_route rematd_route_plans_create = {.method = "POST",
                                                       .pattern = "/v1/plans",
                                                       .name = "plans_create",
                                                       .auth = REMATD_AUTH_CLIENT,
                                                       .created_status = 201,
                                                       .handler = create,
                                                       .resumed = resumed};
