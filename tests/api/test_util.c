/* Unit tests of rematd's pure helpers: SHA-256 against FIPS 180-4 vectors
 * (the idempotency fingerprint), id generation and checking (the 404 rule
 * for ids), JSON depth (the json-too-deep limit), RFC 3339 timestamps and
 * the SVG chart's shape. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "rematd.h"
#include "rematx/sha256.h"
#include "rematx/svg.h"

/* The streaming hash, fed in pieces of every size from 1 to 130 bytes
 * (inside a block, across one, several at once), gives the one-shot
 * digest; and the million-'a' vector fed 1000 bytes at a time. */
static void test_sha256_streaming(void **state)
{
    unsigned char data[1000];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (unsigned char)(i * 7 + 3);
    char want[65], got[65];
    rematx_sha256_hex(data, sizeof data, want);
    for (size_t piece = 1; piece <= 130; piece++) {
        struct rematx_sha256 c;
        rematx_sha256_init(&c);
        for (size_t off = 0; off < sizeof data; off += piece)
            rematx_sha256_update(&c, data + off,
                                 sizeof data - off < piece ? sizeof data - off : piece);
        rematx_sha256_final_hex(&c, got);
        assert_string_equal(got, want);
    }
    struct rematx_sha256 c;
    rematx_sha256_init(&c);
    char a[1000];
    memset(a, 'a', sizeof a);
    for (int i = 0; i < 1000; i++)
        rematx_sha256_update(&c, a, sizeof a);
    rematx_sha256_final_hex(&c, got);
    assert_string_equal(got, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    assert_true(rematx_is_sha256_hex(got));
    got[3] = 'A';
    assert_false(rematx_is_sha256_hex(got));
    assert_false(rematx_is_sha256_hex("abc"));
}

static void test_sha256_vectors(void **state)
{
    char out[65];
    rematd_sha256_hex("", 0, out);
    assert_string_equal(out, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    rematd_sha256_hex("abc", 3, out);
    assert_string_equal(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    rematd_sha256_hex(two, strlen(two), out);
    assert_string_equal(out, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* A million 'a's crosses many blocks. */
    char *m = malloc(1000000);
    assert_non_null(m);
    memset(m, 'a', 1000000);
    rematd_sha256_hex(m, 1000000, out);
    assert_string_equal(out, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(m);
    /* Lengths around the padding boundary (55, 56, 64 bytes) differ. */
    char a[65], b[65];
    rematd_sha256_hex("0123456789012345678901234567890123456789012345678901234", 55, a);
    rematd_sha256_hex("01234567890123456789012345678901234567890123456789012345", 56, b);
    assert_string_not_equal(a, b);
}

static int cmp_id(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void test_ids(void **state)
{
    char a[REMATD_ID_LEN + 1], b[REMATD_ID_LEN + 1];
    rematd_new_id(a);
    rematd_new_id(b);
    assert_int_equal(strlen(a), 32);
    assert_true(rematd_is_id(a));
    assert_string_not_equal(a, b);
    rematd_new_ordered_id(a);
    assert_true(rematd_is_id(a));
    assert_false(rematd_is_id(""));
    assert_false(rematd_is_id("0123456789abcdef0123456789abcde"));   /* 31 */
    assert_false(rematd_is_id("0123456789abcdef0123456789abcdef0")); /* 33 */
    assert_false(rematd_is_id("0123456789ABCDEF0123456789abcdef"));  /* upper case */
    assert_false(rematd_is_id("../../etc/passwd0123456789abcdef0"));
    assert_true(rematd_is_id("0123456789abcdef0123456789abcdef"));
    /* Across several refills of the per-thread random pool (256 ids
     * each): every id well formed and distinct, every hex digit used at
     * every position about equally often. */
    enum { IDS = 2000 };
    char(*ids)[REMATD_ID_LEN + 1] = malloc(IDS * sizeof *ids);
    assert_non_null(ids);
    unsigned counts[REMATD_ID_LEN][16];
    memset(counts, 0, sizeof counts);
    for (int i = 0; i < IDS; i++) {
        rematd_new_id(ids[i]);
        assert_true(rematd_is_id(ids[i]));
        for (int k = 0; k < REMATD_ID_LEN; k++) {
            char c = ids[i][k];
            counts[k][c <= '9' ? c - '0' : c - 'a' + 10]++;
        }
    }
    qsort(ids, IDS, sizeof *ids, cmp_id);
    for (int i = 1; i < IDS; i++)
        assert_string_not_equal(ids[i - 1], ids[i]);
    /* 2000 / 16 = 125 expected; 60..200 is more than 6 sigma either way. */
    for (int k = 0; k < REMATD_ID_LEN; k++)
        for (int d = 0; d < 16; d++)
            assert_in_range(counts[k][d], 60, 200);
    free(ids);
}

static void test_json_depth(void **state)
{
    json_t *v = json_loads("{\"a\":[1,{\"b\":[[]]}],\"c\":2}", 0, NULL);
    assert_non_null(v);
    assert_int_equal(rematd_json_depth(v, 100), 5);
    /* The walk stops past the limit: it reports limit + 1 at most. */
    assert_int_equal(rematd_json_depth(v, 2), 3);
    json_decref(v);
    json_t *s = json_integer(3);
    assert_int_equal(rematd_json_depth(s, 10), 0);
    json_decref(s);
}

static void test_rfc3339(void **state)
{
    char out[32];
    rematd_rfc3339(86400.5, out);
    assert_string_equal(out, "1970-01-02T00:00:00.500Z");
    /* The same second again (the per-thread cache), then others, each
     * against gmtime_r and strftime. */
    rematd_rfc3339(86400.0078125, out); /* milliseconds truncate */
    assert_string_equal(out, "1970-01-02T00:00:00.007Z");
    rematd_rfc3339(86401.9990234375, out);
    assert_string_equal(out, "1970-01-02T00:00:01.999Z");
    rematd_rfc3339(1795392000.25, out);
    assert_string_equal(out, "2026-11-23T00:00:00.250Z");
    rematd_rfc3339(86400.0, out);
    assert_string_equal(out, "1970-01-02T00:00:00.000Z");
    for (double t = 1700000000.125; t < 1700000000.0 + 86400.0 * 400; t += 86400.0 * 7 + 3607.0) {
        time_t sec = (time_t)t;
        struct tm tm;
        gmtime_r(&sec, &tm);
        char want[32];
        strftime(want, sizeof want, "%Y-%m-%dT%H:%M:%S.125Z", &tm);
        rematd_rfc3339(t, out);
        assert_string_equal(out, want);
    }
}

static void test_svg(void **state)
{
    const int64_t a[] = {0, 1 << 20, 3 << 20, 1 << 20}, b[] = {0, 2 << 20, 4 << 20};
    struct rematx_svg_series s[2] = {{"min-peak", "#d62728", a, 4, 3 << 20, NULL, 0},
                                     {"store-all", "#1f77b4", b, 3, 5 << 20, NULL, 0}};
    size_t len = 0;
    char *svg = rematx_svg_timeline("t", NULL, s, 2, &len);
    assert_non_null(svg);
    assert_int_equal(strlen(svg), len);
    assert_non_null(strstr(svg, "<svg"));
    assert_non_null(strstr(svg, "</svg>"));
    assert_non_null(strstr(svg, "(MiB)"));
    assert_non_null(strstr(svg, "store-all: peak 5.00 MiB"));
    int lines = 0;
    for (const char *p = svg; (p = strstr(p, "<polyline")); p++)
        lines++;
    assert_int_equal(lines, 2);
    free(svg);
}

/* rematd_log writes its line directly; it must be the line jansson would
 * print for {ts, level, msg, ...fields} (fields of the same name taking
 * the place of the first three), escapes, reals and nested values included. */
static void log_one(const char *level, const char *msg, json_t *fields, char *out, size_t cap)
{
    FILE *f = tmpfile();
    assert_non_null(f);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_true(dup2(fileno(f), STDERR_FILENO) >= 0);
    rematd_log(level, msg, fields);
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    rewind(f);
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    fclose(f);
}

static void test_log_line(void **state)
{
    (void)state;
    static const double reals[] = {0.0, 1.0, 12.345678, 1e-7, 2.5e21, -3.0, 123456789.0};
    for (size_t k = 0; k < sizeof reals / sizeof reals[0]; k++) {
        json_t *fields = json_pack(
            "{s:s, s:s, s:i, s:f, s:b, s:n, s:I, s:[i, s], s:{s:f}}", "request_id", "abc", "path",
            "/v1/\"q\"\\x\n\t\001\x7f\xc3\xa9/", "status", 201, "dur_ms", reals[k], "ok", 1, "none",
            "big", (json_int_t)-9007199254740993LL, "list", 1, "two", "obj", "r", reals[k]);
        assert_non_null(fields);
        if (k == 1)
            json_object_set_new(fields, "msg", json_string("replaced"));
        char got[4096];
        json_incref(fields);
        log_one("info", "request", fields, got, sizeof got);
        /* The line jansson prints, with the timestamp rematd_log wrote. */
        json_t *line = json_loads(got, 0, NULL);
        assert_non_null(line);
        json_t *o = json_pack("{s:O, s:s, s:s}", "ts", json_object_get(line, "ts"), "level", "info",
                              "msg", "request");
        json_object_update(o, fields);
        char *want = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6));
        assert_non_null(want);
        size_t wl = strlen(want);
        assert_int_equal(strlen(got), wl + 1);
        assert_memory_equal(got, want, wl);
        assert_int_equal(got[wl], '\n');
        free(want);
        json_decref(o);
        json_decref(line);
        json_decref(fields);
    }
    /* A line too long for the direct writer still comes out whole. */
    char big[5000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    char got[8192];
    log_one("warn", "long", json_pack("{s:s}", "detail", big), got, sizeof got);
    assert_int_equal(
        strlen(got),
        strlen(big) +
            strlen("{\"ts\":\"\",\"level\":\"warn\",\"msg\":\"long\",\"detail\":\"\"}\n") + 24);
}

/* What follows the timestamp: the two lines were written at different
 * instants, so only their ts values may differ. */
static const char *after_ts(const char *line)
{
    const char *p = strstr(line, "\",\"level\":");
    assert_non_null(p);
    return p;
}

static void capture_request_line(const struct rematd_request_log *f, char *out, size_t cap)
{
    FILE *tf = tmpfile();
    assert_non_null(tf);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_true(dup2(fileno(tf), STDERR_FILENO) >= 0);
    rematd_log_request("info", f);
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    rewind(tf);
    size_t n = fread(out, 1, cap - 1, tf);
    out[n] = '\0';
    fclose(tf);
}

static void test_request_line(void **state)
{
    (void)state;
    static const double durs[] = {0.0, 0.0123, 1.5, 12.345678, 1e-7, 2.5e21, 123456789.0};
    char longpath[1900];
    memset(longpath, '\\', sizeof longpath - 1); /* escapes double it: past the direct buffer */
    longpath[sizeof longpath - 1] = '\0';
    const char *paths[] = {"/healthz", "/v1/\"q\"\\x\n\t\001\x7f\xc3\xa9/", longpath};
    for (size_t k = 0; k < sizeof durs / sizeof durs[0]; k++)
        for (size_t pi = 0; pi < 3; pi++)
            for (int variant = 0; variant < 4; variant++) {
                struct rematd_request_log f = {
                    .request_id = "0123456789abcdef",
                    .method = "POST",
                    .path = paths[pi],
                    .route = variant == 3 ? "unmatched" : "plans_create",
                    .status = variant == 1 ? 400 : 201,
                    .dur_ms = durs[k],
                    .problem = variant == 1 ? "validation" : NULL,
                    .terminated = variant == 2 ? 2 : -1,
                    .id = variant == 0 ? "0123456789abcdef0123456789abcdef" : "",
                };
                char got[8192], want[8192];
                capture_request_line(&f, got, sizeof got);
                json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:i, s:f}", "request_id", f.request_id,
                                      "method", f.method, "path", f.path, "route", f.route,
                                      "status", f.status, "dur_ms", f.dur_ms);
                assert_non_null(o);
                if (f.problem)
                    json_object_set_new(o, "problem", json_string(f.problem));
                if (f.terminated >= 0)
                    json_object_set_new(o, "terminated", json_integer(f.terminated));
                if (f.id[0])
                    json_object_set_new(o, "id", json_string(f.id));
                log_one("info", "request", o, want, sizeof want);
                assert_string_equal(after_ts(got), after_ts(want));
                assert_true(strncmp(got, "{\"ts\":\"", 7) == 0);
            }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_vectors),
        cmocka_unit_test(test_sha256_streaming),
        cmocka_unit_test(test_ids),
        cmocka_unit_test(test_json_depth),
        cmocka_unit_test(test_rfc3339),
        cmocka_unit_test(test_svg),
        cmocka_unit_test(test_log_line),
        cmocka_unit_test(test_request_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
