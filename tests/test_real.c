/* test_real.c - every real remat prints reads back (strtod) to the
 * identical double, in as few digits as any text that does, in jansson's
 * layout (src/rematx/real.h).  rematx_real_text is checked against a
 * reference made of printf and strtod alone (the least precision whose
 * text reads back) on edge doubles (zeros, subnormals, the largest, powers
 * of ten and their neighbours, integers past 2^53) and 400,000 random
 * ones, then the texts remat really prints: jansson documents rewritten by
 * rematx_json_dumps, and plans of random chains by remat_plan_dumps. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "randchain.h"
#include "remat_private.h"
#include "rematx/real.h"

static int same_double(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

/* The significant digits of a decimal text (sign, point, exponent and
 * leading and trailing zeros dropped) into out. */
static void significant(const char *text, char *out)
{
    size_t n = 0;
    for (const char *q = text; *q != '\0' && *q != 'e' && *q != 'E'; q++)
        if (*q >= '0' && *q <= '9' && (n > 0 || *q != '0'))
            out[n++] = *q;
    while (n > 1 && out[n - 1] == '0')
        n--;
    out[n] = '\0';
}

/* The reference: the least precision whose correctly rounded text reads
 * back, its significant digits and the exponent of the first. */
static void reference(double v, char *digits, int *x)
{
    char buf[64];
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, fabs(v));
        if (strtod(buf, NULL) == fabs(v) || p == 17)
            break;
    }
    significant(buf, digits);
    *x = atoi(strchr(buf, 'e') + 1);
}

static long checked;

static void check(double v)
{
    if (!isfinite(v)) /* past DBL_MAX: JSON has no such number */
        return;
    char text[REMATX_REAL_MAX];
    size_t n = rematx_real_text(v, text);
    assert_int_equal(n, strlen(text));
    assert_true(n < REMATX_REAL_MAX);
    char *end;
    double back = strtod(text, &end);
    if (*end != '\0' || !same_double(back, v))
        fail_msg("%a printed as %s reads back as %a", v, text, back);
    /* JSON's number syntax, and a real: a point or an exponent. */
    json_error_t jerr;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &jerr);
    if (j == NULL || !json_is_real(j))
        fail_msg("%s is not a JSON real", text);
    assert_true(same_double(json_real_value(j), v));
    json_decref(j);
    if (v != 0) {
        char want[32], got[32];
        int x;
        reference(v, want, &x);
        significant(text, got);
        if (strcmp(want, got) != 0)
            fail_msg("%a printed as %s: digits %s, the shortest are %s", v, text, got, want);
        /* jansson's layout: fixed notation exactly for exponents -4..16. */
        int fixed = strchr(text, 'e') == NULL;
        if (fixed != (x >= -4 && x < 17))
            fail_msg("%a printed as %s: exponent %d in the wrong notation", v, text, x);
    }
    checked++;
}

static void around(double v)
{
    check(v);
    check(-v);
    check(nextafter(v, 0));
    check(nextafter(v, HUGE_VAL));
}

static void texts(void **state)
{
    (void)state;
    static const struct {
        double v;
        const char *text;
    } want[] = {
        {0.54, "0.54"},
        {0.1 + 0.2, "0.30000000000000004"},
        {0.0, "0.0"},
        {-0.0, "-0.0"},
        {1.0, "1.0"},
        {100.0, "100.0"},
        {-2.5, "-2.5"},
        {1e-4, "0.0001"},
        {1e-5, "1e-5"},
        {1.5e-7, "1.5e-7"},
        {1e16, "10000000000000000.0"},
        {1e17, "1e17"},
        {9007199254740992.0, "9007199254740992.0"},      /* 2^53 */
        {9007199254740994.0, "9007199254740994.0"},      /* 2^53 + 2 */
        {1152921504606846976.0, "1.152921504606847e18"}, /* 2^60 */
        {1e308, "1e308"},
        {DBL_MAX, "1.7976931348623157e308"},
        {DBL_MIN, "2.2250738585072014e-308"},
        {5e-324, "5e-324"},
        {-5e-324, "-5e-324"},
        {1.0 / 3, "0.3333333333333333"},
        {123.456, "123.456"},
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        char text[REMATX_REAL_MAX];
        rematx_real_text(want[k].v, text);
        assert_string_equal(text, want[k].text);
        check(want[k].v);
    }
}

static void edges(void **state)
{
    (void)state;
    checked = 0;
    /* Powers of ten and two, where digits, notation and the rounding
     * interval change, and their neighbours. */
    for (int e = -323; e <= 308; e++) {
        double p = pow(10, e);
        if (p != 0 && isfinite(p))
            around(p);
    }
    for (int e = -1074; e <= 1023; e++)
        around(ldexp(1, e));
    /* Subnormals, integers past 2^53, the largest doubles. */
    for (uint64_t m = 1; m < 2000; m++) {
        double sub;
        memcpy(&sub, &m, sizeof sub);
        around(sub);
        around(9007199254740992.0 + 2.0 * (double)m);
        around(ldexp(9007199254740991.0 - (double)m, 971));
    }
    around(DBL_MAX);
    around(DBL_MIN);
    /* The range the fast path takes, and its edges. */
    around(1e-5);
    around(1e15);
    around(9.999999999999999e14);
    assert_true(checked > 30000);
}

