/*
 * request.c - a request's life, from libmicrohttpd's first access call to
 * its completion: framing defences (smuggling), the route (404, 405 with
 * Allow), the health slots, bearer auth, reading the body under its limits
 * (413 from Content-Length before the body is read, or at the end for
 * chunked bodies; 503 when bodies held together pass --max-bodies-bytes),
 * content type (415), dispatch to the route, resuming after a planning
 * thread, and the per-request log line and metrics.
 *
 * Each request owns one struct rematd_req (http_private.h), created on the
 * first call of the access handler and freed in one place, rematd_completed
 * (MHD's NOTIFY_COMPLETED), whether or not the request finished.
 *
 * Shutdown (see main.c) relies on the counters kept here: in_flight (first
 * access call to NOTIFY_COMPLETED), fresh (connections whose first request
 * has not begun, conn.c), suspended (rematd_req_suspend to rematd_req_resume)
 * and in_access (access calls running), and on every access call refusing
 * once closing is set.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http_private.h"
#include "rematx/utf8.h"
#include "tenants.h"

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

int rematd_req_owns(const struct rematd_request *r, const char *owner)
{
    if (!r->route || r->route->auth != REMATD_AUTH_CLIENT)
        return 1;
    const char *me = r->tenant ? r->tenant : REMATD_TENANT_DEFAULT;
    return strcmp(owner && owner[0] ? owner : REMATD_TENANT_DEFAULT, me) == 0;
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

static void set_request_id(struct rematd_req *q)
{
    struct rematd_request *r = &q->pub;
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
        size_t k = rematx_utf8_seq((const unsigned char *)s + i, n - i);
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
static int refuse_framing(struct rematd_req *q, const char *url, const char *method,
                          const char *version)
{
    struct rematd_request *r = &q->pub;
    if (!is_token_n(method, strlen(method)) || strlen(method) >= sizeof q->method) {
        escape_into(q->method, sizeof q->method, method);
        rematd_req_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
        rematd_req_problem(r, 400, "bad-request", NULL, "the method is not an HTTP token");
        return 1;
    }
    int path_ok = rematx_utf8_valid(url, strlen(url));
    for (const char *p = url; path_ok && *p; p++)
        path_ok = (unsigned char)*p > 0x20 && *p != 0x7f;
    if (!path_ok) {
        escape_into(q->path, sizeof q->path, url);
        rematd_req_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
        rematd_req_problem(r, 400, "bad-request", NULL,
                           "the path is not valid UTF-8 or holds control characters");
        return 1;
    }
    struct framing f;
    memset(&f, 0, sizeof f);
    MHD_get_connection_values_n(q->conn, MHD_HEADER_KIND, framing_header, &f);
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
static int body_reserve(struct rematd_req *q, size_t total)
{
    struct rematd_request *r = &q->pub;
    if (total <= q->body_held)
        return 0;
    long long add = (long long)(total - q->body_held);
    long long limit = (long long)r->srv->cfg.max_bodies_bytes;
    long long cur = atomic_load(&r->srv->body_memory);
    do {
        if (cur + add > limit)
            return -1;
    } while (!atomic_compare_exchange_weak(&r->srv->body_memory, &cur, cur + add));
    q->body_held = total;
    return 0;
}

static void answer_bodies_full(struct rematd_req *q)
{
    struct rematd_request *r = &q->pub;
    rematd_req_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    rematd_req_problem(r, 503, "queue-full", NULL,
                       "request bodies held now take the memory allowed them all "
                       "(--max-bodies-bytes %zu); try again shortly",
                       r->srv->cfg.max_bodies_bytes);
}

/* The first call: framing, route, auth, limits and content type.  Returns
 * 1 when it has answered. */
