/* config.c - rematd's configuration: built-in defaults, then REMAT_*
 * environment variables, then command-line flags (twelve-factor order).
 * Tokens come only from the environment so they never show in `ps`. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "rematd.h"
#include "store.h"
#include "rematx/real.h"

#ifndef REMATD_BINDIR
#define REMATD_BINDIR "/usr/local/bin"
#endif

enum opt_kind { O_STR, O_SIZE, O_UINT, O_WORKERS };

struct opt {
    const char *flag;
    const char *env;
    enum opt_kind kind;
    size_t offset;
    size_t size; /* for strings */
    unsigned long long lo, hi;
    const char *help;
};

#define OFF(f) offsetof(struct rematd_config, f)
#define SZ(f) sizeof(((struct rematd_config *)0)->f)

static const struct opt opts[] = {
    {"listen", "REMAT_LISTEN", O_STR, OFF(listen), SZ(listen), 0, 0,
     "address and port to bind (host:port, [v6]:port; port 0 picks a free one)"},
    {"data-dir", "REMAT_DATA_DIR", O_STR, OFF(data_dir), SZ(data_dir), 0, 0,
     "directory of the SQLite store (created when missing); with PostgreSQL, of this "
     "replica's copies of uploaded models"},
    {"store", "REMAT_STORE", O_STR, OFF(store), SZ(store), 0, 0,
     "sqlite:DIR (the default, DIR = --data-dir) or postgresql://user@host/db, shared by "
     "replicas (docs/deploy.md); the password from PGPASSWORD or ~/.pgpass"},
    {"max-body-bytes", "REMAT_MAX_BODY_BYTES", O_SIZE, OFF(max_body_bytes), 0, 1024, (1ULL << 31),
     "largest request body accepted"},
    {"max-bodies-bytes", "REMAT_MAX_BODIES_BYTES", O_SIZE, OFF(max_bodies_bytes), 0, 1024,
     (1ULL << 40),
     "request bodies held in memory together (being read, queued, handled); past it a request is "
     "503 with Retry-After"},
    {"max-model-bytes", "REMAT_MAX_MODEL_BYTES", O_SIZE, OFF(max_model_bytes), 0, 1024,
     (1ULL << 40), "largest model archive accepted by POST /v1/models"},
    {"max-models-bytes", "REMAT_MAX_MODELS_BYTES", O_SIZE, OFF(max_models_bytes), 0, 1024,
     (1ULL << 46), "total bytes of uploaded models kept (507 past it)"},
    {"max-stages", "REMAT_MAX_STAGES", O_SIZE, OFF(max_stages), 0, 1, REMAT_MAX_STAGES,
     "most stages accepted in one profile"},
    {"max-connections", "REMAT_MAX_CONNECTIONS", O_UINT, OFF(max_connections), 0, 4, 60000,
     "concurrent connections"},
    {"connection-timeout", "REMAT_CONNECTION_TIMEOUT", O_UINT, OFF(connection_timeout), 0, 1, 86400,
     "seconds an idle or slow connection is kept"},
    {"threads", "REMAT_THREADS", O_UINT, OFF(threads), 0, 1, 256, "HTTP polling threads"},
    {"plan-threads", "REMAT_PLAN_THREADS", O_UINT, OFF(plan_threads), 0, 0, 256,
     "planning threads (POST /v1/plans with a large body or a slow solver); 0: one per core"},
    /* At least 2: a worker renews every third of the lease but at most
     * once a second, so a lease of 1 s lapses between two renewals. */
    {"lease-seconds", "REMAT_LEASE_SECONDS", O_UINT, OFF(lease_seconds), 0, 2, 86400,
     "job lease length"},
    {"max-attempts", "REMAT_MAX_ATTEMPTS", O_UINT, OFF(max_attempts), 0, 1, 1000,
     "attempts before a job is failed"},
    {"idempotency-ttl", "REMAT_IDEMPOTENCY_TTL", O_UINT, OFF(idempotency_ttl), 0, 1, 31 * 86400,
     "seconds an Idempotency-Key is remembered"},
    {"workers", "REMAT_WORKERS", O_WORKERS, OFF(workers), 0, 0, 256,
     "local remat-worker processes to run and supervise (a number or auto)"},
    {"worker-path", "REMAT_WORKER_PATH", O_STR, OFF(worker_path), SZ(worker_path), 0, 0,
     "the remat-worker program"},
    {"sync", "REMAT_SYNC", O_STR, OFF(sync), SZ(sync), 0, 0,
     "SQLite synchronous mode: full (fsync every commit) or normal (survives a crash of "
     "rematd, not of the machine)"},
    {"port-file", "REMAT_PORT_FILE", O_STR, OFF(port_file), SZ(port_file), 0, 0,
     "write the bound port to this file once listening"},
    {"max-queued-plans", "REMAT_MAX_QUEUED_PLANS", O_UINT, OFF(max_queued_plans), 0, 1, 1000000,
     "plans waiting for a planning thread; past it POST /v1/plans is 503 with Retry-After"},
    {"max-queued-jobs", "REMAT_MAX_QUEUED_JOBS", O_UINT, OFF(max_queued_jobs), 0, 1, 10000000,
     "jobs queued for workers; past it POST /v1/profiles and /v1/validations are 503"},
    {"max-idempotency-keys", "REMAT_MAX_IDEMPOTENCY_KEYS", O_UINT, OFF(max_idempotency_keys), 0, 1,
     100000000, "Idempotency-Key records kept; past it a request with a new key is 503"},
    {"solve-timeout-ms", "REMAT_SOLVE_TIMEOUT_MS", O_UINT, OFF(solve_timeout_ms), 0, 1, 3600000,
     "the longest one solve may run; past it POST /v1/plans is 422 solve-deadline"},
    {"solve-memory-bytes", "REMAT_SOLVE_MEMORY_BYTES", O_SIZE, OFF(solve_memory_bytes), 0, 1u << 20,
     (1ULL << 40),
     "solver memory (estimated before solving) all running solves may hold together; one "
     "request over it is 422, one that must wait for others is 503"},
    {"wal-limit-bytes", "REMAT_WAL_LIMIT_BYTES", O_SIZE, OFF(wal_limit_bytes), 0, 1u << 20,
     (1ULL << 40), "size the SQLite WAL file is cut back to after a burst of writes"},
    {"drain-seconds", "REMAT_DRAIN_SECONDS", O_UINT, OFF(drain_seconds), 0, 1, 3600,
     "on SIGTERM, how long requests in flight get to finish before they are cut off"},
    /* Connection defences (http/conn.c, docs/api.md "Limits"). */
    {"request-timeout", "REMAT_REQUEST_TIMEOUT", O_UINT, OFF(request_timeout), 0, 1, 3600,
     "seconds a client has to send a whole request (headers and body), however it trickles"},
    {"upload-idle-timeout", "REMAT_UPLOAD_IDLE_TIMEOUT", O_UINT, OFF(upload_idle_timeout), 0, 1,
     3600,
     "seconds an upload's body (POST /v1/models) may go without a byte; it has no "
     "--request-timeout, so a large model on a slow link goes through"},
    {"max-connections-per-ip", "REMAT_MAX_CONNECTIONS_PER_IP", O_UINT, OFF(max_connections_per_ip),
     0, 0, 60000,
     "concurrent connections from one client address (0: no limit, e.g. behind a proxy)"},
    {"health-connections", "REMAT_HEALTH_CONNECTIONS", O_UINT, OFF(health_connections), 0, 1, 1000,
     "connections kept beyond --max-connections for /healthz and /readyz only; with "
     "--health-listen, also the connection limit of that listener"},
    /* Tenants (tenants.c, docs/security.md "Tenants"). */
    {"tokens-file", "REMAT_TOKENS_FILE", O_STR, OFF(tokens_file), SZ(tokens_file), 0, 0,
     "file of '<tenant> <token>' lines: each token is a client of that tenant (read at start)"},
    {"tenant-max-models-bytes", "REMAT_TENANT_MAX_MODELS_BYTES", O_SIZE,
     OFF(tenant_max_models_bytes), 0, 0, (1ULL << 46),
     "bytes of uploaded models one tenant may keep (507 past it); 0: --max-models-bytes divided "
     "among the tenants"},
    {"tenant-max-queued-jobs", "REMAT_TENANT_MAX_QUEUED_JOBS", O_UINT, OFF(tenant_max_queued_jobs),
     0, 0, 10000000,
     "jobs one tenant may have queued (503 past it); 0: --max-queued-jobs divided among the "
     "tenants"},
    {"tenant-max-idempotency-keys", "REMAT_TENANT_MAX_IDEMPOTENCY_KEYS", O_UINT,
     OFF(tenant_max_idempotency_keys), 0, 0, 100000000,
     "Idempotency-Key records one tenant may keep (503 past it); 0: --max-idempotency-keys "
     "divided among the tenants"},
    {"max-store-bytes", "REMAT_MAX_STORE_BYTES", O_SIZE, OFF(max_store_bytes), 0, 65536,
     (1ULL << 50),
     "bytes of stored plans and Idempotency-Key records together; past it the oldest go first "
     "(checked once a minute)"},
    {"plan-ttl", "REMAT_PLAN_TTL", O_UINT, OFF(plan_ttl), 0, 0, 3650u * 86400u,
     "seconds a stored plan is kept (0: until --max-store-bytes makes room)"},
    {"health-listen", "REMAT_HEALTH_LISTEN", O_STR, OFF(health_listen), SZ(health_listen), 0, 0,
     "a second address (host:port) serving only /healthz, /readyz and /metrics, for probes: "
     "its own connections, which clients of --listen cannot take; empty: none"},
};
#define N_OPTS (sizeof opts / sizeof opts[0])

