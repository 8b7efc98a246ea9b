/*
 * POST /v1/plans: plan synchronously, store, answer 201 with the plan.
 *
 * Planning takes microseconds, so it runs in the handler.  Storing does not
 * fsync per request: the plan is queued for the writer thread's next group
 * commit and the connection is suspended; the writer resumes it once the
 * batch holding the plan is durable, and only then does the 201 go out.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "plan_common.h"

/* The last request body this thread hashed: clients repeating one profile
 * (schedulers polling, load tests) skip the SHA-256.  Kept under a
 * pthread key so that its destructor frees it when an MHD thread ends. */
struct hash_cache {
    char *body;
    size_t len;
    char hash[65];
};
static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

static void cache_free(void *p)
{
    struct hash_cache *c = p;
    free(c->body);
    free(c);
}

static void cache_init(void)
{
    pthread_key_create(&cache_key, cache_free);
}

static void body_hash(struct rematd_request *r, char out[65])
{
    if (r->body_hash[0]) {
        memcpy(out, r->body_hash, 65);
        return;
    }
    pthread_once(&cache_once, cache_init);
    struct hash_cache *c = pthread_getspecific(cache_key);
    if (c && c->len == r->body_len && memcmp(c->body, r->body, c->len) == 0) {
        memcpy(out, c->hash, 65);
        return;
    }
    rematd_sha256_hex(r->body, r->body_len, out);
    if (!c) {
        c = calloc(1, sizeof *c);
        if (!c || pthread_setspecific(cache_key, c) != 0) {
            free(c);
            return;
        }
    }
    char *copy = malloc(r->body_len + 1);
    if (copy) {
        memcpy(copy, r->body, r->body_len);
        free(c->body);
        c->body = copy;
        c->len = r->body_len;
        memcpy(c->hash, out, 65);
    }
}

static void committed(struct rematd_plan_write *w)
{
    rq_resume(w->cls);
}

static enum rematd_handled create(struct rematd_request *r)
{
    json_t *body = rq_body_json(r);
    if (!body)
        return HANDLED;
    struct remat_profile *profile;
    struct remat_options opts;
    json_t *options;
    if (rematd_plan_request(r, body, &profile, &opts, &options) < 0)
        return HANDLED;
    struct remat_plan plan;
    memset(&plan, 0, sizeof plan);
    struct remat_error err = {0};
    int rc = remat_solve(profile, &opts, &plan, &err);
    if (rc != REMAT_OK) {
        rematd_answer_remat_error(r, rc, &err, &plan);
        remat_plan_clear(&plan);
        remat_profile_free(profile);
        json_decref(options);
        return HANDLED;
    }
    json_t *pj = remat_plan_to_json(profile, &plan);
    remat_plan_clear(&plan);
    remat_profile_free(profile);
    struct rematd_plan_write *w = calloc(1, sizeof *w);
    if (!pj || !w) {
        free(w);
        json_decref(pj);
        json_decref(options);
        rq_problem(r, 500, "internal", NULL, "out of memory");
        return HANDLED;
    }
    r->plan_write = w;
    rematd_new_id(w->id);
    rematd_rfc3339(rematd_now(), w->created_at);
    char self[64], timeline[80];
    snprintf(self, sizeof self, "/v1/plans/%s", w->id);
    snprintf(timeline, sizeof timeline, "/v1/plans/%s/timeline.svg", w->id);
    json_object_set_new(pj, "id", json_string(w->id));
    json_object_set_new(pj, "created_at", json_string(w->created_at));
    json_t *pid = json_object_get(options, "profile_id");
    if (pid)
        json_object_set(pj, "profile_id", pid);
    json_object_set_new(pj, "links", json_pack("{s:s, s:s}", "self", self, "timeline", timeline));
    w->body = json_dumps(pj, JSON_COMPACT);
    w->options = json_dumps(options, JSON_COMPACT);
    json_decref(pj);
    json_decref(options);
    if (!w->body || !w->options) {
        rq_problem(r, 500, "internal", NULL, "out of memory");
        return HANDLED;
    }
    w->algorithm = remat_algorithm_name(opts.algorithm);
    body_hash(r, w->body_hash);
    w->request_body = r->body;
    w->request_len = r->body_len;
    w->idem_key = r->idem_key;
    w->idem_scope = r->route->name;
    w->done = committed;
    w->cls = r;
    int a = (int)opts.algorithm;
    atomic_fetch_add(&r->srv->plans_by_algorithm[a >= 0 && a < REMAT_ALG_COUNT ? a : REMAT_ALG_COUNT],
                     1);
    /* Suspend first: the writer may commit and resume before this returns. */
    rq_suspend(r);
    rematd_store_enqueue_plan(r->srv->store, w);
    return SUSPENDED;
}

static void resumed(struct rematd_request *r)
{
    struct rematd_plan_write *w = r->plan_write;
    if (w->result == 1) {
        rq_problem(r, 409, "idempotency-key-in-use", NULL,
                   "another request with this Idempotency-Key was stored first; retry to get "
                   "its answer");
        return;
    }
    if (w->result != 0) {
        rq_problem(r, 503, "unavailable", NULL, "the plan could not be stored");
        return;
    }
    char loc[64];
    snprintf(loc, sizeof loc, "/v1/plans/%s", w->id);
    rq_header(r, "Location", loc);
    char *b = w->body;
    w->body = NULL;
    rq_text(r, 201, "application/json", b, strlen(b), 0);
}

const struct remat_route route_plans_create = {.method = "POST",
                                               .pattern = "/v1/plans",
                                               .name = "plans_create",
                                               .auth = AUTH_CLIENT,
                                               .idempotent = 1,
                                               .handler = create,
                                               .resumed = resumed};
