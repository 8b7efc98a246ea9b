/*
 * main.c - rematd: configuration, the store, the HTTP daemon, signals.
 *
 * Threads: MHD's pool of polling threads (epoll) run the handlers; the
 * store's writer thread commits plans in groups; this main thread waits on a
 * self-pipe for signals and ticks the worker supervisor.
 *
 * Signals (docs/api.md, "Signals"): SIGTERM and SIGINT shut down; SIGHUP is
 * logged and otherwise ignored (the configuration is read at start only and
 * the log is stderr, which needs no reopening); SIGUSR1 logs one status line
 * (requests in flight, plans waiting, jobs by status); SIGUSR2 is logged and
 * ignored.  None of them kills rematd unannounced.
 *
 * Shutdown (SIGTERM or SIGINT): /readyz turns 503, the front door
 * (http/door.c) stops accepting, local workers get SIGTERM, in-flight requests finish within
 * --drain-seconds, then every access call is refused, a solve still running
 * is cancelled (its request answered 503), the daemon stops, the writer
 * flushes and the store checkpoints.  Exit status 0.
 *
 * MHD_stop_daemon aborts the process when a connection is still suspended,
 * and a plan's connection stays suspended until the writer has committed
 * it.  So the daemon is stopped only once no handler is running, none can
 * start, and every suspended connection has been resumed (see http/request.c).
 * "In flight" also covers a connection accepted before the door closed
 * whose request MHD has not parsed yet: it is answered too.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "http/http.h"
#include "rematd.h"
#include "models_common.h"
#include "pool.h"
#include "store.h"
#include "supervise.h"
#include "tenants.h"

static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    /* Async-signal-safe: only write(2) to the self-pipe. */
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    ssize_t w = write(sig_pipe[1], &b, 1);
    (void)w;
    errno = saved;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    rematd_log("warn", "libmicrohttpd", json_pack("{s:s}", "detail", msg));
}

/* host:port or [v6]:port into a sockaddr. */
/* Whether a bound address is loopback only (127.0.0.0/8, ::1, or an
 * IPv4-mapped 127.x). */
static int is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
    }
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        if (IN6_IS_ADDR_LOOPBACK(&a->sin6_addr))
            return 1;
        return IN6_IS_ADDR_V4MAPPED(&a->sin6_addr) && a->sin6_addr.s6_addr[12] == 127;
    }
    return 0;
}

/* Workers are authenticated whenever rematd listens beyond loopback:
 * with REMAT_WORKER_TOKEN, or, when it has supervised workers and no such
 * token, with one made now and given to them only (remote workers then
 * cannot lease: they need REMAT_WORKER_TOKEN).  Without either rematd does
 * not start.  On loopback, supervised workers get a token of their own
 * when REMAT_TOKEN or a tokens file is set, so that they never hold a
 * client's token.  With a tokens file a tenant's token never opens the
 * worker routes (a tenant would lease, and fetch the models of, every
 * other tenant's jobs): REMAT_WORKER_TOKEN is needed, or supervised
 * workers to make one for.  Returns 0, or -1 after saying why. */
static int worker_auth(struct rematd_config *cfg, int loopback)
{
    if (cfg->worker_token[0])
        return 0;
    if (cfg->workers != 0 && (!loopback || cfg->token[0] || cfg->tokens_file[0])) {
        rematd_new_id(cfg->worker_token);
        cfg->worker_token_generated = 1;
        rematd_log("info", "worker token generated for the supervised workers",
                   json_pack("{s:s}", "detail",
                             "set REMAT_WORKER_TOKEN to let workers on other machines lease"));
        return 0;
    }
    if (!loopback) {
        fprintf(stderr,
                "rematd: --listen %s is beyond loopback: set REMAT_WORKER_TOKEN (the worker "
                "routes would be open to anyone), or run supervised workers (--workers)\n",
                cfg->listen);
        return -1;
    }
    if (cfg->tokens_file[0]) {
        fprintf(stderr, "rematd: --tokens-file needs REMAT_WORKER_TOKEN (or supervised workers, "
                        "--workers): a tenant's token must not lease other tenants' jobs\n");
        return -1;
    }
    return 0;
}