static void defaults(struct rematd_config *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->listen, sizeof c->listen, "127.0.0.1:8080");
    /* The XDG base-directory rule for state, so that `./api/rematd` in a
     * source tree does not write into the tree. */
    const char *xdg = getenv("XDG_STATE_HOME");
    const char *home = getenv("HOME");
    if (xdg && *xdg == '/')
        snprintf(c->data_dir, sizeof c->data_dir, "%s/remat", xdg);
    else if (home && *home == '/')
        snprintf(c->data_dir, sizeof c->data_dir, "%s/.local/state/remat", home);
    else
        snprintf(c->data_dir, sizeof c->data_dir, "./remat-data");
    c->max_body_bytes = 8u << 20;
    /* Without it --max-queued-plans (1024) x --max-body-bytes (8 MiB) is
     * 8 GiB of bodies, and --max-connections more: 16 bodies at the limit,
     * beside the solves' 640 MiB, inside deploy/k8s's 1 GiB. */
    c->max_bodies_bytes = (size_t)128 << 20;
    c->max_model_bytes = 2ULL << 30;
    c->max_models_bytes = 20ULL << 30;
    c->max_stages = 100000;
    c->max_connections = 1024;
    c->connection_timeout = 60;
    c->request_timeout = 30;
    c->upload_idle_timeout = 30;
    c->max_connections_per_ip = 64;
    c->health_connections = 16;
    /* A plan's row is ~1.5 KB (50 stages): ~700,000 plans, inside the
     * 5 GiB volume deploy/k8s gives the store beside WAL and models. */
    c->max_store_bytes = (size_t)1 << 30;
    c->plan_ttl = 30u * 86400u;
    c->threads = 2;
    c->lease_seconds = 30;
    c->max_attempts = 3;
    c->idempotency_ttl = 86400;
    c->workers = 0;
    c->max_queued_plans = 1024;
    c->max_queued_jobs = 10000;
    c->max_idempotency_keys = 1000000;
    c->solve_timeout_ms = 10000;
    /* One min-time table at its largest (512 MiB) and the rest, inside the
     * 1 GiB that deploy/k8s gives rematd. */
    c->solve_memory_bytes = (size_t)640 << 20;
    c->drain_seconds = 10;
    c->wal_limit_bytes = (size_t)64 << 20;
    snprintf(c->sync, sizeof c->sync, "full");
    snprintf(c->worker_path, sizeof c->worker_path, "%s/remat-worker", REMATD_BINDIR);
}

