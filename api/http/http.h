/*
 * http.h - routes and requests: what a route (api/routes/) may use of the
 * HTTP layer (api/http/).
 *
 * A route is one const struct rematd_route; routes/table.c lists them and
 * main.c hands the table to rematd_http_setup.  A request is a public head
 * (struct rematd_request, below) that routes read, and a tail private to
 * api/http/ (http_private.h: the connection, the answer being made, the
 * pool's link) that no route names: they answer only through the
 * rematd_req_* verbs here.  tests/check-routes.sh fails when a file under
 * api/routes/ includes http_private.h or names one of its fields, as
 * libuv's "private" fields and SQLite's "private to pcache.c" tail are
 * kept by convention.
 */
#ifndef REMATD_HTTP_H
#define REMATD_HTTP_H

#include <stddef.h>

#include <jansson.h>
#include <microhttpd.h>

#include "problem.h"
#include "rematd.h"
#include "rematx/dynbuf.h"

/* The store (store.h): Idempotency-Key records. */
struct rematd_idem;

enum rematd_auth { REMATD_AUTH_NONE = 0, REMATD_AUTH_CLIENT, REMATD_AUTH_WORKER };
enum rematd_handled { REMATD_HANDLED = 0, REMATD_SUSPENDED = 1 };

struct rematd_request;

struct rematd_route {
    const char *method;  /* "GET", "POST" */
    const char *pattern; /* "/v1/plans/{id}": {id} matches one segment */
    const char *name;    /* the metrics label */
    size_t body_limit;   /* 0: the configured default */
    enum rematd_auth auth;
    /* A route that creates a plan or a job: the status of its answer (201,
     * or 202 for a queued job), made by rematd_req_created.  Such a route
     * honours Idempotency-Key.  0 for every other route. */
    int created_status;
    /* A health probe (/healthz, /readyz): served on the health slots kept
     * past --max-connections, which serve nothing else. */
    int health_probe;
    /* Served on the health listener (--health-listen), which answers every
     * other path 404: the probes and /metrics. */
    int health_port;
    /* Queues a response with rematd_req_* or returns REMATD_SUSPENDED after arranging for
     * rematd_req_resume to be called; then resumed() is called to answer. */
    enum rematd_handled (*handler)(struct rematd_request *r);
    void (*resumed)(struct rematd_request *r);
    /* In place of handler, for a route whose whole work runs on a planning
     * thread: http defers job(r) (rematd_req_defer) itself, so that such
     * routes do not each write the same handler around it. */
    void (*job)(struct rematd_request *r);
    /* A route whose body is streamed (an upload) rather than buffered:
     * body_limit_of gives its limit from the configuration (413 from
     * Content-Length before anything is read, else once the body passes
     * it); body_begin runs once the request is routed and authorised and
     * may answer (its own 415, 507) or set up route_state; body_chunk gets
     * every piece as it arrives (after an answer or past the limit, none);
     * handler runs at the end as for any route.  No content-type check is
     * made for such a route: body_begin makes its own. */
    size_t (*body_limit_of)(const struct rematd_config *cfg);
    void (*body_begin)(struct rematd_request *r);
    void (*body_chunk)(struct rematd_request *r, const char *data, size_t n);
};

/* The public head of a request: what a route reads (and route_state, which
 * it owns).  The rest is http's (http_private.h). */
struct rematd_request {
    struct rematd_server *srv;
    const struct rematd_route *route;
    char id[REMATD_ID_LEN + 1]; /* the {id} segment, validated */
    char request_id[65];
    /* The body, in a buffer whose maximum is the route's limit (plan_cache.c
     * takes it over for its cache). */
    struct rematx_dynbuf body;
    /* The body parsed by rematd_req_body_json, owned by the request. */
    json_t *json;
    /* The Idempotency-Key and the body's SHA-256, set by http before the
     * handler of a route that creates (NULL and "" without a key). */
    const char *idem_key;
    char body_hash[65];
    /* The tenant the bearer token names (tenants.h), borrowed from the
     * server's table: "default" without tokens, and on routes that need no
     * client token.  A route shows, changes and counts only this tenant's
     * models, jobs and plans.  idem_scope is where its Idempotency-Key
     * records live: the route's name, after the tenant's for any tenant
     * but "default" (whose records keep the name they always had). */
    const char *tenant;
    char idem_scope[128];
    /* A route's own state (its planning-thread job's input, what it
     * stores), freed with the request by route_state_free. */
    void *route_state;
    void (*route_state_free)(void *);
};

enum MHD_Result rematd_access(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **req_cls);
void rematd_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                      enum MHD_RequestTerminationCode toe);
void rematd_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                       enum MHD_ConnectionNotificationCode toe);
/* Sets up the HTTP layer for srv with the n routes of table (borrowed: it
 * must outlive srv; metrics names routes from it too), starts the request
 * deadline thread and returns the options to give MHD_start_daemon with
 * MHD_OPTION_ARRAY (connection limit with the health slots, per-IP limit,
 * memory per connection, routing on the raw path); NULL when out of
 * memory.  rematd_http_teardown stops the thread, after MHD_stop_daemon. */
const struct MHD_OptionItem *rematd_http_setup(struct rematd_server *srv,
                                               const struct rematd_route *const *table, size_t n);
void rematd_http_teardown(struct rematd_server *srv);
/* The options for the daemon of the supervised workers' Unix socket
 * (main.c), after rematd_http_setup: at most max_connections, no limit
 * per address, the same routing.  Its connections serve the worker routes
 * and the health probes only, and never take a client's slot. */
const struct MHD_OptionItem *rematd_http_worker_options(struct rematd_server *srv,
                                                        unsigned max_connections);
/* Starts the health listener (--health-listen; nothing when unset), after
 * rematd_http_setup: 0, or -1 after logging why.  rematd_http_teardown
 * stops it. */