/* Clients are authenticated whenever rematd listens beyond loopback: with
 * REMAT_TOKEN or a tokens file, or, when the operator says so with
 * --allow-anonymous, not at all (a warning in the log each start).  On
 * loopback no token stays anonymous, as it always was.  Loads the tenants
 * into srv and sets each tenant's share of the quotas.  Returns 0, or -1
 * after saying why. */
static int client_auth(struct rematd_server *srv, int loopback)
{
    struct rematd_config *cfg = &srv->cfg;
    char err[1400];
    srv->tenants = rematd_tenants_load(cfg->token, cfg->tokens_file, err, sizeof err);
    if (!srv->tenants) {
        fprintf(stderr, "rematd: %s\n", err);
        return -1;
    }
    if (!rematd_tenants_any(srv->tenants) && !loopback) {
        if (!cfg->allow_anonymous) {
            fprintf(stderr,
                    "rematd: --listen %s is beyond loopback and no client token is set: set "
                    "REMAT_TOKEN or --tokens-file (uploads and deletes would be open to anyone "
                    "who reaches it), or say --allow-anonymous\n",
                    cfg->listen);
            return -1;
        }
        rematd_log("warn", "anonymous clients beyond loopback",
                   json_pack("{s:s, s:s}", "listen", cfg->listen, "detail",
                             "--allow-anonymous: every client route is open to anyone who "
                             "reaches this address"));
    }
    /* A tenant's share: what the operator set, else an even part of the
     * whole, so that one tenant never fills what the others need. */
    size_t n = rematd_tenants_count(srv->tenants);
    if (cfg->tenant_max_models_bytes == 0)
        cfg->tenant_max_models_bytes = cfg->max_models_bytes / n;
    if (cfg->tenant_max_queued_jobs == 0)
        cfg->tenant_max_queued_jobs =
            cfg->max_queued_jobs / (unsigned)n > 0 ? cfg->max_queued_jobs / (unsigned)n : 1;
    if (cfg->tenant_max_idempotency_keys == 0)
        cfg->tenant_max_idempotency_keys = cfg->max_idempotency_keys / (unsigned)n > 0
                                               ? cfg->max_idempotency_keys / (unsigned)n
                                               : 1;
    if (rematd_tenants_any(srv->tenants))
        rematd_log("info", "tenants",
                   json_pack("{s:I, s:I, s:I, s:I}", "tenants", (json_int_t)n,
                             "tenant_max_models_bytes", (json_int_t)cfg->tenant_max_models_bytes,
                             "tenant_max_queued_jobs", (json_int_t)cfg->tenant_max_queued_jobs,
                             "tenant_max_idempotency_keys",
                             (json_int_t)cfg->tenant_max_idempotency_keys));
    return 0;
}

/* The supervised workers' own way in: a Unix socket,
 * <data-dir>/workers/rematd.sock, in the folder only rematd's user may
 * enter (0700), served by a second daemon with the same routes.  Its
 * connections serve the worker routes and health probes only, and count
 * against neither --max-connections-per-ip nor --max-connections: clients
 * holding every slot their address may have, from 127.0.0.1 as the
 * workers' TCP connections come, no longer keep the workers from leasing
 * and finishing jobs.  Returns the daemon with the socket's path in path,
 * or NULL (path "") when there are no supervised workers or the socket
 * cannot be made: the workers then use TCP, as before (logged). */
