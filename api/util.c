/* util.c - ids, clocks, SHA-256, JSON depth and the JSON log line. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "rematd.h"
#include "rematx/sha256.h"
#include "rematx/utf8.h"

/* Fills raw from the kernel's CSPRNG. */
static void random_bytes(unsigned char *raw, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = getrandom(raw + got, len - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            /* getrandom cannot fail on Linux >= 3.17 with a valid buffer;
             * fall back to the clock rather than leave the id unset. */
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            for (size_t i = got; i < len; i++)
                raw[i] = (unsigned char)(ts.tv_nsec >> (i % 8));
            return;
        }
        got += (size_t)n;
    }
}

/* Ids take their bits from a per-thread pool of kernel randomness, filled
 * 4 KiB at a time: a getrandom call per id (two per plan with the request
 * id) showed in POST /v1/plans.  Each byte is used once. */
#define RANDOM_POOL 4096
static _Thread_local unsigned char pool[RANDOM_POOL];
static _Thread_local size_t pool_used = RANDOM_POOL;

void rematd_new_id(char out[REMATD_ID_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    enum { RAW = REMATD_ID_LEN / 2 };
    if (pool_used + RAW > RANDOM_POOL) {
        random_bytes(pool, RANDOM_POOL);
        pool_used = 0;
    }
    const unsigned char *raw = pool + pool_used;
    for (size_t i = 0; i < RAW; i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 15];
    }
    /* Used bytes are wiped so that nothing later can read them back. */
    memset(pool + pool_used, 0, RAW);
    pool_used += RAW;
    out[REMATD_ID_LEN] = '\0';
}

void rematd_new_ordered_id(char out[REMATD_ID_LEN + 1])
{
    /* The first 48 bits are milliseconds since the epoch (as in UUIDv7),
     * the other 80 random: ids made in one batch land next to each other in
     * the primary-key index, so a group commit dirties a few index pages
     * instead of one random page per plan. */
    rematd_new_id(out);
    unsigned long long ms = (unsigned long long)(rematd_now() * 1000.0);
    char head[16];
    snprintf(head, sizeof head, "%012llx", ms & 0xffffffffffffULL);
    memcpy(out, head, 12);
}

int rematd_is_id(const char *s)
{
    size_t i;
    for (i = 0; s[i]; i++) {
        if (i >= REMATD_ID_LEN)
            return 0;
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    }
    return i == REMATD_ID_LEN;
}

double rematd_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

double rematd_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The text of the last second formatted on this thread: a plan request
 * formats two timestamps (created_at, the log line), and gmtime_r and
 * strftime showed in its profile; the second changes once a second. */
static _Thread_local time_t ts_second = (time_t)-1;
static _Thread_local char ts_text[24];

void rematd_rfc3339(double t, char out[32])
{
    time_t s = (time_t)t;
    int ms = (int)((t - (double)s) * 1000.0);
    if (ms < 0)
        ms = 0;
    if (ms > 999)
        ms = 999;
    if (s != ts_second) {
        struct tm tm;
        gmtime_r(&s, &tm);
        /* strftime keeps the compiler's range analysis of snprintf quiet. */
        if (strftime(ts_text, sizeof ts_text, "%Y-%m-%dT%H:%M:%S", &tm) != 19) {
            snprintf(out, 32, "1970-01-01T00:00:00.000Z");
            return;
        }
        ts_second = s;
    }
    memcpy(out, ts_text, 19);
    out[19] = '.';
    out[20] = (char)('0' + ms / 100);
    out[21] = (char)('0' + ms / 10 % 10);
    out[22] = (char)('0' + ms % 10);
    out[23] = 'Z';
    out[24] = '\0';
}

/* The idempotency fingerprint of a request body: rematx's SHA-256. */
void rematd_sha256_hex(const void *data, size_t len, char out[65])
{
    rematx_sha256_hex(data, len, out);
}

size_t rematd_json_depth(const json_t *v, size_t limit)
{
    /* Recursion is bounded by jansson's own parser depth (2048), and the
     * walk stops descending once the limit is passed. */
    if (!json_is_object(v) && !json_is_array(v))
        return 0;
    if (limit == 0)
        return 1;
    size_t best = 0;
    if (json_is_object(v)) {
        const char *k;
        json_t *c;
        json_object_foreach ((json_t *)v, k, c) {
            size_t d = rematd_json_depth(c, limit - 1);
            if (d > best)
                best = d;
            if (best >= limit)
                break;
        }
    } else {
        size_t i;
        json_t *c;
        json_array_foreach (v, i, c) {
            size_t d = rematd_json_depth(c, limit - 1);
            if (d > best)
                best = d;
            if (best >= limit)
                break;
        }
    }
    return best + 1;
}

