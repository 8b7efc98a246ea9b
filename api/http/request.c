/*
 * http.c - what every request has in common: the route table and matching
 * (404, 405 with Allow), bearer auth, reading the body under its limit (413
 * from Content-Length before the body is read, or at the end for chunked
 * bodies), content type (415), JSON parsing (400), problem+json answers,
 * Idempotency-Key replay, the per-request log line and metrics.
 *
 * Each request owns one struct rematd_request, created on the first call of
 * the access handler and freed in one place, rematd_completed (MHD's
 * NOTIFY_COMPLETED), whether or not the request finished.
 *
 * Shutdown (see main.c) relies on the counters kept here: in_flight (first
 * access call to NOTIFY_COMPLETED), fresh (connections whose first request
 * has not begun), suspended (rematd_req_suspend to rematd_req_resume) and in_access (access
 * calls running), and on every access call refusing once closing is set.
 */
#include "config.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "rematd.h"
#include "store.h"
#include "rematx/pointer.h"
#include "rematx/real.h"

extern const struct rematd_route rematd_route_healthz, rematd_route_readyz, rematd_route_openapi,
    rematd_route_metrics, rematd_route_models, rematd_route_plans_create, rematd_route_plans_get,
    rematd_route_plans_timeline, rematd_route_profiles_create, rematd_route_profiles_get,
    rematd_route_validations_create, rematd_route_validations_get, rematd_route_worker_lease,
    rematd_route_worker_heartbeat, rematd_route_worker_complete, rematd_route_worker_fail,
    rematd_route_worker_release, rematd_route_models_upload, rematd_route_models_get,
    rematd_route_models_delete, rematd_route_worker_models, rematd_route_fits,
    rematd_route_profiles_frontier, rematd_route_fits_get;

const struct rematd_route *const rematd_routes[] = {
    &rematd_route_healthz,
    &rematd_route_readyz,
    &rematd_route_openapi,
    &rematd_route_metrics,
    &rematd_route_models,
    &rematd_route_models_upload,
    &rematd_route_models_get,
    &rematd_route_models_delete,
    &rematd_route_plans_create,
    &rematd_route_plans_get,
    &rematd_route_plans_timeline,
    &rematd_route_profiles_create,
    &rematd_route_profiles_get,
    &rematd_route_fits,
    &rematd_route_validations_create,
    &rematd_route_validations_get,
    &rematd_route_worker_lease,
    &rematd_route_worker_heartbeat,
    &rematd_route_worker_complete,
    &rematd_route_worker_fail,
    &rematd_route_worker_release,
    &rematd_route_worker_models,
    &rematd_route_profiles_frontier,
    &rematd_route_fits_get,
};
const size_t rematd_n_routes = sizeof rematd_routes / sizeof rematd_routes[0];

/* Problem types: the slug after /problems/ and its fixed title (RFC 9457:
 * the title is the same for every occurrence of a type). */
static const struct {
    const char *slug, *title;
} problem_titles[] = {
    {"not-found", "Not found"},
    {"method-not-allowed", "Method not allowed"},
    {"unauthorized", "Unauthorized"},
    {"body-too-large", "Request body too large"},
    {"unsupported-media-type", "Unsupported media type"},
    {"invalid-json", "Malformed JSON"},
    {"json-too-deep", "JSON nested too deeply"},
    {"validation", "Invalid field"},
    {"limit-exceeded", "Limit exceeded"},
    {"invalid-idempotency-key", "Invalid Idempotency-Key"},
    {"idempotency-key-reused", "Idempotency-Key reused with a different body"},
    {"unsupported", "Not supported"},
    {"infeasible", "No plan fits the budget"},
    {"job-not-ready", "Job not done"},
    {"lease-conflict", "Lease not held"},
    {"invalid-archive", "Not a zip archive"},
    {"not-torchscript", "Not a TorchScript archive"},
    {"unsafe-archive", "Unsafe archive"},
    {"storage-full", "Model storage full"},
    {"model-in-use", "Model in use"},
    {"model-deleted", "Model deleted"},
    {"unavailable", "Service unavailable"},
    {"queue-full", "Queue full"},
    {"solve-deadline", "Solve deadline passed"},
    {"solve-memory", "Solve needs too much memory"},
    {"shutting-down", "Shutting down"},
    {"canceled", "Canceled"},
    {"plan-profile-mismatch", "Plan made for another profile"},
    {"profile-failed", "A profile job failed"},
    {"bad-request", "Malformed request"},
    {"not-implemented", "Not implemented"},
    {"internal", "Internal error"},
};

static const char *problem_title(const char *slug)
{
    for (size_t i = 0; i < sizeof problem_titles / sizeof problem_titles[0]; i++)
        if (strcmp(problem_titles[i].slug, slug) == 0)
            return problem_titles[i].title;
    return "Error";
}

/* JSON depth allowed in request bodies: far below jansson's 2048, deep
 * enough for every document remat accepts (layer lists nest "sequential"). */
#define MAX_JSON_DEPTH 32

