/*
 * POST /v1/plans: plan synchronously, store, answer 201 with the plan.
 *
 * Small requests for the fast solvers are planned on the polling thread
 * (microseconds); anything that can take long (a large body to read, a
 * min-time table, acg or paper-cubic) is planned on a planning thread
 * (pool.c) with the connection suspended, so that no polling thread
 * stalls.  Storing does not fsync per request: the plan is queued for the
 * writer thread's next group commit; the writer resumes the connection once
 * the batch holding the plan is durable, and only then does the 201 go out.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "plan_common.h"
#include "remat_private.h"
#include "store.h"

/* The last request this thread answered: its body and what was made of
 * it (the answer's text up to id, created_at and links; the stored record;
 * the options).  Solvers are deterministic and a profile_id names an
 * immutable done profile, so a byte-identical body gets the same plan:
 * clients repeating a request (schedulers polling, retries) skip parsing,
 * solving and serialising.  Kept under a pthread key so that its
 * destructor frees it when an MHD thread ends. */
struct plan_cache {
    char *body; /* taken from the request, not copied */
    size_t len;
    char *text; /* taken from make_plan */
    size_t text_len;
    unsigned char *record;
    size_t record_len, record_cap;
    char *options;
    char profile_id[REMATD_ID_LEN + 1];
    enum remat_algorithm algorithm;
};
static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

static void cache_free(void *p)
{
    struct plan_cache *c = p;
    free(c->body);
    free(c->text);
    free(c->record);
    free(c->options);
    free(c);
}

static void cache_init(void)
{
    pthread_key_create(&cache_key, cache_free);
}

static struct plan_cache *cache_hit(struct rematd_request *r)
{
    pthread_once(&cache_once, cache_init);
    struct plan_cache *c = pthread_getspecific(cache_key);
    if (c && c->text && c->len == r->body_len && memcmp(c->body, r->body, c->len) == 0)
        return c;
    return NULL;
}

/* Remembers what w holds as the answer to r's body.  Copying the body
 * and the text of every distinct request showed in the planning threads'
 * profile, so the cache takes them: r's body buffer (r needs it no more;
 * the cache's old one goes back to r, to be freed with it) and *text
 * (set to NULL).  On any failure the cache is just left empty. */
static void cache_store(struct rematd_request *r, const struct rematd_plan_write *w, char **text,
                        size_t text_len, enum remat_algorithm alg)
{
    pthread_once(&cache_once, cache_init);
    struct plan_cache *c = pthread_getspecific(cache_key);
    if (!c) {
        c = calloc(1, sizeof *c);
        if (!c || pthread_setspecific(cache_key, c) != 0) {
            free(c);
            return;
        }
    }
    free(c->text);
    c->text = NULL;
    free(c->options);
    c->options = strdup(w->options);
    if (w->record_len > c->record_cap) {
        free(c->record);
        c->record = malloc(w->record_len);
        c->record_cap = c->record ? w->record_len : 0;
    }
    if (!c->options || !c->record || !r->body)
        return;
    memcpy(c->record, w->record, w->record_len);
    c->record_len = w->record_len;
    char *old = c->body;
    c->body = r->body;
    c->len = r->body_len;
    r->body = old;
    r->body_len = r->body_cap = 0;
    c->text = *text;
    c->text_len = text_len;
    *text = NULL;
    memcpy(c->profile_id, w->profile_id, sizeof c->profile_id);
    c->algorithm = alg;
}

/* Solves, and fills w with the stored record, the options and the answer.
 * Takes p and options.  Returns 0, or -1 after answering the problem. */
