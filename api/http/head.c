/*
 * head.c - the front door's judgement of a request head (door.c peeks at
 * it), and the whole answer it writes to one it refuses.
 *
 * The limits are those libmicrohttpd would enforce, a little below, so
 * that a head that passes never meets libmicrohttpd's own answers: it
 * keeps the head in its 16 KiB per connection together with a record of
 * about 64 bytes for every header, query argument and cookie (and a copy
 * of the cookies).  Measured with 0.9.75: one header of 16,112 bytes of
 * head passed, one byte more did not; 225 headers of 8 bytes passed, 244
 * query arguments, 217 cookies (tests/api/test_door.c and framing.sh hold
 * the door to a little less).  What libmicrohttpd takes that RFC 9112
 * allows is taken here too: runs of spaces in the request line, empty
 * lines before it, bare LF line ends, a higher minor version (HTTP/1.7,
 * served as 1.1).  A folded header line, which libmicrohttpd took, is
 * refused (RFC 9112 5.2 lets a server choose).  What a method, a path or
 * a header name may hold is request.c's to say, with its own words.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http_private.h"

/* The head's budget in libmicrohttpd's measure (the bytes, the cookies
 * again, FIELD_COST per field): 15.5 KiB of its 16 KiB per connection, the
 * rest left for its read buffer's growth and the answer's headers. */
#define HEAD_BUDGET 15872
#define FIELD_COST 72
/* The request line alone: longer is 414 (no route reads a query, and no
 * path of rematd's is longer than 256 bytes). */
#define REQUEST_LINE_MAX 8192

static int verdict(struct rematd__verdict *v, int status, const char *slug, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int verdict(struct rematd__verdict *v, int status, const char *slug, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->detail, sizeof v->detail, fmt, ap);
    va_end(ap);
    v->slug = slug;
    return status;
}

static int is_ctl(unsigned char c)
{
    return c < 0x20 || c == 0x7f;
}

/* The request line b[0..n) (without its line end). */
static int judge_request_line(const char *b, size_t n, struct rematd__verdict *v, size_t *args)
{
    /* METHOD SP request-target SP HTTP-version; runs of SP are taken as
     * one (RFC 9112 3: a server may parse on whitespace), as libmicrohttpd
     * does.  What a method or a path may hold is request.c's to say. */
    size_t i = 0, m_end, t_start, t_end;
    while (i < n && b[i] != ' ')
        i++;
    m_end = i;
    while (i < n && b[i] == ' ')
        i++;
    t_start = i;
    while (i < n && b[i] != ' ')
        i++;
    t_end = i;
    while (i < n && b[i] == ' ')
        i++;
    if (m_end == 0 || t_start == t_end || i == n || t_end == n)
        return verdict(v, 400, "bad-request",
                       "the request line is not METHOD SP request-target SP HTTP-version "
                       "(RFC 9112 3)");
    for (size_t k = 0; k < n; k++)
        if (is_ctl((unsigned char)b[k]) && !(b[k] == '\r' && k + 1 == n))
            return verdict(v, 400, "bad-request",
                           "the request line holds a control character (byte %zu)", k + 1);
    const char *ver = b + i;
    size_t vn = n - i;
    if (vn && ver[vn - 1] == '\r')
        vn--;
    if (vn != 8 || memcmp(ver, "HTTP/", 5) != 0 || ver[5] < '0' || ver[5] > '9' || ver[6] != '.' ||
        ver[7] < '0' || ver[7] > '9')
        return verdict(v, 400, "bad-request",
                       "the request line does not end in an HTTP version HTTP/<digit>.<digit> "
                       "after one request-target (RFC 9112 2.3)");
    if (ver[5] != '1')
        return verdict(v, 505, "http-version-not-supported",
                       "HTTP/%c.%c is not served: rematd speaks HTTP/1.1 (and 1.0)", ver[5],
                       ver[7]);
    /* libmicrohttpd keeps a record for every query argument. */
    const char *q = memchr(b + t_start, '?', t_end - t_start);
    if (q) {
        *args = 1;
        for (const char *p = q; p < b + t_end; p++)
            *args += *p == '&';
    }
    return 0;
}

static int name_is(const char *b, size_t n, const char *name)
{
    size_t k = strlen(name);
    return n == k && strncasecmp(b, name, k) == 0;
}

/* Judges the head peeked into b[0..n): -1 while it may still come whole,
 * 0 when it is one libmicrohttpd reads, else the status of its answer,
 * with v filled.  full: nothing more will be peeked (the buffer is full or
 * the client has stopped sending). */