static void rematd_req_free(struct rematd_request *r)
{
    if (r->body_held)
        atomic_fetch_sub(&r->srv->body_memory, (long long)r->body_held);
    rematx_dyn_free(&r->body);
    for (int i = 0; i < r->n_headers; i++) {
        free(r->header_name[i]);
        free(r->header_value[i]);
    }
    json_decref(r->json);
    free(r->problem_type);
    if (r->pending)
        MHD_destroy_response(r->pending);
    if (r->route_state && r->route_state_free)
        r->route_state_free(r->route_state);
    free(r);
}

void rematd_req_header(struct rematd_request *r, const char *name, const char *value)
{
    if (r->n_headers >= REMATD_REQ_MAX_HEADERS)
        return;
    r->header_name[r->n_headers] = strdup(name);
    r->header_value[r->n_headers] = strdup(value);
    r->n_headers++;
}

const char *rematd_req_header_in(struct rematd_request *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *rematd_req_query(struct rematd_request *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

static void queue(struct rematd_request *r, int status, struct MHD_Response *resp,
                  const char *content_type)
{
    if (!resp) {
        if (r->deferred) {
            /* No memory for the answer: the connection is closed when it
             * resumes. */
            r->pending_status = -1;
            return;
        }
        r->responded = 1;
        r->status = 500;
        return;
    }
    if (content_type)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(resp, "X-Request-Id", r->request_id);
    /* Draining: a keep-alive client must not send its next request on this
     * connection, which is about to be closed. */
    if (atomic_load(&r->srv->draining))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    for (int i = 0; i < r->n_headers; i++)
        if (r->header_name[i] && r->header_value[i])
            MHD_add_response_header(resp, r->header_name[i], r->header_value[i]);
    if (r->deferred) {
        /* A planning thread: MHD takes the response on the connection's
         * own thread once it resumes. */
        if (r->pending)
            MHD_destroy_response(r->pending);
        r->pending = resp;
        r->pending_status = status;
        return;
    }
    MHD_queue_response(r->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    r->responded = 1;
    r->status = status;
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
    queue(r, status, resp, content_type);
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
    char type[96];
    snprintf(type, sizeof type, "/problems/%s", slug);
    json_t *p = json_pack("{s:s, s:s, s:i, s:s, s:s, s:s}", "type", type, "title",
                          problem_title(slug), "status", status, "detail", detail, "instance",
                          r->path, "request_id", r->request_id);
    if (p && pointer && *pointer)
        json_object_set_new(p, "pointer", json_string(pointer));
    if (p && extra)
        json_object_update(p, extra);
    json_decref(extra);
    free(r->problem_type);
    r->problem_type = strdup(type);
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

void rematd_req_suspend(struct rematd_request *r)
{
    /* Counted before MHD sees it, so that shutdown never finds the count
     * at zero while a connection is suspended. */
    atomic_fetch_add(&r->srv->suspended, 1);
    r->suspended = 1;
    MHD_suspend_connection(r->conn);
}

int rematd_req_defer(struct rematd_request *r, void (*job)(struct rematd_request *r))
{
    if (rematd_pool_full(r->srv->pool)) {
        rematd_req_header(r, "Retry-After", "1");
        rematd_req_problem(r, 503, "queue-full", NULL,
                           "too many plans wait for a planning thread (--max-queued-plans)");
        return -1;
    }
    r->pool_job = job;
    r->deferred = 1;
    rematd_req_suspend(r);
    rematd_pool_submit(r->srv->pool, r);
    return 0;
}

void rematd_req_resume(struct rematd_request *r)
{
    /* Once resumed, the request may complete and be freed on its MHD
     * thread at any moment: take what is needed from it first. */
    struct rematd_server *srv = r->srv;
    MHD_resume_connection(r->conn);
    atomic_fetch_sub(&srv->suspended, 1);
}

/* Matches path against a pattern segment by segment; {id} takes one
 * segment, which is copied to id_out (validated later, so that a bad id is a
 * 404 on a route that exists). */
static int match(const char *pattern, const char *path, char *id_out, size_t id_cap)
{
    const char *p = pattern, *s = path;
    while (*p && *s) {
        if (strncmp(p, "{id}", 4) == 0) {
            const char *e = strchr(s, '/');
            size_t n = e ? (size_t)(e - s) : strlen(s);
            if (n == 0)
                return 0;
            size_t c = n < id_cap - 1 ? n : id_cap - 1;
            memcpy(id_out, s, c);
            id_out[c] = '\0';
            if (n >= id_cap - 1)
                id_out[0] = 'X'; /* too long: fails the id check */
            s += n;
            p += 4;
            continue;
        }
        if (*p != *s)
            return 0;
        p++;
        s++;
    }
    return *p == '\0' && *s == '\0';
}

static int token_ok(const char *header, const char *token)
{
    if (!header || strncasecmp(header, "Bearer ", 7) != 0)
        return 0;
    const char *t = header + 7;
    size_t a = strlen(t), b = strlen(token);
    /* Compare every byte whatever the first mismatch, so the time does not
     * tell an attacker how much of a guess was right. */
    unsigned char diff = (unsigned char)(a != b);
    for (size_t i = 0; i < b; i++)
        diff |= (unsigned char)(t[i < a ? i : 0] ^ token[i]);
    return diff == 0;
}

static int json_content_type(const char *ct)
{
    if (!ct)
        return 0;
    while (*ct == ' ')
        ct++;
    size_t n = strcspn(ct, "; ");
    if (n == 16 && strncasecmp(ct, "application/json", 16) == 0)
        return 1;
    /* application/<anything>+json, e.g. problem+json or merge-patch+json. */
    if (n > 17 && strncasecmp(ct, "application/", 12) == 0 &&
        strncasecmp(ct + n - 5, "+json", 5) == 0)
        return 1;
    return 0;
}

static void set_request_id(struct rematd_request *r)
{
    const char *in = rematd_req_header_in(r, "X-Request-Id");
    if (in) {
        size_t n = strlen(in);
        int ok = n > 0 && n < sizeof r->request_id;
        for (size_t i = 0; ok && i < n; i++)
            ok = (in[i] >= '0' && in[i] <= '9') || (in[i] >= 'a' && in[i] <= 'z') ||
                 (in[i] >= 'A' && in[i] <= 'Z') || in[i] == '-' || in[i] == '_' || in[i] == '.';
        if (ok) {
            memcpy(r->request_id, in, n + 1);
            return;
        }
    }
    char id[REMATD_ID_LEN + 1];
    rematd_new_id(id);
    memcpy(r->request_id, id, 16);
    r->request_id[16] = '\0';
}

/* s as printable text for the log and the problem's instance: a byte that
 * is not valid UTF-8, or a control character, as \xNN. */
static void escape_into(char *out, size_t cap, const char *s)
{
    size_t o = 0, n = strlen(s);
    for (size_t i = 0; i < n && o + 5 < cap;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = rematd_utf8_seq((const unsigned char *)s + i, n - i);
        if (k == 0 || c < 0x20 || c == 0x7f) {
            snprintf(out + o, cap - o, "\\x%02X", c);
            o += 4;
            i++;
            continue;
        }
        if (o + k >= cap)
            break;
        memcpy(out + o, s + i, k);
        o += k;
        i += k;
    }
    out[o] = '\0';
}

/* Whether the n bytes at s are an RFC 9110 token (a method, a header
 * name). */
static int is_token_n(const char *s, size_t n)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              (c && strchr("!#$%&'*+-.^_`|~", c))))
            return 0;
    }
    return 1;
}

