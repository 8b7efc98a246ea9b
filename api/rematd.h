/*
 * rematd.h - declarations shared by rematd's files (not installed).
 *
 * rematd is one process: a libmicrohttpd daemon with a small pool of polling
 * threads, one SQLite store with a writer thread doing group commit, and a
 * main thread that waits for signals and supervises local workers.  Each
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

/* ------------------------------------------------------------------------
 * Configuration (config.c): defaults < REMAT_* environment < flags.
 */

struct rematd_config {
    char listen[128];            /* host:port */
    char data_dir[1024];         /* where rematd.db lives */
    size_t max_body_bytes;       /* request body limit */
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
    int print_config;
};

/* Fills cfg from defaults, the environment and argv.  Returns 0 to run,
 * 1 when the program should exit 0 (--help, --version, --print-config),
 * or -1 after printing an error (exit 2). */
int rematd_config_load(struct rematd_config *cfg, int argc, char **argv);
json_t *rematd_config_to_json(const struct rematd_config *cfg);

/* ------------------------------------------------------------------------
 * Logging (log.c): one JSON object per line on stderr, one write(2) each.
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
double rematd_now(void);         /* seconds since the epoch, wall clock */
double rematd_mono(void);        /* seconds, monotonic */
void rematd_rfc3339(double t, char out[32]);
/* SHA-256 of data as 64 lowercase hex characters. */
void rematd_sha256_hex(const void *data, size_t len, char out[65]);
/* Deepest nesting of arrays and objects in v (a scalar is 0). */
size_t rematd_json_depth(const json_t *v, size_t limit);

/* ------------------------------------------------------------------------
 * The store (store.c): SQLite in WAL mode, synchronous=FULL.
 */

struct rematd_store;

/* A plan waiting for the writer thread's next group commit.  The handler
 * fills the fields, calls rematd_store_enqueue_plan and suspends its
 * connection; the writer commits a batch, sets result and calls done(). */
struct rematd_plan_write {
    char id[REMATD_ID_LEN + 1];
    char created_at[32];
    const char *algorithm;
    char *options;                      /* JSON text, owned by the request */
    char profile_id[REMATD_ID_LEN + 1]; /* "" when the profile was inline */
    unsigned char *record;              /* plan_codec.h's record, owned by the request */
    size_t record_len;
    char *body;           /* the response JSON, owned by the request */
    char body_hash[65];   /* SHA-256 of the request body, with an Idempotency-Key */
    const char *idem_key; /* NULL: none */
    const char *idem_scope;
    int result; /* 0 committed, 1 idempotency key taken meanwhile, -1 error */
    void (*done)(struct rematd_plan_write *w);
    void *cls;
    struct rematd_plan_write *next;
};

struct rematd_store *rematd_store_open(const char *dir, const struct rematd_config *cfg,
                                       char *errbuf, size_t errlen);
/* Flushes what is queued, stops the writer thread, checkpoints and closes. */
void rematd_store_close(struct rematd_store *st);
int rematd_store_ready(struct rematd_store *st);
void rematd_store_enqueue_plan(struct rematd_store *st, struct rematd_plan_write *w);
/* Group commits of plans since start, and the plans they committed. */
void rematd_store_commit_stats(struct rematd_store *st, unsigned long *commits,
                               unsigned long *plans);

/* A stored plan.  Plans stored by this version have record (plan_codec.h),
 * created_at and profile_id ("" for an inline profile); one stored by
 * rematd 0.1.0 has legacy_body (its answer) and legacy_request (or NULL)
 * instead.  options (the normalised request options, JSON) either way. */
struct rematd_stored_plan {
    char created_at[32];
    char profile_id[REMATD_ID_LEN + 1];
    unsigned char *record;
    size_t record_len;
    char *options;
    char *legacy_body;
    char *legacy_request;
};
/* Returns 1 found (out filled: rematd_stored_plan_clear), 0 none, -1 error. */
int rematd_store_get_plan(struct rematd_store *st, const char *id, struct rematd_stored_plan *out);
void rematd_stored_plan_clear(struct rematd_stored_plan *p);

/* An idempotency record.  Returns 1 found (fields new), 0 none, -1 error. */
struct rematd_idem {
    char body_hash[65];
    int status;
    char *location;
    char *body;
};
int rematd_store_idem_get(struct rematd_store *st, const char *scope, const char *key,
                          struct rematd_idem *out);
void rematd_idem_clear(struct rematd_idem *r);

/* Jobs.  Creation writes the job and its idempotency record in one
 * transaction.  Returns 0, 1 when the key was taken meanwhile (replay from
 * *existing), or -1. */
struct rematd_job_new {
    const char *kind;
    const char *device;
    const char *spec; /* JSON text */
    const char *idem_scope, *idem_key, *body_hash;
    const char *location_fmt; /* "/v1/profiles/%s" */
};
int rematd_store_create_job(struct rematd_store *st, const struct rematd_job_new *job,
                            char id_out[REMATD_ID_LEN + 1], json_t **response_out);