static int set_value(struct rematd_config *c, const struct opt *o, const char *v, const char *src)
{
    char *base = (char *)c + o->offset;
    if (o->kind == O_STR) {
        if (strlen(v) >= o->size) {
            fprintf(stderr, "rematd: %s: value too long\n", src);
            return -1;
        }
        memcpy(base, v, strlen(v) + 1);
        if (o->offset == OFF(worker_path))
            c->worker_path_set = 1;
        return 0;
    }
    if (o->kind == O_WORKERS && strcmp(v, "auto") == 0) {
        *(int *)base = -1;
        return 0;
    }
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v || *end || *v == '-' || x < o->lo || x > o->hi) {
        fprintf(stderr, "rematd: %s: want an integer in %llu..%llu, got '%s'\n", src, o->lo, o->hi,
                v);
        return -1;
    }
    if (o->offset == OFF(max_bodies_bytes))
        c->max_bodies_set = 1;
    if (o->kind == O_SIZE)
        *(size_t *)base = (size_t)x;
    else if (o->kind == O_UINT)
        *(unsigned *)base = (unsigned)x;
    else
        *(int *)base = (int)x;
    return 0;
}

static int load_token(char *dst, size_t cap, const char *env)
{
    const char *t = getenv(env);
    if (!t)
        return 0;
    size_t n = strlen(t);
    if (n >= cap) {
        fprintf(stderr, "rematd: %s: longer than %zu bytes\n", env, cap - 1);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)t[i] <= ' ' || (unsigned char)t[i] >= 0x7f) {
            /* RFC 6750's b64token: a client could never send it. */
            fprintf(stderr, "rematd: %s: only visible ASCII characters are allowed\n", env);
            return -1;
        }
    memcpy(dst, t, n + 1);
    return 0;
}

