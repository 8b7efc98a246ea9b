/*
 * http_private.h - the private tail of a request and what the files of
 * api/http/ share, included by them only: a route that needs something
 * from here needs a verb in http.h instead (tests/check-routes.sh keeps it
 * so).
 *
 * One allocation per request holds both halves: struct rematd_req begins
 * with the public struct rematd_request, so that http turns the pointer a
 * route holds back into the whole with req_of().
 */
#ifndef REMATD_HTTP_PRIVATE_H
#define REMATD_HTTP_PRIVATE_H

#include "http.h"
#include "pool.h"

#define REMATD_REQ_MAX_HEADERS 6

struct rematd_req {
    struct rematd_request pub; /* first: see req_of() */
    struct MHD_Connection *conn;
    int route_index;
    char method[8];
    char path[256];
    double t0;
    /* The body's limit, set when the request starts; body_error is the
     * body buffer's failure (REMAT_ELIMIT: a 413, REMAT_ENOMEM: a 500),
     * the rest of the body then read and dropped. */
    size_t body_limit;
    int body_error;
    size_t body_held; /* reserved from srv->body_memory, given back when r is freed */
    int body_over;    /* the body would take body_memory past --max-bodies-bytes */
    size_t streamed;  /* bytes handed to a streaming route's body_chunk */
    int responded;
    int status;
    int suspended;
    /* Response headers to add: name/value pairs owned by the request. */
    int n_headers;
    char *header_name[REMATD_REQ_MAX_HEADERS];
    char *header_value[REMATD_REQ_MAX_HEADERS];
    char *problem_type; /* for the log line */
    /* rematd_req_defer: the job and the pool's queue item, and the answer
     * recorded while the connection is suspended (queued when it resumes;
     * pending_status -1: none could be made, the connection is closed). */
    void (*pool_job)(struct rematd_request *r);
    struct rematd_pool_item pool_item;
    int deferred;
    struct MHD_Response *pending;
    int pending_status;
    int health_only; /* 1: arrived on a health slot, 2: on the health listener */
    int worker_only; /* arrived on the workers' Unix socket: worker routes and probes */
    double idle_set; /* a streamed body: when its idle deadline was last moved */
};

static inline struct rematd_req *req_of(struct rematd_request *r)
{
    return (struct rematd_req *)(void *)r;
}

static inline const struct rematd_req *creq_of(const struct rematd_request *r)
{
    return (const struct rematd_req *)(const void *)r;
}

/* response.c */
void rematd__req_free(struct rematd_req *q);
/* Queues (or, deferred, records) resp with status; resp NULL: out of
 * memory (a 500, or a closed connection when deferred). */
void rematd__queue(struct rematd_req *q, int status, struct MHD_Response *resp,
                   const char *content_type);

/* idempotency.c: for a route that creates, reads the key and the body's
 * hash into r, and when the store holds a record of the key, answers it
 * (rematd_req_replay) and returns 1; 0 to go on. */
int rematd__idempotency_check(struct rematd_req *q);

/* problems.c: the fixed title of a problem type (RFC 9457). */
const char *rematd__problem_title(const char *slug);

/* conn.c: the per-connection state of the connection defences. */
struct rematd__conn;
struct rematd__conn *rematd__conn_of(struct MHD_Connection *c);
/* Ends the connection's "fresh" state (its first request has begun);
 * returns 1 when it holds a health slot, 2 when it is the health
 * listener's, 0 otherwise. */
int rematd__conn_begin(struct rematd_server *srv, struct rematd__conn *cs);
/* Whether c came to the health listener (--health-listen), told by its
 * daemon: so even a connection whose state could not be allocated is
 * served the probes only there. */
int rematd__conn_health_port(struct rematd_server *srv, struct MHD_Connection *c);
/* Turns the request deadline off (the request is in, or answered). */
void rematd__conn_deadline_off(struct rematd_server *srv, struct rematd__conn *cs);
/* The deadline seconds from now: a streamed body's idle deadline. */
void rematd__conn_deadline_in(struct rematd_server *srv, struct rematd__conn *cs, double seconds);
/* The next request on a kept-alive connection has the full deadline. */
void rematd__conn_deadline_next(struct rematd_server *srv, struct rematd__conn *cs);
/* Whether the connection came on the workers' Unix socket (main.c). */
int rematd__conn_local(const struct rematd__conn *cs);

/* Seconds a health slot, or a connection of the health listener, waits for
 * its request (a probe asks at once), and how long the health listener's
 * connections may stay idle (libmicrohttpd's own timeout there). */
#define REMATD_HEALTH_DEADLINE 2.0
#define REMATD_HEALTH_IDLE_TIMEOUT 5u
/* The detail of the 408 past the request deadline (conn.c, door.c). */
#define REMATD_TIMEOUT_DETAIL                                                                      \
    "the request did not arrive within --request-timeout (an upload: its next byte within "        \
    "--upload-idle-timeout)"

/* door.c: the front door of the TCP listeners, which reads the head of
 * each connection's first request before libmicrohttpd does and answers
 * one it would refuse as problem+json. */
struct rematd__door;
struct rematd__door *rematd__door_new(struct rematd_server *srv);
/* A TCP socket bound to addr and listening, as libmicrohttpd made its own
 * (SO_REUSEADDR; IPv6 only on an IPv6 address); -1 with errno. */
int rematd__door_bind(const struct sockaddr *addr, socklen_t len, int backlog);
/* Stops the door (rematd__door_stop), closes the listeners, frees d. */
void rematd__door_free(struct rematd__door *d);
/* Takes the listening socket fd (closed with the door) for daemon, started
 * with MHD_USE_NO_LISTEN_SOCKET: the main listener, or health's.  0, or -1
 * with errno. */
int rematd__door_listen(struct rematd__door *d, int fd, struct MHD_Daemon *daemon, int health);
/* The port a listener is bound to; 0 when none. */
int rematd__door_port(struct rematd__door *d, int health);
int rematd__door_start(struct rematd__door *d);
/* Stops accepting on the main listener (shutdown), keeps the rest. */
void rematd__door_quiesce(struct rematd__door *d);
/* Stops the thread and closes the connections it holds. */
void rematd__door_stop(struct rematd__door *d);
/* From libmicrohttpd's thread, when it starts the connection fd: the
 * deadline the door gave it (monotonic seconds), -1 when it did not come
 * through the door; the door no longer holds it.  *reserved: it was
 * accepted past --max-connections (a health slot). */
double rematd__door_started(struct rematd__door *d, int fd, int *reserved);
/* From libmicrohttpd's thread, when it closes a connection that came
 * through the door: gives back its place in the limits. */
void rematd__door_closed(struct rematd__door *d, int health, const struct sockaddr *addr);
/* head.c: the door's judgement of the head peeked into b[0..n): -1 while
 * it may still come whole, 0 when libmicrohttpd may read it, else the
 * status of the answer, with v's problem type and detail (which names
 * what is wrong and holds nothing the client sent).  A head is judged on
 * at most REMATD_HEAD_PEEK_BYTES: past its budget, whatever its shape. */
#define REMATD_HEAD_PEEK_BYTES 16384
struct rematd__verdict {
    const char *slug;
    char detail[200];
};
int rematd__door_judge(const char *b, size_t n, struct rematd__verdict *v);
/* The whole answer of the door: problem+json with Connection: close, the
 * detail naming what is wrong, request_id (NULL: none) in X-Request-Id and
 * the problem; its length. */
int rematd__door_answer(char *out, size_t cap, int status, const char *slug, const char *detail,
                        const char *request_id);

#endif