struct framing {
    int n_length, lengths_differ, bad_length, n_coding, n_host, bad_name, bad_value;
    char length[32], coding[64];
};

static enum MHD_Result framing_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                      size_t key_size, const char *value, size_t value_size)
{
    struct framing *f = cls;
    (void)kind;
    if (!key)
        return MHD_YES;
    /* "Content-Length : 5" is no Content-Length to rematd but may be one
     * to a proxy (RFC 9112 5.1: whitespace before the colon is a 400). */
    if (!is_token_n(key, key_size))
        f->bad_name = 1;
    /* CR or LF inside a value (RFC 9110 5.5); libmicrohttpd ends a value
     * at a NUL byte itself, so value_size never shows one. */
    for (size_t i = 0; value && i < value_size; i++)
        if (value[i] == '\0' || value[i] == '\r' || value[i] == '\n')
            f->bad_value = 1;
    if (!value)
        return MHD_YES;
    if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0) {
        f->n_host++;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        /* 1*DIGIT only (RFC 9112 6.3): no sign, no list, no spaces inside. */
        size_t n = strlen(value);
        int digits = n > 0 && n < sizeof f->length && strspn(value, "0123456789") == n;
        if (!digits)
            f->bad_length = 1;
        else if (f->n_length > 0 && strcmp(f->length, value) != 0)
            f->lengths_differ = 1;
        else
            snprintf(f->length, sizeof f->length, "%s", value);
        f->n_length++;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        if (f->n_coding++ == 0)
            snprintf(f->coding, sizeof f->coding, "%s", value);
    }
    return MHD_YES;
}

/* RFC 9112 section 6 (and 3.2, 5.1): how the body is framed and which
 * resource is meant must be unambiguous, or a proxy in front and rematd
 * could each see a different request in the same bytes (request
 * smuggling).  Answers and returns 1 when the request is refused; the
 * connection is closed after the answer, since where the next request
 * would begin is unknown. */
