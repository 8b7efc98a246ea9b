/*
 * rematd.h - declarations shared by rematd's files (not installed).
 *
 * rematd is one process: a libmicrohttpd daemon with a small pool of polling
 * threads, one store (api/store/: SQLite, or PostgreSQL shared by replicas)
 * with a writer thread doing group commit, and a main thread that waits for
 * signals and supervises local workers.  Each
 * api/route_*.c file exports one const struct rematd_route; http.c holds the
 * table and everything common to requests (body, auth, problems, logging).
 */
#ifndef REMATD_H
#define REMATD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <microhttpd.h>

#include "remat.h"
#include "rematx/dynbuf.h"

/* ------------------------------------------------------------------------
 * Configuration (config.c): defaults < REMAT_* environment < flags.
 */

struct rematd_config {
    char listen[128];            /* host:port */
    char data_dir[1024];         /* where rematd.db lives */
    char store[1200];            /* --store: sqlite:DIR or a PostgreSQL URI */
    size_t max_body_bytes;       /* request body limit */
    size_t max_bodies_bytes;     /* all buffered request bodies together */
    size_t max_model_bytes;      /* one uploaded model archive */
    size_t max_models_bytes;     /* all uploaded models together */
    size_t max_stages;           /* server cap on stages, <= REMAT_MAX_STAGES */
    unsigned max_connections;    /* MHD_OPTION_CONNECTION_LIMIT */
    unsigned connection_timeout; /* seconds an idle connection is kept */
    unsigned threads;            /* MHD polling threads */
    unsigned plan_threads;       /* planning threads (pool.c); 0 = one per core */
    unsigned lease_seconds;      /* job lease length */
    unsigned max_attempts;       /* attempts before a job is failed */
    unsigned idempotency_ttl;    /* seconds an Idempotency-Key is kept */
    int workers;                 /* local remat-worker processes; -1 = auto */
    char worker_path[1024];      /* the remat-worker binary */
    char port_file[1024];        /* when set, the bound port is written there */
    char sync[8];                /* SQLite synchronous: "full" or "normal" */
    char token[256];             /* REMAT_TOKEN: clients' bearer token, "" = none */
    char worker_token[256];      /* REMAT_WORKER_TOKEN: workers' bearer token */
    int worker_path_set;         /* --worker-path or REMAT_WORKER_PATH given */
    int max_bodies_set;          /* --max-bodies-bytes or REMAT_MAX_BODIES_BYTES given */
    unsigned max_queued_plans;   /* requests waiting for a planning thread */
    unsigned max_queued_jobs;    /* jobs in status queued */
    unsigned max_idempotency_keys;
    unsigned solve_timeout_ms;  /* one solve's deadline */
    size_t solve_memory_bytes;  /* solver memory all running solves share */
    unsigned drain_seconds;     /* SIGTERM: time requests in flight get */
    size_t wal_limit_bytes;     /* the WAL file is cut back to this */
    int worker_token_generated; /* made at start for supervised workers (main.c) */
    int print_config;
    /* Connection defences (http.c). */
    unsigned request_timeout;        /* seconds for a whole request, headers and body */
    unsigned max_connections_per_ip; /* MHD_OPTION_PER_IP_CONNECTION_LIMIT; 0 = none */
    unsigned health_connections;     /* slots past max_connections, health probes only */
};

/* Fills cfg from defaults, the environment and argv.  Returns 0 to run,
 * 1 when the program should exit 0 (--help, --version, --print-config),
 * or -1 after printing an error (exit 2). */
int rematd_config_load(struct rematd_config *cfg, int argc, char **argv);
json_t *rematd_config_to_json(const struct rematd_config *cfg);
/* cfg->store with any password in it replaced by "(set)", into out. */
void rematd_config_store_redacted(const struct rematd_config *cfg, char *out, size_t cap);

/* ------------------------------------------------------------------------
 * Logging (util.c): one JSON object per line on stderr, one write(2) each.
 */

/* Steals fields (may be NULL); adds ts, level and msg. */
void rematd_log(const char *level, const char *msg, json_t *fields);
/* The request line: what rematd_log(level, "request", {request_id, method,
 * path, route, status, dur_ms[, problem][, terminated][, id]}) writes, byte
 * for byte, without building the object.  problem and id may be NULL;
 * terminated < 0 leaves it out. */
struct rematd_request_log {
    const char *request_id, *method, *path, *route;
    int status;
    double dur_ms;
    const char *problem;
    int terminated;
    const char *id;
};
void rematd_log_request(const char *level, const struct rematd_request_log *f);

/* ------------------------------------------------------------------------
 * Small helpers (util.c)
 */

#define REMATD_ID_LEN 32 /* 128 random bits as lowercase hex */

void rematd_new_id(char out[REMATD_ID_LEN + 1]);
/* 48 bits of milliseconds, then 80 random bits: ids that sort by time. */
void rematd_new_ordered_id(char out[REMATD_ID_LEN + 1]);
int rematd_is_id(const char *s); /* exactly 32 lowercase hex characters */
/* The length of the valid UTF-8 sequence at s (n bytes left), 0 when the
 * bytes there are not one (overlong, surrogate, cut, past U+10FFFF). */