static int begin(struct rematd_req *q, const char *url, const char *method, const char *version)
{
    struct rematd_request *r = &q->pub;
    struct rematd_server *srv = r->srv;
    snprintf(q->method, sizeof q->method, "%s", method);
    snprintf(q->path, sizeof q->path, "%.200s", url);
    if (refuse_framing(q, url, method, version))
        return 1;
    if (strlen(url) >= sizeof q->path) {
        snprintf(q->path, sizeof q->path, "%.200s...", url);
        rematd_req_problem(r, 404, "not-found", NULL, "no resource at this path");
        return 1;
    }
    snprintf(q->path, sizeof q->path, "%s", url);
    const char *m = strcmp(method, "HEAD") == 0 ? "GET" : method;
    char allow[64] = "";
    int path_matched = 0;
    q->route_index = -1;
    for (size_t i = 0; i < srv->n_routes; i++) {
        char id[REMATD_ID_LEN + 2];
        /* The health listener has no other route: not there, not found. */
        if (q->health_only == 2 && !srv->routes[i]->health_port)
            continue;
        if (!match(srv->routes[i]->pattern, url, id, sizeof id))
            continue;
        path_matched = 1;
        if (strcmp(srv->routes[i]->method, m) != 0) {
            if (!strstr(allow, srv->routes[i]->method)) {
                size_t l = strlen(allow);
                snprintf(allow + l, sizeof allow - l, "%s%s", l ? ", " : "",
                         srv->routes[i]->method);
                if (strcmp(srv->routes[i]->method, "GET") == 0) {
                    l = strlen(allow);
                    snprintf(allow + l, sizeof allow - l, ", HEAD");
                }
            }
            continue;
        }
        r->route = srv->routes[i];
        q->route_index = (int)i;
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
    if (q->worker_only && rt->auth != REMATD_AUTH_WORKER && !rt->health_probe) {
        /* The workers' socket is theirs: a client there would hold what
         * the clients' cap keeps for the workers. */
        rematd_req_problem(r, 404, "not-found", NULL,
                           "the workers' socket serves the /v1/worker routes only");
        return 1;
    }
    if (q->health_only == 1 && !rt->health_probe) {
        /* A health slot: the connections are all taken. */
        rematd_req_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
        rematd_req_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
        rematd_req_problem(r, 503, "unavailable", NULL,
                           "every connection is taken (--max-connections %u); retry",
                           srv->cfg.max_connections);
        return 1;
    }
    r->tenant = REMATD_TENANT_DEFAULT;
    if (rt->auth != REMATD_AUTH_NONE) {
        /* A client route takes any tenant's token and is that tenant's; a
         * worker route takes REMAT_WORKER_TOKEN, or without one (on
         * loopback only: main.c) any client's token. */
        const char *authz = rematd_req_header_in(r, MHD_HTTP_HEADER_AUTHORIZATION);
        int refused;
        if (rt->auth == REMATD_AUTH_WORKER && srv->cfg.worker_token[0]) {
            refused = !token_ok(authz, srv->cfg.worker_token);
        } else if (rematd_tenants_any(srv->tenants)) {
            const char *tenant = rematd_tenants_match(srv->tenants, authz);
            refused = tenant == NULL;
            if (tenant && rt->auth == REMATD_AUTH_CLIENT)
                r->tenant = tenant;
        } else {
            refused = 0;
        }
        if (refused) {
            rematd_req_header(r, "WWW-Authenticate", "Bearer realm=\"remat\"");
            rematd_req_problem(r, 401, "unauthorized", NULL,
                               rematd_req_header_in(r, MHD_HTTP_HEADER_AUTHORIZATION)
                                   ? "the bearer token is not valid for this route"
                                   : "this route needs Authorization: Bearer <token>");
            return 1;
        }
    }
    if (strcmp(r->tenant, REMATD_TENANT_DEFAULT) == 0)
        snprintf(r->idem_scope, sizeof r->idem_scope, "%s", rt->name);
    else
        snprintf(r->idem_scope, sizeof r->idem_scope, "%s/%s", r->tenant, rt->name);
    q->body_limit = rt->body_limit ? rt->body_limit : srv->cfg.max_body_bytes;
    if (rt->body_limit_of)
        q->body_limit = rt->body_limit_of(&srv->cfg);
    rematx_dyn_init(&r->body, q->body_limit);
    const char *cl = rematd_req_header_in(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl) {
        char *end;
        unsigned long long n = strtoull(cl, &end, 10);
        if (end == cl || *end || n > q->body_limit) {
            rematd_req_problem(r, 413, "body-too-large", NULL,
                               "the body is larger than the limit of %zu bytes", q->body_limit);
            return 1;
        }
        if (n > 0 && !rt->body_chunk) {
            /* The whole announced body counts against --max-bodies-bytes
             * from the start (a client trickling it holds the promise), and
             * when it does not fit nothing of it is read. */
            if (body_reserve(q, (size_t)n) < 0) {
                rematd_req_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
                answer_bodies_full(q);
                return 1;
            }
            /* At most 64 KiB up front: a client announcing 8 MiB and then
             * trickling must not pin 8 MiB per connection. */
            rematx_dyn_grow(&r->body, n < 65535 ? (size_t)n : 65535);
        }
    }
    if (rt->body_begin) {
        rt->body_begin(r);
        return q->responded;
    }
    if (strcmp(rt->method, "POST") == 0 &&
        !json_content_type(rematd_req_header_in(r, MHD_HTTP_HEADER_CONTENT_TYPE))) {
        rematd_req_problem(r, 415, "unsupported-media-type", NULL,
                           "send the body as Content-Type: application/json");
        return 1;
    }
    return 0;
}

static void append(struct rematd_req *q, const char *data, size_t n)
{
    struct rematd_request *r = &q->pub;
    /* Past the limit (or out of memory) keep reading and discarding: MHD
     * cannot answer while the body is arriving, so the 413 (or the 503 of
     * --max-bodies-bytes) goes out at the end.  The buffer grows
     * geometrically: appends stay linear. */
    if (q->body_error || q->body_over)
        return;
    size_t len = rematx_dyn_len(&r->body);
    if (n > q->body_limit - len) {
        q->body_error = REMAT_ELIMIT;
        return;
    }
    if (body_reserve(q, len + n) < 0) {
        q->body_over = 1;
        rematx_dyn_free(&r->body);
        return;
    }
    q->body_error = rematx_dyn_addn(&r->body, data, n);
}

json_t *rematd_req_body_json(struct rematd_request *r)
{
    struct rematd_problem p = {0};
    json_t *j = rematd_body_parse(rematx_dyn_ptr(&r->body), rematx_dyn_len(&r->body), &p);
    if (!j) {
        rematd_req_send_problem(r, &p);
        return NULL;
    }
    json_decref(r->json);
    r->json = j;
    return j;
}

int rematd_req_reject_unknown(struct rematd_request *r, json_t *obj, const char *prefix,
                              const char *const *allowed)
{
    struct rematd_problem p = {0};
    if (rematd_problem_unknown(&p, obj, prefix, allowed) == 0)
        return 0;
    rematd_req_send_problem(r, &p);
    return -1;
}

static void dispatch(struct rematd_req *q)
{
    struct rematd_request *r = &q->pub;
    if (q->body_over) {
        answer_bodies_full(q);
        return;
    }
    if (q->body_error == REMAT_ELIMIT) {
        rematd_req_problem(r, 413, "body-too-large", NULL,
                           "the body is larger than the limit of %zu bytes", q->body_limit);
        return;
    }
    if (q->body_error != 0) {
        rematd_req_problem(r, 500, "internal", NULL, "out of memory reading the body");
        return;
    }
    if (r->route->created_status && rematd__idempotency_check(q))
        return;
    enum rematd_handled h;
    if (r->route->job != NULL)
        h = rematd_req_defer(r, r->route->job) < 0 ? REMATD_HANDLED : REMATD_SUSPENDED;
    else
        h = r->route->handler(r);
    if (h == REMATD_SUSPENDED)
        return;
    if (!q->responded)
        rematd_req_problem(r, 500, "internal", NULL, "the handler gave no answer");
}

/* A streamed body's deadline: --upload-idle-timeout from now, moved at
 * most four times a second (each move takes the deadline thread's lock). */
static void idle_deadline(struct rematd_req *q, struct rematd__conn *cs)
{
    double now = rematd_mono();
    if (now - q->idle_set < 0.25)
        return;
    q->idle_set = now;
    unsigned t = q->pub.srv->cfg.upload_idle_timeout;
    rematd__conn_deadline_in(q->pub.srv, cs, t ? t : 30);
}

static enum MHD_Result access_call(struct rematd_server *srv, struct MHD_Connection *c,
                                   const char *url, const char *method, const char *version,
                                   const char *upload_data, size_t *upload_data_size,
                                   void **req_cls)
{
    struct rematd_req *q = *req_cls;
    if (!q) {
        q = calloc(1, sizeof *q);
        if (!q)
            return MHD_NO;
        q->pub.srv = srv;
        q->conn = c;
        q->t0 = rematd_mono();
        *req_cls = q;
        /* in_flight before fresh: shutdown reads fresh first, so when it
         * sees this connection no longer fresh it also sees the request. */
        atomic_fetch_add(&srv->in_flight, 1);
        struct rematd__conn *cs = rematd__conn_of(c);
        q->health_only = rematd__conn_begin(srv, cs);
        q->worker_only = rematd__conn_local(cs);
        if (rematd__conn_health_port(srv, c))
            q->health_only = 2;
        set_request_id(q);
        /* Answered at once: nothing more is read, the deadline is off.  A
         * streamed body has an idle deadline instead of the request's. */
        if (begin(q, url, method, version))
            rematd__conn_deadline_off(srv, cs);
        else if (q->pub.route && q->pub.route->body_chunk)
            idle_deadline(q, cs);
        return MHD_YES;
    }
    struct rematd_request *r = &q->pub;
    if (q->responded) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size && r->route && r->route->body_chunk) {
        /* Streamed: counted against the limit, never held; each read moves
         * the idle deadline. */
        idle_deadline(q, rematd__conn_of(c));
        if (q->body_error == 0 && *upload_data_size > q->body_limit - q->streamed)
            q->body_error = REMAT_ELIMIT;
        if (q->body_error == 0) {
            q->streamed += *upload_data_size;
            r->route->body_chunk(r, upload_data, *upload_data_size);
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size) {
        append(q, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (q->suspended) {
        q->suspended = 0;
        q->deferred = 0;
        if (q->pending_status < 0)
            return MHD_NO;
        if (q->pending) {
            struct MHD_Response *resp = q->pending;
            q->pending = NULL;
            MHD_queue_response(q->conn, (unsigned)q->pending_status, resp);
            MHD_destroy_response(resp);
            q->responded = 1;
            q->status = q->pending_status;
            return MHD_YES;
        }
        if (r->route->resumed)
            r->route->resumed(r);
        if (!q->responded)
            rematd_req_problem(r, 500, "internal", NULL, "the handler gave no answer");
        return MHD_YES;
    }
    /* The whole request is in: from here it is handled, not read. */
    rematd__conn_deadline_off(srv, rematd__conn_of(c));
    dispatch(q);
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
    struct rematd_req *q = *req_cls;
    if (!q)
        return;
    struct rematd_request *r = &q->pub;
    *req_cls = NULL;
    double dur = rematd_mono() - q->t0;
    int status = q->responded ? q->status : 0;
    rematd_metrics_observe(q->route_index, status, dur);
    struct rematd_request_log f = {
        .request_id = r->request_id,
        .method = q->method,
        .path = q->path,
        .route = r->route ? r->route->name : "unmatched",
        .status = status,
        .dur_ms = dur * 1000.0,
        .problem = q->problem_type,
        .terminated = toe != MHD_REQUEST_TERMINATED_COMPLETED_OK ? (int)toe : -1,
        .id = r->id,
    };
    rematd_log_request(status >= 500 || status == 0 ? "error" : "info", &f);
    /* A kept-alive connection: its next request has the same deadline. */
    rematd__conn_deadline_next(r->srv, rematd__conn_of(c));
    atomic_fetch_sub(&r->srv->in_flight, 1);
    rematd__req_free(q);
}