static int refuse_framing(struct rematd_request *r, const char *url, const char *method,
                          const char *version)
{
    if (!is_token_n(method, strlen(method)) || strlen(method) >= sizeof r->method) {
        escape_into(r->method, sizeof r->method, method);
        rematd_req_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
        rematd_req_problem(r, 400, "bad-request", NULL, "the method is not an HTTP token");
        return 1;
    }
    int path_ok = rematd_utf8_valid(url, strlen(url));
    for (const char *p = url; path_ok && *p; p++)
        path_ok = (unsigned char)*p > 0x20 && *p != 0x7f;
    if (!path_ok) {
        escape_into(r->path, sizeof r->path, url);
        rematd_req_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
        rematd_req_problem(r, 400, "bad-request", NULL,
                           "the path is not valid UTF-8 or holds control characters");
        return 1;
    }
    struct framing f;
    memset(&f, 0, sizeof f);
    MHD_get_connection_values_n(r->conn, MHD_HEADER_KIND, framing_header, &f);
    const char *why = NULL;
    int status = 400;
    if (f.bad_name)
        why = "a header name is not a token (whitespace before the colon?)";
    else if (f.bad_value)
        why = "a header value holds NUL, CR or LF";
    else if (f.n_host > 1 || (f.n_host == 0 && version && strcmp(version, "HTTP/1.1") == 0))
        why = "an HTTP/1.1 request has exactly one Host header";
    else if (f.n_coding && f.n_length)
        why = "Content-Length and Transfer-Encoding together";
    else if (f.bad_length)
        why = "Content-Length is not a decimal number";
    else if (f.lengths_differ)
        why = "Content-Length given twice with different values";
    else if (f.n_coding > 1 || (f.n_coding && strcasecmp(f.coding, "chunked") != 0)) {
        why = "the only transfer coding accepted is chunked";
        status = 501;
    }
    if (!why)
        return 0;
    rematd_req_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    rematd_req_problem(r, status, status == 501 ? "not-implemented" : "bad-request", NULL, "%s",
                       why);
    return 1;
}

/* Reserves bytes of --max-bodies-bytes so that r holds at least total of
 * them (a body's announced length, or what a chunked one has sent so far).
 * Each request's body is bounded by --max-body-bytes, but requests are
 * many: queued plans and open connections times the body limit would be
 * gigabytes.  Returns 0, or -1 when the bound would be passed. */
static int body_reserve(struct rematd_request *r, size_t total)
{
    if (total <= r->body_held)
        return 0;
    long long add = (long long)(total - r->body_held);
    long long limit = (long long)r->srv->cfg.max_bodies_bytes;
    long long cur = atomic_load(&r->srv->body_memory);
    do {
        if (cur + add > limit)
            return -1;
    } while (!atomic_compare_exchange_weak(&r->srv->body_memory, &cur, cur + add));
    r->body_held = total;
    return 0;
}

static void answer_bodies_full(struct rematd_request *r)
{
    rematd_req_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    rematd_req_problem(r, 503, "queue-full", NULL,
                       "request bodies held now take the memory allowed them all "
                       "(--max-bodies-bytes %zu); try again shortly",
                       r->srv->cfg.max_bodies_bytes);
}

/* The first call: framing, route, auth, limits and content type.  Returns
 * 1 when it has answered. */