/* The log line through a jansson tree: for lines too long for the direct
 * writer below. */
static void log_tree(const char *ts, const char *level, const char *msg, json_t *fields)
{
    json_t *o = json_object();
    if (!o)
        return;
    json_object_set_new(o, "ts", json_string(ts));
    json_object_set_new(o, "level", json_string(level));
    json_object_set_new(o, "msg", json_string(msg));
    if (fields)
        json_object_update(o, fields);
    char *line = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6));
    json_decref(o);
    if (!line)
        return;
    size_t n = strlen(line);
    line[n] = '\n'; /* overwrite the NUL: one write(2) per line keeps lines whole */
    ssize_t w = write(STDERR_FILENO, line, n + 1);
    (void)w;
    free(line);
}

/* A line being written into a fixed buffer; `over` once it did not fit. */
struct line {
    char *s;
    size_t len, cap;
    int over;
};

static void lput(struct line *l, const char *s, size_t n)
{
    if (l->over || n > l->cap - l->len) {
        l->over = 1;
        return;
    }
    memcpy(l->s + l->len, s, n);
    l->len += n;
}

/* A JSON string of s; a byte that is not part of valid UTF-8 is written as
 * the text \xNN, so that every log line is valid UTF-8 whatever a client
 * sent (a request path, a method). */
static void lput_str(struct line *l, const char *s, size_t n)
{
    lput(l, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80) {
            size_t k = rematx_utf8_seq((const unsigned char *)s + i, n - i);
            if (k > 0) {
                i += k - 1;
                continue;
            }
            lput(l, s + run, i - run);
            run = i + 1;
            char esc[8];
            snprintf(esc, sizeof esc, "\\x%02X", c);
            lput(l, esc, 5);
            continue;
        }
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        lput(l, s + run, i - run);
        run = i + 1;
        char esc[8];
        switch (c) {
        case '"':
            lput(l, "\\\"", 2);
            break;
        case '\\':
            lput(l, "\\\\", 2);
            break;
        case '\b':
            lput(l, "\\b", 2);
            break;
        case '\f':
            lput(l, "\\f", 2);
            break;
        case '\n':
            lput(l, "\\n", 2);
            break;
        case '\r':
            lput(l, "\\r", 2);
            break;
        case '\t':
            lput(l, "\\t", 2);
            break;
        default:
            snprintf(esc, sizeof esc, "\\u%04X", c);
            lput(l, esc, 6);
        }
    }
    lput(l, s + run, n - run);
    lput(l, "\"", 1);
}

/* jansson's jsonp_dtostr at precision 6: "%.6g", ".0" when neither '.'
 * nor 'e' is there, no '+' or leading zeros in the exponent. */
static void lput_real(struct line *l, double v)
{
    char tmp[64];
    int n = snprintf(tmp, sizeof tmp - 3, "%.6g", v);
    if (n < 0 || (size_t)n >= sizeof tmp - 3) {
        l->over = 1;
        return;
    }
    size_t len = (size_t)n;
    if (!strchr(tmp, '.') && !strchr(tmp, 'e')) {
        tmp[len++] = '.';
        tmp[len++] = '0';
        tmp[len] = '\0';
    }
    char *start = strchr(tmp, 'e');
    if (start) {
        start++;
        char *end = start + 1;
        if (*start == '-')
            start++;
        while (*end == '0')
            end++;
        if (end != start) {
            memmove(start, end, len - (size_t)(end - tmp) + 1);
            len -= (size_t)(end - start);
        }
    }
    lput(l, tmp, len);
}

static void lput_int(struct line *l, long long v)
{
    char tmp[24];
    char *q = tmp + sizeof tmp;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        *--q = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--q = '-';
    lput(l, q, (size_t)(tmp + sizeof tmp - q));
}

/* A value as json_dumps(..., JSON_COMPACT | JSON_REAL_PRECISION(6)) writes it. */
static void lput_value(struct line *l, json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_STRING:
        lput_str(l, json_string_value(v), json_string_length(v));
        return;
    case JSON_INTEGER:
        lput_int(l, (long long)json_integer_value(v));
        return;
    case JSON_REAL:
        lput_real(l, json_real_value(v));
        return;
    case JSON_TRUE:
        lput(l, "true", 4);
        return;
    case JSON_FALSE:
        lput(l, "false", 5);
        return;
    case JSON_NULL:
        lput(l, "null", 4);
        return;
    default: {
        /* Objects and arrays: rare in log lines, printed by jansson. */
        char *t = json_dumps(v, JSON_COMPACT | JSON_REAL_PRECISION(6) | JSON_ENCODE_ANY);
        if (!t) {
            l->over = 1;
            return;
        }
        lput(l, t, strlen(t));
        free(t);
    }
    }
}

