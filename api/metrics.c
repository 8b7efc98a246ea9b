/* metrics.c - the Prometheus text exposition (format 0.0.4), written by
 * hand: requests by route and status, a latency histogram by route, jobs
 * by state (read from the store when scraped) and plans by algorithm.
 * Counters are process-wide atomics; rematd runs one server per process. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http.h"
#include "pool.h"
#include "rematd.h"
#include "store.h"

#define MAX_ROUTES 32
#define N_BUCKETS 12
static const double bucket_le[N_BUCKETS] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                            0.01,   0.025,   0.05,   0.1,   0.5,    2.5};

/* Route slot MAX_ROUTES - 1 holds unmatched paths; status codes 100..599. */
static atomic_ulong requests[MAX_ROUTES][600];
static atomic_ulong buckets[MAX_ROUTES][N_BUCKETS + 1];
static atomic_ulong dur_sum_us[MAX_ROUTES];

static int slot(int route_index)
{
    return route_index < 0 || route_index >= MAX_ROUTES - 1 ? MAX_ROUTES - 1 : route_index;
}

void rematd_metrics_observe(int route_index, int status, double seconds)
{
    int r = slot(route_index);
    if (status < 100 || status > 599)
        status = 0;
    atomic_fetch_add_explicit(&requests[r][status], 1, memory_order_relaxed);
    int b = 0;
    while (b < N_BUCKETS && seconds > bucket_le[b])
        b++;
    atomic_fetch_add_explicit(&buckets[r][b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&dur_sum_us[r], (unsigned long)(seconds * 1e6), memory_order_relaxed);
}

/* The text is a few kilobytes: a line per route and status seen, and a
 * dozen per route's histogram. */
#define MAX_TEXT ((size_t)16 << 20)

/* Appends to o; a failure is sticky (dynbuf.h) and seen once, at the end. */
static void put(struct rematx_dynbuf *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void put(struct rematx_dynbuf *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rematx_dyn_vaddf(o, fmt, ap);
    va_end(ap);
}

/* The names come from the table the server was set up with (srv->routes),
 * so that metrics does not name the route table itself. */
static const char *route_name(const struct rematd_server *srv, int r)
{
    return r < (int)srv->n_routes && r < MAX_ROUTES - 1 ? srv->routes[r]->name : "unmatched";
}

char *rematd_metrics_render(struct rematd_server *srv, size_t *len)
{
    struct rematx_dynbuf o;
    rematx_dyn_init(&o, MAX_TEXT);
    rematx_dyn_grow(&o, 8192);
    put(&o, "# HELP remat_http_requests_total HTTP requests answered, by route and status.\n"
            "# TYPE remat_http_requests_total counter\n");
    for (int r = 0; r < MAX_ROUTES; r++) {
        for (int s = 0; s < 600; s++) {
            unsigned long n = atomic_load_explicit(&requests[r][s], memory_order_relaxed);
            if (n)
                put(&o, "remat_http_requests_total{route=\"%s\",code=\"%d\"} %lu\n",
                    route_name(srv, r), s, n);
        }
    }
    put(&o, "# HELP remat_http_request_duration_seconds Time from the request's headers to its "
            "completion.\n# TYPE remat_http_request_duration_seconds histogram\n");
    for (int r = 0; r < MAX_ROUTES; r++) {
        unsigned long cum = 0, counts[N_BUCKETS + 1];
        for (int b = 0; b <= N_BUCKETS; b++)
            counts[b] = atomic_load_explicit(&buckets[r][b], memory_order_relaxed);
        unsigned long total = 0;
        for (int b = 0; b <= N_BUCKETS; b++)
            total += counts[b];
        if (!total)
            continue;
        for (int b = 0; b < N_BUCKETS; b++) {
            cum += counts[b];
            put(&o, "remat_http_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %lu\n",
                route_name(srv, r), bucket_le[b], cum);
        }
        put(&o, "remat_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %lu\n",
            route_name(srv, r), total);
        put(&o, "remat_http_request_duration_seconds_sum{route=\"%s\"} %.6f\n", route_name(srv, r),
            atomic_load_explicit(&dur_sum_us[r], memory_order_relaxed) / 1e6);
        put(&o, "remat_http_request_duration_seconds_count{route=\"%s\"} %lu\n", route_name(srv, r),
            total);
    }
    put(&o, "# HELP remat_jobs Jobs in the store, by state.\n# TYPE remat_jobs gauge\n");
    struct rematd_job_counts jc;
    rematd_store_count_jobs(srv->store, &jc); /* all zero when the store does not answer */
    put(&o,
        "remat_jobs{state=\"queued\"} %ld\nremat_jobs{state=\"running\"} %ld\n"
        "remat_jobs{state=\"done\"} %ld\nremat_jobs{state=\"failed\"} %ld\n",
        jc.queued, jc.running, jc.done, jc.failed);
    put(&o, "# HELP remat_plans_created_total Plans created since start, by algorithm.\n"
            "# TYPE remat_plans_created_total counter\n");
    for (int a = 0; a < REMAT_ALG_COUNT; a++)
        put(&o, "remat_plans_created_total{algorithm=\"%s\"} %ld\n",
            remat_algorithm_name((enum remat_algorithm)a),
            atomic_load(&srv->plans_by_algorithm[a]));
    put(&o,
        "# HELP remat_in_flight_requests Requests being handled now.\n"
        "# TYPE remat_in_flight_requests gauge\nremat_in_flight_requests %ld\n",
        atomic_load(&srv->in_flight));
    put(&o,
        "# HELP remat_plan_queue_depth Plan requests waiting for a planning thread.\n"
        "# TYPE remat_plan_queue_depth gauge\nremat_plan_queue_depth %ld\n",
        rematd_pool_queued(srv->pool));
    put(&o,
        "# HELP remat_request_body_bytes Request bodies held in memory now (read or announced), "
        "against --max-bodies-bytes.\n# TYPE remat_request_body_bytes gauge\n"
        "remat_request_body_bytes %lld\n",
        (long long)atomic_load(&srv->body_memory));
    put(&o,
        "# HELP remat_workers_supervised Workers this rematd runs (--workers).\n"
        "# TYPE remat_workers_supervised gauge\nremat_workers_supervised %d\n"
        "# HELP remat_workers_alive Of the supervised workers, those running now.\n"
        "# TYPE remat_workers_alive gauge\nremat_workers_alive %d\n"
        "# HELP remat_worker_exits_total Exits of supervised workers since start (shutdown's "
        "aside).\n# TYPE remat_worker_exits_total counter\nremat_worker_exits_total %ld\n"
        "# HELP remat_worker_crashes_total Of those exits, by a signal or a nonzero status.\n"
        "# TYPE remat_worker_crashes_total counter\nremat_worker_crashes_total %ld\n",
        atomic_load(&srv->workers.supervised), atomic_load(&srv->workers.alive),
        atomic_load(&srv->workers.exits), atomic_load(&srv->workers.crashes));
    put(&o,
        "# HELP remat_solve_memory_bytes Solver memory reserved by the solves running now, "
        "against --solve-memory-bytes.\n# TYPE remat_solve_memory_bytes gauge\n"
        "remat_solve_memory_bytes %lld\n",
        (long long)atomic_load(&srv->solve_memory));
    unsigned long commits, committed;
    rematd_store_commit_stats(srv->store, &commits, &committed);
    put(&o,
        "# HELP remat_store_commits_total Group commits of plans (one fsync each with --sync "
        "full).\n# TYPE remat_store_commits_total counter\nremat_store_commits_total %lu\n"
        "# HELP remat_store_committed_plans_total Plans those commits stored: divided by the "
        "commits, the mean batch.\n# TYPE remat_store_committed_plans_total counter\n"
        "remat_store_committed_plans_total %lu\n",
        commits, committed);
    return rematx_dyn_take(&o, len); /* NULL after any failure */
}