static int judge(const char *b, size_t n, struct rematd__verdict *v)
{
    size_t i = 0, cost_fields = 0, cookie_bytes = 0, args = 0;
    /* Empty lines before the request line are skipped (RFC 9112 2.2). */
    while (i < n && (b[i] == '\n' || (b[i] == '\r' && i + 1 < n && b[i + 1] == '\n')))
        i += b[i] == '\r' ? 2 : 1;
    /* The request line's length, its line end (CR LF, or LF) aside. */
    const char *lf = memchr(b + i, '\n', n - i);
    size_t line = lf ? (size_t)(lf - (b + i)) : n - i;
    size_t text = line && b[i + line - 1] == '\r' ? line - 1 : line;
    if (text > REQUEST_LINE_MAX)
        return verdict(v, 414, "uri-too-long", "the request line is over %d bytes",
                       REQUEST_LINE_MAX);
    if (!lf)
        return -1;
    int st = judge_request_line(b + i, line, v, &args);
    if (st)
        return st;
    i += line + 1;
    for (size_t k = 1;; k++) {
        lf = memchr(b + i, '\n', n - i);
        if (!lf)
            break;
        size_t len = (size_t)(lf - (b + i));
        const char *h = b + i;
        size_t hl = len && h[len - 1] == '\r' ? len - 1 : len;
        if (hl == 0) {
            /* The end of the head. */
            size_t cost = i + len + 1 + cookie_bytes + FIELD_COST * (cost_fields + args);
            if (cost > HEAD_BUDGET)
                return verdict(v, 431, "headers-too-large",
                               "the request line and headers take %zu bytes of the %d a "
                               "connection has (each header, query argument and cookie "
                               "counting %d more)",
                               cost, HEAD_BUDGET, FIELD_COST);
            return 0;
        }
        if (h[0] == ' ' || h[0] == '\t')
            return verdict(v, 400, "bad-request",
                           "header line %zu begins with whitespace: obsolete line folding is "
                           "not accepted (RFC 9112 5.2)",
                           k);
        const char *colon = memchr(h, ':', hl);
        if (!colon)
            return verdict(v, 400, "bad-request",
                           "header line %zu has no colon: not a field-name \":\" field-value "
                           "(RFC 9112 5)",
                           k);
        for (size_t j = 0; j < hl; j++)
            if (h[j] == '\r' || h[j] == '\0')
                return verdict(v, 400, "bad-request",
                               "header line %zu holds a bare CR or a NUL byte", k);
        cost_fields++;
        if (name_is(h, (size_t)(colon - h), "Cookie")) {
            /* libmicrohttpd copies the cookies and keeps a record for each. */
            cookie_bytes += hl;
            for (const char *p = colon; p < h + hl; p++)
                cost_fields += *p == ';';
            cost_fields++;
        }
        i += len + 1;
        if (i + cookie_bytes + FIELD_COST * (cost_fields + args) > HEAD_BUDGET)
            break;
    }
    if (i + cookie_bytes + FIELD_COST * (cost_fields + args) > HEAD_BUDGET ||
        n >= REMATD_HEAD_PEEK_BYTES)
        return verdict(v, 431, "headers-too-large",
                       "the request line and headers take more than the %d bytes a connection "
                       "has (each header, query argument and cookie counting %d more)",
                       HEAD_BUDGET, FIELD_COST);
    return -1;
}

int rematd__door_judge(const char *b, size_t n, struct rematd__verdict *v)
{
    v->slug = NULL;
    v->detail[0] = '\0';
    return judge(b, n, v);
}

static const char *reason(int status)
{
    switch (status) {
    case 400:
        return "Bad Request";
    case 408:
        return "Request Timeout";
    case 414:
        return "URI Too Long";
    case 431:
        return "Request Header Fields Too Large";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Error";
    }
}

/* The whole answer, problem+json as every other error of rematd's, though
 * written before any route is known (so no instance); the detail names
 * what is wrong and holds nothing the client sent.  request_id: the id of
 * the answer (X-Request-Id and the problem's request_id), NULL for none
 * (the 408, as the reaper's).  Returns its length. */
int rematd__door_answer(char *out, size_t cap, int status, const char *slug, const char *detail,
                        const char *request_id)
{
    json_t *p = json_pack("{s:s+, s:s, s:i, s:s}", "type", "/problems/", slug, "title",
                          rematd__problem_title(slug), "status", status, "detail", detail);
    if (p && request_id)
        json_object_set_new(p, "request_id", json_string(request_id));
    char *body = p ? json_dumps(p, JSON_COMPACT) : NULL;
    json_decref(p);
    char id_header[64] = "";
    if (request_id)
        snprintf(id_header, sizeof id_header, "X-Request-Id: %s\r\n", request_id);
    int n =
        snprintf(out, cap,
                 "HTTP/1.1 %d %s\r\nConnection: close\r\nContent-Type: "
                 "application/problem+json\r\n%sContent-Length: %zu\r\n\r\n%s",
                 status, reason(status), id_header, body ? strlen(body) : 2, body ? body : "{}");
    free(body);
    return n < 0 ? 0 : n >= (int)cap ? (int)cap - 1 : n;
}