/* host:port, [v6]:port or :port, the port a decimal in 0..65535.
 * getaddrinfo alone takes a port of 99999 (as 34463) and an IPv4 address
 * of fewer than four parts ("1.2.3" as 1.2.0.3): rematd would listen
 * somewhere other than where it was told. */
static int check_listen(const char *flag, const char *spec, char *host_out, unsigned long *port_out)
{
    char host[128];
    const char *port;
    int bad = 0;
    if (spec[0] == '[') {
        const char *e = strchr(spec, ']');
        struct in6_addr a6;
        if (!e || e[1] != ':' || (size_t)(e - spec - 1) >= sizeof host) {
            bad = 1;
        } else {
            snprintf(host, sizeof host, "%.*s", (int)(e - spec - 1), spec + 1);
            bad = inet_pton(AF_INET6, host, &a6) != 1;
        }
        port = e ? e + 2 : "";
    } else {
        const char *colon = strrchr(spec, ':');
        if (!colon || (size_t)(colon - spec) >= sizeof host) {
            bad = 1;
            port = "";
        } else {
            snprintf(host, sizeof host, "%.*s", (int)(colon - spec), spec);
            port = colon + 1;
            /* A bare IPv6 address needs its brackets; a host made of digits
             * and dots must be a whole dotted quad; names are resolved. */
            int digits_dots = host[0] != '\0';
            for (const char *p = host; *p; p++) {
                if (*p == ':')
                    bad = 1;
                if (!((*p >= '0' && *p <= '9') || *p == '.'))
                    digits_dots = 0;
            }
            struct in_addr a4;
            if (digits_dots && inet_pton(AF_INET, host, &a4) != 1)
                bad = 1;
        }
    }
    char *end;
    errno = 0;
    unsigned long p = strtoul(port, &end, 10);
    if (bad || !*port || *end || errno || p > 65535 || port[0] < '0' || port[0] > '9') {
        fprintf(stderr,
                "rematd: --%s %s: want host:port or [v6]:port, an IPv4 address in four "
                "parts, a port in 0..65535\n",
                flag, spec);
        return -1;
    }
    snprintf(host_out, sizeof host, "%s", host);
    *port_out = p;
    return 0;
}

