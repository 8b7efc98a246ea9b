/* The default stages read from a module's pickle (api/torchpickle.c): a
 * module pickled as torch.jit.save pickles one (protocol 2, objects of
 * __torch__ classes built from dicts; this one made by Python's pickle the
 * way tests/api/models.sh makes it) gives its children in order, a child
 * held twice twice, and nothing else; every truncation of it, a root that
 * is not a __torch__ object, an unknown opcode, a memo index past the
 * limit and random bytes give NULL, and the pickle with a few bytes
 * changed gives NULL or an array of names, without reading out of bounds
 * (run under ASan in the sanitizer build). */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "torchpickle.h"

static const char module_pickle[] =
    "\x80\x02\x63\x5f\x5f\x74\x6f\x72\x63\x68\x5f\x5f\x0a\x4e\x65\x74\x0a\x71"
    "\x00\x29\x81\x71\x01\x7d\x71\x02\x28\x58\x08\x00\x00\x00\x74\x72\x61\x69"
    "\x6e\x69\x6e\x67\x71\x03\x88\x58\x05\x00\x00\x00\x73\x63\x61\x6c\x65\x71"
    "\x04\x47\x3f\xe0\x00\x00\x00\x00\x00\x00\x58\x05\x00\x00\x00\x65\x6d\x62"
    "\x65\x64\x71\x05\x63\x5f\x5f\x74\x6f\x72\x63\x68\x5f\x5f\x2e\x74\x6f\x72"
    "\x63\x68\x2e\x6e\x6e\x2e\x6d\x6f\x64\x75\x6c\x65\x73\x2e\x6c\x69\x6e\x65"
    "\x61\x72\x0a\x4c\x69\x6e\x65\x61\x72\x0a\x71\x06\x29\x81\x71\x07\x7d\x71"
    "\x08\x28\x68\x03\x88\x58\x06\x00\x00\x00\x77\x65\x69\x67\x68\x74\x71\x09"
    "\x4e\x75\x62\x58\x03\x00\x00\x00\x61\x63\x74\x71\x0a\x63\x5f\x5f\x74\x6f"
    "\x72\x63\x68\x5f\x5f\x2e\x74\x6f\x72\x63\x68\x2e\x6e\x6e\x2e\x6d\x6f\x64"
    "\x75\x6c\x65\x73\x2e\x61\x63\x74\x69\x76\x61\x74\x69\x6f\x6e\x0a\x52\x65"
    "\x4c\x55\x0a\x71\x0b\x29\x81\x71\x0c\x7d\x71\x0d\x68\x03\x88\x73\x62\x58"
    "\x04\x00\x00\x00\x68\x65\x61\x64\x71\x0e\x68\x06\x29\x81\x71\x0f\x7d\x71"
    "\x10\x68\x03\x88\x73\x62\x58\x04\x00\x00\x00\x61\x63\x74\x32\x71\x11\x68"
    "\x0c\x58\x05\x00\x00\x00\x73\x74\x65\x70\x73\x71\x12\x4b\x03\x75\x62\x2e";

static json_t *scan(const void *p, size_t n)
{
    /* A copy of exactly n bytes, so that ASan sees a read past them. */
    unsigned char *c = malloc(n > 0 ? n : 1);
    assert_non_null(c);
    memcpy(c, p, n);
    json_t *names = rematd_pickle_children(c, n);
    free(c);
    return names;
}

static void test_children_in_order(void **state)
{
    (void)state;
    json_t *names = scan(module_pickle, sizeof module_pickle - 1);
    assert_non_null(names);
    char *text = json_dumps(names, JSON_COMPACT);
    assert_string_equal(text, "[\"embed\",\"act\",\"head\",\"act2\"]");
    free(text);
    json_decref(names);
}

static void test_truncations(void **state)
{
    (void)state;
    for (size_t n = 0; n + 1 < sizeof module_pickle - 1; n++)
        assert_null(scan(module_pickle, n));
}

/* The scan of a literal's bytes, its final NUL left out. */
#define SCAN(lit) scan(lit, sizeof lit - 1)

