/* plan_common.c - what the plan routes share: a done profile job's
 * profile, libremat's error codes as problem+json, the solve guard, and a
 * plan's answer text (plans/request.c reads the request itself). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_common.h"

void rematd_answer_remat_error(struct rematd_request *r, int rc, const struct remat_error *err,
                               const struct remat_plan *plan)
{
    struct rematd_problem p = {0};
    rematd_problem_remat(&p, rc, err, plan);
    rematd_req_send_problem(r, &p);
}

int rematd_solve_cancel(void *arg)
{
    struct rematd_solve_guard *g = arg;
    double now = rematd_mono();
    if (now >= g->deadline)
        g->why = 1;
    else if (atomic_load(&g->r->srv->closing))
        g->why = 3;
    else if (now >= g->next_peek) {
        g->next_peek = now + 0.02;
        if (rematd_req_client_gone(g->r))
            g->why = 2;
    }
    return g->why;
}

int rematd_solve_begin(struct rematd_request *r, int64_t need, const char *what,
                       struct rematd_solve_guard *g, struct rematd_problem *p)
{
    struct rematd_server *srv = r->srv;
    memset(g, 0, sizeof *g);
    long long limit = (long long)srv->cfg.solve_memory_bytes;
    if (need > limit) {
        rematd_problem_set(p, 422, "solve-memory", NULL,
                           "this %s may take %lld bytes, over the %lld this server gives all"
                           " solves (--solve-memory-bytes); %s",
                           what, (long long)need, limit,
                           strcmp(what, "solve") == 0 ? "fewer stages or mem_slots fit"
                                                      : "fewer stages, memories or mem_slots fit");
        return -1;
    }
    long long cur = atomic_load(&srv->solve_memory);
    do {
        if (cur + need > limit) {
            rematd_problem_set(p, 503, "solve-memory", NULL,
                               "this %s may take %lld bytes and running solves hold %lld of"
                               " %lld (--solve-memory-bytes): try again shortly",
                               what, (long long)need, cur, limit);
            p->retry_after = "1";
            return -1;
        }
    } while (!atomic_compare_exchange_weak(&srv->solve_memory, &cur, cur + need));
    g->r = r;
    g->need = need;
    g->t0 = rematd_mono();
    g->deadline = g->t0 + srv->cfg.solve_timeout_ms / 1000.0;
    return 0;
}

int rematd_solve_end(struct rematd_solve_guard *g, int rc, const char *what,
                     struct rematd_problem *p)
{
    struct rematd_request *r = g->r;
    struct rematd_server *srv = r->srv;
    atomic_fetch_sub(&srv->solve_memory, g->need);
    g->need = 0;
    if (rc != REMAT_ECANCELED)
        return 0;
    double ms = (rematd_mono() - g->t0) * 1000;
    if (g->why == 1) {
        rematd_problem_set(p, 422, "solve-deadline", NULL,
                           "the %s passed its deadline of %u ms (--solve-timeout-ms); %s", what,
                           srv->cfg.solve_timeout_ms,
                           strcmp(what, "solve") == 0
                               ? "fewer stages or mem_slots solve faster"
                               : "fewer stages, memories or mem_slots, or \"throughput\": "
                                 "false, answer faster");
    } else if (g->why == 2) {
        rematd_log("info", "solve canceled: the client went away",
                   json_pack("{s:s, s:f}", "request_id", r->request_id, "solve_ms", ms));
        rematd_problem_set(p, 503, "canceled", NULL, "the client went away");
    } else {
        rematd_problem_set(p, 503, "shutting-down", NULL,
                           "rematd is shutting down; the %s was stopped", what);
        p->retry_after = "1";
    }
    return -1;
}

/* A solve under the guard, for plans and frontiers alike: run is the solve
 * itself (its cancel argument the guard), clear frees what it made. */
struct guarded_solve {
    int (*run)(const struct guarded_solve *s, struct rematd_solve_guard *g,
               struct remat_error *err);
    void (*clear)(const struct guarded_solve *s);
    const struct remat_profile *p;
    const struct remat_options *opts; /* weighed by remat_solve_memory_bound */
    struct remat_plan *plan;          /* a plan's, or NULL */
    struct remat_frontier *f;         /* a frontier's, or NULL */
};

/* The memory bound, a share of --solve-memory-bytes, the solve, and the
 * problem for each way that can fail (sent here): 0, or -1 once answered.
 * One place, so that a plan and a frontier stop and fail alike. */
static int solve_guarded(struct rematd_request *r, const struct guarded_solve *s)
{
    struct remat_error err = {0};
    int64_t need = 0;
    int rc = remat_solve_memory_bound(s->p, s->opts, &need, &err);
    if (rc != REMAT_OK) {
        rematd_answer_remat_error(r, rc, &err, NULL);
        return -1;
    }
    struct rematd_solve_guard g;
    struct rematd_problem why = {0};
    if (rematd_solve_begin(r, need, "solve", &g, &why) < 0) {
        rematd_req_send_problem(r, &why);
        return -1;
    }
    rc = s->run(s, &g, &err);
    if (rematd_solve_end(&g, rc, "solve", &why) < 0) {
        rematd_req_send_problem(r, &why);
        s->clear(s);
        return -1;
    }
    if (rc != REMAT_OK) {
        rematd_answer_remat_error(r, rc, &err, s->plan);
        s->clear(s);
        return -1;
    }
    return 0;
}