static struct MHD_Daemon *worker_socket(struct rematd_server *srv, char *path, size_t cap)
{
    const struct rematd_config *cfg = &srv->cfg;
    path[0] = '\0';
    if (cfg->workers == 0)
        return NULL;
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/workers", cfg->data_dir);
    int n = snprintf(sa.sun_path, sizeof sa.sun_path, "%s/rematd.sock", dir);
    const char *why = NULL;
    int fd = -1;
    if (n < 0 || (size_t)n >= sizeof sa.sun_path || (size_t)n >= cap)
        why = "the data directory's path is too long for a Unix socket";
    else if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        why = strerror(errno);
    if (!why) {
        /* A socket left by an earlier rematd on this directory (its lock,
         * taken by the store, says no other runs now). */
        unlink(sa.sun_path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
            chmod(sa.sun_path, 0600) < 0 || listen(fd, 128) < 0)
            why = strerror(errno);
    }
    struct MHD_Daemon *d = NULL;
    if (!why) {
        /* Enough for every worker's lease, heartbeat and fetch at once. */
        unsigned limit = 64 + 4 * (unsigned)(cfg->workers > 0 ? cfg->workers : 16);
        const struct MHD_OptionItem *opts = rematd_http_worker_options(srv, limit);
        d = opts ? MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
                                        MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG,
                                    0, NULL, NULL, rematd_access, srv, MHD_OPTION_EXTERNAL_LOGGER,
                                    mhd_log, NULL, MHD_OPTION_LISTEN_SOCKET, fd,
                                    MHD_OPTION_CONNECTION_TIMEOUT, cfg->connection_timeout,
                                    MHD_OPTION_NOTIFY_COMPLETED, rematd_completed, srv,
                                    MHD_OPTION_NOTIFY_CONNECTION, rematd_connection, srv,
                                    MHD_OPTION_ARRAY, opts, MHD_OPTION_END)
                 : NULL;
        if (!d)
            why = "libmicrohttpd would not serve it";
    }
    if (!d) {
        if (fd >= 0) {
            close(fd);
            unlink(sa.sun_path);
        }
        rematd_log("warn", "no Unix socket for the workers: they connect over TCP",
                   json_pack("{s:s, s:s}", "path", sa.sun_path, "detail", why));
        return NULL;
    }
    snprintf(path, cap, "%s", sa.sun_path);
    return d;
}

static void status_line(struct rematd_server *srv)
{
    struct rematd_job_counts jc;
    rematd_store_count_jobs(srv->store, &jc);
    rematd_log("info", "status",
               json_pack("{s:I, s:I, s:I, s:I, s:i}", "in_flight",
                         (json_int_t)atomic_load(&srv->in_flight), "plans_waiting",
                         (json_int_t)rematd_pool_queued(srv->pool), "jobs_queued",
                         (json_int_t)jc.queued, "jobs_running", (json_int_t)jc.running, "ready",
                         rematd_store_ready(srv->store) == REMATD_STORE_OK));
}

