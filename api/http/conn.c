/*
 * conn.c - connections, and the defences that keep idle and slow clients
 * from holding the slots that others need (docs/api.md, "Connections"):
 *
 * - A deadline for the whole request: from the start of the connection, or
 *   from the end of the previous request on it, the request's headers and
 *   body must have arrived within --request-timeout, however slowly they
 *   trickle (libmicrohttpd's own timeout counts from the last byte read, so
 *   a byte every few seconds would hold a slot forever).  A thread of this
 *   file (the reaper) answers 408 and shuts down the socket of a connection
 *   past its deadline; libmicrohttpd sees the end of the stream and closes
 *   it on its own thread.  The deadline is off while a request is handled
 *   or answered.  A streamed body (an upload) has instead, once its
 *   headers are in and accepted, --upload-idle-timeout from the last read:
 *   a 1 GB model at 20 MB/s takes 50 s, past any whole-request deadline
 *   worth having, while a client that stops sending is cut as soon.
 *   (libmicrohttpd's own MHD_OPTION_CONNECTION_TIMEOUT, --connection-timeout,
 *   is such an idle timeout too, for every connection: it closes without
 *   an answer, and a byte every few seconds resets it.)
 * - --max-connections-per-ip, and --max-connections with the health slots
 *   below: counted by the front door (door.c), which accepts on the TCP
 *   listeners, from the accept to the close, and holds a connection until
 *   the head of its first request is in (the request deadline counting
 *   there already).  A connection past --max-connections is marked there
 *   (a health slot); rematd__door_started hands that on, with the deadline.
 * - --health-connections slots past --max-connections: a connection that
 *   arrives when the others are all taken is served only /healthz and
 *   /readyz (what a kubelet probes), with a short deadline, so that a full
 *   pool does not make a healthy rematd look dead.  The limit is logged
 *   when reached.
 * - --health-listen: a second libmicrohttpd daemon on its own address,
 *   serving /healthz, /readyz and /metrics only (any other path is 404),
 *   with its own connection limit (--health-connections), one polling
 *   thread, a 2 s request deadline and a 5 s idle timeout.  Clients of the
 *   main port cannot take its connections however many they open: the
 *   health slots above are shared by every client once the pool is full, so
 *   a flood larger than --max-connections takes them too.
 *
 * The reaper and libmicrohttpd's threads share the list of connections
 * under one mutex; a connection leaves it in NOTIFY_CLOSED, which
 * libmicrohttpd calls before it closes the socket, so the reaper never
 * shuts down a descriptor that has been reused.
 */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "http_private.h"

struct rematd__conn {
    int fresh;       /* its first request has not begun */
    int reserved;    /* a health slot, or a connection of the health listener */
    int health_port; /* a connection of the health listener (--health-listen) */
    int local;       /* on the workers' Unix socket: outside the clients' slots */
    int fd;
    double deadline; /* monotonic seconds; 0 = none */
    char client[48];
    struct rematd__conn *prev, *next;
};

struct rematd_http {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t reaper;
    int reaper_started, stop;
    struct rematd__conn *head;
    double last_cut_log;
    long cut_unlogged;
    struct MHD_OptionItem options[8];
    struct MHD_OptionItem worker_options[8];
    struct MHD_Daemon *health; /* --health-listen's daemon, or NULL */
    struct rematd__door *door; /* the TCP listeners (door.c) */
};

static void set_deadline(struct rematd_server *srv, struct rematd__conn *cs, double deadline)
{
    if (!cs || !srv->http)
        return;
    pthread_mutex_lock(&srv->http->mu);
    cs->deadline = deadline;
    pthread_mutex_unlock(&srv->http->mu);
}

static double request_deadline(struct rematd_server *srv, const struct rematd__conn *cs)
{
    double t = srv->cfg.request_timeout ? srv->cfg.request_timeout : 30;
    if (cs && cs->reserved && t > REMATD_HEALTH_DEADLINE)
        t = REMATD_HEALTH_DEADLINE;
    return rematd_mono() + t;
}

struct rematd__conn *rematd__conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

int rematd__conn_begin(struct rematd_server *srv, struct rematd__conn *cs)
{
    if (!cs)
        return 0;
    if (cs->fresh) {
        cs->fresh = 0;
        atomic_fetch_sub(&srv->fresh, 1);
    }
    return cs->health_port ? 2 : cs->reserved;
}

int rematd__conn_health_port(struct rematd_server *srv, struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_DAEMON);
    return srv->http && srv->http->health && ci && ci->daemon == srv->http->health;
}

void rematd__conn_deadline_off(struct rematd_server *srv, struct rematd__conn *cs)
{
    set_deadline(srv, cs, 0);
}

