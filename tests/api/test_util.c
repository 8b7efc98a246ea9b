/* Unit tests of rematd's pure helpers: SHA-256 against FIPS 180-4 vectors
 * (the idempotency fingerprint), id generation and checking (the 404 rule
 * for ids), JSON depth (the json-too-deep limit), RFC 3339 timestamps and
 * the SVG chart's shape. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rematd.h"

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
}

static void test_svg(void **state)
{
    const int64_t a[] = {0, 1 << 20, 3 << 20, 1 << 20}, b[] = {0, 2 << 20, 4 << 20};
    struct rematd_series s[2] = {{"min-peak", "#d62728", a, 4, 3 << 20},
                                 {"store-all", "#1f77b4", b, 3, 5 << 20}};
    size_t len = 0;
    char *svg = rematd_svg_timeline("t", s, 2, &len);
    assert_non_null(svg);
    assert_int_equal(strlen(svg), len);
    assert_non_null(strstr(svg, "<svg"));
    assert_non_null(strstr(svg, "</svg>"));
    assert_non_null(strstr(svg, "(MiB)"));
    assert_non_null(strstr(svg, "store-all: peak 5 MiB"));
    int lines = 0;
    for (const char *p = svg; (p = strstr(p, "<polyline")); p++)
        lines++;
    assert_int_equal(lines, 2);
    free(svg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_vectors),
        cmocka_unit_test(test_ids),
        cmocka_unit_test(test_json_depth),
        cmocka_unit_test(test_rfc3339),
        cmocka_unit_test(test_svg),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
