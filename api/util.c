/* util.c - ids, clocks, SHA-256, JSON depth and the JSON log line. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "rematd.h"

void rematd_new_id(char out[REMATD_ID_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char raw[REMATD_ID_LEN / 2];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            /* getrandom cannot fail on Linux >= 3.17 with a valid buffer;
             * fall back to the clock rather than leave the id unset. */
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            for (size_t i = got; i < sizeof raw; i++)
                raw[i] = (unsigned char)(ts.tv_nsec >> (i % 8));
            break;
        }
        got += (size_t)n;
    }
    for (size_t i = 0; i < sizeof raw; i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 15];
    }
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

void rematd_rfc3339(double t, char out[32])
{
    time_t s = (time_t)t;
    struct tm tm;
    gmtime_r(&s, &tm);
    int ms = (int)((t - (double)s) * 1000.0);
    if (ms < 0)
        ms = 0;
    if (ms > 999)
        ms = 999;
    /* strftime keeps the compiler's range analysis of snprintf quiet. */
    char base[24];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, 32, "%.19s.%03dZ", base, ms % 1000);
}

/* SHA-256 (FIPS 180-4), small and portable: it fingerprints request bodies
 * for Idempotency-Key and the stored-request table, nothing secret. */
static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(uint32_t h[8], const unsigned char *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 =
            hh + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += hh;
}

void rematd_sha256_hex(const void *data, size_t len, char out[65])
{
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    const unsigned char *p = data;
    size_t n = len;
    while (n >= 64) {
        sha256_block(h, p);
        p += 64;
        n -= 64;
    }
    unsigned char tail[128] = {0};
    memcpy(tail, p, n);
    tail[n] = 0x80;
    size_t tl = n + 1 + 8 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t)len * 8;
    for (int i = 0; i < 8; i++)
        tail[tl - 1 - i] = (unsigned char)(bits >> (8 * i));
    sha256_block(h, tail);
    if (tl == 128)
        sha256_block(h, tail + 64);
    for (int i = 0; i < 8; i++)
        snprintf(out + 8 * i, 9, "%08x", h[i]);
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
        json_object_foreach((json_t *)v, k, c)
        {
            size_t d = rematd_json_depth(c, limit - 1);
            if (d > best)
                best = d;
            if (best >= limit)
                break;
        }
    } else {
        size_t i;
        json_t *c;
        json_array_foreach(v, i, c)
        {
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

/* A JSON string as jansson's json_dumps escapes it by default. */
static void lput_str(struct line *l, const char *s, size_t n)
{
    lput(l, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
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

/* A value as json_dumps(..., JSON_COMPACT | JSON_REAL_PRECISION(6)) writes it. */
static void lput_value(struct line *l, json_t *v)
{
    char tmp[64];
    int n;
    switch (json_typeof(v)) {
    case JSON_STRING:
        lput_str(l, json_string_value(v), json_string_length(v));
        return;
    case JSON_INTEGER:
        n = snprintf(tmp, sizeof tmp, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        lput(l, tmp, (size_t)n);
        return;
    case JSON_REAL: {
        /* jansson's jsonp_dtostr at precision 6: "%.6g", ".0" when neither
         * '.' nor 'e' is there, no '+' or leading zeros in the exponent. */
        n = snprintf(tmp, sizeof tmp - 3, "%.6g", json_real_value(v));
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
        return;
    }
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
        json_object_foreach(fields, key, v)
        {
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
