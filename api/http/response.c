/*
 * response.c - how a request is answered: every answer goes through
 * rematd__queue (X-Request-Id, the route's headers, Connection: close while
 * draining), queued at once on the connection's thread or, on a planning
 * thread (rematd_req_defer), recorded until the connection resumes.  Also
 * suspend, defer and resume, and freeing a request.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <errno.h>
#include <sys/socket.h>

#include "http_private.h"
#include "rematx/real.h"

void rematd__req_free(struct rematd_req *q)
{
    struct rematd_request *r = &q->pub;
    if (q->body_held)
        atomic_fetch_sub(&r->srv->body_memory, (long long)q->body_held);
    rematx_dyn_free(&r->body);
    for (int i = 0; i < q->n_headers; i++) {
        free(q->header_name[i]);
        free(q->header_value[i]);
    }
    json_decref(r->json);
    free(q->problem_type);
    if (q->pending)
        MHD_destroy_response(q->pending);
    if (r->route_state && r->route_state_free)
        r->route_state_free(r->route_state);
    free(q);
}

void rematd_req_header(struct rematd_request *r, const char *name, const char *value)
{
    struct rematd_req *q = req_of(r);
    if (q->n_headers >= REMATD_REQ_MAX_HEADERS)
        return;
    q->header_name[q->n_headers] = strdup(name);
    q->header_value[q->n_headers] = strdup(value);
    q->n_headers++;
}

const char *rematd_req_header_in(struct rematd_request *r, const char *name)
{
    return MHD_lookup_connection_value(req_of(r)->conn, MHD_HEADER_KIND, name);
}

const char *rematd_req_query(struct rematd_request *r, const char *name)
{
    return MHD_lookup_connection_value(req_of(r)->conn, MHD_GET_ARGUMENT_KIND, name);
}

void rematd__queue(struct rematd_req *q, int status, struct MHD_Response *resp,
                   const char *content_type)
{
    struct rematd_request *r = &q->pub;
    if (!resp) {
        if (q->deferred) {
            /* No memory for the answer: the connection is closed when it
             * resumes. */
            q->pending_status = -1;
            return;
        }
        q->responded = 1;
        q->status = 500;
        return;
    }
    if (content_type)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(resp, "X-Request-Id", r->request_id);
    /* Draining: a keep-alive client must not send its next request on this
     * connection, which is about to be closed. */
    if (atomic_load(&r->srv->draining))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    for (int i = 0; i < q->n_headers; i++)
        if (q->header_name[i] && q->header_value[i])
            MHD_add_response_header(resp, q->header_name[i], q->header_value[i]);
    if (q->deferred) {
        /* A planning thread: MHD takes the response on the connection's
         * own thread once it resumes. */
        if (q->pending)
            MHD_destroy_response(q->pending);
        q->pending = resp;
        q->pending_status = status;
        return;
    }
    MHD_queue_response(q->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    q->responded = 1;
    q->status = status;
}

void rematd_req_text(struct rematd_request *r, int status, const char *content_type, char *buf,
                     size_t len, int persistent)
{
    struct MHD_Response *resp;
    if (persistent)
        resp = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_PERSISTENT);
    else
        resp = MHD_create_response_from_buffer_with_free_callback(len, buf, &free);
    if (!resp && !persistent)
        free(buf);
    rematd__queue(req_of(r), status, resp, content_type);
}

void rematd_req_file(struct rematd_request *r, int status, int fd, size_t size,
                     const char *content_type)
{
    /* The fd is the response's from here: closed when it is destroyed. */
    struct MHD_Response *resp = MHD_create_response_from_fd((uint64_t)size, fd);
    if (!resp) {
        close(fd);
        rematd_req_problem(r, 500, "internal", NULL, "out of memory");
        return;
    }
    rematd__queue(req_of(r), status, resp, content_type);
}

static void send_json(struct rematd_request *r, int status, json_t *body, const char *ctype)
{
    char *s = body ? rematx_json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!s) {
        static char oom[] = "{\"type\":\"/problems/internal\",\"title\":\"Internal error\","
                            "\"status\":500,\"detail\":\"out of memory\"}";
        rematd_req_text(r, 500, "application/problem+json", oom, sizeof oom - 1, 1);
        return;
    }
    rematd_req_text(r, status, ctype, s, strlen(s), 0);
}