static int parse_listen(const char *spec, struct sockaddr_storage *ss, socklen_t *len)
{
    char host[128], port[16];
    const char *colon;
    if (spec[0] == '[') {
        const char *e = strchr(spec, ']');
        if (!e || e[1] != ':')
            return -1;
        snprintf(host, sizeof host, "%.*s", (int)(e - spec - 1), spec + 1);
        colon = e + 1;
    } else {
        colon = strrchr(spec, ':');
        if (!colon)
            return -1;
        snprintf(host, sizeof host, "%.*s", (int)(colon - spec), spec);
    }
    snprintf(port, sizeof port, "%s", colon + 1);
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    if (getaddrinfo(host[0] ? host : NULL, port, &hints, &res) != 0 || !res)
        return -1;
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

int main(int argc, char **argv)
{
    static struct rematd_server srv;
    int rc = rematd_config_load(&srv.cfg, argc, argv);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    struct rematd_config *cfg = &srv.cfg;

    struct sockaddr_storage addr;
    socklen_t alen;
    if (parse_listen(cfg->listen, &addr, &alen) < 0) {
        fprintf(stderr, "rematd: --listen %s: want host:port\n", cfg->listen);
        return 2;
    }
    if (worker_auth(cfg, is_loopback(&addr)) < 0 || client_auth(&srv, is_loopback(&addr)) < 0 ||
        rematd_supervisor_check(cfg) < 0) {
        rematd_tenants_free(srv.tenants);
        return 2;
    }
    if (pipe(sig_pipe) < 0) {
        perror("rematd: pipe");
        return 1;
    }
    fcntl(sig_pipe[1], F_SETFL, O_NONBLOCK);
    fcntl(sig_pipe[0], F_SETFD, FD_CLOEXEC);
    fcntl(sig_pipe[1], F_SETFD, FD_CLOEXEC);
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    char err[1200];
    srv.store = rematd_store_open(cfg->store, cfg, err, sizeof err);
    if (!srv.store) {
        rematd_log("error", "cannot open the store", json_pack("{s:s}", "detail", err));
        return 1;
    }
    if (rematd_models_prepare(cfg, srv.store) < 0) {
        rematd_store_close(srv.store);
        return 1;
    }
    unsigned plan_threads = cfg->plan_threads;
    if (plan_threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        plan_threads = n < 1 ? 1 : n > 64 ? 64 : (unsigned)n;
    }
    srv.pool = rematd_pool_start(plan_threads, cfg->max_queued_plans);
    if (!srv.pool) {
        rematd_log("error", "cannot start the planning threads", NULL);
        rematd_store_close(srv.store);
        return 1;
    }
    /* No listening socket of libmicrohttpd's: rematd's front door accepts
     * and hands it each connection whose first request's head passed
     * (http/door.c), so that a head libmicrohttpd would answer with a page
     * of its own is answered as problem+json. */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET;
    /* Connection limits, health slots and the request deadline: http/conn.c. */
    const struct MHD_OptionItem *http_options =
        rematd_http_setup(&srv, rematd_routes, rematd_n_routes);
    srv.daemon = !http_options
                     ? NULL
                     : MHD_start_daemon(flags, 0, NULL, NULL, rematd_access, &srv,
                                        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                                        MHD_OPTION_THREAD_POOL_SIZE, cfg->threads,
                                        MHD_OPTION_CONNECTION_TIMEOUT, cfg->connection_timeout,
                                        MHD_OPTION_NOTIFY_COMPLETED, rematd_completed, &srv,
                                        MHD_OPTION_NOTIFY_CONNECTION, rematd_connection, &srv,
                                        MHD_OPTION_ARRAY, http_options, MHD_OPTION_END);
    int bound = srv.daemon ? rematd_http_listen(&srv, (struct sockaddr *)&addr, alen) : -1;
    if (bound < 0) {
        rematd_log("error", "cannot listen",
                   json_pack("{s:s, s:s}", "listen", cfg->listen, "detail", strerror(errno)));
        if (srv.daemon)
            MHD_stop_daemon(srv.daemon);
        rematd_http_teardown(&srv);
        rematd_pool_stop(srv.pool);
        rematd_store_close(srv.store);
        return 1;
    }
    /* The probes' own listener, before the port file says rematd is up. */
    if (rematd_http_health_start(&srv) < 0) {
        MHD_stop_daemon(srv.daemon);
        rematd_http_teardown(&srv);
        rematd_pool_stop(srv.pool);
        rematd_store_close(srv.store);
        return 1;
    }
    unsigned port = (unsigned)bound;
    if (cfg->port_file[0]) {
        /* Written to a temporary name and renamed, so a reader never sees
         * a half-written port. */
        char tmp[1100];
        snprintf(tmp, sizeof tmp, "%s.tmp", cfg->port_file);
        FILE *f = fopen(tmp, "w");
        int ok = f != NULL;
        if (f) {
            ok = fprintf(f, "%u\n", port) > 0;
            ok = fclose(f) == 0 && ok;
            ok = ok && rename(tmp, cfg->port_file) == 0;
        }
        if (!ok) {
            /* Whoever waits for the file (a test, an init script) would
             * wait forever: said, and not started. */
            rematd_log(
                "error", "cannot write the port file",
                json_pack("{s:s, s:s}", "port_file", cfg->port_file, "detail", strerror(errno)));
            MHD_stop_daemon(srv.daemon);
            rematd_http_teardown(&srv);
            rematd_pool_stop(srv.pool);
            rematd_store_close(srv.store);
            return 1;
        }
    }
    if (rematd_http_open(&srv) < 0) {
        rematd_log("error", "cannot start the front door thread", NULL);
        MHD_stop_daemon(srv.daemon);
        rematd_http_teardown(&srv);
        rematd_pool_stop(srv.pool);
        rematd_store_close(srv.store);
        return 1;
    }
    char store[1300];
    rematd_config_store_redacted(cfg, store, sizeof store);
    rematd_log("info", "listening",
               json_pack("{s:s, s:i, s:s, s:s, s:s, s:i, s:i, s:s}", "listen", cfg->listen, "port",
                         (int)port, "data_dir", cfg->data_dir, "store",
                         rematd_store_backend(srv.store), "store_at", store, "threads",
                         (int)cfg->threads, "plan_threads", (int)plan_threads, "version",
                         PACKAGE_VERSION));
    /* Where local workers reach rematd: the address it listens on, or the
     * loopback of its family for a wildcard.  Always 127.0.0.1 reached
     * nothing when rematd listened on [::1] or on one outside address. */
    char server[80], host[INET6_ADDRSTRLEN] = "127.0.0.1";
    if (addr.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)&addr;
        if (IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr))
            snprintf(host, sizeof host, "::1");
        else
            inet_ntop(AF_INET6, &a6->sin6_addr, host, sizeof host);
        snprintf(server, sizeof server, "http://[%s]:%u", host, port);
    } else {
        const struct sockaddr_in *a4 = (const struct sockaddr_in *)&addr;
        if (a4->sin_addr.s_addr != htonl(INADDR_ANY))
            inet_ntop(AF_INET, &a4->sin_addr, host, sizeof host);
        snprintf(server, sizeof server, "http://%s:%u", host, port);
    }
    char wsock[108];
    struct MHD_Daemon *wd = worker_socket(&srv, wsock, sizeof wsock);
    struct rematd_supervisor *sv = rematd_supervisor_start(cfg, server, wsock, &srv.workers);

    int sig = 0;
    while (!sig) {
        struct pollfd pfd = {sig_pipe[0], POLLIN, 0};
        int n = poll(&pfd, 1, sv ? 200 : 1000);
        if (n > 0) {
            unsigned char b;
            if (read(sig_pipe[0], &b, 1) == 1) {
                if (b == SIGTERM || b == SIGINT)
                    sig = b;
                else if (b == SIGUSR1)
                    status_line(&srv);
                else
                    rematd_log("info", "signal ignored",
                               json_pack("{s:i, s:s}", "signal", (int)b, "name",
                                         b == SIGHUP ? "SIGHUP" : "SIGUSR2"));
            }
        }
        rematd_supervisor_tick(sv);
    }

    rematd_log("info", "shutting down", json_pack("{s:i}", "signal", sig));
    atomic_store(&srv.draining, 1);
    rematd_http_quiesce(&srv);
    /* The workers get SIGTERM now and the drain time to release their jobs
     * (SIGKILL after), so that the whole shutdown stays within
     * --drain-seconds. */
    rematd_supervisor_term(sv);
    /* Every request that has begun gets its answer (bounded: a client that
     * trickles its body is cut off), and so does every accepted connection
     * whose request arrives within a second (one that stays silent longer
     * is an idle pre-connection, not a request in flight).  fresh is read
     * before in_flight: a request begins by counting itself in flight, then
     * leaving fresh. */
    double now = rematd_mono(), end = now + cfg->drain_seconds, fresh_end = now + 1.0;
    struct timespec tick = {0, 2 * 1000 * 1000};
    for (;;) {
        now = rematd_mono();
        int waiting = atomic_load(&srv.fresh) > 0 && now < fresh_end;
        if (!waiting && atomic_load(&srv.in_flight) == 0 && rematd_supervisor_alive(sv) == 0)
            break;
        if (now >= end)
            break;
        nanosleep(&tick, NULL);
    }
    /* From here every access call is refused (a request arriving now on a
     * kept-alive connection is closed unanswered, so never acknowledged).
     * Wait for the calls still running, which may suspend a connection, and
     * for the writer to resume every suspended one: it is still running and
     * does so once the plan is committed. */
    atomic_store(&srv.closing, 1);
    rematd_supervisor_stop(sv, 0.2);
    while (atomic_load(&srv.in_access) > 0 || atomic_load(&srv.suspended) > 0)
        nanosleep(&tick, NULL);
    /* The door hands connections to the daemon: it goes first. */
    rematd_http_close(&srv);
    MHD_stop_daemon(srv.daemon);
    if (wd) {
        MHD_stop_daemon(wd);
        unlink(wsock);
    }
    rematd_http_teardown(&srv);
    rematd_pool_stop(srv.pool);
    /* A store that lost its directory or cannot write is not a clean
     * stop: the exit status says so (a supervisor then looks). */
    int store_ok = rematd_store_ready(srv.store) == REMATD_STORE_OK;
    rematd_store_close(srv.store);
    rematd_tenants_free(srv.tenants);
    if (!store_ok) {
        rematd_log("error", "stopped with the store failing", NULL);
        return 1;
    }
    rematd_log("info", "stopped", NULL);
    return 0;
}