static int begin(struct rematd_request *r, const char *url, const char *method, const char *version)
{
    struct rematd_server *srv = r->srv;
    snprintf(r->method, sizeof r->method, "%s", method);
    snprintf(r->path, sizeof r->path, "%.200s", url);
    if (refuse_framing(r, url, method, version))
        return 1;
    if (strlen(url) >= sizeof r->path) {
        snprintf(r->path, sizeof r->path, "%.200s...", url);
        rematd_req_problem(r, 404, "not-found", NULL, "no resource at this path");
        return 1;
    }
    snprintf(r->path, sizeof r->path, "%s", url);
    const char *m = strcmp(method, "HEAD") == 0 ? "GET" : method;
    char allow[64] = "";
    int path_matched = 0;
    r->route_index = -1;
    for (size_t i = 0; i < rematd_n_routes; i++) {
        char id[REMATD_ID_LEN + 2];
        if (!match(rematd_routes[i]->pattern, url, id, sizeof id))
            continue;
        path_matched = 1;
        if (strcmp(rematd_routes[i]->method, m) != 0) {
            if (!strstr(allow, rematd_routes[i]->method)) {
                size_t l = strlen(allow);
                snprintf(allow + l, sizeof allow - l, "%s%s", l ? ", " : "",
                         rematd_routes[i]->method);
                if (strcmp(rematd_routes[i]->method, "GET") == 0) {
                    l = strlen(allow);
                    snprintf(allow + l, sizeof allow - l, ", HEAD");
                }
            }
            continue;
        }
        r->route = rematd_routes[i];
        r->route_index = (int)i;
        if (strstr(r->route->pattern, "{id}")) {
            if (!rematd_is_id(id)) {
                rematd_req_problem(r, 404, "not-found", NULL,
                                   "ids are 32 lowercase hexadecimal characters");
                return 1;
            }
            memcpy(r->id, id, REMATD_ID_LEN + 1);
        }
        break;
    }
    if (!r->route) {
        if (path_matched) {
            rematd_req_header(r, "Allow", allow);
            rematd_req_problem(r, 405, "method-not-allowed", NULL,
                               "%s is not allowed here; allowed: %s", method, allow);
        } else {
            rematd_req_problem(r, 404, "not-found", NULL, "no resource at this path");
        }
        return 1;
    }
    const struct rematd_route *rt = r->route;
    if (r->health_only && rt != &rematd_route_healthz && rt != &rematd_route_readyz) {
        /* A health slot: the connections are all taken. */
        rematd_req_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
        rematd_req_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
        rematd_req_problem(r, 503, "unavailable", NULL,
                           "every connection is taken (--max-connections %u); retry",
                           srv->cfg.max_connections);
        return 1;
    }
    if (rt->auth != REMATD_AUTH_NONE) {
        const char *tok = srv->cfg.token;
        if (rt->auth == REMATD_AUTH_WORKER && srv->cfg.worker_token[0])
            tok = srv->cfg.worker_token;
        if (tok[0] && !token_ok(rematd_req_header_in(r, MHD_HTTP_HEADER_AUTHORIZATION), tok)) {
            rematd_req_header(r, "WWW-Authenticate", "Bearer realm=\"remat\"");
            rematd_req_problem(r, 401, "unauthorized", NULL,
                               rematd_req_header_in(r, MHD_HTTP_HEADER_AUTHORIZATION)
                                   ? "the bearer token is not valid for this route"
                                   : "this route needs Authorization: Bearer <token>");
            return 1;
        }
    }
    r->body_limit = rt->body_limit ? rt->body_limit : srv->cfg.max_body_bytes;
    if (rt->body_limit_of)
        r->body_limit = rt->body_limit_of(&srv->cfg);
    rematx_dyn_init(&r->body, r->body_limit);
    const char *cl = rematd_req_header_in(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl) {
        char *end;
        unsigned long long n = strtoull(cl, &end, 10);
        if (end == cl || *end || n > r->body_limit) {
            rematd_req_problem(r, 413, "body-too-large", NULL,
                               "the body is larger than the limit of %zu bytes", r->body_limit);
            return 1;
        }
        if (n > 0 && !rt->body_chunk) {
            /* The whole announced body counts against --max-bodies-bytes
             * from the start (a client trickling it holds the promise), and
             * when it does not fit nothing of it is read. */
            if (body_reserve(r, (size_t)n) < 0) {
                rematd_req_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
                answer_bodies_full(r);
                return 1;
            }
            /* At most 64 KiB up front: a client announcing 8 MiB and then
             * trickling must not pin 8 MiB per connection. */
            rematx_dyn_grow(&r->body, n < 65535 ? (size_t)n : 65535);
        }
    }
    if (rt->body_begin) {
        rt->body_begin(r);
        return r->responded;
    }
    if (strcmp(rt->method, "POST") == 0 &&
        !json_content_type(rematd_req_header_in(r, MHD_HTTP_HEADER_CONTENT_TYPE))) {
        rematd_req_problem(r, 415, "unsupported-media-type", NULL,
                           "send the body as Content-Type: application/json");
        return 1;
    }
    return 0;
}

static void append(struct rematd_request *r, const char *data, size_t n)
{
    /* Past the limit (or out of memory) keep reading and discarding: MHD
     * cannot answer while the body is arriving, so the 413 (or the 503 of
     * --max-bodies-bytes) goes out at the end.  The buffer grows
     * geometrically: appends stay linear. */
    if (r->body_error || r->body_over)
        return;
    size_t len = rematx_dyn_len(&r->body);
    if (n > r->body_limit - len) {
        r->body_error = REMAT_ELIMIT;
        return;
    }
    if (body_reserve(r, len + n) < 0) {
        r->body_over = 1;
        rematx_dyn_free(&r->body);
        return;
    }
    r->body_error = rematx_dyn_addn(&r->body, data, n);
}

json_t *rematd_req_body_json(struct rematd_request *r)
{
    if (rematx_dyn_len(&r->body) == 0) {
        rematd_req_problem(r, 400, "invalid-json", NULL,
                           "the body is empty; a JSON object is expected");
        return NULL;
    }
    /* jansson skips a NUL byte right after a number or literal ("[1\0]"
     * loads); JSON has no such byte outside an escape, and libremat's
     * streaming reader refuses it, so every path refuses it here. */
    if (memchr(rematx_dyn_ptr(&r->body), 0, rematx_dyn_len(&r->body))) {
        rematd_req_problem(r, 400, "invalid-json", NULL,
                           "the body holds a NUL byte (write it as \\u0000 inside a string)");
        return NULL;
    }
    json_error_t e;
    json_t *j =
        json_loadb(rematx_dyn_ptr(&r->body), rematx_dyn_len(&r->body), JSON_REJECT_DUPLICATES, &e);
    if (!j) {
        if (json_error_code(&e) == json_error_stack_overflow) {
            rematd_req_problem(r, 400, "json-too-deep", NULL, "nesting deeper than %d levels",
                               MAX_JSON_DEPTH);
            return NULL;
        }
        rematd_req_problem(r, 400, "invalid-json", NULL, "line %d, column %d: %s", e.line, e.column,
                           e.text);
        return NULL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        rematd_req_problem(r, 400, "invalid-json", "", "the body must be a JSON object");
        return NULL;
    }
    if (rematd_json_depth(j, MAX_JSON_DEPTH + 1) > MAX_JSON_DEPTH) {
        json_decref(j);
        rematd_req_problem(r, 400, "json-too-deep", NULL, "nesting deeper than %d levels",
                           MAX_JSON_DEPTH);
        return NULL;
    }
    r->json = j;
    return j;
}

