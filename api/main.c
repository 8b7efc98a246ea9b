/*
 * main.c - rematd: configuration, the store, the HTTP daemon, signals.
 *
 * Threads: MHD's pool of polling threads (epoll) run the handlers; the
 * store's writer thread commits plans in groups; this main thread waits on a
 * self-pipe for SIGTERM/SIGINT and ticks the worker supervisor.
 *
 * Shutdown (SIGTERM or SIGINT): /readyz turns 503, MHD_quiesce_daemon stops
 * accepting, local workers get SIGTERM, in-flight requests finish (bounded
 * wait), then every access call is refused and the daemon stops, the writer
 * flushes and the store checkpoints.  Exit status 0.
 *
 * MHD_stop_daemon aborts the process when a connection is still suspended,
 * and a plan's connection stays suspended until the writer has committed
 * it.  So the daemon is stopped only once no handler is running, none can
 * start, and every suspended connection has been resumed (see http.c).
 * "In flight" also covers a connection accepted before MHD_quiesce_daemon
 * whose request MHD has not parsed yet: it is answered too.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rematd.h"
#include "store.h"

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
static int parse_listen(const char *spec, struct sockaddr_storage *ss, socklen_t *len, int *v6)
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
    *v6 = res->ai_family == AF_INET6;
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
    int v6 = 0;
    if (parse_listen(cfg->listen, &addr, &alen, &v6) < 0) {
        fprintf(stderr, "rematd: --listen %s: want host:port\n", cfg->listen);
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
    signal(SIGPIPE, SIG_IGN);

    char err[1200];
    srv.store = rematd_store_open(cfg->data_dir, cfg, err, sizeof err);
    if (!srv.store) {
        rematd_log("error", "cannot open the store", json_pack("{s:s}", "detail", err));
        return 1;
    }
    unsigned plan_threads = cfg->plan_threads;
    if (plan_threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        plan_threads = n < 1 ? 1 : n > 64 ? 64 : (unsigned)n;
    }
    srv.pool = rematd_pool_start(plan_threads);
    if (!srv.pool) {
        rematd_log("error", "cannot start the planning threads", NULL);
        rematd_store_close(srv.store);
        return 1;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ERROR_LOG | (v6 ? MHD_USE_IPv6 : 0);
    /* Connection limits, health slots and the request deadline: http.c. */
    const struct MHD_OptionItem *http_options = rematd_http_setup(&srv);
    srv.daemon =
        !http_options
            ? NULL
            : MHD_start_daemon(
                  flags, 0, NULL, NULL, rematd_access, &srv, MHD_OPTION_EXTERNAL_LOGGER, mhd_log,
                  NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_THREAD_POOL_SIZE,
                  cfg->threads, MHD_OPTION_CONNECTION_TIMEOUT, cfg->connection_timeout,
                  MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u, MHD_OPTION_NOTIFY_COMPLETED,
                  rematd_completed, &srv, MHD_OPTION_NOTIFY_CONNECTION, rematd_connection, &srv,
                  MHD_OPTION_ARRAY, http_options, MHD_OPTION_END);
    if (!srv.daemon) {
        rematd_log("error", "cannot listen",
                   json_pack("{s:s, s:s}", "listen", cfg->listen, "detail", strerror(errno)));
        rematd_pool_stop(srv.pool);
        rematd_store_close(srv.store);
        return 1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(srv.daemon, MHD_DAEMON_INFO_BIND_PORT);
    unsigned port = di ? di->port : 0;
    if (cfg->port_file[0]) {
        /* Written to a temporary name and renamed, so a reader never sees
         * a half-written port. */
        char tmp[1100];
        snprintf(tmp, sizeof tmp, "%s.tmp", cfg->port_file);
        FILE *f = fopen(tmp, "w");
        if (f) {
            fprintf(f, "%u\n", port);
            fclose(f);
            rename(tmp, cfg->port_file);
        }
    }
    rematd_log("info", "listening",
               json_pack("{s:s, s:i, s:s, s:i, s:i, s:s}", "listen", cfg->listen, "port", (int)port,
                         "data_dir", cfg->data_dir, "threads", (int)cfg->threads, "plan_threads",
                         (int)plan_threads, "version", PACKAGE_VERSION));
    struct rematd_supervisor *sv = rematd_supervisor_start(cfg, port);

    int sig = 0;
    while (!sig) {
        struct pollfd pfd = {sig_pipe[0], POLLIN, 0};
        int n = poll(&pfd, 1, sv ? 200 : 1000);
        if (n > 0) {
            unsigned char b;
            if (read(sig_pipe[0], &b, 1) == 1)
                sig = b;
        }
        rematd_supervisor_tick(sv);
    }

    rematd_log("info", "shutting down", json_pack("{s:i}", "signal", sig));
    atomic_store(&srv.draining, 1);
    MHD_socket lfd = MHD_quiesce_daemon(srv.daemon);
    if (lfd != MHD_INVALID_SOCKET)
        close(lfd);
    rematd_supervisor_stop(sv, 5.0);
    /* Every request that has begun gets its answer (bounded: a client that
     * trickles its body is cut off), and so does every accepted connection
     * whose request arrives within a second (one that stays silent longer
     * is an idle pre-connection, not a request in flight).  fresh is read
     * before in_flight: a request begins by counting itself in flight, then
     * leaving fresh. */
    double now = rematd_mono(), end = now + 10.0, fresh_end = now + 1.0;
    struct timespec tick = {0, 2 * 1000 * 1000};
    for (;;) {
        now = rematd_mono();
        int waiting = atomic_load(&srv.fresh) > 0 && now < fresh_end;
        if (!waiting && atomic_load(&srv.in_flight) == 0)
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
    while (atomic_load(&srv.in_access) > 0 || atomic_load(&srv.suspended) > 0)
        nanosleep(&tick, NULL);
    MHD_stop_daemon(srv.daemon);
    rematd_http_teardown(&srv);
    rematd_pool_stop(srv.pool);
    rematd_store_close(srv.store);
    rematd_log("info", "stopped", NULL);
    return 0;
}