/* The wildcard addresses, which take every address of their family. */
static int any_host(const char *h)
{
    return !h[0] || strcmp(h, "0.0.0.0") == 0 || strcmp(h, "::") == 0;
}

/* --listen and, when set, --health-listen, which must not be the same
 * socket: probes on the main port are what the health listener is for
 * (the bind would fail anyway, with a less useful message).  Port 0 picks
 * a free port for each, so two of them never clash. */
static int check_listeners(const struct rematd_config *c)
{
    char host[128], hhost[128];
    unsigned long port, hport;
    if (check_listen("listen", c->listen, host, &port) < 0)
        return -1;
    if (!c->health_listen[0])
        return 0;
    if (check_listen("health-listen", c->health_listen, hhost, &hport) < 0)
        return -1;
    if (port != 0 && port == hport &&
        (strcmp(host, hhost) == 0 || any_host(host) || any_host(hhost))) {
        fprintf(stderr,
                "rematd: --health-listen %s: the same address as --listen %s; give the probes a "
                "port of their own\n",
                c->health_listen, c->listen);
        return -1;
    }
    return 0;
}

/* Settings each in range that do not work together. */
static int check_combined(struct rematd_config *c)
{
    /* A body at --max-body-bytes could never be taken: the default total
     * follows a larger body limit, one given is checked. */
    if (!c->max_bodies_set && c->max_bodies_bytes < c->max_body_bytes)
        c->max_bodies_bytes = c->max_body_bytes;
    if (c->max_bodies_bytes < c->max_body_bytes) {
        fprintf(stderr, "rematd: --max-bodies-bytes %zu is below --max-body-bytes %zu\n",
                c->max_bodies_bytes, c->max_body_bytes);
        return -1;
    }
    /* libmicrohttpd divides the connection limit among the polling
     * threads: fewer connections than threads leaves a thread none. */
    if (c->max_connections < c->threads) {
        fprintf(stderr, "rematd: --max-connections %u is below --threads %u\n", c->max_connections,
                c->threads);
        return -1;
    }
    /* Each connection is a descriptor; past the limit accept(2) fails and
     * clients wait on the backlog with nothing logged.  The soft limit is
     * raised as far as the hard one allows. */
    struct rlimit rl;
    rlim_t need = (rlim_t)c->max_connections + 64 + 2 * (rlim_t)(c->workers > 0 ? c->workers : 1);
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
        if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need)
            rl.rlim_cur = need;
        else
            rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need) {
            fprintf(stderr,
                    "rematd: --max-connections %u needs %llu descriptors, the limit is %llu "
                    "(ulimit -n)\n",
                    c->max_connections, (unsigned long long)need, (unsigned long long)rl.rlim_cur);
            return -1;
        }
    }
    if (c->worker_path_set && c->workers != 0 && access(c->worker_path, X_OK) != 0) {
        /* Not replaced by another worker program, and not restarted in a
         * loop: said once, at start. */
        fprintf(stderr, "rematd: --worker-path %s: %s\n", c->worker_path, strerror(errno));
        return -1;
    }
    return 0;
}

