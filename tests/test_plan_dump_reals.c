/* test_plan_dump_reals.c - remat_plan_dumps writes the reals of a plan
 * (recompute_ms, total_ms) without printf where it can: those bytes must be
 * jansson's, "%.17g" then its touches, for every double.  This puts many
 * through both (remat_plan_dumps against json_dumps of remat_plan_to_json):
 * random bit patterns over the whole range the shortcut takes and past its
 * edges, short decimals and sums of them as times are, powers of ten and
 * their neighbours, and exact ties at the 17th digit (an odd 53-bit integer
 * over 4 ends in 25 or 75 at the 18th), which must round to even. */
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

struct fixture {
    struct remat_profile *p;
    struct remat_plan plan;
    long checked;
};

/* The two texts of the plan with these reals, byte for byte. */
static void same_text(struct fixture *f, double recompute_ms, double total_ms)
{
    f->plan.recompute_ms = recompute_ms;
    f->plan.total_ms = total_ms;
    json_t *j = remat_plan_to_json(f->p, &f->plan);
    assert_non_null(j);
    char *want = rematx_json_dumps(j, JSON_COMPACT);
    json_decref(j);
    assert_non_null(want);
    size_t len = 0;
    char *got = remat_plan_dumps(f->p, &f->plan, &len);
    assert_non_null(got);
    if (strcmp(want, got) != 0)
        fail_msg("%a, %a:\n jansson %s\n dumps   %s", recompute_ms, total_ms, want, got);
    assert_int_equal(len, strlen(want));
    free(want);
    free(got);
    f->checked += 2;
}

/* v and the doubles either side of it. */
static void around(struct fixture *f, double v)
{
    same_text(f, v, nextafter(v, 0));
    same_text(f, nextafter(v, HUGE_VAL), v);
}

static void reals(void **state)
{
    (void)state;
    struct fixture f = {0};
    f.p = randchain_profile(5, 2, RANDCHAIN_UNIFORM, 1);
    assert_non_null(f.p);
    struct remat_options o;
    remat_options_init(&o);
    assert_int_equal(remat_solve(f.p, &o, &f.plan, NULL), REMAT_OK);
    struct randchain_rng rng;
    randchain_seed(&rng, 17);
    for (int i = 0; i < 24000; i++) {
        uint64_t r = randchain_next(&rng);
        double v;
        switch (i % 6) {
        case 0: { /* any double from 2^-20 to 2^64 */
            uint64_t bits = (randchain_next(&rng) & 0x000FFFFFFFFFFFFFu) |
                            ((uint64_t)(1023 - 20 + r % 85) << 52);
            memcpy(&v, &bits, sizeof v);
            break;
        }
        case 1: /* a short decimal, as profiles give times */
            v = (double)(r % 100000000) / (r & 1 ? 10.0 : 1000.0);
            break;
        case 2: { /* a sum of them, as the simulator adds times */
            v = 0;
            for (int k = (int)(r % 120); k > 0; k--)
                v += (double)randchain_below(&rng, 30) / 10.0;
            break;
        }
        case 3: { /* a tie at the 17th digit */
            uint64_t m = (randchain_next(&rng) >> 11) | 1 | ((uint64_t)1 << 52);
            v = (double)m / 4.0;
            break;
        }
        case 4: { /* an odd mantissa at any scale near the shortcut's range */
            uint64_t m = (randchain_next(&rng) >> 11) | 1 | ((uint64_t)1 << 52);
            v = ldexp((double)m, (int)(r % 120) - 90);
            break;
        }
        default: /* a large integer */
            v = (double)(int64_t)(r % UINT64_C(2000000000000000000));
            break;
        }
        around(&f, v);
    }
    /* Powers of ten, where the exponent and the notation change, and the
     * edges of the shortcut (1e-4 and 1e17). */
    for (int e = -30; e <= 30; e++) {
        double p = pow(10, e);
        around(&f, p);
        around(&f, p * 9.999999999999999);
        around(&f, p * 5);
    }
    static const double odd[] = {0.0, -0.0, -1.5, 1e-300, 5e-324, 1.0 / 3, 100.0, 0.1, 0.5};
    for (size_t k = 0; k < sizeof odd / sizeof odd[0]; k++)
        around(&f, odd[k]);
    assert_true(f.checked > 90000);
    remat_plan_clear(&f.plan);
    remat_profile_free(f.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
