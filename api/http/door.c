/*
 * door.c - the front door: rematd accepts on its TCP listeners itself and
 * reads the head of each connection's first request before libmicrohttpd
 * sees any of it (docs/api.md, "Framing").
 *
 * libmicrohttpd 0.9 answers a request line or head it cannot read with
 * short HTML pages of its own (400, 414, 431, 505) that no option
 * replaces, and a request line of one word with nothing at all.  So the
 * daemons run without a listening socket (MHD_USE_NO_LISTEN_SOCKET) and
 * this file's one thread accepts, waits until the head has arrived
 * (peeked with MSG_PEEK: the bytes stay in the kernel's buffer), and
 * judges it: a head libmicrohttpd would refuse is answered here as
 * problem+json, with Connection: close, and the socket closed; any other
 * goes to libmicrohttpd untouched (MHD_add_connection), which reads it as
 * if it had accepted the connection itself.
 *
 * The judgement itself, and the answers, are head.c's.
 *
 * Only the first request of a connection comes through here: libmicrohttpd
 * reads the next ones of a kept-alive connection itself, where its own
 * pages remain (said in docs/api.md and openapi.yaml).  So a kept-alive
 * connection costs nothing more than it did.
 *
 * The door holds a connection until its head is in, and bounds what it
 * holds: the whole request deadline counts from the accept (408 past it,
 * as the reaper of conn.c answers one inside libmicrohttpd, which takes
 * over the deadline left), --connection-timeout from the last byte read
 * (closed unanswered, as libmicrohttpd would), and the connection limits
 * count every connection from its accept to its close, held here or in
 * libmicrohttpd: a listener at its limit is not accepted from (clients
 * wait in the backlog, as libmicrohttpd's own accept left them), and a
 * connection whose address is at --max-connections-per-ip is closed
 * unanswered, as libmicrohttpd closed it, after waiting 0.3 s for a
 * connection of that address that libmicrohttpd has yet to see closed.
 * SO_RCVLOWAT makes a partial head wake the thread only when more bytes
 * come, so a head trickled a byte at a time costs one peek per byte, not
 * a spin.
 */
/* accept4: the accepted socket non-blocking and close-on-exec in one call. */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "http_private.h"

/* How often the held connections' deadlines are looked at. */
#define TICK_MS 100
/* How long a connection over its address's limit waits for a slot, and
 * how many may wait at once (beyond, refused at once). */
#define IP_GRACE 0.3
#define WAIT_MAX 64

enum { LISTEN_MAIN, LISTEN_HEALTH, N_LISTEN };

struct held {
    int fd;
    int listener;
    int reserved; /* accepted past --max-connections: a health slot */
    int lowat;    /* SO_RCVLOWAT was raised (a partial head) */
    int admitted; /* counted in its listener's and its address's limits */
    double deadline, idle_deadline;
    size_t seen; /* bytes of the head peeked so far */
    struct sockaddr_storage addr;
    socklen_t addrlen;
    struct held *prev, *next;
};

struct listener {
    int fd; /* -1: none, or closed by quiesce */
    struct MHD_Daemon *daemon;
    unsigned limit;         /* connections, held here and in libmicrohttpd */
    unsigned long live;     /* under mu */
    int paused;             /* not in the epoll set: at its limit, or accept failing */
    double resume_at;       /* accept failing (EMFILE): when to try again */
    double request_timeout; /* seconds from the accept */
    double idle_timeout;    /* seconds from the last byte; 0: none */
};

/* An address's connections (--max-connections-per-ip), main listener only. */
struct ip_count {
    unsigned char key[17];
    unsigned n;
};

struct rematd__door {
    struct rematd_server *srv;
    pthread_mutex_t mu; /* live, ips, pending: the MHD threads close and start */
    pthread_t thread;
    int started;
    atomic_int stop, quiesced; /* set by main.c's thread, read by the door's */
    int ep, wake;
    struct listener l[N_LISTEN];
    struct held *held;    /* the door thread's own */
    struct held *dead;    /* closed during this batch of events: freed after it */
    struct held *waiting; /* over their address's limit for a moment (retry_waiting) */
    atomic_int n_waiting; /* written by the door's thread, read by release */
    struct held *pending; /* handed to libmicrohttpd, not yet started there */
    struct ip_count *ips; /* capacity n_ips: never more addresses than connections */
    size_t n_ips;
    /* The limits reached are logged at most once a second each. */
    double ip_log, full_log;
    long full_unlogged;
    char buf[REMATD_HEAD_PEEK_BYTES];
};