static void usage(const struct rematd_config *d)
{
    printf("Usage: rematd [OPTION]...\n"
           "remat's HTTP planning service.  Each flag overrides its environment variable,\n"
           "which overrides the default.\n\n");
    json_t *j = rematd_config_to_json(d);
    for (size_t i = 0; i < N_OPTS; i++) {
        json_t *v = json_object_get(j, opts[i].flag);
        char *dv = rematx_json_dumps(v, JSON_ENCODE_ANY);
        printf("  --%-20s %s\n  %-22s env %s, default %s\n", opts[i].flag, opts[i].help, "",
               opts[i].env, dv ? dv : "?");
        free(dv);
    }
    json_decref(j);
    printf("  --print-config         print the effective configuration as JSON and exit\n"
           "  --allow-anonymous      let clients in without a token even when listening beyond\n"
           "                         loopback (env REMAT_ALLOW_ANONYMOUS=1; logged as a warning)\n"
           "  --help, --version\n\n"
           "Environment only: REMAT_TOKEN (Bearer token every /v1 route requires: the tenant\n"
           "\"default\"), REMAT_WORKER_TOKEN (Bearer token of the /v1/worker routes).\n");
}

/* --store: sqlite:DIR is --data-dir DIR (the models' files go beside the
 * database, as they always did); empty is sqlite: on --data-dir. */
static int check_store(struct rematd_config *c)
{
    if (!c->store[0]) {
        snprintf(c->store, sizeof c->store, "sqlite:%s", c->data_dir);
        return 0;
    }
    if (strncmp(c->store, "sqlite:", 7) == 0) {
        if (!c->store[7] || strlen(c->store + 7) >= sizeof c->data_dir) {
            fprintf(stderr, "rematd: --store sqlite:DIR: want a directory\n");
            return -1;
        }
        snprintf(c->data_dir, sizeof c->data_dir, "%s", c->store + 7);
        return 0;
    }
    if (rematd_store_is_shared(c->store))
        return 0;
    fprintf(stderr, "rematd: --store: want sqlite:DIR or postgresql://..., got '%.40s'\n",
            c->store);
    return -1;
}

/* s with a password in it (postgresql://user:PASSWORD@host, password=...)
 * replaced by (set): what --print-config and the log may show. */
static void redact_store(const char *s, char *out, size_t cap)
{
    snprintf(out, cap, "%s", s);
    char *scheme = strstr(out, "://");
    if (scheme) {
        char *at = strchr(scheme + 3, '@');
        char *colon = at ? memchr(scheme + 3, ':', (size_t)(at - scheme - 3)) : NULL;
        if (colon) {
            char rest[1300];
            snprintf(rest, sizeof rest, "%s", at);
            snprintf(colon + 1, cap - (size_t)(colon + 1 - out), "(set)%s", rest);
        }
    }
    char *pw = strstr(out, "password=");
    if (pw) {
        char *end = strchr(pw, ' ');
        char rest[1300];
        snprintf(rest, sizeof rest, "%s", end ? end : "");
        snprintf(pw + 9, cap - (size_t)(pw + 9 - out), "(set)%s", rest);
    }
}

void rematd_config_store_redacted(const struct rematd_config *c, char *out, size_t cap)
{
    redact_store(c->store, out, cap);
}