static void random_doubles(void **state)
{
    (void)state;
    checked = 0;
    struct randchain_rng rng;
    randchain_seed(&rng, 29);
    for (int i = 0; i < 400000; i++) {
        uint64_t r = randchain_next(&rng);
        double v;
        switch (i % 4) {
        case 0: { /* any finite double */
            uint64_t bits = randchain_next(&rng);
            memcpy(&v, &bits, sizeof v);
            if (!isfinite(v))
                continue;
            break;
        }
        case 1: { /* a double where times fall, 2^-20 to 2^52 */
            uint64_t bits = (randchain_next(&rng) & 0x000FFFFFFFFFFFFFu) |
                            ((uint64_t)(1023 - 20 + r % 73) << 52);
            memcpy(&v, &bits, sizeof v);
            break;
        }
        case 2: /* a short decimal, as profiles give times */
            v = (double)(r % 100000000) / (r & 1 ? 10.0 : 1000.0);
            break;
        default: { /* a sum of them, as the simulator adds times */
            v = 0;
            for (int k = (int)(r % 60); k > 0; k--)
                v += (double)randchain_below(&rng, 30) / 10.0;
            break;
        }
        }
        check(v);
    }
    assert_true(checked > 390000);
}

/* Every real of a rewritten jansson document reads back; strings that look
 * like numbers and integers are left alone. */
static void documents(void **state)
{
    (void)state;
    struct randchain_rng rng;
    randchain_seed(&rng, 31);
    for (int round = 0; round < 200; round++) {
        json_t *arr = json_array();
        double vals[50];
        for (int k = 0; k < 50; k++) {
            uint64_t bits = randchain_next(&rng);
            memcpy(&vals[k], &bits, sizeof vals[k]);
            if (!isfinite(vals[k]))
                vals[k] = (double)(bits % 1000) / 7.0;
            json_array_append_new(arr, json_pack("{s:f, s:s, s:I}", "x", vals[k], "s",
                                                 "0.54000000000000004", "i", (json_int_t)k));
        }
        for (int flags = 0; flags < 2; flags++) {
            char *text = rematx_json_dumps(arr, flags ? JSON_INDENT(2) : JSON_COMPACT);
            assert_non_null(text);
            json_t *back = json_loads(text, 0, NULL);
            assert_non_null(back);
            for (int k = 0; k < 50; k++) {
                json_t *o = json_array_get(back, (size_t)k);
                assert_true(same_double(json_real_value(json_object_get(o, "x")), vals[k]));
                assert_string_equal(json_string_value(json_object_get(o, "s")),
                                    "0.54000000000000004");
                assert_int_equal(json_integer_value(json_object_get(o, "i")), k);
            }
            json_decref(back);
            free(text);
        }
        json_decref(arr);
    }
    json_t *one = json_pack("{s:f}", "ms", 0.54);
    char *text = rematx_json_dumps(one, JSON_COMPACT);
    assert_string_equal(text, "{\"ms\":0.54}");
    free(text);
    json_decref(one);
}

/* The reals of plans as rematd and the CLI print them read back to the
 * plan's own numbers. */
static void plans(void **state)
{
    (void)state;
    size_t n_plans = 0;
    for (unsigned seed = 1; seed <= 40; seed++) {
        struct remat_profile *p = randchain_profile(seed, 4 + seed % 30, RANDCHAIN_UNIFORM, 1);
        assert_non_null(p);
        static const enum remat_algorithm algs[] = {REMAT_ALG_MIN_PEAK, REMAT_ALG_SQRT,
                                                    REMAT_ALG_STORE_ALL};
        for (size_t a = 0; a < sizeof algs / sizeof algs[0]; a++) {
            struct remat_options o;
            remat_options_init(&o);
            o.algorithm = algs[a];
            struct remat_plan plan;
            memset(&plan, 0, sizeof plan);
            assert_int_equal(remat_solve(p, &o, &plan, NULL), REMAT_OK);
            size_t len = 0;
            char *text = remat_plan_dumps(p, &plan, &len);
            assert_non_null(text);
            json_t *j = json_loadb(text, len, 0, NULL);
            assert_non_null(j);
            assert_true(same_double(json_real_value(json_object_get(j, "recompute_ms")),
                                    plan.recompute_ms));
            assert_true(
                same_double(json_real_value(json_object_get(j, "total_ms")), plan.total_ms));
            check(plan.recompute_ms);
            check(plan.total_ms);
            json_decref(j);
            free(text);
            remat_plan_clear(&plan);
            n_plans++;
        }
        remat_profile_free(p);
    }
    assert_int_equal(n_plans, 120);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(texts),     cmocka_unit_test(edges), cmocka_unit_test(random_doubles),
        cmocka_unit_test(documents), cmocka_unit_test(plans),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