void rematd__conn_deadline_in(struct rematd_server *srv, struct rematd__conn *cs, double seconds)
{
    set_deadline(srv, cs, rematd_mono() + seconds);
}

void rematd__conn_deadline_next(struct rematd_server *srv, struct rematd__conn *cs)
{
    set_deadline(srv, cs, request_deadline(srv, cs));
}

int rematd__conn_local(const struct rematd__conn *cs)
{
    return cs && cs->local;
}

/* The client's address as text into out; returns 1 when the connection
 * came on a Unix socket (the workers'). */
static int client_address(struct MHD_Connection *c, char *out, size_t cap)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    snprintf(out, cap, "?");
    if (!ci || !ci->client_addr)
        return 0;
    const struct sockaddr *sa = ci->client_addr;
    if (sa->sa_family == AF_UNIX) {
        snprintf(out, cap, "unix");
        return 1;
    }
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, out,
                  (socklen_t)cap);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, out,
                  (socklen_t)cap);
    return 0;
}

static void *reaper(void *arg)
{
    struct rematd_server *srv = arg;
    struct rematd_http *h = srv->http;
    /* The reaper's answer, whole: problem+json as every other error,
     * though written before any route is known (so no instance and no
     * request id), the same as the door's (door.c). */
    char timeout_answer[512];
    int timeout_len = rematd__door_answer(timeout_answer, sizeof timeout_answer, 408,
                                          "request-timeout", REMATD_TIMEOUT_DETAIL, NULL);
    pthread_mutex_lock(&h->mu);
    while (!h->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 200 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&h->cv, &h->mu, &ts);
        double now = rematd_mono();
        char client[48] = "";
        for (struct rematd__conn *cs = h->head; cs; cs = cs->next) {
            if (cs->deadline == 0 || now < cs->deadline || cs->fd < 0)
                continue;
            cs->deadline = 0;
            /* Nothing is being written on a connection whose request has
             * not been read, so this answer cannot interleave with one. */
            ssize_t w =
                send(cs->fd, timeout_answer, (size_t)timeout_len, MSG_NOSIGNAL | MSG_DONTWAIT);
            (void)w;
            shutdown(cs->fd, SHUT_RDWR);
            h->cut_unlogged++;
            memcpy(client, cs->client, sizeof client);
        }
        if (h->cut_unlogged && now - h->last_cut_log >= 1.0) {
            long n = h->cut_unlogged;
            h->cut_unlogged = 0;
            h->last_cut_log = now;
            pthread_mutex_unlock(&h->mu);
            rematd_log("warn", "request deadline passed: connection closed",
                       json_pack("{s:i, s:i, s:s}", "connections", (int)n, "request_timeout",
                                 (int)srv->cfg.request_timeout, "client", client));
            pthread_mutex_lock(&h->mu);
        }
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* The no-op unescaper: routes match the path as sent, so that
 * /v1/plans%2F<id> is not /v1/plans/<id> (no route reads a query). */
static size_t raw_path(void *cls, struct MHD_Connection *c, char *s)
{
    (void)cls;
    (void)c;
    return strlen(s);
}

/* libmicrohttpd's memory per connection: request line and headers must
 * fit in it with the read buffer, about 16,100 bytes of them (docs/api.md;
 * tests/api/framing.sh measures it).  Kept small: it is zeroed for every
 * request. */
#define CONNECTION_MEMORY (16 * 1024)

const struct MHD_OptionItem *rematd_http_setup(struct rematd_server *srv,
                                               const struct rematd_route *const *table, size_t n)
{
    srv->routes = table;
    srv->n_routes = n;
    struct rematd_http *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    srv->http = h;
    h->door = rematd__door_new(srv);
    if (!h->door) {
        rematd_http_teardown(srv);
        return NULL;
    }
    if (pthread_create(&h->reaper, NULL, reaper, srv) == 0)
        h->reaper_started = 1;
    else
        rematd_log("error", "cannot start the request deadline thread", NULL);
    /* The door counts connections from their accept, per address too
     * (door.c); libmicrohttpd's limit stays, the same, behind it. */
    unsigned limit = srv->cfg.max_connections + srv->cfg.health_connections;
    struct MHD_OptionItem items[] = {
        {MHD_OPTION_CONNECTION_LIMIT, (intptr_t)limit, NULL},
        {MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)CONNECTION_MEMORY, NULL},
        {MHD_OPTION_UNESCAPE_CALLBACK, (intptr_t)(void *)&raw_path, NULL},
        {MHD_OPTION_END, 0, NULL},
    };
    memcpy(h->options, items, sizeof items);
    return h->options;
}