int rematd_config_load(struct rematd_config *c, int argc, char **argv)
{
    defaults(c);
    struct rematd_config d = *c;
    for (size_t i = 0; i < N_OPTS; i++) {
        const char *v = getenv(opts[i].env);
        if (v && *v && set_value(c, &opts[i], v, opts[i].env) < 0)
            return -1;
    }
    /* A token too long to keep is an error, not no token: dropping it
     * would open every route the operator meant to close. */
    if (load_token(c->token, sizeof c->token, "REMAT_TOKEN") < 0 ||
        load_token(c->worker_token, sizeof c->worker_token, "REMAT_WORKER_TOKEN") < 0)
        return -1;

    const char *anon = getenv("REMAT_ALLOW_ANONYMOUS");
    if (anon && *anon) {
        if (strcmp(anon, "1") == 0 || strcmp(anon, "true") == 0 || strcmp(anon, "yes") == 0) {
            c->allow_anonymous = 1;
        } else if (strcmp(anon, "0") != 0 && strcmp(anon, "false") != 0 &&
                   strcmp(anon, "no") != 0) {
            fprintf(stderr, "rematd: REMAT_ALLOW_ANONYMOUS: want 1 or 0, got '%s'\n", anon);
            return -1;
        }
    }
    struct option lo[N_OPTS + 5];
    for (size_t i = 0; i < N_OPTS; i++)
        lo[i] = (struct option){opts[i].flag, required_argument, NULL, (int)(256 + i)};
    lo[N_OPTS] = (struct option){"help", no_argument, NULL, 'h'};
    lo[N_OPTS + 1] = (struct option){"version", no_argument, NULL, 'V'};
    lo[N_OPTS + 2] = (struct option){"print-config", no_argument, NULL, 'P'};
    lo[N_OPTS + 3] = (struct option){"allow-anonymous", no_argument, NULL, 'A'};
    lo[N_OPTS + 4] = (struct option){NULL, 0, NULL, 0};
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, "hV", lo, NULL)) != -1) {
        if (ch == 'h') {
            usage(&d);
            return 1;
        } else if (ch == 'V') {
            printf("rematd %s\n", PACKAGE_VERSION);
            return 1;
        } else if (ch == 'P') {
            c->print_config = 1;
        } else if (ch == 'A') {
            c->allow_anonymous = 1;
        } else if (ch >= 256 && ch < 256 + (int)N_OPTS) {
            char src[64];
            snprintf(src, sizeof src, "--%s", opts[ch - 256].flag);
            if (set_value(c, &opts[ch - 256], optarg, src) < 0)
                return -1;
        } else {
            fprintf(stderr, "Try 'rematd --help'.\n");
            return -1;
        }
    }
    if (strcmp(c->sync, "full") != 0 && strcmp(c->sync, "normal") != 0) {
        fprintf(stderr, "rematd: --sync: want full or normal, got '%s'\n", c->sync);
        return -1;
    }
    if (check_listeners(c) < 0 || check_combined(c) < 0 || check_store(c) < 0)
        return -1;
    if (optind < argc) {
        fprintf(stderr, "rematd: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (c->print_config) {
        json_t *j = rematd_config_to_json(c);
        char *s = rematx_json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        printf("%s\n", s ? s : "{}");
        free(s);
        json_decref(j);
        return 1;
    }
    return 0;
}

json_t *rematd_config_to_json(const struct rematd_config *c)
{
    json_t *j = json_object();
    for (size_t i = 0; i < N_OPTS; i++) {
        const char *base = (const char *)c + opts[i].offset;
        json_t *v;
        switch (opts[i].kind) {
        case O_STR:
            v = json_string(base);
            break;
        case O_SIZE:
            v = json_integer((json_int_t) * (const size_t *)base);
            break;
        case O_UINT:
            v = json_integer(*(const unsigned *)base);
            break;
        default:
            v = *(const int *)base < 0 ? json_string("auto") : json_integer(*(const int *)base);
        }
        json_object_set_new(j, opts[i].flag, v);
    }
    /* Secrets are reported as set or not, never printed. */
    char store[1300];
    redact_store(c->store, store, sizeof store);
    json_object_set_new(j, "store", json_string(store));
    json_object_set_new(j, "token", json_string(c->token[0] ? "(set)" : ""));
    json_object_set_new(j, "worker-token", json_string(c->worker_token[0] ? "(set)" : ""));
    json_object_set_new(j, "allow-anonymous", json_boolean(c->allow_anonymous));
    return j;
}