int rematd_req_reject_unknown(struct rematd_request *r, json_t *obj, const char *prefix,
                              const char *const *allowed)
{
    const char *k;
    json_t *v;
    json_object_foreach (obj, k, v) {
        int ok = 0;
        for (size_t i = 0; allowed[i]; i++)
            if (strcmp(allowed[i], k) == 0)
                ok = 1;
        if (!ok) {
            char ptr[160];
            snprintf(ptr, sizeof ptr, "%s", prefix);
            rematx_pointer_append(ptr, sizeof ptr, k);
            rematd_req_problem(r, 400, "validation", ptr, "unknown field '%.100s'", k);
            return -1;
        }
    }
    return 0;
}

static void created(struct rematd_request *r, const char *id, char *body, size_t len, int replayed)
{
    char loc[sizeof r->path + REMATD_ID_LEN + 2];
    snprintf(loc, sizeof loc, "%s/%s", r->route->pattern, id);
    rematd_req_header(r, "Location", loc);
    if (replayed)
        rematd_req_header(r, "Idempotent-Replayed", "true");
    /* A queued job: when to look again, as GET of a queued job says. */
    if (r->route->created_status == 202)
        rematd_req_header(r, "Retry-After", "2");
    rematd_req_text(r, r->route->created_status, "application/json", body, len, 0);
}

void rematd_req_created(struct rematd_request *r, const char *id, char *body, size_t len)
{
    created(r, id, body, len, 0);
}

void rematd_req_replay(struct rematd_request *r, struct rematd_idem *rec)
{
    if (strcmp(rec->body_hash, r->body_hash) != 0) {
        rematd_req_problem(r, 422, "idempotency-key-reused", NULL,
                           "this Idempotency-Key was first used with a different body");
        rematd_idem_clear(rec);
        return;
    }
    char *b = rec->body;
    rec->body = NULL;
    created(r, rec->resource_id, b, strlen(b), 1);
}

int rematd_req_idempotency_check(struct rematd_request *r)
{
    const char *key = rematd_req_header_in(r, "Idempotency-Key");
    if (!key)
        return 0;
    size_t n = strlen(key);
    int ok = n >= 1 && n <= 255;
    for (size_t i = 0; ok && i < n; i++)
        ok = key[i] > 32 && key[i] < 127;
    if (!ok) {
        rematd_req_problem(r, 400, "invalid-idempotency-key", NULL,
                           "Idempotency-Key must be 1 to 255 visible ASCII characters");
        return 1;
    }
    r->idem_key = key;
    rematd_sha256_hex(rematx_dyn_ptr(&r->body), rematx_dyn_len(&r->body), r->body_hash);
    struct rematd_idem rec;
    enum rematd_store_result got =
        rematd_store_get_idempotency(r->srv->store, r->route->name, key, &rec);
    if (got == REMATD_STORE_NOT_FOUND)
        return 0;
    if (got != REMATD_STORE_OK)
        rematd_req_problem(r, 503, "unavailable", NULL, "the store did not answer");
    else
        rematd_req_replay(r, &rec);
    return 1;
}

static void dispatch(struct rematd_request *r)
{
    if (r->body_over) {
        answer_bodies_full(r);
        return;
    }
    if (r->body_error == REMAT_ELIMIT) {
        rematd_req_problem(r, 413, "body-too-large", NULL,
                           "the body is larger than the limit of %zu bytes", r->body_limit);
        return;
    }
    if (r->body_error != 0) {
        rematd_req_problem(r, 500, "internal", NULL, "out of memory reading the body");
        return;
    }
    if (r->route->created_status && rematd_req_idempotency_check(r))
        return;
    if (r->route->handler(r) == REMATD_SUSPENDED)
        return;
    if (!r->responded)
        rematd_req_problem(r, 500, "internal", NULL, "the handler gave no answer");
}

/*
 * Connections.  Three defences keep idle and slow clients from holding the
 * slots that others need (docs/api.md, "Connections"):
 *
 * - A deadline for the whole request: from the start of the connection, or
 *   from the end of the previous request on it, the request's headers and
 *   body must have arrived within --request-timeout, however slowly they
 *   trickle (libmicrohttpd's own timeout counts from the last byte read, so
 *   a byte every few seconds would hold a slot forever).  A thread of this
 *   file (the reaper) answers 408 and shuts down the socket of a connection
 *   past its deadline; libmicrohttpd sees the end of the stream and closes
 *   it on its own thread.  The deadline is off while a request is handled
 *   or answered.
 * - --max-connections-per-ip (libmicrohttpd refuses more at accept).
 * - --health-connections slots past --max-connections: a connection that
 *   arrives when the others are all taken is served only /healthz and
 *   /readyz (what a kubelet probes), with a short deadline, so that a full
 *   pool does not make a healthy rematd look dead.  The limit is logged
 *   when reached.
 *
 * The reaper and libmicrohttpd's threads share the list of connections
 * under one mutex; a connection leaves it in NOTIFY_CLOSED, which
 * libmicrohttpd calls before it closes the socket, so the reaper never
 * shuts down a descriptor that has been reused.
 */
