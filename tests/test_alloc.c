/* test_alloc.c - SQLite's and curl's torture rule for the core: make the
 * N-th allocation fail, for every N, in profile parsing, every solver of
 * this part, the simulator and the JSON printers, and check that each
 * call either succeeds or fails cleanly (NULL or REMAT_ENOMEM) and that no
 * allocation is left behind.
 *
 * The core's allocations are intercepted at link time (-Wl,--wrap), and
 * jansson's through json_set_alloc_funcs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "failalloc.h"
#include "remat_private.h"

static char *profile_text(size_t *len)
{
    const char *top = getenv("top_srcdir");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/profiles/good/full.json", top != NULL ? top : ".");
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[1 << 16];
    *len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[*len] = '\0';
    return buf;
}

/* One operation under test: returns 0 on success, nonzero on a clean
 * failure; anything else is an assertion inside. */

/* Text that takes every allocating path of the streaming reader: names,
 * metadata, escapes (the scratch buffer), unknown keys (the duplicate-key
 * table) and a number too long for the reader's stack copy. */
static const char tricky[] =
    "{\"format\":\"remat.profile\\/v1\",\"input_bytes\":1,\"model\":\"m\\u00e9\","
    "\"dtype\":\"f32\",\"x\":{\"a\":[1,{\"b\":2}],\"c\":3},\"stages\":["
    "{\"name\":\"a\\tb\",\"out_bytes\":1,\"y\":1,\"z\":2},"
    "{\"name\":\"c\",\"out_bytes\":2,\"fwd_ms\":"
    "0.1000000000000000055511151231257827021181583404541015625000000000000}]}";

static int op_parse(const struct remat_profile *unused, int64_t arg)
{
    (void)unused;
    size_t len;
    const char *text = arg == 0 ? profile_text(&len) : tricky;
    if (arg != 0)
        len = sizeof tricky - 1;
    struct remat_error err;
    struct remat_profile *p = remat_profile_loadb(text, len, &err);
    if (p == NULL) {
        /* The streaming reader tells a failed allocation from bad text. */
        assert_int_equal(err.code, REMAT_ENOMEM);
        return 1;
    }
    remat_profile_free(p);
    return 0;
}

static int op_solve(const struct remat_profile *p, int64_t alg)
{
    struct remat_options o;
    remat_options_init(&o);
    o.algorithm = (enum remat_algorithm)alg;
    o.segments = 3;
    return failalloc_solve_json(p, &o);
}

static int op_simulate(const struct remat_profile *p, int64_t model)
{
    const size_t ck[] = {2, 5};
    struct remat_sim sim;
    int rc = remat_simulate_checkpoints(p, (enum remat_model)model, ck, 2, 1, &sim, NULL);
    if (rc != REMAT_OK) {
        assert_int_equal(rc, REMAT_ENOMEM);
        return 1;
    }
    remat_sim_clear(&sim);
    return 0;
}

static int op_profile_json(const struct remat_profile *p, int64_t arg)
{
    (void)arg;
    return failalloc_json_made(remat_profile_to_json(p));
}

static void all_operations(void **state)
{
    (void)state;
    failalloc_install_jansson();
    failalloc_torture(NULL, op_parse, 0, "parse", 100000);
    failalloc_torture(NULL, op_parse, 1, "parse (escapes, unknown keys, a long number)", 100000);
    size_t len;
    const char *text = profile_text(&len);
    struct remat_profile *p = remat_profile_loadb(text, len, NULL);
    assert_non_null(p);
    static const int algs[] = {REMAT_ALG_STORE_ALL, REMAT_ALG_SQRT,        REMAT_ALG_UNIFORM,
                               REMAT_ALG_ACG,       REMAT_ALG_PAPER_CUBIC, REMAT_ALG_PAPER_LINEAR};
    for (size_t a = 0; a < sizeof algs / sizeof algs[0]; a++)
        failalloc_torture(p, op_solve, algs[a], remat_algorithm_name((enum remat_algorithm)algs[a]),
                          100000);
    for (int m = REMAT_MODEL_SUM; m <= REMAT_MODEL_TRACED; m++)
        failalloc_torture(p, op_simulate, m, remat_model_name((enum remat_model)m), 100000);
    failalloc_torture(p, op_profile_json, 0, "profile_to_json", 100000);
    remat_profile_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(all_operations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