const struct MHD_OptionItem *rematd_http_worker_options(struct rematd_server *srv,
                                                        unsigned max_connections)
{
    struct rematd_http *h = srv->http;
    if (!h)
        return NULL;
    struct MHD_OptionItem items[] = {
        {MHD_OPTION_CONNECTION_LIMIT, (intptr_t)max_connections, NULL},
        {MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)CONNECTION_MEMORY, NULL},
        {MHD_OPTION_UNESCAPE_CALLBACK, (intptr_t)(void *)&raw_path, NULL},
        {MHD_OPTION_END, 0, NULL},
    };
    memcpy(h->worker_options, items, sizeof items);
    return h->worker_options;
}

void rematd_http_teardown(struct rematd_server *srv)
{
    struct rematd_http *h = srv->http;
    if (!h)
        return;
    /* After the main daemon: /readyz said 503 on it through the drain.
     * The door first: it hands connections to the daemons. */
    if (h->door)
        rematd__door_stop(h->door);
    if (h->health)
        MHD_stop_daemon(h->health);
    h->health = NULL;
    rematd__door_free(h->door);
    h->door = NULL;
    pthread_mutex_lock(&h->mu);
    h->stop = 1;
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
    if (h->reaper_started)
        pthread_join(h->reaper, NULL);
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    srv->http = NULL;
    free(h);
}

static void list_add(struct rematd_http *h, struct rematd__conn *cs)
{
    cs->next = h->head;
    if (h->head)
        h->head->prev = cs;
    h->head = cs;
}

static void list_remove(struct rematd_http *h, struct rematd__conn *cs)
{
    if (cs->prev)
        cs->prev->next = cs->next;
    else if (h->head == cs)
        h->head = cs->next;
    if (cs->next)
        cs->next->prev = cs->prev;
}

static int conn_fd(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

static struct rematd__conn *conn_new(struct MHD_Connection *c)
{
    struct rematd__conn *cs = calloc(1, sizeof *cs);
    if (!cs)
        return NULL;
    cs->fd = conn_fd(c);
    cs->local = client_address(c, cs->client, sizeof cs->client);
    return cs;
}

void rematd_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                       enum MHD_ConnectionNotificationCode toe)
{
    struct rematd_server *srv = cls;
    struct rematd_http *h = srv->http;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        struct rematd__conn *cs = conn_new(c);
        /* A connection of the door comes counted among the fresh ones,
         * with the deadline it had there. */
        int over = 0;
        double handed = h ? rematd__door_started(h->door, conn_fd(c), &over) : -1;
        if (cs) {
            cs->fresh = 1;
            if (handed < 0)
                atomic_fetch_add(&srv->fresh, 1);
        } else if (handed >= 0) {
            atomic_fetch_sub(&srv->fresh, 1);
        }
        *socket_context = cs;
        if (!h)
            return;
        if (cs && cs->local) {
            /* The workers' socket has a limit of its own (its daemon's):
             * neither counted in the clients' slots nor put on a health
             * slot, but under the request deadline as every connection. */
            pthread_mutex_lock(&h->mu);
            cs->deadline = request_deadline(srv, cs);
            list_add(h, cs);
            pthread_mutex_unlock(&h->mu);
            return;
        }
        /* Past --max-connections when it was accepted (the door counts
         * and logs it, door.c). */
        pthread_mutex_lock(&h->mu);
        if (cs) {
            cs->reserved = over;
            cs->deadline = request_deadline(srv, cs);
            if (handed > 0 && handed < cs->deadline)
                cs->deadline = handed;
            list_add(h, cs);
        }
        pthread_mutex_unlock(&h->mu);
        return;
    }
    struct rematd__conn *cs = *socket_context;
    if (h) {
        pthread_mutex_lock(&h->mu);
        if (cs)
            list_remove(h, cs);
        pthread_mutex_unlock(&h->mu);
        if (!cs || !cs->local) {
            const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
            rematd__door_closed(h->door, 0, ci ? ci->client_addr : NULL);
        }
    }
    if (cs && cs->fresh)
        atomic_fetch_sub(&srv->fresh, 1);
    free(cs);
    *socket_context = NULL;
}

/* The health listener's connections: under the reaper's deadline like any
 * other (a short one), outside the main pool's count, never "fresh" (a
 * probe is not a request shutdown waits for). */
