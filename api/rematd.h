/*
 * rematd.h - declarations shared by rematd's files (not installed).
 *
 * rematd is one process: a libmicrohttpd daemon with a small pool of polling
 * threads, one store (api/store/: SQLite, or PostgreSQL shared by replicas)
 * with a writer thread doing group commit, and a main thread that waits for
 * signals and supervises local workers.  This header holds what the whole
 * program shares (configuration, logging, ids, the server, metrics); routes
 * and requests are http/http.h's, the planning threads pool.h's, the worker
 * supervisor supervise.h's, the store's interface store.h's.
 */
#ifndef REMATD_H
#define REMATD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

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
    /* Connection defences (http/conn.c). */
    unsigned request_timeout;        /* seconds for a whole request, headers and body */
    unsigned max_connections_per_ip; /* MHD_OPTION_PER_IP_CONNECTION_LIMIT; 0 = none */
    unsigned health_connections;     /* slots past max_connections, health probes only */
    /* Tenants (tenants.c, docs/security.md "Tenants"). */
    /* One tenant's Idempotency-Key records; 0 = max_idempotency_keys / tenants. */
    unsigned tenant_max_idempotency_keys;
    char tokens_file[1024];          /* --tokens-file: tokens and their tenants, "" = none */
    int allow_anonymous;             /* --allow-anonymous: no token even beyond loopback */
    size_t tenant_max_models_bytes;  /* one tenant's models; 0 = max_models_bytes / tenants */
    unsigned tenant_max_queued_jobs; /* one tenant's queued jobs; 0 = max_queued_jobs / tenants */
    unsigned upload_idle_timeout;    /* seconds a streamed upload may go without a byte */
    char health_listen[128];         /* --health-listen host:port, "" = none (http/conn.c) */
    /* Stored plans and Idempotency-Key records (store/sqlite/bounds.c,
     * store/pg/bounds.c): their bytes together, and a plan's age. */
    size_t max_store_bytes;
    unsigned plan_ttl; /* seconds; 0 = plans are kept until the byte bound */
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
double rematd_now(void);         /* seconds since the epoch, wall clock */
double rematd_mono(void);        /* seconds, monotonic */
void rematd_rfc3339(double t, char out[32]);
/* SHA-256 of data as 64 lowercase hex characters. */
void rematd_sha256_hex(const void *data, size_t len, char out[65]);
/* Deepest nesting of arrays and objects in v (a scalar is 0). */
size_t rematd_json_depth(const json_t *v, size_t limit);

/* The store (store.h): plans, jobs and leases, Idempotency-Key records. */
struct rematd_store;
struct rematd_plan_write;
struct rematd_idem;

struct rematd_http;
struct rematd_route;
struct MHD_Daemon;
/* The supervised workers as /readyz and /metrics see them (supervise.c
 * writes, the MHD threads read). */
struct rematd_worker_stats {
    atomic_int supervised; /* --workers started by this rematd (0: none) */
    atomic_int alive;      /* of those, running now */
    atomic_long exits;     /* exits of a supervised worker since start, shutdown's aside */
    atomic_long crashes;   /* of those, by a signal or a nonzero status */
};

struct rematd_tenants;

struct rematd_server {
    struct rematd_config cfg;
    struct rematd_tenants *tenants; /* tenants.h: made at start, never changed after */
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
     * being read, waiting for a planning thread or handled (http/), bounded
     * by cfg.max_bodies_bytes. */
    atomic_llong body_memory;
    const char *openapi;
    size_t openapi_len;
    struct rematd_http *http; /* connection defences (http/conn.c) */
    /* The route table given to rematd_http_setup (http/http.h), borrowed:
     * a route's index in it is its metrics slot. */
    const struct rematd_route *const *routes;
    size_t n_routes;
    struct rematd_worker_stats workers;
};

/* ------------------------------------------------------------------------
 * Metrics (metrics.c)
 */

void rematd_metrics_observe(int route_index, int status, double seconds);
/* The Prometheus text (new, *len bytes), or NULL when out of memory. */
char *rematd_metrics_render(struct rematd_server *srv, size_t *len);

/* The embedded openapi.yaml (openapi.c, generated at build time). */
extern const unsigned char rematd_openapi_yaml[];
extern const size_t rematd_openapi_yaml_len;

#endif