struct conn_state {
    int fresh;    /* its first request has not begun */
    int reserved; /* a health slot */
    int fd;
    double deadline; /* monotonic seconds; 0 = none */
    char client[48];
    struct conn_state *prev, *next;
};

struct rematd_http {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t reaper;
    int reaper_started, stop;
    struct conn_state *head;
    long n_conns;
    double last_full_log, last_cut_log;
    long cut_unlogged, full_unlogged;
    struct MHD_OptionItem options[8];
};

/* Seconds a health slot waits for its request: a probe asks at once. */
#define HEALTH_SLOT_DEADLINE 2.0

static void set_deadline(struct rematd_server *srv, struct conn_state *cs, double deadline)
{
    if (!cs || !srv->http)
        return;
    pthread_mutex_lock(&srv->http->mu);
    cs->deadline = deadline;
    pthread_mutex_unlock(&srv->http->mu);
}

static double request_deadline(struct rematd_server *srv, const struct conn_state *cs)
{
    double t = srv->cfg.request_timeout ? srv->cfg.request_timeout : 30;
    if (cs && cs->reserved && t > HEALTH_SLOT_DEADLINE)
        t = HEALTH_SLOT_DEADLINE;
    return rematd_mono() + t;
}

static struct conn_state *conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void client_address(struct MHD_Connection *c, char *out, size_t cap)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    snprintf(out, cap, "?");
    if (!ci || !ci->client_addr)
        return;
    const struct sockaddr *sa = ci->client_addr;
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, out,
                  (socklen_t)cap);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, out,
                  (socklen_t)cap);
}