static int make_plan(struct rematd_request *r, struct rematd_plan_write *w, struct remat_profile *p,
                     const struct remat_options *opts, json_t *options)
{
    struct remat_plan plan;
    memset(&plan, 0, sizeof plan);
    struct remat_error err = {0};
    int rc = remat_solve(p, opts, &plan, &err);
    if (rc != REMAT_OK) {
        rematd_answer_remat_error(r, rc, &err, &plan);
        remat_plan_clear(&plan);
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
    w->algorithm = remat_algorithm_name(opts->algorithm);
    if (text && w->options && w->record) {
        w->body = rematd_plan_finish(text, len, w->id, w->created_at);
        cache_store(r, w, &text, len, opts->algorithm);
    }
    free(text);
    return 0;
}

/* ---- the fast path: no jansson tree of the profile ------------------
 *
 * A request is mostly its profile.  Reading it into jansson's tree and then
 * into a profile cost several times the solve, and so did printing the
 * plan through a tree.  Here a small scanner finds the top-level "profile"
 * member's value, the rest of the body (the envelope, with a placeholder in
 * that value's place) goes to jansson, the profile text to
 * remat_profile_parse, and the plan is written by remat_plan_dumps.
 *
 * The answers must not change, so the fast path only ever answers what the
 * plain path would: whenever anything is unusual or wrong (bad JSON
 * anywhere, a bad profile, escapes in top-level keys, "profile" given twice,
 * deep nesting) it gives up before answering and the plain path runs on the
 * whole body.  A valid profile cannot change which envelope error comes
 * first, so envelope errors are answered by the same code on either path. */

static const char *skip_ws(const char *p, const char *e)
{
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

/* p at a '"': past the closing quote, or NULL.  *escaped is set when the
 * string has a backslash. */
static const char *skip_string(const char *p, const char *e, int *escaped)
{
    for (p++; p < e; p++) {
        if (*p == '\\') {
            *escaped = 1;
            p++;
        } else if (*p == '"') {
            return p + 1;
        }
    }
    return NULL;
}

/* One value at p (after whitespace): its end, or NULL.  Loose about what is
 * inside (jansson and remat_profile_parse check that); *depth gets the
 * deepest bracket nesting, as rematd_json_depth counts it. */
static const char *skip_value(const char *p, const char *e, size_t *depth)
{
    int escaped = 0;
    size_t d = 0;
    *depth = 0;
    if (p < e && *p == '"')
        return skip_string(p, e, &escaped);
    if (p < e && (*p == '{' || *p == '[')) {
        while (p < e) {
            if (*p == '"') {
                p = skip_string(p, e, &escaped);
                if (p == NULL)
                    return NULL;
                continue;
            }
            if (*p == '{' || *p == '[') {
                if (++d > *depth)
                    *depth = d;
            } else if (*p == '}' || *p == ']') {
                if (--d == 0)
                    return p + 1;
            }
            p++;
        }
        return NULL;
    }
    const char *b = p;
    while (p < e && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\t' && *p != '\n' &&
           *p != '\r')
        p++;
    return p > b ? p : NULL;
}

/* Reads the body's top level: the profile (new) from the one "profile"
 * member, read in place by the streaming reader, which says where it ended,
 * and that value's span.  NULL when the scan saw anything odd, including a
 * profile the reader refused. */
static struct remat_profile *find_profile(const char *body, size_t len, size_t *vs, size_t *ve)
{
    const char *p = body, *e = body + len;
    struct remat_profile *profile = NULL;
    p = skip_ws(p, e);
    if (p >= e || *p != '{')
        return NULL;
    p = skip_ws(p + 1, e);
    if (p < e && *p == '}')
        return NULL;
    for (;;) {
        p = skip_ws(p, e);
        if (p >= e || *p != '"')
            goto odd;
        const char *k = p + 1;
        int escaped = 0;
        p = skip_string(p, e, &escaped);
        if (p == NULL || escaped)
            goto odd;
        int is_profile = p - 1 - k == 7 && memcmp(k, "profile", 7) == 0;
        p = skip_ws(p, e);
        if (p >= e || *p != ':')
            goto odd;
        p = skip_ws(p + 1, e);
        const char *v = p;
        if (is_profile) {
            if (profile != NULL)
                goto odd;
            int depth = 0;
            size_t used = 0;
            struct remat_error err;
            profile =
                remat__profile_parse(v, (size_t)(e - v), "/profile", NULL, &depth, &used, &err);
            /* rematd_json_depth's limit applies to the whole body: a
             * profile nested deeper than usual goes the plain way. */
            if (profile == NULL || depth > 8)
                goto odd;
            p = v + used;
            *vs = (size_t)(v - body);
            *ve = (size_t)(p - body);
        } else {
            size_t d;
            p = skip_value(p, e, &d);
            if (p == NULL)
                goto odd;
        }
        p = skip_ws(p, e);
        if (p < e && *p == ',') {
            p++;
            continue;
        }
        if (p < e && *p == '}')
            break;
        goto odd;
    }
    if (profile != NULL && skip_ws(p + 1, e) == e)
        return profile;
odd:
    remat_profile_free(profile);
    return NULL;
}

/* 1: the plan is in w->body and w->options; -1: a problem was answered
 * (one the plain path would answer too); 0: nothing done, take the plain
 * path. */
/* A request read and checked: the profile (owned), the options and their
 * normalised JSON (owned). */
struct prepared {
    struct remat_profile *p;
    struct remat_options opts;
    json_t *options;
};

static void prepared_free(void *v)
{
    struct prepared *pr = v;
    remat_profile_free(pr->p);
    json_decref(pr->options);
    free(pr);
}

/* The fast path's reading.  1: *out filled; -1: a problem was answered
 * (one the plain path would answer too); 0: nothing done, take the plain
 * path. */
static int fast_prepare(struct rematd_request *r, struct prepared *out)
{
    size_t vs = 0, ve = 0;
    struct remat_profile *profile =
        r->body_len > 0 ? find_profile(r->body, r->body_len, &vs, &ve) : NULL;
    if (profile == NULL)
        return 0;
    /* The envelope: the body with "0" for the profile's value. */
    size_t elen = r->body_len - (ve - vs) + 1;
    char *env_text = malloc(elen);
    if (env_text == NULL) {
        remat_profile_free(profile);
        return 0;
    }
    memcpy(env_text, r->body, vs);
    env_text[vs] = '0';
    memcpy(env_text + vs + 1, r->body + ve, r->body_len - ve);
    json_t *env = json_loadb(env_text, elen, JSON_REJECT_DUPLICATES, NULL);
    free(env_text);
    if (env == NULL || !json_is_object(env) || !json_is_integer(json_object_get(env, "profile")) ||
        rematd_json_depth(env, 9) > 8) {
        json_decref(env);
        remat_profile_free(profile);
        return 0;
    }
    int rc = rematd_plan_request_parsed(r, env, profile, &out->p, &out->opts, &out->options);
    json_decref(env);
    return rc < 0 ? -1 : 1;
}

/* Reads the request, by the fast path or else the plain one.  1: *out
 * filled; -1: a problem was answered. */
static int prepare(struct rematd_request *r, struct prepared *out)
{
    /* A NUL byte is refused by the plain path (rematd_req_body_json); the
     * fast path's envelope must not take it either. */
    if (r->body_len > 0 && memchr(r->body, 0, r->body_len)) {
        rematd_req_body_json(r);
        return -1;
    }
    int rc = fast_prepare(r, out);
    if (rc != 0)
        return rc;
    json_t *body = rematd_req_body_json(r);
    if (!body)
        return -1;
    return rematd_plan_request(r, body, &out->p, &out->opts, &out->options) < 0 ? -1 : 1;
}

/* Planned on the polling thread itself: requests whose body is at most
 * INLINE_BODY bytes and whose solver is O(n log n) or less on at most
 * INLINE_STAGES stages, i.e. well under a millisecond.  Handing those to a
 * planning thread cost ~4 us of CPU each (the queue and the wakeup) and
 * bought nothing; a long solve on a polling thread would stall every
 * connection it holds, health probes included (liveness.sh). */
#define INLINE_BODY (64 * 1024)
#define INLINE_STAGES 2000

static int cheap(const struct prepared *pr)
{
    switch (pr->opts.algorithm) {
    case REMAT_ALG_STORE_ALL:
    case REMAT_ALG_SQRT:
    case REMAT_ALG_UNIFORM:
    case REMAT_ALG_PAPER_LINEAR:
    case REMAT_ALG_MIN_PEAK:
        return pr->p->n_stages <= INLINE_STAGES;
    default:
        return 0;
    }
}

static void committed(struct rematd_plan_write *w)
{
    rematd_req_resume(w->cls);
}

/* w is complete: count it, suspend the connection (unless a planning
 * thread has it suspended already) and queue the plan for the writer,
 * which resumes the connection once the plan is committed. */
static enum rematd_handled submit(struct rematd_request *r, enum remat_algorithm alg)
{
    struct rematd_plan_write *w = r->plan_write;
    if (!w->body || !w->options || !w->record) {
        rematd_req_problem(r, 500, "internal", NULL, "out of memory");
        return REMATD_HANDLED;
    }
    memcpy(w->body_hash, r->body_hash, sizeof w->body_hash);
    w->idem_key = r->idem_key;
    w->idem_scope = r->route->name;
    w->done = committed;
    w->cls = r;
    atomic_fetch_add(
        &r->srv->plans_by_algorithm[(int)alg < REMAT_ALG_COUNT ? (int)alg : REMAT_ALG_COUNT], 1);
    if (!r->suspended)
        rematd_req_suspend(r);
    /* The last use of r here: the writer may commit and resume it (and
     * MHD free it) before this returns. */
    rematd_store_enqueue_plan(r->srv->store, w);
    return REMATD_SUSPENDED;
}

/* Solves what prepare() read and submits it (takes pr's contents). */
static enum rematd_handled solve(struct rematd_request *r, struct prepared *pr)
{
    enum remat_algorithm alg = pr->opts.algorithm;
    int rc = make_plan(r, r->plan_write, pr->p, &pr->opts, pr->options);
    pr->p = NULL;
    pr->options = NULL;
    if (rc < 0)
        return REMATD_HANDLED;
    return submit(r, alg);
}

/* On a planning thread (rematd_req_defer): answers are recorded, and a problem
 * resumes the connection to be sent. */
static void finish_job(struct rematd_request *r, enum rematd_handled h)
{
    if (h == REMATD_SUSPENDED)
        return;
    if (!r->pending && r->pending_status >= 0)
        rematd_req_problem(r, 500, "internal", NULL, "the handler gave no answer");
    rematd_req_resume(r);
}

static void solve_job(struct rematd_request *r)
{
    struct prepared *pr = r->route_state;
    r->route_state = NULL;
    enum rematd_handled h = solve(r, pr);
    prepared_free(pr);
    finish_job(r, h);
}

/* Plans the request: on the polling thread (on_pool 0), which hands the
 * solve to a planning thread unless it is cheap, or on a planning thread
 * (on_pool 1) for a large body, whose reading alone can take milliseconds. */
static enum rematd_handled plan(struct rematd_request *r, int on_pool)
{
    struct rematd_plan_write *w = calloc(1, sizeof *w);
    if (!w) {
        rematd_req_problem(r, 500, "internal", NULL, "out of memory");
        return REMATD_HANDLED;
    }
    r->plan_write = w;
    rematd_new_ordered_id(w->id);
    rematd_rfc3339(rematd_now(), w->created_at);
    struct plan_cache *hit = cache_hit(r);
    if (hit) {
        w->body = rematd_plan_finish(hit->text, hit->text_len, w->id, w->created_at);
        w->options = strdup(hit->options);
        w->record = malloc(hit->record_len);
        if (w->record) {
            memcpy(w->record, hit->record, hit->record_len);
            w->record_len = hit->record_len;
        }
        memcpy(w->profile_id, hit->profile_id, sizeof w->profile_id);
        w->algorithm = remat_algorithm_name(hit->algorithm);
        return submit(r, hit->algorithm);
    }
    struct prepared pr = {0};
    if (prepare(r, &pr) < 0)
        return REMATD_HANDLED;
    if (!on_pool && !cheap(&pr)) {
        struct prepared *keep = malloc(sizeof *keep);
        if (!keep) {
            remat_profile_free(pr.p);
            json_decref(pr.options);
            rematd_req_problem(r, 500, "internal", NULL, "out of memory");
            return REMATD_HANDLED;
        }
        *keep = pr;
        r->route_state = keep;
        r->route_state_free = prepared_free;
        rematd_req_defer(r, solve_job);
        return REMATD_SUSPENDED;
    }
    return solve(r, &pr);
}

static void plan_job(struct rematd_request *r)
{
    finish_job(r, plan(r, 1));
}

static enum rematd_handled create(struct rematd_request *r)
{
    if (r->body_len > INLINE_BODY) {
        rematd_req_defer(r, plan_job);
        return REMATD_SUSPENDED;
    }
    return plan(r, 0);
}

static void resumed(struct rematd_request *r)
{
    struct rematd_plan_write *w = r->plan_write;
    if (w->result == REMATD_STORE_CONFLICT) {
        /* Another request with this Idempotency-Key was stored first
         * (since our check, or in the same batch): its answer. */
        rematd_req_replay(r, &w->existing);
        return;
    }
    if (w->result != REMATD_STORE_OK) {
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