size_t rematd_utf8_seq(const unsigned char *s, size_t n);
int rematd_utf8_valid(const char *s, size_t n); /* 1 when all of s is valid UTF-8 */
double rematd_now(void);                        /* seconds since the epoch, wall clock */
double rematd_mono(void);                       /* seconds, monotonic */
void rematd_rfc3339(double t, char out[32]);
/* SHA-256 of data as 64 lowercase hex characters. */
void rematd_sha256_hex(const void *data, size_t len, char out[65]);
/* Deepest nesting of arrays and objects in v (a scalar is 0). */
size_t rematd_json_depth(const json_t *v, size_t limit);

/* The store (store.h): plans, jobs and leases, Idempotency-Key records. */
struct rematd_store;
struct rematd_plan_write;
struct rematd_idem;

/* ------------------------------------------------------------------------
 * Requests and routes (http.c)
 */

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
    /* Queues a response with rematd_req_* or returns REMATD_SUSPENDED after arranging for
     * rematd_req_resume to be called; then resumed() is called to answer. */
    enum rematd_handled (*handler)(struct rematd_request *r);
    void (*resumed)(struct rematd_request *r);
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

struct rematd_http;
struct rematd_server {
    struct rematd_config cfg;
    struct rematd_store *store;
    struct rematd_pool *pool;
    struct MHD_Daemon *daemon;
    atomic_int draining;
    atomic_long in_flight;
    /* Shutdown bookkeeping (main.c): closing makes every access call refuse;
     * in_access counts the access calls running now, suspended the
     * connections suspended and not yet resumed (MHD_stop_daemon aborts the
     * process when one is left), fresh the connections accepted whose first
     * request has not begun. */
    atomic_int closing;
    atomic_long in_access;
    atomic_long suspended;
    atomic_long fresh;
    atomic_long plans_by_algorithm[REMAT_ALG_COUNT + 1];
    /* Solver memory reserved by the solves running now (plan_common.c). */
    atomic_llong solve_memory;
    /* Bytes of request bodies held now, read or announced, by requests
     * being read, waiting for a planning thread or handled (http.c),
     * bounded by cfg.max_bodies_bytes. */
    atomic_llong body_memory;
    const char *openapi;
    size_t openapi_len;
    struct rematd_http *http; /* connection defences (http.c) */
};

#define REMATD_REQ_MAX_HEADERS 6

struct rematd_request {
    struct rematd_server *srv;
    struct MHD_Connection *conn;
    const struct rematd_route *route;
    int route_index;
    char method[8];
    char path[256];
    char id[REMATD_ID_LEN + 1]; /* the {id} segment, validated */
    char request_id[65];
    double t0;
    /* The body, in a buffer whose maximum is the route's limit, set when
     * the request starts; body_error is its failure (REMAT_ELIMIT: a 413,
     * REMAT_ENOMEM: a 500), the rest of the body then read and dropped. */
    struct rematx_dynbuf body;
    size_t body_limit;
    int body_error;
    size_t body_held; /* reserved from srv->body_memory, given back when r is freed */
    int body_over;    /* the body would take body_memory past --max-bodies-bytes */
    size_t streamed;  /* bytes handed to a streaming route's body_chunk */
    int responded;
    int status;
    int suspended;
    const char *idem_key;
    char body_hash[65];
    /* Response headers to add: name/value pairs owned by the request. */
    int n_headers;
    char *header_name[REMATD_REQ_MAX_HEADERS];
    char *header_value[REMATD_REQ_MAX_HEADERS];
    /* Handler scratch, freed by rematd_req_free. */
    json_t *json;
    char *problem_type; /* for the log line */
    /* rematd_req_defer: the job, the pool's queue link, and the answer recorded
     * while the connection is suspended (queued when it resumes). */
    void (*pool_job)(struct rematd_request *r);
    struct rematd_request *pool_next;
    /* A route's own state (its planning-thread job's input, what it
     * stores), freed with the request by route_state_free. */
    void *route_state;
    void (*route_state_free)(void *);
    int deferred;
    struct MHD_Response *pending;
    int pending_status;
    int health_only; /* arrived on a health slot: only /healthz and /readyz */
};

extern const struct rematd_route *const rematd_routes[];
extern const size_t rematd_n_routes;

enum MHD_Result rematd_access(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **req_cls);
void rematd_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                      enum MHD_RequestTerminationCode toe);
void rematd_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                       enum MHD_ConnectionNotificationCode toe);
/* The connection defences (http.c): starts the request deadline thread and
 * returns the options to give MHD_start_daemon with MHD_OPTION_ARRAY
 * (connection limit with the health slots, per-IP limit, memory per
 * connection, routing on the raw path); NULL when out of memory.
 * rematd_http_teardown stops the thread, after MHD_stop_daemon. */
const struct MHD_OptionItem *rematd_http_setup(struct rematd_server *srv);
void rematd_http_teardown(struct rematd_server *srv);

