/* JSON pointers to a member a request named (src/rematx/pointer.h): RFC
 * 6901's escapes, and cutting a key that does not fit without splitting an
 * escape or a UTF-8 sequence (cmocka). */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "rematx/pointer.h"

static void test_escapes(void **state)
{
    (void)state;
    char p[64] = "/layers/0";
    assert_int_equal(rematx_pointer_append(p, sizeof p, "a/b~c"), 0);
    assert_string_equal(p, "/layers/0/a~1b~0c");
    assert_int_equal(rematx_pointer_append(p, sizeof p, "~1"), 0);
    assert_string_equal(p, "/layers/0/a~1b~0c/~01");
    char q[8] = "";
    assert_int_equal(rematx_pointer_append(q, sizeof q, ""), 0);
    assert_string_equal(q, "/");
    assert_int_equal(rematx_pointer_append(q, sizeof q, "x"), 0);
    assert_string_equal(q, "//x");
}

static void test_cut(void **state)
{
    (void)state;
    /* Room for "/ab" and the NUL: the escape of '/' would not fit whole. */
    char p[5] = "";
    assert_int_equal(rematx_pointer_append(p, sizeof p, "ab/c"), -1);
    assert_string_equal(p, "/ab");
    /* A two-byte character that does not fit is left out whole. */
    char q[4] = "";
    assert_int_equal(rematx_pointer_append(q, sizeof q, "a\xc3\xa9"), -1);
    assert_string_equal(q, "/a");
    char r[5] = "";
    assert_int_equal(rematx_pointer_append(r, sizeof r, "a\xc3\xa9"), 0);
    assert_string_equal(r, "/a\xc3\xa9");
    /* A full buffer: nothing appended, still terminated. */
    char s[4] = "/ab";
    assert_int_equal(rematx_pointer_append(s, sizeof s, "c"), -1);
    assert_string_equal(s, "/ab");
    assert_int_equal(rematx_pointer_append(s, 0, "c"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escapes),
        cmocka_unit_test(test_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