static void health_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                              enum MHD_ConnectionNotificationCode toe)
{
    struct rematd_server *srv = cls;
    struct rematd_http *h = srv->http;
    struct rematd__conn *cs;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        int over;
        double handed = rematd__door_started(h->door, conn_fd(c), &over);
        cs = conn_new(c);
        if (cs) {
            cs->reserved = 1;
            cs->health_port = 1;
            pthread_mutex_lock(&h->mu);
            cs->deadline = request_deadline(srv, cs);
            if (handed > 0 && handed < cs->deadline)
                cs->deadline = handed;
            list_add(h, cs);
            pthread_mutex_unlock(&h->mu);
        }
        *socket_context = cs;
        return;
    }
    cs = *socket_context;
    if (cs) {
        pthread_mutex_lock(&h->mu);
        list_remove(h, cs);
        pthread_mutex_unlock(&h->mu);
    }
    rematd__door_closed(h->door, 1, NULL);
    free(cs);
    *socket_context = NULL;
}

static void health_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    rematd_log("warn", "libmicrohttpd (health listener)", json_pack("{s:s}", "detail", msg));
}

/* The health listener's connections may stay idle between requests
 * REMATD_HEALTH_IDLE_TIMEOUT (libmicrohttpd's own timeout, from the last
 * byte read or written): a kept-alive load balancer probe reuses it, a
 * silent socket gives it back. */

int rematd_http_health_start(struct rematd_server *srv)
{
    struct rematd_http *h = srv->http;
    const char *spec = srv->cfg.health_listen;
    if (!h || !spec[0])
        return 0;
    /* host:port or [v6]:port, checked by config.c; an empty host binds
     * every address. */
    char host[128];
    const char *colon;
    if (spec[0] == '[') {
        const char *e = strchr(spec, ']');
        snprintf(host, sizeof host, "%.*s", e ? (int)(e - spec - 1) : 0, spec + 1);
        colon = e ? e + 1 : spec;
    } else {
        colon = strrchr(spec, ':');
        snprintf(host, sizeof host, "%.*s", colon ? (int)(colon - spec) : 0, spec);
    }
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int gai = colon && *colon == ':' ? getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &res)
                                     : EAI_NONAME;
    if (gai != 0 || !res) {
        rematd_log("error", "cannot listen for health probes",
                   json_pack("{s:s, s:s}", "health_listen", spec, "detail", gai_strerror(gai)));
        return -1;
    }
    struct sockaddr_storage addr;
    socklen_t alen = res->ai_addrlen;
    memcpy(&addr, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    /* The door accepts (door.c); libmicrohttpd serves what it hands on. */
    int fd = rematd__door_bind((struct sockaddr *)&addr, alen, SOMAXCONN);
    h->health = fd < 0 ? NULL
                       : MHD_start_daemon(
                             MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG |
                                 MHD_USE_NO_LISTEN_SOCKET,
                             0, NULL, NULL, rematd_access, srv, MHD_OPTION_EXTERNAL_LOGGER,
                             health_log, NULL, MHD_OPTION_CONNECTION_LIMIT,
                             srv->cfg.health_connections, MHD_OPTION_CONNECTION_TIMEOUT,
                             REMATD_HEALTH_IDLE_TIMEOUT, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                             (size_t)CONNECTION_MEMORY, MHD_OPTION_UNESCAPE_CALLBACK, raw_path,
                             NULL, MHD_OPTION_NOTIFY_COMPLETED, rematd_completed, srv,
                             MHD_OPTION_NOTIFY_CONNECTION, health_connection, srv, MHD_OPTION_END);
    int eno = errno;
    if (h->health && rematd__door_listen(h->door, fd, h->health, 1) < 0) {
        eno = errno;
        MHD_stop_daemon(h->health);
        h->health = NULL;
    }
    if (!h->health) {
        if (fd >= 0)
            close(fd);
        rematd_log("error", "cannot listen for health probes",
                   json_pack("{s:s, s:s}", "health_listen", spec, "detail", strerror(eno)));
        return -1;
    }
    rematd_log("info", "listening for health probes",
               json_pack("{s:s, s:i, s:i}", "health_listen", spec, "port",
                         rematd__door_port(h->door, 1), "connections",
                         (int)srv->cfg.health_connections));
    return 0;
}

int rematd_http_listen(struct rematd_server *srv, const struct sockaddr *addr, socklen_t len)
{
    struct rematd_http *h = srv->http;
    int fd = h ? rematd__door_bind(addr, len, 1024) : -1;
    if (fd < 0)
        return -1;
    if (rematd__door_listen(h->door, fd, srv->daemon, 0) < 0) {
        int eno = errno;
        close(fd);
        errno = eno;
        return -1;
    }
    return rematd__door_port(h->door, 0);
}

int rematd_http_open(struct rematd_server *srv)
{
    return srv->http ? rematd__door_start(srv->http->door) : -1;
}

void rematd_http_quiesce(struct rematd_server *srv)
{
    if (srv->http)
        rematd__door_quiesce(srv->http->door);
}

void rematd_http_close(struct rematd_server *srv)
{
    if (srv->http)
        rematd__door_stop(srv->http->door);
}