/* The job as the API shows it, or NULL when unknown (or of another kind). */
json_t *rematd_store_get_job(struct rematd_store *st, const char *id, const char *kind);
/* The raw stored result of a job (new JSON) when done, with status. */
int rematd_store_job_result(struct rematd_store *st, const char *id, const char *kind,
                            char status[16], json_t **spec, json_t **result);

/* Worker side.  Return 0 ok, 1 nothing to lease / stale lease, 2 unknown
 * job, -1 error. */
int rematd_store_lease(struct rematd_store *st, const char *worker_id, json_t *kinds,
                       json_t *devices, json_t **lease_out);
int rematd_store_heartbeat(struct rematd_store *st, const char *id, const char *lease_id,
                           const char *progress, json_t **out);
int rematd_store_complete(struct rematd_store *st, const char *id, const char *lease_id,
                          const char *result);
int rematd_store_fail(struct rematd_store *st, const char *id, const char *lease_id,
                      const char *reason, int retryable);
int rematd_store_release(struct rematd_store *st, const char *id, const char *lease_id);
/* Expires leases now (also run by the writer thread every second). */
void rematd_store_expire(struct rematd_store *st);
/* Jobs by status for /metrics: a new object {"queued": n, ...}. */
json_t *rematd_store_job_counts(struct rematd_store *st);
const char *rematd_store_job_kind(struct rematd_store *st, const char *id, char buf[16]);

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
    int idempotent; /* honours Idempotency-Key */
    /* Queues a response with rematd_req_* or returns REMATD_SUSPENDED after arranging for
     * rematd_req_resume to be called; then resumed() is called to answer. */
    enum rematd_handled (*handler)(struct rematd_request *r);
    void (*resumed)(struct rematd_request *r);
};

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
    const char *openapi;
    size_t openapi_len;
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
    /* The body: a buffer with its limit set when the request starts. */
    char *body;
    size_t body_len, body_cap, body_limit;
    int body_too_large;
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
    struct rematd_plan_write *plan_write;
    char *problem_type; /* for the log line */
    /* rematd_req_defer: the job, the pool's queue link, and the answer recorded
     * while the connection is suspended (queued when it resumes). */
    void (*pool_job)(struct rematd_request *r);
    struct rematd_request *pool_next;
    /* A route's state carried to its planning-thread job (freed with the
     * request if the job did not take it). */
    void *route_state;
    void (*route_state_free)(void *);
    int deferred;
    struct MHD_Response *pending;
    int pending_status;
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
 * job must end by calling rematd_req_resume or by handing r to what will. */
void rematd_req_defer(struct rematd_request *r, void (*job)(struct rematd_request *r));

const char *rematd_req_header_in(struct rematd_request *r, const char *name);
const char *rematd_req_query(struct rematd_request *r, const char *name);

/* Validation helpers shared by route files: each answers the 400 itself
 * and returns -1 when the field is present but wrong. */
int rematd_req_reject_unknown(struct rematd_request *r, json_t *obj, const char *prefix,
                              const char *const *allowed);

/* Idempotency (http.c): for idempotent routes, looks the key up; when a
 * record exists, answers (replay or 422) and returns 1. */
int rematd_req_idempotency_check(struct rematd_request *r);

/* ------------------------------------------------------------------------
 * Metrics (metrics.c)
 */

void rematd_metrics_observe(int route_index, int status, double seconds);
char *rematd_metrics_render(struct rematd_server *srv, size_t *len); /* new */

/* ------------------------------------------------------------------------
 * The timeline chart (svg.c)
 */

struct rematd_series {
    const char *label;
    const char *color;
    const int64_t *bytes;
    size_t n;
    int64_t peak_bytes;
};
/* A new SVG document with one line per series. */
char *rematd_svg_timeline(const char *title, const struct rematd_series *s, size_t n_series,
                          size_t *len);

/* ------------------------------------------------------------------------
 * Worker supervision (supervise.c), driven from the main thread.
 */

struct rematd_supervisor;
struct rematd_supervisor *rematd_supervisor_start(const struct rematd_config *cfg, unsigned port);
void rematd_supervisor_tick(struct rematd_supervisor *sv);
void rematd_supervisor_stop(struct rematd_supervisor *sv, double grace_seconds);
int rematd_count_devices(void);

/* The embedded openapi.yaml (openapi.c, generated at build time). */
extern const unsigned char rematd_openapi_yaml[];
extern const size_t rematd_openapi_yaml_len;

/* ------------------------------------------------------------------------
 * Planning threads (pool.c): one FIFO queue, n threads.
 */
struct rematd_pool;
struct rematd_pool *rematd_pool_start(unsigned n_threads);
void rematd_pool_submit(struct rematd_pool *p, struct rematd_request *r);
/* Runs what is queued, then joins the threads. */
void rematd_pool_stop(struct rematd_pool *p);
/* Requests waiting for a planning thread now. */
long rematd_pool_queued(struct rematd_pool *p);

#endif
