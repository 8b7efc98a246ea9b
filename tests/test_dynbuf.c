/* test_dynbuf - the bounded buffer of src/rematx/dynbuf.h: growth, the
 * maximum to the byte, sticky errors, take/reset, and out-of-memory at
 * every allocation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "failalloc.h"
#include "rematx/rematx.h"

static void grows_and_stays_terminated(void **state)
{
    struct rematx_dynbuf b;
    rematx_dyn_init(&b, 1 << 20);
    assert_string_equal(rematx_dyn_ptr(&b), "");
    assert_int_equal(rematx_dyn_len(&b), 0);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(rematx_dyn_addf(&b, "%d,", i % 10), 0);
    assert_int_equal(rematx_dyn_len(&b), 2000);
    assert_int_equal(strlen(rematx_dyn_ptr(&b)), 2000);
    assert_memory_equal(rematx_dyn_ptr(&b), "0,1,2,", 6);
    assert_memory_equal(rematx_dyn_ptr(&b) + 1994, "7,8,9,", 6);
    /* A printf longer than what is left after a partial write. */
    char big[700];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_int_equal(rematx_dyn_addf(&b, "<%s>", big), 0);
    assert_int_equal(rematx_dyn_len(&b), 2000 + 701);
    assert_int_equal(rematx_dyn_ptr(&b)[2000], '<');
    assert_int_equal(rematx_dyn_ptr(&b)[2700], '>');
    assert_int_equal(rematx_dyn_ptr(&b)[2701], '\0');
    rematx_dyn_free(&b);
    assert_string_equal(rematx_dyn_ptr(&b), "");
}

static void maximum_to_the_byte(void **state)
{
    struct rematx_dynbuf b;
    rematx_dyn_init(&b, 10);
    assert_int_equal(rematx_dyn_add(&b, "0123456789"), 0); /* exactly max */
    assert_int_equal(rematx_dyn_len(&b), 10);
    assert_string_equal(rematx_dyn_ptr(&b), "0123456789");
    assert_int_equal(rematx_dyn_addn(&b, "", 0), 0); /* nothing more is fine */
    assert_int_equal(rematx_dyn_add(&b, "x"), REMAT_ELIMIT);
    /* Sticky: the text is gone and every later add fails the same way. */
    assert_int_equal(rematx_dyn_error(&b), REMAT_ELIMIT);
    assert_null(rematx_dyn_ptr(&b));
    assert_int_equal(rematx_dyn_len(&b), 0);
    assert_int_equal(rematx_dyn_add(&b, ""), REMAT_ELIMIT);
    assert_int_equal(rematx_dyn_addf(&b, "%d", 1), REMAT_ELIMIT);
    assert_null(rematx_dyn_room(&b, 0));
    assert_null(rematx_dyn_take(&b, NULL));
    /* reset clears the error; the maximum stays. */
    rematx_dyn_reset(&b);
    assert_int_equal(rematx_dyn_addf(&b, "%s", "abcdefghij"), 0);
    assert_int_equal(rematx_dyn_addf(&b, "%s", "k"), REMAT_ELIMIT);
    rematx_dyn_free(&b);
    /* A printf over the maximum fails without writing past it. */
    rematx_dyn_init(&b, 5);
    assert_int_equal(rematx_dyn_addf(&b, "%s", "abc"), 0);
    assert_int_equal(rematx_dyn_addf(&b, "%s", "def"), REMAT_ELIMIT);
    rematx_dyn_free(&b);
    /* A huge maximum is clamped so that sizes cannot wrap. */
    rematx_dyn_init(&b, SIZE_MAX);
    assert_int_equal(rematx_dyn_addn(&b, "a", 1), 0);
    assert_int_equal(rematx_dyn_grow(&b, SIZE_MAX - 1), REMAT_ELIMIT);
    rematx_dyn_free(&b);
}

static void room_take_reset(void **state)
{
    struct rematx_dynbuf b;
    rematx_dyn_init(&b, 1000);
    char *q = rematx_dyn_room(&b, 5);
    assert_non_null(q);
    memcpy(q, "hello", 5);
    rematx_dyn_setlen(&b, 5);
    assert_string_equal(rematx_dyn_ptr(&b), "hello");
    size_t len = 0;
    char *t = rematx_dyn_take(&b, &len);
    assert_string_equal(t, "hello");
    assert_int_equal(len, 5);
    free(t);
    /* After take the buffer is empty and usable. */
    assert_string_equal(rematx_dyn_ptr(&b), "");
    t = rematx_dyn_take(&b, &len); /* an empty text is a real string */
    assert_non_null(t);
    assert_string_equal(t, "");
    assert_int_equal(len, 0);
    free(t);
    assert_int_equal(rematx_dyn_add(&b, "abc"), 0);
    rematx_dyn_reset(&b);
    assert_string_equal(rematx_dyn_ptr(&b), "");
    assert_int_equal(rematx_dyn_add(&b, "de"), 0);
    assert_string_equal(rematx_dyn_ptr(&b), "de");
    rematx_dyn_free(&b);
}

/* Writes a text of `arg` pieces through every kind of add, then takes it:
 * 0 when it ran through, 1 when an allocation failed (cleanly). */
static int build_text(const struct remat_profile *p, int64_t arg)
{
    struct rematx_dynbuf b;
    rematx_dyn_init(&b, 1 << 20);
    for (int64_t i = 0; i < arg; i++) {
        rematx_dyn_addf(&b, "%lld:", (long long)i);
        rematx_dyn_add(&b, "piece;");
        char *q = rematx_dyn_room(&b, 3);
        if (q) {
            memcpy(q, "abc", 3);
            rematx_dyn_setlen(&b, rematx_dyn_len(&b) + 3);
        }
    }
    size_t len;
    char *t = rematx_dyn_take(&b, &len);
    if (t == NULL) {
        assert_int_equal(rematx_dyn_error(&b), REMAT_ENOMEM);
        rematx_dyn_free(&b);
        return 1;
    }
    assert_int_equal(len, strlen(t));
    assert_memory_equal(t, "0:piece;abc1:piece;abc", 22);
    free(t);
    rematx_dyn_free(&b);
    return 0;
}

static void out_of_memory_everywhere(void **state)
{
    failalloc_torture(NULL, build_text, 300, "dynbuf", 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(grows_and_stays_terminated),
        cmocka_unit_test(maximum_to_the_byte),
        cmocka_unit_test(room_take_reset),
        cmocka_unit_test(out_of_memory_everywhere),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