/* Responses: each queues one response and marks the request answered. */
void rematd_req_json(struct rematd_request *r, int status, json_t *body); /* steals body */
void rematd_req_text(struct rematd_request *r, int status, const char *content_type, char *buf,
                     size_t len, int persistent); /* buf freed unless persistent */
/* problem: the slug after /problems/; pointer may be NULL. */
void rematd_req_problem(struct rematd_request *r, int status, const char *slug, const char *pointer,
                        const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Adds an extension member to the next problem: used for min_budget_bytes. */
void rematd_req_problem_json(struct rematd_request *r, int status, const char *slug,
                             const char *pointer, json_t *extra, const char *detail);
void rematd_req_header(struct rematd_request *r, const char *name, const char *value);
/* Parses the body as a JSON object, answering the problem itself on failure
 * (returns NULL). */
json_t *rematd_req_body_json(struct rematd_request *r);
/* Suspends the request's connection (call before handing work to another
 * thread) and resumes it from any thread. */
void rematd_req_suspend(struct rematd_request *r);
void rematd_req_resume(struct rematd_request *r);
/* Suspends r and runs job(r) on a planning thread (pool.c).  Until r is
 * resumed, rematd_req_* answers only record the response; it is queued when the
 * connection resumes (before resumed() would be called, which then is not).
 * job must end by calling rematd_req_resume or by handing r to what will.
 * Returns 0, or -1 after answering 503 queue-full (with Retry-After) when
 * --max-queued-plans requests wait already (nothing suspended then). */
int rematd_req_defer(struct rematd_request *r, void (*job)(struct rematd_request *r));

const char *rematd_req_header_in(struct rematd_request *r, const char *name);
const char *rematd_req_query(struct rematd_request *r, const char *name);

/* Validation helpers shared by route files: each answers the 400 itself
 * and returns -1 when the field is present but wrong. */
int rematd_req_reject_unknown(struct rematd_request *r, json_t *obj, const char *prefix,
                              const char *const *allowed);

/* The answer of a route that creates: its created_status, Location
 * <pattern>/<id> (and Retry-After for a queued job), body (len bytes,
 * taken: freed with the response).  The first answer and every replay of
 * it are made here, so that they agree. */
void rematd_req_created(struct rematd_request *r, const char *id, char *body, size_t len);
/* Idempotency-Key (http.c).  For a route that creates: reads the key and
 * the body's hash into r, and when the store holds a record of the key,
 * answers it (rematd_req_replay) and returns 1; 0 to go on. */
int rematd_req_idempotency_check(struct rematd_request *r);
/* Answers r from the record of its Idempotency-Key that the store
 * returned: the first answer again, with Idempotent-Replayed: true, or 422
 * when the key came with another body.  Takes rec's body.  The one replay
 * path: the check above, and a plan or job whose key another request
 * recorded first (the store's REMATD_STORE_CONFLICT). */
void rematd_req_replay(struct rematd_request *r, struct rematd_idem *rec);

/* ------------------------------------------------------------------------
 * Metrics (metrics.c)
 */

void rematd_metrics_observe(int route_index, int status, double seconds);
/* The Prometheus text (new, *len bytes), or NULL when out of memory. */
char *rematd_metrics_render(struct rematd_server *srv, size_t *len);

/* ------------------------------------------------------------------------
 * Worker supervision (supervise.c), driven from the main thread.
 */

struct rematd_supervisor;
/* Before anything starts: with --workers, finds the worker program (the
 * default path, or the build tree's when that is not installed; a path
 * given is taken as given).  0, or -1 after logging why. */
int rematd_supervisor_check(struct rematd_config *cfg);
/* server: the URL the workers reach this rematd at (main.c makes it from
 * the bound address). */
struct rematd_supervisor *rematd_supervisor_start(const struct rematd_config *cfg,
                                                  const char *server);
void rematd_supervisor_tick(struct rematd_supervisor *sv);
/* SIGTERM to every worker, none restarted after. */
void rematd_supervisor_term(struct rematd_supervisor *sv);
/* Workers still running (those that exited are reaped). */
int rematd_supervisor_alive(struct rematd_supervisor *sv);
/* SIGTERM, then SIGKILL to those left after grace_seconds; frees sv. */
void rematd_supervisor_stop(struct rematd_supervisor *sv, double grace_seconds);
int rematd_count_devices(void);

/* The embedded openapi.yaml (openapi.c, generated at build time). */
extern const unsigned char rematd_openapi_yaml[];
extern const size_t rematd_openapi_yaml_len;

/* ------------------------------------------------------------------------
 * Planning threads (pool.c): one FIFO queue, n threads.
 */
struct rematd_pool;
struct rematd_pool *rematd_pool_start(unsigned n_threads, unsigned max_queued);
/* Whether max_queued requests wait already (a soft bound: each polling
 * thread may add one past it between this check and its submit). */
int rematd_pool_full(struct rematd_pool *p);
void rematd_pool_submit(struct rematd_pool *p, struct rematd_request *r);
/* Runs what is queued, then joins the threads. */
void rematd_pool_stop(struct rematd_pool *p);
/* Requests waiting for a planning thread now. */
long rematd_pool_queued(struct rematd_pool *p);

#endif