int rematd_http_health_start(struct rematd_server *srv);
/* The main TCP listener: binds addr for srv->daemon, started with
 * MHD_USE_NO_LISTEN_SOCKET; rematd's front door (http/door.c) accepts on
 * it and hands libmicrohttpd each connection once the head of its first
 * request has come and passed.  Returns the port, or -1 with errno. */
int rematd_http_listen(struct rematd_server *srv, const struct sockaddr *addr, socklen_t len);
/* Starts accepting on the listeners (after rematd_http_health_start): 0 or
 * -1. */
int rematd_http_open(struct rematd_server *srv);
/* Stops accepting on the main listener (shutdown); what was accepted is
 * still served. */
void rematd_http_quiesce(struct rematd_server *srv);
/* Stops the front door and closes what it holds: before MHD_stop_daemon
 * of the daemons it hands connections to. */
void rematd_http_close(struct rematd_server *srv);

/* The route table (routes/table.c). */
extern const struct rematd_route *const rematd_routes[];
extern const size_t rematd_n_routes;

/* Responses: each queues one response and marks the request answered (on a
 * planning thread, records it until the connection resumes). */
void rematd_req_json(struct rematd_request *r, int status, json_t *body); /* steals body */
void rematd_req_text(struct rematd_request *r, int status, const char *content_type, char *buf,
                     size_t len, int persistent); /* buf freed unless persistent */
/* The size bytes of the open file fd (taken: closed with the response, or
 * at once on failure), sent by libmicrohttpd without reading it into
 * memory, through the same path as every other answer. */
void rematd_req_file(struct rematd_request *r, int status, int fd, size_t size,
                     const char *content_type);
/* problem: the slug after /problems/; pointer may be NULL. */
void rematd_req_problem(struct rematd_request *r, int status, const char *slug, const char *pointer,
                        const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* The fixed title of a problem type: for a problem shown inside a
 * resource (a failed job's), not answered as one. */
const char *rematd_problem_title(const char *slug);
/* Adds an extension member to the next problem: used for min_budget_bytes. */
void rematd_req_problem_json(struct rematd_request *r, int status, const char *slug,
                             const char *pointer, json_t *extra, const char *detail);
/* Answers what a reader filled (problem.h), Retry-After included; takes
 * p->extra (p is empty after). */
void rematd_req_send_problem(struct rematd_request *r, struct rematd_problem *p);
void rematd_req_header(struct rematd_request *r, const char *name, const char *value);
/* Whether r has its answer: queued, or recorded on a planning thread. */
int rematd_req_answered(const struct rematd_request *r);
/* The end of a planning-thread job (rematd_req_defer) that did not hand r
 * on: 500 when the job gave no answer, then the connection resumes. */
void rematd_req_end_job(struct rematd_request *r);
/* Whether the client has gone (its side of the connection is closed): a
 * suspended connection is not polled, so a long solve asks here. */
int rematd_req_client_gone(struct rematd_request *r);
/* A libmicrohttpd form reader on r's connection (multipart/form-data):
 * new, or NULL. */
struct MHD_PostProcessor *rematd_req_post_processor(struct rematd_request *r, size_t buffer_size,
                                                    MHD_PostDataIterator iter, void *cls);
/* Parses the body as a JSON object, answering the problem itself on failure
 * (returns NULL); the object is the request's (r->json). */
json_t *rematd_req_body_json(struct rematd_request *r);
/* Suspends the request's connection (call before handing work to another
 * thread) and resumes it from any thread. */
void rematd_req_suspend(struct rematd_request *r);
void rematd_req_resume(struct rematd_request *r);
/* Whether r's connection is suspended now. */
int rematd_req_suspended(const struct rematd_request *r);
/* Suspends r and runs job(r) on a planning thread (pool.c).  Until r is
 * resumed, rematd_req_* answers only record the response; it is queued when the
 * connection resumes (before resumed() would be called, which then is not).
 * job must end by calling rematd_req_end_job (or rematd_req_resume) or by
 * handing r to what will.  Returns 0, or -1 after answering 503 queue-full
 * (with Retry-After) when --max-queued-plans requests wait already
 * (nothing suspended then). */
int rematd_req_defer(struct rematd_request *r, void (*job)(struct rematd_request *r));

/* Whether r may see a row whose tenant is owner (a model, job or plan the
 * store returned): always on a route that is not a client's (the worker
 * routes serve every tenant's jobs), else only its own.  A route answers
 * another tenant's row exactly as no row (404), so that an id says nothing
 * about what other tenants have. */
int rematd_req_owns(const struct rematd_request *r, const char *owner);

const char *rematd_req_header_in(struct rematd_request *r, const char *name);
const char *rematd_req_query(struct rematd_request *r, const char *name);

/* Validation helper shared by route files: answers the 400 itself and
 * returns -1 when obj has a member not in allowed. */
int rematd_req_reject_unknown(struct rematd_request *r, json_t *obj, const char *prefix,
                              const char *const *allowed);

/* The answer of a route that creates: its created_status, Location
 * <pattern>/<id> (and Retry-After for a queued job), body (len bytes,
 * taken: freed with the response).  The first answer and every replay of
 * it are made here, so that they agree. */
void rematd_req_created(struct rematd_request *r, const char *id, char *body, size_t len);
/* Answers r from the record of its Idempotency-Key that the store
 * returned: the first answer again, with Idempotent-Replayed: true, or 422
 * when the key came with another body.  Takes rec's body.  The one replay
 * path: http's check before the handler, and a plan or job whose key
 * another request recorded first (the store's REMATD_STORE_CONFLICT). */
void rematd_req_replay(struct rematd_request *r, struct rematd_idem *rec);

#endif