void rematd_log(const char *level, const char *msg, json_t *fields)
{
    char ts[32];
    rematd_rfc3339(rematd_now(), ts);
    /* Written directly: building a second tree and printing it for every
     * request was a measurable part of POST /v1/plans.  The bytes are
     * those of log_tree: ts, level and msg first (a field of the same name
     * takes its place), then the fields in their order. */
    char buf[2048];
    struct line l = {buf, 0, sizeof buf - 1, 0};
    static const char *const head[] = {"ts", "level", "msg"};
    const char *vals[] = {ts, level, msg};
    for (int k = 0; k < 3; k++) {
        lput(&l, k == 0 ? "{" : ",", 1);
        lput_str(&l, head[k], strlen(head[k]));
        lput(&l, ":", 1);
        json_t *f = fields ? json_object_get(fields, head[k]) : NULL;
        if (f)
            lput_value(&l, f);
        else
            lput_str(&l, vals[k], strlen(vals[k]));
    }
    const char *key;
    json_t *v;
    if (fields) {
        json_object_foreach (fields, key, v) {
            if (strcmp(key, "ts") == 0 || strcmp(key, "level") == 0 || strcmp(key, "msg") == 0)
                continue;
            lput(&l, ",", 1);
            lput_str(&l, key, strlen(key));
            lput(&l, ":", 1);
            lput_value(&l, v);
        }
    }
    lput(&l, "}", 1);
    if (l.over) {
        log_tree(ts, level, msg, fields);
    } else {
        buf[l.len] = '\n'; /* one write(2) per line keeps lines whole */
        ssize_t w = write(STDERR_FILENO, buf, l.len + 1);
        (void)w;
    }
    json_decref(fields);
}

/* The field: ,"key": */
static void lput_key(struct line *l, const char *key)
{
    lput(l, ",", 1);
    lput_str(l, key, strlen(key));
    lput(l, ":", 1);
}

void rematd_log_request(const char *level, const struct rematd_request_log *f)
{
    char ts[32];
    rematd_rfc3339(rematd_now(), ts);
    /* The bytes of rematd_log(level, "request", {request_id, method, path,
     * route, status, dur_ms[, problem][, terminated][, id]}), written
     * without building the object: one line per request, healthz's too. */
    char buf[2048];
    struct line l = {buf, 0, sizeof buf - 1, 0};
    lput(&l, "{\"ts\":", 6);
    lput_str(&l, ts, strlen(ts));
    lput_key(&l, "level");
    lput_str(&l, level, strlen(level));
    lput(&l, ",\"msg\":\"request\"", 16);
    lput_key(&l, "request_id");
    lput_str(&l, f->request_id, strlen(f->request_id));
    lput_key(&l, "method");
    lput_str(&l, f->method, strlen(f->method));
    lput_key(&l, "path");
    lput_str(&l, f->path, strlen(f->path));
    lput_key(&l, "route");
    lput_str(&l, f->route, strlen(f->route));
    lput_key(&l, "status");
    lput_int(&l, f->status);
    lput_key(&l, "dur_ms");
    lput_real(&l, f->dur_ms);
    if (f->problem) {
        lput_key(&l, "problem");
        lput_str(&l, f->problem, strlen(f->problem));
    }
    if (f->terminated >= 0) {
        lput_key(&l, "terminated");
        lput_int(&l, f->terminated);
    }
    if (f->id && f->id[0]) {
        lput_key(&l, "id");
        lput_str(&l, f->id, strlen(f->id));
    }
    lput(&l, "}", 1);
    if (!l.over) {
        buf[l.len] = '\n'; /* one write(2) per line keeps lines whole */
        ssize_t w = write(STDERR_FILENO, buf, l.len + 1);
        (void)w;
        return;
    }
    /* A long path: through the general writer, which falls back to jansson. */
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:i, s:f}", "request_id", f->request_id, "method",
                          f->method, "path", f->path, "route", f->route, "status", f->status,
                          "dur_ms", f->dur_ms);
    if (o && f->problem)
        json_object_set_new(o, "problem", json_string(f->problem));
    if (o && f->terminated >= 0)
        json_object_set_new(o, "terminated", json_integer(f->terminated));
    if (o && f->id && f->id[0])
        json_object_set_new(o, "id", json_string(f->id));
    rematd_log(level, "request", o);
}
