/* config.c - rematd's configuration: built-in defaults, then REMAT_*
 * environment variables, then command-line flags (twelve-factor order).
 * Tokens come only from the environment so they never show in `ps`. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rematd.h"

#ifndef REMAT_BINDIR
#define REMAT_BINDIR "/usr/local/bin"
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
     "directory of the SQLite store (created when missing)"},
    {"max-body-bytes", "REMAT_MAX_BODY_BYTES", O_SIZE, OFF(max_body_bytes), 0, 1024, (1ULL << 31),
     "largest request body accepted"},
    {"max-stages", "REMAT_MAX_STAGES", O_SIZE, OFF(max_stages), 0, 1, REMAT_MAX_STAGES,
     "most stages accepted in one profile"},
    {"max-connections", "REMAT_MAX_CONNECTIONS", O_UINT, OFF(max_connections), 0, 4, 60000,
     "concurrent connections"},
    {"connection-timeout", "REMAT_CONNECTION_TIMEOUT", O_UINT, OFF(connection_timeout), 0, 1, 86400,
     "seconds an idle or slow connection is kept"},
    {"threads", "REMAT_THREADS", O_UINT, OFF(threads), 0, 1, 256, "HTTP polling threads"},
    {"plan-threads", "REMAT_PLAN_THREADS", O_UINT, OFF(plan_threads), 0, 0, 256,
     "planning threads (POST /v1/plans with a large body or a slow solver); 0: one per core"},
    {"lease-seconds", "REMAT_LEASE_SECONDS", O_UINT, OFF(lease_seconds), 0, 1, 86400,
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
    /* Connection defences (http.c, docs/api.md "Limits"). */
    {"request-timeout", "REMAT_REQUEST_TIMEOUT", O_UINT, OFF(request_timeout), 0, 1, 3600,
     "seconds a client has to send a whole request (headers and body), however it trickles"},
    {"max-connections-per-ip", "REMAT_MAX_CONNECTIONS_PER_IP", O_UINT, OFF(max_connections_per_ip),
     0, 0, 60000,
     "concurrent connections from one client address (0: no limit, e.g. behind a proxy)"},
    {"health-connections", "REMAT_HEALTH_CONNECTIONS", O_UINT, OFF(health_connections), 0, 1, 1000,
     "connections kept beyond --max-connections for /healthz and /readyz only"},
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
    c->max_stages = 100000;
    c->max_connections = 1024;
    c->connection_timeout = 60;
    c->request_timeout = 30;
    c->max_connections_per_ip = 64;
    c->health_connections = 16;
    c->threads = 2;
    c->lease_seconds = 30;
    c->max_attempts = 3;
    c->idempotency_ttl = 86400;
    c->workers = 0;
    snprintf(c->sync, sizeof c->sync, "full");
    snprintf(c->worker_path, sizeof c->worker_path, "%s/remat-worker", REMAT_BINDIR);
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
    if (o->kind == O_SIZE)
        *(size_t *)base = (size_t)x;
    else if (o->kind == O_UINT)
        *(unsigned *)base = (unsigned)x;
    else
        *(int *)base = (int)x;
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
        char *dv = json_dumps(v, JSON_ENCODE_ANY);
        printf("  --%-20s %s\n  %-22s env %s, default %s\n", opts[i].flag, opts[i].help, "",
               opts[i].env, dv ? dv : "?");
        free(dv);
    }
    json_decref(j);
    printf("  --print-config         print the effective configuration as JSON and exit\n"
           "  --help, --version\n\n"
           "Environment only: REMAT_TOKEN (Bearer token every /v1 route requires),\n"
           "REMAT_WORKER_TOKEN (Bearer token of the /v1/worker routes).\n");
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
    const char *t = getenv("REMAT_TOKEN");
    if (t && strlen(t) < sizeof c->token)
        snprintf(c->token, sizeof c->token, "%s", t);
    t = getenv("REMAT_WORKER_TOKEN");
    if (t && strlen(t) < sizeof c->worker_token)
        snprintf(c->worker_token, sizeof c->worker_token, "%s", t);

    struct option lo[N_OPTS + 4];
    for (size_t i = 0; i < N_OPTS; i++)
        lo[i] = (struct option){opts[i].flag, required_argument, NULL, (int)(256 + i)};
    lo[N_OPTS] = (struct option){"help", no_argument, NULL, 'h'};
    lo[N_OPTS + 1] = (struct option){"version", no_argument, NULL, 'V'};
    lo[N_OPTS + 2] = (struct option){"print-config", no_argument, NULL, 'P'};
    lo[N_OPTS + 3] = (struct option){NULL, 0, NULL, 0};
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
    if (optind < argc) {
        fprintf(stderr, "rematd: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (c->print_config) {
        json_t *j = rematd_config_to_json(c);
        char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
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
    json_object_set_new(j, "token", json_string(c->token[0] ? "(set)" : ""));
    json_object_set_new(j, "worker-token", json_string(c->worker_token[0] ? "(set)" : ""));
    return j;
}