void rematd_req_json(struct rematd_request *r, int status, json_t *body)
{
    send_json(r, status, body, "application/json");
}

void rematd_req_problem_json(struct rematd_request *r, int status, const char *slug,
                             const char *pointer, json_t *extra, const char *detail)
{
    struct rematd_req *q = req_of(r);
    char type[96];
    snprintf(type, sizeof type, "/problems/%s", slug);
    json_t *p = json_pack("{s:s, s:s, s:i, s:s, s:s, s:s}", "type", type, "title",
                          rematd__problem_title(slug), "status", status, "detail", detail,
                          "instance", q->path, "request_id", r->request_id);
    if (p && pointer && *pointer)
        json_object_set_new(p, "pointer", json_string(pointer));
    if (p && extra)
        json_object_update(p, extra);
    json_decref(extra);
    free(q->problem_type);
    q->problem_type = strdup(type);
    send_json(r, status, p, "application/problem+json");
}

void rematd_req_problem(struct rematd_request *r, int status, const char *slug, const char *pointer,
                        const char *fmt, ...)
{
    char detail[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    rematd_req_problem_json(r, status, slug, pointer, NULL, detail);
}

void rematd_req_send_problem(struct rematd_request *r, struct rematd_problem *p)
{
    if (p->retry_after)
        rematd_req_header(r, MHD_HTTP_HEADER_RETRY_AFTER, p->retry_after);
    json_t *extra = p->extra;
    p->extra = NULL;
    rematd_req_problem_json(r, p->status ? p->status : 500, p->slug ? p->slug : "internal",
                            p->pointer, extra, p->detail);
    rematd_problem_clear(p);
}

int rematd_req_answered(const struct rematd_request *r)
{
    const struct rematd_req *q = creq_of(r);
    return q->responded || q->pending != NULL || q->pending_status != 0;
}

void rematd_req_end_job(struct rematd_request *r)
{
    if (!rematd_req_answered(r))
        rematd_req_problem(r, 500, "internal", NULL, "the handler gave no answer");
    rematd_req_resume(r);
}

int rematd_req_client_gone(struct rematd_request *r)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(req_of(r)->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return 0;
    /* A suspended connection is not polled by libmicrohttpd, so a client
     * that hung up is only seen here: end of file (or a reset) when its
     * side is closed; bytes (a pipelined request) or nothing yet when not. */
    char c;
    ssize_t n = recv(ci->connect_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

struct MHD_PostProcessor *rematd_req_post_processor(struct rematd_request *r, size_t buffer_size,
                                                    MHD_PostDataIterator iter, void *cls)
{
    return MHD_create_post_processor(req_of(r)->conn, buffer_size, iter, cls);
}

void rematd_req_suspend(struct rematd_request *r)
{
    struct rematd_req *q = req_of(r);
    /* Counted before MHD sees it, so that shutdown never finds the count
     * at zero while a connection is suspended. */
    atomic_fetch_add(&r->srv->suspended, 1);
    q->suspended = 1;
    MHD_suspend_connection(q->conn);
}

int rematd_req_suspended(const struct rematd_request *r)
{
    return creq_of(r)->suspended;
}

/* The pool's item is in the private tail: back to its request. */
static void run_job(struct rematd_pool_item *it)
{
    struct rematd_req *q =
        (struct rematd_req *)(void *)((char *)it - offsetof(struct rematd_req, pool_item));
    q->pool_job(&q->pub);
}

int rematd_req_defer(struct rematd_request *r, void (*job)(struct rematd_request *r))
{
    struct rematd_req *q = req_of(r);
    if (rematd_pool_full(r->srv->pool)) {
        rematd_req_header(r, "Retry-After", "1");
        rematd_req_problem(r, 503, "queue-full", NULL,
                           "too many plans wait for a planning thread (--max-queued-plans)");
        return -1;
    }
    q->pool_job = job;
    q->pool_item.run = run_job;
    q->deferred = 1;
    rematd_req_suspend(r);
    rematd_pool_submit(r->srv->pool, &q->pool_item);
    return 0;
}

void rematd_req_resume(struct rematd_request *r)
{
    /* Once resumed, the request may complete and be freed on its MHD
     * thread at any moment: take what is needed from it first. */
    struct rematd_server *srv = r->srv;
    MHD_resume_connection(req_of(r)->conn);
    atomic_fetch_sub(&srv->suspended, 1);
}