static void *reaper(void *arg)
{
    struct rematd_server *srv = arg;
    struct rematd_http *h = srv->http;
    static const char timeout_answer[] =
        "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
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
        for (struct conn_state *cs = h->head; cs; cs = cs->next) {
            if (cs->deadline == 0 || now < cs->deadline || cs->fd < 0)
                continue;
            cs->deadline = 0;
            /* Nothing is being written on a connection whose request has
             * not been read, so this answer cannot interleave with one. */
            ssize_t w = send(cs->fd, timeout_answer, sizeof timeout_answer - 1,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
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

const struct MHD_OptionItem *rematd_http_setup(struct rematd_server *srv)
{
    struct rematd_http *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    srv->http = h;
    if (pthread_create(&h->reaper, NULL, reaper, srv) == 0)
        h->reaper_started = 1;
    else
        rematd_log("error", "cannot start the request deadline thread", NULL);
    unsigned limit = srv->cfg.max_connections + srv->cfg.health_connections;
    struct MHD_OptionItem items[] = {
        {MHD_OPTION_CONNECTION_LIMIT, (intptr_t)limit, NULL},
        {MHD_OPTION_PER_IP_CONNECTION_LIMIT, (intptr_t)srv->cfg.max_connections_per_ip, NULL},
        {MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)CONNECTION_MEMORY, NULL},
        {MHD_OPTION_UNESCAPE_CALLBACK, (intptr_t)(void *)&raw_path, NULL},
        {MHD_OPTION_END, 0, NULL},
    };
    memcpy(h->options, items, sizeof items);
    return h->options;
}

void rematd_http_teardown(struct rematd_server *srv)
{
    struct rematd_http *h = srv->http;
    if (!h)
        return;
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

void rematd_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                       enum MHD_ConnectionNotificationCode toe)
{
    struct rematd_server *srv = cls;
    struct rematd_http *h = srv->http;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        struct conn_state *cs = calloc(1, sizeof *cs);
        if (cs) {
            cs->fresh = 1;
            atomic_fetch_add(&srv->fresh, 1);
            const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
            cs->fd = ci ? ci->connect_fd : -1;
            client_address(c, cs->client, sizeof cs->client);
        }
        *socket_context = cs;
        if (!h)
            return;
        int log_full = 0;
        long n;
        pthread_mutex_lock(&h->mu);
        n = ++h->n_conns;
        if (cs) {
            cs->reserved = n > (long)srv->cfg.max_connections;
            cs->deadline = request_deadline(srv, cs);
            cs->next = h->head;
            if (h->head)
                h->head->prev = cs;
            h->head = cs;
        }
        if (n > (long)srv->cfg.max_connections) {
            h->full_unlogged++;
            double now = rematd_mono();
            if (now - h->last_full_log >= 1.0) {
                log_full = (int)h->full_unlogged;
                h->full_unlogged = 0;
                h->last_full_log = now;
            }
        }
        pthread_mutex_unlock(&h->mu);
        if (log_full)
            rematd_log("warn", "connection limit reached: serving health probes only",
                       json_pack("{s:i, s:i, s:i, s:s}", "connections", (int)n, "max_connections",
                                 (int)srv->cfg.max_connections, "over_limit", log_full, "client",
                                 cs ? cs->client : "?"));
        return;
    }
    struct conn_state *cs = *socket_context;
    if (h) {
        pthread_mutex_lock(&h->mu);
        h->n_conns--;
        if (cs) {
            if (cs->prev)
                cs->prev->next = cs->next;
            else if (h->head == cs)
                h->head = cs->next;
            if (cs->next)
                cs->next->prev = cs->prev;
        }
        pthread_mutex_unlock(&h->mu);
    }
    if (cs && cs->fresh)
        atomic_fetch_sub(&srv->fresh, 1);
    free(cs);
    *socket_context = NULL;
}

static enum MHD_Result access_call(struct rematd_server *srv, struct MHD_Connection *c,
                                   const char *url, const char *method, const char *version,
                                   const char *upload_data, size_t *upload_data_size,
                                   void **req_cls)
{
    struct rematd_request *r = *req_cls;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r)
            return MHD_NO;
        r->srv = srv;
        r->conn = c;
        r->t0 = rematd_mono();
        *req_cls = r;
        /* in_flight before fresh: shutdown reads fresh first, so when it
         * sees this connection no longer fresh it also sees the request. */
        atomic_fetch_add(&srv->in_flight, 1);
        struct conn_state *cs = conn_of(c);
        if (cs && cs->fresh) {
            cs->fresh = 0;
            atomic_fetch_sub(&srv->fresh, 1);
        }
        set_request_id(r);
        r->health_only = cs && cs->reserved;
        /* Answered at once: nothing more is read, the deadline is off. */
        if (begin(r, url, method, version))
            set_deadline(srv, cs, 0);
        return MHD_YES;
    }
    if (r->responded) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size && r->route && r->route->body_chunk) {
        /* Streamed: counted against the limit, never held. */
        if (r->body_error == 0 && *upload_data_size > r->body_limit - r->streamed)
            r->body_error = REMAT_ELIMIT;
        if (r->body_error == 0) {
            r->streamed += *upload_data_size;
            r->route->body_chunk(r, upload_data, *upload_data_size);
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size) {
        append(r, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (r->suspended) {
        r->suspended = 0;
        r->deferred = 0;
        if (r->pending_status < 0)
            return MHD_NO;
        if (r->pending) {
            struct MHD_Response *resp = r->pending;
            r->pending = NULL;
            MHD_queue_response(r->conn, (unsigned)r->pending_status, resp);
            MHD_destroy_response(resp);
            r->responded = 1;
            r->status = r->pending_status;
            return MHD_YES;
        }
        if (r->route->resumed)
            r->route->resumed(r);
        if (!r->responded)
            rematd_req_problem(r, 500, "internal", NULL, "the handler gave no answer");
        return MHD_YES;
    }
    /* The whole request is in: from here it is handled, not read. */
    set_deadline(srv, conn_of(c), 0);
    dispatch(r);
    return MHD_YES;
}

enum MHD_Result rematd_access(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **req_cls)
{
    struct rematd_server *srv = cls;
    /* Counted, then checked (both sequentially consistent): shutdown sets
     * closing, then waits for in_access to reach zero, so either this call
     * sees closing, or shutdown waits until it has returned.  After that no
     * handler can suspend a connection behind MHD_stop_daemon's back. */
    atomic_fetch_add(&srv->in_access, 1);
    enum MHD_Result res = MHD_NO;
    if (!atomic_load(&srv->closing))
        res = access_call(srv, c, url, method, version, upload_data, upload_data_size, req_cls);
    atomic_fetch_sub(&srv->in_access, 1);
    return res;
}

void rematd_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                      enum MHD_RequestTerminationCode toe)
{
    struct rematd_request *r = *req_cls;
    if (!r)
        return;
    *req_cls = NULL;
    double dur = rematd_mono() - r->t0;
    int status = r->responded ? r->status : 0;
    rematd_metrics_observe(r->route_index, status, dur);
    struct rematd_request_log f = {
        .request_id = r->request_id,
        .method = r->method,
        .path = r->path,
        .route = r->route ? r->route->name : "unmatched",
        .status = status,
        .dur_ms = dur * 1000.0,
        .problem = r->problem_type,
        .terminated = toe != MHD_REQUEST_TERMINATED_COMPLETED_OK ? (int)toe : -1,
        .id = r->id,
    };
    rematd_log_request(status >= 500 || status == 0 ? "error" : "info", &f);
    /* A kept-alive connection: its next request has the same deadline. */
    struct conn_state *cs = conn_of(c);
    set_deadline(r->srv, cs, request_deadline(r->srv, cs));
    atomic_fetch_sub(&r->srv->in_flight, 1);
    rematd_req_free(r);
}