static void test_refused(void **state)
{
    (void)state;
    /* The smallest module: a __torch__ object built from an empty dict,
     * which has no children.  Each case below breaks one thing of it. */
    json_t *none = SCAN("\x80\x02"
                        "c__torch__\nNet\n)\x81}b.");
    assert_non_null(none);
    assert_int_equal(json_array_size(none), 0);
    json_decref(none);
    /* A plain dict (what tests/api/models.sh's other archives hold). */
    assert_null(SCAN("\x80\x02}q\x00."));
    /* A root of another module's class. */
    assert_null(SCAN("\x80\x02"
                     "cbuiltins\nobject\n)\x81}b."));
    /* An opcode outside the scan's: PERSID's text form. */
    assert_null(SCAN("\x80\x02"
                     "c__torch__\nNet\n)\x81}Pz\n0b."));
    /* A memo index past the limit, and a get of one never put. */
    assert_null(SCAN("\x80\x02"
                     "c__torch__\nNet\nr\xff\xff\xff\xff)\x81}b."));
    assert_null(SCAN("\x80\x02"
                     "c__torch__\nNet\n)\x81}j\x05\x00\x00\x00"
                     "0b."));
    /* Memo indices out of order: the class put at 0 is taken, the same put
     * at 5 (no 0 to 4 before it) is refused, not grown to. */
    json_t *in_order = SCAN("\x80\x02"
                            "c__torch__\nNet\nq\x00)\x81}b.");
    assert_non_null(in_order);
    json_decref(in_order);
    assert_null(SCAN("\x80\x02"
                     "c__torch__\nNet\nq\x05)\x81}b."));
    /* No STOP. */
    assert_null(SCAN("\x80\x02"
                     "c__torch__\nNet\n)\x81}b"));
    /* Over the size limit. */
    size_t big = REMATD_PICKLE_MAX_BYTES + 1;
    unsigned char *p = calloc(big, 1);
    assert_non_null(p);
    memcpy(p, module_pickle, sizeof module_pickle - 1);
    assert_null(rematd_pickle_children(p, big));
    free(p);
}

/* What the contract allows of any input: NULL, or an array of at most
 * REMATD_PICKLE_MAX_CHILDREN names (strings).  Frees names; 1 when it was
 * an array. */
static int allowed(json_t *names)
{
    if (names == NULL)
        return 0;
    assert_true(json_is_array(names));
    assert_true(json_array_size(names) <= REMATD_PICKLE_MAX_CHILDREN);
    for (size_t i = 0; i < json_array_size(names); i++)
        assert_true(json_is_string(json_array_get(names, i)));
    json_decref(names);
    return 1;
}

/* Random bytes, with or without the usual start, are no module pickle. */
static void test_random_bytes(void **state)
{
    (void)state;
    unsigned char b[512] = {0};
    srand(12345);
    for (int k = 0; k < 2000; k++) {
        size_t n = (size_t)(rand() % (int)sizeof b);
        for (size_t i = 0; i < n; i++)
            b[i] = (unsigned char)rand();
        /* The usual start, so that the scan goes past its first check. */
        if (n > 2 && k % 2 == 0)
            b[0] = 0x80, b[1] = 2, b[2] = 'c';
        assert_null(scan(b, n));
    }
}

/* The module's pickle with one to three bytes changed: every scan gives
 * what the contract allows, and both answers come up (a changed name is
 * still a module; a changed opcode is not), so that both are checked. */
static void test_changed_bytes(void **state)
{
    (void)state;
    unsigned char m[sizeof module_pickle - 1];
    int arrays = 0, nulls = 0;
    srand(54321);
    for (int k = 0; k < 3000; k++) {
        memcpy(m, module_pickle, sizeof m);
        for (int c = 1 + rand() % 3; c > 0; c--)
            m[(size_t)rand() % sizeof m] = (unsigned char)rand();
        if (allowed(scan(m, sizeof m)))
            arrays++;
        else
            nulls++;
    }
    assert_true(arrays > 0);
    assert_true(nulls > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_children_in_order), cmocka_unit_test(test_truncations),
        cmocka_unit_test(test_refused),           cmocka_unit_test(test_random_bytes),
        cmocka_unit_test(test_changed_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