static int run_plan(const struct guarded_solve *s, struct rematd_solve_guard *g,
                    struct remat_error *err)
{
    struct remat_options o = *s->opts;
    o.cancel = rematd_solve_cancel;
    o.cancel_arg = g;
    return remat_solve(s->p, &o, s->plan, err);
}

static void clear_plan(const struct guarded_solve *s)
{
    remat_plan_clear(s->plan);
}

int rematd_plan_solve(struct rematd_request *r, const struct remat_profile *p,
                      const struct remat_options *opts, struct remat_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    struct guarded_solve s = {run_plan, clear_plan, p, opts, plan, NULL};
    return solve_guarded(r, &s);
}

static int run_frontier(const struct guarded_solve *s, struct rematd_solve_guard *g,
                        struct remat_error *err)
{
    return remat_frontier_compute_cancel(s->p, s->opts->mem_slots, rematd_solve_cancel, g, s->f,
                                         err);
}

static void clear_frontier(const struct guarded_solve *s)
{
    remat_frontier_clear(s->f);
}

int rematd_frontier_solve(struct rematd_request *r, const struct remat_profile *p, size_t mem_slots,
                          struct remat_frontier *f)
{
    memset(f, 0, sizeof *f);
    /* The frontier is one min-time table fill (at store-all's peak), so
     * min-time's bound is its bound; the budget does not change it. */
    struct remat_options o;
    remat_options_init(&o);
    o.algorithm = REMAT_ALG_MIN_TIME;
    o.budget_bytes = 1;
    o.mem_slots = mem_slots;
    struct guarded_solve s = {run_frontier, clear_frontier, p, &o, NULL, f};
    return solve_guarded(r, &s);
}

struct remat_profile *rematd_profile_by_id(struct rematd_request *r, const char *id,
                                           const char *pointer)
{
    struct rematd_problem prob = {0};
    struct remat_profile *p = rematd_profile_lookup(r, id, pointer, &prob);
    if (!p)
        rematd_req_send_problem(r, &prob);
    return p;
}

char *rematd_plan_text(const struct remat_profile *p, const struct remat_plan *plan,
                       const char *profile_id, size_t *len)
{
    size_t n = 0;
    char *text = remat_plan_dumps(p, plan, &n);
    if (text == NULL)
        return NULL;
    n--; /* the closing brace */
    if (profile_id && profile_id[0]) {
        /* An id is 32 hexadecimal characters: nothing to escape. */
        char *t = realloc(text, n + 64);
        if (t == NULL) {
            free(text);
            return NULL;
        }
        text = t;
        n += (size_t)snprintf(text + n, 64, ",\"profile_id\":\"%s\"", profile_id);
    }
    text[n] = '\0';
    *len = n;
    return text;
}

char *rematd_plan_finish(const char *text, size_t len, const char *id, const char *created_at)
{
    /* ,"id":"ID","created_at":"TS","links":{"self":"/v1/plans/ID",
     * "timeline":"/v1/plans/ID/timeline.svg"}} written piece by piece: a
     * snprintf of it showed in the planning threads' profile. */
    size_t idl = strlen(id), tsl = strlen(created_at);
    char *b = malloc(len + 3 * idl + tsl + 128);
    if (!b)
        return NULL;
    char *q = b;
#define PUT(s, n)                                                                                  \
    do {                                                                                           \
        memcpy(q, (s), (n));                                                                       \
        q += (n);                                                                                  \
    } while (0)
#define LIT(s) PUT(s, sizeof(s) - 1)
    PUT(text, len);
    LIT(",\"id\":\"");
    PUT(id, idl);
    LIT("\",\"created_at\":\"");
    PUT(created_at, tsl);
    LIT("\",\"links\":{\"self\":\"/v1/plans/");
    PUT(id, idl);
    LIT("\",\"timeline\":\"/v1/plans/");
    PUT(id, idl);
    LIT("/timeline.svg\"}}");
#undef LIT
#undef PUT
    *q = '\0';
    return b;
}

int rematd_plan_load(struct rematd_request *r, const char *id, char **body)
{
    *body = NULL;
    struct rematd_stored_plan sp;
    enum rematd_store_result got = rematd_store_get_plan(r->srv->store, id, &sp);
    if (got == REMATD_STORE_OK && !rematd_req_owns(r, sp.tenant)) {
        rematd_stored_plan_clear(&sp);
        got = REMATD_STORE_NOT_FOUND; /* another tenant's: as if none */
    }
    if (got != REMATD_STORE_OK)
        return got == REMATD_STORE_NOT_FOUND ? 0 : -1;
    if (sp.legacy_body) {
        *body = sp.legacy_body;
        sp.legacy_body = NULL;
        rematd_stored_plan_clear(&sp);
        return 1;
    }
    struct remat_profile *p;
    struct remat_plan plan;
    if (rematd_plan_decode(sp.record, sp.record_len, &p, &plan) < 0) {
        rematd_log("error", "stored plan unreadable", json_pack("{s:s}", "plan", id));
        rematd_stored_plan_clear(&sp);
        return -2;
    }
    size_t len = 0;
    char *text = rematd_plan_text(p, &plan, sp.profile_id, &len);
    if (text)
        *body = rematd_plan_finish(text, len, id, sp.created_at);
    free(text);
    remat_plan_clear(&plan);
    remat_profile_free(p);
    rematd_stored_plan_clear(&sp);
    return *body ? 1 : -1;
}