static void wake(struct rematd__door *d)
{
    uint64_t one = 1;
    ssize_t w = write(d->wake, &one, sizeof one);
    (void)w;
}

/* The per-address key: the family and the address, nothing of the port. */
static int ip_key(const struct sockaddr *sa, unsigned char key[17])
{
    memset(key, 0, 17);
    if (sa->sa_family == AF_INET) {
        key[0] = 4;
        memcpy(key + 1, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
        return 0;
    }
    if (sa->sa_family == AF_INET6) {
        key[0] = 6;
        memcpy(key + 1, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
        return 0;
    }
    return -1;
}

/* Adds one to the address's count (delta 1) or takes one (delta -1);
 * returns 0, or -1 when adding would pass limit (0: no limit).  Under mu.
 * A linear scan: at most --max-connections addresses, once per accept and
 * per close, never on a request. */
static int ip_move(struct rematd__door *d, const struct sockaddr *sa, int delta, unsigned limit)
{
    unsigned char key[17];
    if (!d->ips || ip_key(sa, key) < 0)
        return 0;
    struct ip_count *free_slot = NULL;
    for (size_t i = 0; i < d->n_ips; i++) {
        struct ip_count *e = &d->ips[i];
        if (e->n == 0) {
            if (!free_slot)
                free_slot = e;
            continue;
        }
        if (memcmp(e->key, key, sizeof key) != 0)
            continue;
        if (delta < 0) {
            e->n--;
            return 0;
        }
        if (limit && e->n >= limit)
            return -1;
        e->n++;
        return 0;
    }
    if (delta > 0 && free_slot) {
        memcpy(free_slot->key, key, sizeof key);
        free_slot->n = 1;
    }
    return 0;
}

struct rematd__door *rematd__door_new(struct rematd_server *srv)
{
    struct rematd__door *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->srv = srv;
    d->ep = d->wake = -1;
    pthread_mutex_init(&d->mu, NULL);
    for (int i = 0; i < N_LISTEN; i++)
        d->l[i].fd = -1;
    /* One address per connection at most: the main listener's limit. */
    d->n_ips = (size_t)srv->cfg.max_connections + srv->cfg.health_connections;
    d->ips = srv->cfg.max_connections_per_ip ? calloc(d->n_ips, sizeof *d->ips) : NULL;
    d->ep = epoll_create1(EPOLL_CLOEXEC);
    d->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if ((srv->cfg.max_connections_per_ip && !d->ips) || d->ep < 0 || d->wake < 0) {
        rematd__door_free(d);
        return NULL;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(d->ep, EPOLL_CTL_ADD, d->wake, &ev);
    return d;
}

static void close_held(struct rematd__door *d, struct held *c, int counted);

void rematd__door_free(struct rematd__door *d)
{
    if (!d)
        return;
    rematd__door_stop(d);
    while (d->pending) {
        struct held *c = d->pending;
        d->pending = c->next;
        free(c);
    }
    for (int i = 0; i < N_LISTEN; i++)
        if (d->l[i].fd >= 0)
            close(d->l[i].fd);
    if (d->ep >= 0)
        close(d->ep);
    if (d->wake >= 0)
        close(d->wake);
    pthread_mutex_destroy(&d->mu);
    free(d->ips);
    free(d);
}

int rematd__door_listen(struct rematd__door *d, int fd, struct MHD_Daemon *daemon, int health)
{
    const struct rematd_config *cfg = &d->srv->cfg;
    struct listener *l = &d->l[health ? LISTEN_HEALTH : LISTEN_MAIN];
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
        return -1;
    l->fd = fd;
    l->daemon = daemon;
    if (health) {
        l->limit = cfg->health_connections;
        l->request_timeout = REMATD_HEALTH_DEADLINE;
        l->idle_timeout = REMATD_HEALTH_IDLE_TIMEOUT;
    } else {
        l->limit = cfg->max_connections + cfg->health_connections;
        l->request_timeout = cfg->request_timeout ? cfg->request_timeout : 30;
        l->idle_timeout = cfg->connection_timeout;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = l};
    return epoll_ctl(d->ep, EPOLL_CTL_ADD, fd, &ev);
}

int rematd__door_bind(const struct sockaddr *addr, socklen_t len, int backlog)
{
    int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        (addr->sa_family == AF_INET6 &&
         setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) < 0) ||
        bind(fd, addr, len) < 0 || listen(fd, backlog) < 0) {
        int eno = errno;
        close(fd);
        errno = eno;
        return -1;
    }
    return fd;
}

int rematd__door_port(struct rematd__door *d, int health)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    int fd = d->l[health ? LISTEN_HEALTH : LISTEN_MAIN].fd;
    if (fd < 0 || getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
        return 0;
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

/* ------------------------------------------------------------ the answers */

static void address_text(const struct sockaddr_storage *ss, char *out, size_t cap)
{
    snprintf(out, cap, "?");
    if (ss->ss_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, out, (socklen_t)cap);
    else if (ss->ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, out, (socklen_t)cap);
}

/* Reads what the client sent: bytes left unread make the close a reset,
 * which can destroy an answer in flight and reads as an error where
 * libmicrohttpd, which had read them, closed cleanly.  Bounded: a client
 * that keeps sending is reset after all. */
static void drain(struct rematd__door *d, int fd)
{
    for (int k = 0; k < 4 && recv(fd, d->buf, sizeof d->buf, MSG_DONTWAIT) > 0; k++)
        ;
}

static void refuse(struct rematd__door *d, struct held *c, int status, const char *slug,
                   const char *detail)
{
    char out[1024], id[REMATD_ID_LEN + 1];
    /* 16 hex digits, as request.c makes them. */
    rematd_new_id(id);
    id[16] = '\0';
    int n = rematd__door_answer(out, sizeof out, status, slug, detail, id);
    drain(d, c->fd);
    ssize_t w = send(c->fd, out, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)w;
    shutdown(c->fd, SHUT_WR);
    /* Logged as every request is, though none was routed. */
    char client[INET6_ADDRSTRLEN];
    address_text(&c->addr, client, sizeof client);
    rematd_log("warn", "request refused before routing",
               json_pack("{s:s, s:i, s:s+, s:s, s:s}", "request_id", id, "status", status, "type",
                         "/problems/", slug, "detail", detail, "client", client));
    close_held(d, c, 1);
}

/* ------------------------------------------------------------ the thread */

static void list_unlink(struct held **head, struct held *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else if (*head == c)
        *head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

static void list_push(struct held **head, struct held *c)
{
    c->prev = NULL;
    c->next = *head;
    if (*head)
        (*head)->prev = c;
    *head = c;
}

/* Gives back what a connection held: its listener's count, its address's,
 * and (the main listener's) its place among the fresh connections.  Under
 * mu. */
static void release(struct rematd__door *d, int listener, const struct sockaddr *addr)
{
    struct listener *l = &d->l[listener];
    if (l->live)
        l->live--;
    if (listener == LISTEN_MAIN) {
        ip_move(d, addr, -1, 0);
        atomic_fetch_sub(&d->srv->fresh, 1);
    }
    if (l->paused || (listener == LISTEN_MAIN && d->n_waiting))
        wake(d);
}

static void close_held(struct rematd__door *d, struct held *c, int counted)
{
    epoll_ctl(d->ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    list_unlink(&d->held, c);
    if (counted) {
        pthread_mutex_lock(&d->mu);
        release(d, c->listener, (struct sockaddr *)&c->addr);
        pthread_mutex_unlock(&d->mu);
    }
    /* An event for it may follow in the batch being handled. */
    c->next = d->dead;
    d->dead = c;
}

static void free_dead(struct rematd__door *d)
{
    while (d->dead) {
        struct held *c = d->dead;
        d->dead = c->next;
        free(c);
    }
}

static void hand_over(struct rematd__door *d, struct held *c)
{
    struct listener *l = &d->l[c->listener];
    epoll_ctl(d->ep, EPOLL_CTL_DEL, c->fd, NULL);
    list_unlink(&d->held, c);
    if (c->lowat) {
        int one = 1;
        setsockopt(c->fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof one);
    }
    /* Pending until libmicrohttpd starts it (rematd__door_started): it
     * stays counted here, fresh, with its deadline to hand on. */
    pthread_mutex_lock(&d->mu);
    list_push(&d->pending, c);
    pthread_mutex_unlock(&d->mu);
    int fd = c->fd;
    if (MHD_add_connection(l->daemon, fd, (struct sockaddr *)&c->addr, c->addrlen) == MHD_YES)
        return;
    /* Closed by libmicrohttpd (its own limit, or no memory); started
     * never, so nothing else gives back what it held. */
    int eno = errno;
    pthread_mutex_lock(&d->mu);
    struct held *p = d->pending;
    while (p && p->fd != fd)
        p = p->next;
    if (p) {
        list_unlink(&d->pending, p);
        release(d, p->listener, (struct sockaddr *)&p->addr);
    }
    pthread_mutex_unlock(&d->mu);
    free(p);
    rematd_log("warn", "libmicrohttpd refused a connection",
               json_pack("{s:s}", "detail", strerror(eno)));
}

static void look(struct rematd__door *d, struct held *c, uint32_t events)
{
    if (c->fd < 0)
        return;
    ssize_t n = recv(c->fd, d->buf, sizeof d->buf, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) {
        close_held(d, c, 1);
        return;
    }
    struct rematd__verdict v;
    int st = rematd__door_judge(d->buf, (size_t)n, &v);
    if (st == 0) {
        hand_over(d, c);
        return;
    }
    if (st > 0) {
        refuse(d, c, st, v.slug, v.detail);
        return;
    }
    if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
        /* Half a head and the client has stopped sending: nothing to
         * answer that it would read as an answer to a request. */
        close_held(d, c, 1);
        return;
    }
    if ((size_t)n > c->seen) {
        c->seen = (size_t)n;
        if (c->idle_deadline)
            c->idle_deadline = rematd_mono() + d->l[c->listener].idle_timeout;
    }
    /* Wake again only when a byte more has come: the peeked ones stay. */
    int want = (int)n + 1;
    if (setsockopt(c->fd, SOL_SOCKET, SO_RCVLOWAT, &want, sizeof want) == 0)
        c->lowat = 1;
}

/* Closes the connections held from addr's address whose client has gone
 * (end of stream, nothing sent); returns how many. */
static int close_gone(struct rematd__door *d, const struct sockaddr *addr)
{
    unsigned char key[17], k2[17];
    if (ip_key(addr, key) < 0)
        return 0;
    int n = 0;
    char b;
    for (struct held *c = d->held, *next; c; c = next) {
        next = c->next;
        if (ip_key((struct sockaddr *)&c->addr, k2) == 0 && memcmp(key, k2, sizeof key) == 0 &&
            recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
            close_held(d, c, 1);
            n++;
        }
    }
    return n;
}

/* Takes a listener out of the epoll set: at its limit (resume_at 0: the
 * close that makes room wakes the thread, release), or failing to accept
 * (tried again at resume_at).  paused is set under mu, where release reads
 * it, so that no wake is missed. */
static int pause_listener(struct rematd__door *d, struct listener *l, double resume_at)
{
    pthread_mutex_lock(&d->mu);
    if (resume_at == 0 && l->live < l->limit) {
        /* A close made room since the caller looked. */
        pthread_mutex_unlock(&d->mu);
        return 0;
    }
    int was = l->paused;
    l->paused = 1;
    l->resume_at = resume_at;
    pthread_mutex_unlock(&d->mu);
    if (!was && l->fd >= 0)
        epoll_ctl(d->ep, EPOLL_CTL_DEL, l->fd, NULL);
    return 1;
}

static void resume_listeners(struct rematd__door *d, double now)
{
    for (int i = 0; i < N_LISTEN; i++) {
        struct listener *l = &d->l[i];
        pthread_mutex_lock(&d->mu);
        int go = l->paused && l->fd >= 0 && now >= l->resume_at && l->live < l->limit;
        if (go)
            l->paused = 0;
        pthread_mutex_unlock(&d->mu);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = l};
        if (go && epoll_ctl(d->ep, EPOLL_CTL_ADD, l->fd, &ev) < 0)
            pause_listener(d, l, now + 0.1);
    }
}

/* Whether the thread has anything to look at on a tick: held connections,
 * a listener to try again, pending ones to sweep.  Else it sleeps until an
 * event. */
static int ticking(struct rematd__door *d)
{
    if (d->held || d->waiting)
        return 1;
    pthread_mutex_lock(&d->mu);
    int t = d->pending != NULL;
    for (int i = 0; i < N_LISTEN; i++)
        t |= d->l[i].paused && d->l[i].resume_at > 0;
    pthread_mutex_unlock(&d->mu);
    return t;
}

/* Counts c in and starts holding it: 1; or 0 when its address is at
 * --max-connections-per-ip (nothing counted). */
static int admit(struct rematd__door *d, struct held *c)
{
    const struct rematd_config *cfg = &d->srv->cfg;
    struct listener *l = &d->l[c->listener];
    int main_l = c->listener == LISTEN_MAIN;
    struct sockaddr *sa = (struct sockaddr *)&c->addr;
    pthread_mutex_lock(&d->mu);
    int over_ip = main_l && ip_move(d, sa, 1, cfg->max_connections_per_ip) < 0;
    if (over_ip) {
        /* A connection its client has closed already, whose end this
         * thread has not yet seen (a client that tests the address before
         * it connects for real), counts no more. */
        pthread_mutex_unlock(&d->mu);
        over_ip = close_gone(d, sa) == 0;
        pthread_mutex_lock(&d->mu);
        if (!over_ip)
            over_ip = ip_move(d, sa, 1, cfg->max_connections_per_ip) < 0;
    }
    unsigned long live = 0;
    if (!over_ip) {
        live = ++l->live;
        if (main_l)
            atomic_fetch_add(&d->srv->fresh, 1);
    }
    pthread_mutex_unlock(&d->mu);
    if (over_ip)
        return 0;
    c->admitted = 1;
    double now = rematd_mono(), t = l->request_timeout;
    c->reserved = main_l && live > cfg->max_connections;
    if (c->reserved) {
        d->full_unlogged++;
        if (now - d->full_log >= 1.0) {
            char client[INET6_ADDRSTRLEN];
            address_text(&c->addr, client, sizeof client);
            rematd_log("warn", "connection limit reached: serving health probes only",
                       json_pack("{s:i, s:i, s:i, s:s}", "connections", (int)live,
                                 "max_connections", (int)cfg->max_connections, "over_limit",
                                 (int)d->full_unlogged, "client", client));
            d->full_unlogged = 0;
            d->full_log = now;
        }
    }
    if (c->reserved && t > REMATD_HEALTH_DEADLINE)
        t = REMATD_HEALTH_DEADLINE;
    c->deadline = now + t;
    c->idle_deadline = l->idle_timeout ? now + l->idle_timeout : 0;
    list_push(&d->held, c);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = c};
    if (epoll_ctl(d->ep, EPOLL_CTL_ADD, c->fd, &ev) < 0)
        close_held(d, c, 1);
    return 1;
}

/* Closes, unanswered as libmicrohttpd did at its accept, a connection
 * over its address's limit, not counted, and frees it. */
static void refuse_ip(struct rematd__door *d, struct held *c)
{
    double now = rematd_mono();
    if (now - d->ip_log >= 1.0) {
        d->ip_log = now;
        rematd_log(
            "warn", "per-address connection limit reached: connection closed",
            json_pack("{s:i}", "max_connections_per_ip", (int)d->srv->cfg.max_connections_per_ip));
    }
    close(c->fd);
    free(c);
}

/* The connections waiting for their address's slot: admitted when one is
 * free, refused past their grace. */
static void retry_waiting(struct rematd__door *d, double now)
{
    for (struct held *c = d->waiting, *next; c; c = next) {
        next = c->next;
        double until = c->deadline;
        list_unlink(&d->waiting, c);
        d->n_waiting--;
        if (admit(d, c))
            continue;
        if (now >= until) {
            refuse_ip(d, c);
            continue;
        }
        c->deadline = until;
        list_push(&d->waiting, c);
        d->n_waiting++;
    }
}

static void accept_from(struct rematd__door *d, struct listener *l)
{
    int which = (int)(l - d->l);
    for (int k = 0; k < 64; k++) {
        pthread_mutex_lock(&d->mu);
        int room = l->live < l->limit;
        pthread_mutex_unlock(&d->mu);
        if (!room) {
            if (pause_listener(d, l, 0))
                return;
            continue;
        }
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        int fd = accept4(l->fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            /* Out of descriptors or memory: a level-triggered listener
             * would spin; try again in a while. */
            rematd_log("warn", "cannot accept a connection",
                       json_pack("{s:s}", "detail", strerror(errno)));
            pause_listener(d, l, rematd_mono() + 0.1);
            return;
        }
        struct held *c = calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->listener = which;
        c->addr = ss;
        c->addrlen = len;
        if (admit(d, c) == 0 && d->n_waiting < WAIT_MAX) {
            /* Over its address's limit: libmicrohttpd may not yet have
             * seen the end of a connection that address has closed (its
             * threads see closes, this one accepts, at once): it waits a
             * moment for the slot before it is refused. */
            c->deadline = rematd_mono() + IP_GRACE;
            list_push(&d->waiting, c);
            d->n_waiting++;
        } else if (c->fd >= 0 && !c->admitted) {
            refuse_ip(d, c);
        }
    }
}

static void sweep(struct rematd__door *d, double now)
{
    char answer[1024];
    for (struct held *c = d->held, *next; c; c = next) {
        next = c->next;
        if (now >= c->deadline) {
            int n = rematd__door_answer(answer, sizeof answer, 408, "request-timeout",
                                        REMATD_TIMEOUT_DETAIL, NULL);
            drain(d, c->fd);
            ssize_t w = send(c->fd, answer, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
            (void)w;
            shutdown(c->fd, SHUT_WR);
            close_held(d, c, 1);
        } else if (c->idle_deadline && now >= c->idle_deadline) {
            drain(d, c->fd);
            close_held(d, c, 1);
        }
    }
    /* A connection libmicrohttpd took but never started (it ran out of
     * memory before): it will not be closed there either. */
    pthread_mutex_lock(&d->mu);
    for (struct held *c = d->pending, *next; c; c = next) {
        next = c->next;
        if (now < c->deadline + 60)
            continue;
        list_unlink(&d->pending, c);
        release(d, c->listener, (struct sockaddr *)&c->addr);
        free(c);
    }
    pthread_mutex_unlock(&d->mu);
}

static void *door_thread(void *arg)
{
    struct rematd__door *d = arg;
    struct epoll_event evs[64];
    double next_sweep = rematd_mono() + TICK_MS / 1000.0;
    while (!d->stop) {
        int n = epoll_wait(d->ep, evs, 64, ticking(d) ? TICK_MS : -1);
        for (int i = 0; i < n && !d->stop; i++) {
            void *p = evs[i].data.ptr;
            if (!p) {
                uint64_t x;
                ssize_t r = read(d->wake, &x, sizeof x);
                (void)r;
            } else if (p >= (void *)d->l && p < (void *)(d->l + N_LISTEN)) {
                accept_from(d, p);
            } else {
                look(d, p, evs[i].events);
            }
        }
        free_dead(d);
        struct listener *m = &d->l[LISTEN_MAIN];
        if (d->quiesced && m->fd >= 0) {
            /* Connections still in the backlog are reset, as when
             * libmicrohttpd's listening socket was closed. */
            if (!m->paused)
                epoll_ctl(d->ep, EPOLL_CTL_DEL, m->fd, NULL);
            close(m->fd);
            m->fd = -1;
        }
        double now = rematd_mono();
        resume_listeners(d, now);
        if (d->waiting)
            retry_waiting(d, now);
        if (now >= next_sweep) {
            sweep(d, now);
            next_sweep = now + TICK_MS / 1000.0;
        }
    }
    return NULL;
}

int rematd__door_start(struct rematd__door *d)
{
    if (d->started)
        return 0;
    if (pthread_create(&d->thread, NULL, door_thread, d) != 0)
        return -1;
    d->started = 1;
    return 0;
}

void rematd__door_quiesce(struct rematd__door *d)
{
    /* The thread closes the main listener (it alone touches the epoll
     * set); the health listener serves through the drain. */
    d->quiesced = 1;
    wake(d);
}

void rematd__door_stop(struct rematd__door *d)
{
    if (d->started) {
        d->stop = 1;
        wake(d);
        pthread_join(d->thread, NULL);
        d->started = 0;
    }
    while (d->held)
        close_held(d, d->held, 1);
    free_dead(d);
    while (d->waiting) {
        struct held *c = d->waiting;
        list_unlink(&d->waiting, c);
        close(c->fd);
        free(c);
    }
    d->n_waiting = 0;
}

double rematd__door_started(struct rematd__door *d, int fd, int *reserved)
{
    *reserved = 0;
    if (!d || fd < 0)
        return -1;
    double deadline = -1;
    pthread_mutex_lock(&d->mu);
    for (struct held *c = d->pending; c; c = c->next)
        if (c->fd == fd) {
            deadline = c->deadline;
            *reserved = c->reserved;
            list_unlink(&d->pending, c);
            free(c);
            break;
        }
    pthread_mutex_unlock(&d->mu);
    return deadline;
}

void rematd__door_closed(struct rematd__door *d, int health, const struct sockaddr *addr)
{
    if (!d)
        return;
    pthread_mutex_lock(&d->mu);
    int which = health ? LISTEN_HEALTH : LISTEN_MAIN;
    struct listener *l = &d->l[which];
    if (l->live)
        l->live--;
    if (which == LISTEN_MAIN && addr)
        ip_move(d, addr, -1, 0);
    if (l->paused || (which == LISTEN_MAIN && d->n_waiting))
        wake(d);
    pthread_mutex_unlock(&d->mu);
}
