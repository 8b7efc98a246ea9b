/* rematd's stored plan record (api/plan_codec.c): what GET /v1/plans/{id}
 * and the timeline are rendered from, so it must give back exactly what
 * was encoded, and a damaged record must be refused, never crash.
 *
 * - Round trips over seeded random profiles and every algorithm: each
 *   stage's sizes equal, each double bit for bit (short decimals, -0,
 *   values with 17 significant digits, 2^-1074), the plan's fields and
 *   schedule equal, and remat_plan_dumps of the decoded pair byte for byte
 *   that of the original (what GET answers is what POST answered).
 * - Every proper prefix of a record, and a wrong version, is refused.
 * - Thousands of records with random bytes changed decode or are refused;
 *   when one decodes, its profile validates and its schedule's stages are
 *   in range (the sanitizer build checks the reads). */
#include "config.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plan_codec.h"
#include "randchain.h"
#include "remat.h"

static void assert_same_double(double a, double b)
{
    uint64_t x, y;
    memcpy(&x, &a, sizeof x);
    memcpy(&y, &b, sizeof y);
    assert_true(x == y);
}

static void assert_same(const struct remat_profile *p, const struct remat_plan *plan,
                        const struct remat_profile *q, const struct remat_plan *back)
{
    assert_int_equal(p->n_stages, q->n_stages);
    assert_true(p->input_bytes == q->input_bytes);
    for (size_t i = 0; i < p->n_stages; i++) {
        const struct remat_stage *a = &p->stages[i], *b = &q->stages[i];
        assert_true(a->out_bytes == b->out_bytes);
        assert_true(a->saved_bytes == b->saved_bytes);
        assert_true(a->fwd_tmp_bytes == b->fwd_tmp_bytes);
        assert_true(a->fwd_grad_tmp_bytes == b->fwd_grad_tmp_bytes);
        assert_true(a->bwd_tmp_bytes == b->bwd_tmp_bytes);
        assert_true(a->bwd_freed_bytes == b->bwd_freed_bytes);
        assert_true(a->param_bytes == b->param_bytes);
        assert_same_double(a->fwd_ms, b->fwd_ms);
        assert_same_double(a->bwd_ms, b->bwd_ms);
    }
    assert_int_equal(plan->algorithm, back->algorithm);
    assert_int_equal(plan->single_level, back->single_level);
    assert_int_equal(plan->objective_model, back->objective_model);
    assert_true(plan->objective_value == back->objective_value);
    assert_true(plan->peak_bytes == back->peak_bytes);
    assert_true(plan->store_all_peak_bytes == back->store_all_peak_bytes);
    assert_same_double(plan->recompute_ms, back->recompute_ms);
    assert_same_double(plan->total_ms, back->total_ms);
    assert_true(plan->budget_bytes == back->budget_bytes);
    assert_true(plan->min_budget_bytes == back->min_budget_bytes);
    assert_same_double(plan->optimality_gap, back->optimality_gap);
    assert_int_equal(plan->n_checkpoints, back->n_checkpoints);
    for (size_t k = 0; k < plan->n_checkpoints; k++)
        assert_int_equal(plan->checkpoints[k], back->checkpoints[k]);
    assert_int_equal(plan->schedule.n_ops, back->schedule.n_ops);
    for (size_t k = 0; k < plan->schedule.n_ops; k++) {
        assert_int_equal(plan->schedule.ops[k].stage, back->schedule.ops[k].stage);
        assert_int_equal(plan->schedule.ops[k].kind, back->schedule.ops[k].kind);
    }
    char *d1 = remat_plan_dumps(p, plan, NULL);
    char *d2 = remat_plan_dumps(q, back, NULL);
    assert_non_null(d1);
    assert_non_null(d2);
    assert_string_equal(d1, d2);
    free(d1);
    free(d2);
}

/* Doubles a profile may hold: short decimals (the compact form), and ones
 * that need all 8 bytes. */
static double odd_time(struct randchain_rng *g)
{
    switch (randchain_below(g, 8)) {
    case 0:
        return -0.0;
    case 1:
        return 0.1 + 0.2; /* 0.30000000000000004 */
    case 2:
        return 5e-324; /* the least subnormal */
    case 3:            /* 17 significant digits, under REMAT_MAX_MS */
        return fmod((double)randchain_next(g) / 3.0, REMAT_MAX_MS);
    case 4: /* the largest a profile takes, and the double just under it */
        return randchain_below(g, 2) ? REMAT_MAX_MS : nextafter(REMAT_MAX_MS, 0);
    case 5:
        return (double)randchain_below(g, 1000000) / 1000.0;
    case 6:
        return 123456789.123;
    default:
        return (double)randchain_below(g, 100) * 0.25;
    }
}

static unsigned char *encode_checked(const struct remat_profile *p, const struct remat_plan *plan,
                                     size_t *len)
{
    unsigned char *rec = rematd_plan_encode(p, plan, len);
    assert_non_null(rec);
    struct remat_profile *q = NULL;
    struct remat_plan back;
    assert_int_equal(rematd_plan_decode(rec, *len, &q, &back), 0);
    assert_same(p, plan, q, &back);
    remat_plan_clear(&back);
    remat_profile_free(q);
    return rec;
}

static void test_round_trip(void **state)
{
    (void)state;
    static const enum remat_algorithm algs[] = {
        REMAT_ALG_STORE_ALL,   REMAT_ALG_SQRT,         REMAT_ALG_UNIFORM,  REMAT_ALG_ACG,
        REMAT_ALG_PAPER_CUBIC, REMAT_ALG_PAPER_LINEAR, REMAT_ALG_MIN_PEAK, REMAT_ALG_MIN_TIME};
    size_t trips = 0, nested = 0;
    for (uint64_t seed = 1; seed <= 120; seed++) {
        struct randchain_rng g;
        randchain_seed(&g, seed);
        size_t n = 1 + (size_t)randchain_below(&g, seed % 10 == 0 ? 400 : 40);
        struct remat_profile *p =
            randchain_profile(seed, n, (enum randchain_dist)(seed % RANDCHAIN_N_DISTS), 1);
        assert_non_null(p);
        if (seed % 3 == 0)
            for (size_t i = 0; i < n; i++) {
                p->stages[i].fwd_ms = odd_time(&g);
                p->stages[i].bwd_ms = odd_time(&g);
            }
        if (seed % 7 == 0) {
            p->stages[0].out_bytes = REMAT_MAX_BYTES / 1024;
            p->stages[0].saved_bytes = REMAT_MAX_BYTES / 512;
        }
        for (size_t a = 0; a < sizeof algs / sizeof algs[0]; a++) {
            if ((algs[a] == REMAT_ALG_ACG || algs[a] == REMAT_ALG_PAPER_CUBIC) && n > 100)
                continue;
            struct remat_options o;
            remat_options_init(&o);
            o.algorithm = algs[a];
            o.segments = 3;
            struct remat_plan plan;
            memset(&plan, 0, sizeof plan);
            if (algs[a] == REMAT_ALG_MIN_TIME) {
                /* A budget between the least and store-all: recomputation,
                 * often nested. */
                struct remat_options mp;
                remat_options_init(&mp);
                mp.algorithm = REMAT_ALG_MIN_PEAK;
                assert_int_equal(remat_solve(p, &mp, &plan, NULL), REMAT_OK);
                o.budget_bytes =
                    plan.peak_bytes + (plan.store_all_peak_bytes - plan.peak_bytes) / 3;
                o.mem_slots = 300;
                remat_plan_clear(&plan);
                if (n > 60)
                    continue;
            }
            struct remat_error err = {0};
            int rc = remat_solve(p, &o, &plan, &err);
            if (rc != REMAT_OK) {
                if (algs[a] != REMAT_ALG_MIN_TIME)
                    print_error("seed %llu n %zu alg %d: %s\n", (unsigned long long)seed, n,
                                (int)algs[a], err.message);
                assert_int_equal(algs[a], REMAT_ALG_MIN_TIME);
                remat_plan_clear(&plan);
                continue;
            }
            size_t len;
            unsigned char *rec = encode_checked(p, &plan, &len);
            nested += !plan.single_level;
            trips++;
            free(rec);
            remat_plan_clear(&plan);
        }
        remat_profile_free(p);
    }
    assert_true(trips > 700);
    /* The nested min-time form went through too. */
    assert_true(nested > 0);
}

/* A seeded random profile and its plan by the default algorithm. */
static struct remat_profile *solved(uint64_t seed, size_t n, enum randchain_dist dist,
                                    struct remat_plan *plan)
{
    struct remat_profile *p = randchain_profile(seed, n, dist, 1);
    assert_non_null(p);
    struct remat_options o;
    remat_options_init(&o);
    memset(plan, 0, sizeof *plan);
    assert_int_equal(remat_solve(p, &o, plan, NULL), REMAT_OK);
    return p;
}

static void test_prefixes_and_version(void **state)
{
    (void)state;
    struct remat_plan plan;
    struct remat_profile *p = solved(7, 30, RANDCHAIN_POOLING, &plan);
    size_t len;
    unsigned char *rec = encode_checked(p, &plan, &len);
    for (size_t k = 0; k < len; k++) {
        /* A copy of exactly k bytes, so the sanitizer sees any overread. */
        unsigned char *cut = malloc(k > 0 ? k : 1);
        assert_non_null(cut);
        memcpy(cut, rec, k);
        struct remat_profile *q = (struct remat_profile *)1;
        struct remat_plan back;
        assert_int_equal(rematd_plan_decode(cut, k, &q, &back), -1);
        assert_null(q);
        assert_int_equal(back.schedule.n_ops, 0);
        free(cut);
    }
    /* Trailing bytes are damage too. */
    unsigned char *longer = malloc(len + 1);
    assert_non_null(longer);
    memcpy(longer, rec, len);
    longer[len] = 0;
    struct remat_profile *q;
    struct remat_plan back;
    assert_int_equal(rematd_plan_decode(longer, len + 1, &q, &back), -1);
    free(longer);
    rec[0] = 4;
    assert_int_equal(rematd_plan_decode(rec, len, &q, &back), -1);
    rec[0] = 0;
    assert_int_equal(rematd_plan_decode(rec, len, &q, &back), -1);
    free(rec);
    remat_plan_clear(&plan);
    remat_profile_free(p);
}

static void test_damage(void **state)
{
    (void)state;
    struct randchain_rng g;
    randchain_seed(&g, 99);
    size_t decoded = 0, refused = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        struct remat_plan plan;
        struct remat_profile *p = solved(seed, 1 + seed % 25, RANDCHAIN_HEAVY, &plan);
        size_t len;
        unsigned char *rec = encode_checked(p, &plan, &len);
        for (int t = 0; t < 200; t++) {
            unsigned char *bad = malloc(len);
            assert_non_null(bad);
            memcpy(bad, rec, len);
            int flips = 1 + (int)randchain_below(&g, 3);
            for (int f = 0; f < flips; f++)
                bad[1 + randchain_below(&g, len - 1)] = (unsigned char)randchain_next(&g);
            struct remat_profile *q = NULL;
            struct remat_plan back;
            if (rematd_plan_decode(bad, len, &q, &back) == 0) {
                decoded++;
                assert_int_equal(remat_profile_validate(q, NULL), REMAT_OK);
                for (size_t k = 0; k < back.schedule.n_ops; k++) {
                    assert_true(back.schedule.ops[k].stage >= 1);
                    assert_true(back.schedule.ops[k].stage <= q->n_stages);
                    assert_true(back.schedule.ops[k].kind <= REMAT_OP_B);
                }
                for (size_t k = 0; k < back.n_checkpoints; k++)
                    assert_true(back.checkpoints[k] >= 1 && back.checkpoints[k] < q->n_stages);
                /* Rendering a damaged but well-formed record must not crash. */
                free(remat_plan_dumps(q, &back, NULL));
                remat_plan_clear(&back);
                remat_profile_free(q);
            } else {
                refused++;
                assert_null(q);
            }
            free(bad);
        }
        free(rec);
        remat_plan_clear(&plan);
        remat_profile_free(p);
    }
    /* Both outcomes happen: the checks are exercised, not vacuous. */
    assert_true(decoded > 0);
    assert_true(refused > 0);
}

/* A version 1 record (stored before the block fields) still reads, with
 * their defaults: the forward with grad's transient is fwd_tmp_bytes and
 * nothing is freed early.  A one-stage profile of one-byte values: the
 * stage is out, saved - out, fwd_tmp, [fwd_grad - fwd_tmp], bwd_tmp,
 * [bwd_freed], param, then the times; version 1 is version 2 without the
 * bracketed bytes. */
static void test_version_1(void **state)
{
    (void)state;
    struct remat_profile *p = remat_profile_new(1, NULL);
    assert_non_null(p);
    p->input_bytes = 7;
    p->stages[0].out_bytes = 5;
    p->stages[0].saved_bytes = 5;
    p->stages[0].fwd_tmp_bytes = p->stages[0].fwd_grad_tmp_bytes = 3;
    p->stages[0].bwd_tmp_bytes = 2;
    struct remat_options o;
    remat_options_init(&o);
    struct remat_plan plan;
    memset(&plan, 0, sizeof plan);
    assert_int_equal(remat_solve(p, &o, &plan, NULL), REMAT_OK);
    size_t len;
    unsigned char *rec = encode_checked(p, &plan, &len);
    /* version, n, input_bytes, then the stage at offset 3. */
    const unsigned char v3[] = {3, 1, 7, 5, 0, 3, 0, 2, 0, 0};
    assert_true(len > sizeof v3);
    assert_memory_equal(rec, v3, sizeof v3);
    /* Where version 3's optimality_gap lies: the first byte that differs
     * from the record of the same plan with another gap (0 and 0.5 both
     * take two bytes: a tag and a mantissa). */
    plan.optimality_gap = 0.5;
    size_t len_g;
    unsigned char *rec_g = encode_checked(p, &plan, &len_g);
    plan.optimality_gap = 0;
    assert_int_equal(len_g, len);
    size_t gap_at = 1;
    while (gap_at < len && rec[gap_at] == rec_g[gap_at])
        gap_at++;
    assert_true(gap_at > 8 && gap_at + 2 <= len);
    /* Version 3 reads the gap back. */
    struct remat_profile *qg;
    struct remat_plan back_g;
    assert_int_equal(rematd_plan_decode(rec_g, len_g, &qg, &back_g), 0);
    assert_true(back_g.optimality_gap == 0.5);
    remat_plan_clear(&back_g);
    remat_profile_free(qg);
    free(rec_g);
    /* Version 2 is version 3 without the gap, which reads as 0. */
    unsigned char *v2r = malloc(len);
    assert_non_null(v2r);
    size_t k2 = 0;
    for (size_t i = 0; i < len; i++)
        if (i != gap_at && i != gap_at + 1)
            v2r[k2++] = rec[i];
    v2r[0] = 2;
    struct remat_profile *q2;
    struct remat_plan back_2;
    assert_int_equal(rematd_plan_decode(v2r, k2, &q2, &back_2), 0);
    assert_same(p, &plan, q2, &back_2);
    assert_true(back_2.optimality_gap == 0);
    remat_plan_clear(&back_2);
    remat_profile_free(q2);
    free(v2r);
    unsigned char *v1 = malloc(len);
    assert_non_null(v1);
    size_t k = 0;
    for (size_t i = 0; i < len; i++)
        if (i != 6 && i != 8 && i != gap_at && i != gap_at + 1)
            v1[k++] = rec[i];
    v1[0] = 1;
    struct remat_profile *q;
    struct remat_plan back;
    assert_int_equal(rematd_plan_decode(v1, k, &q, &back), 0);
    assert_same(p, &plan, q, &back);
    /* A version 1 record has no place for the new fields: a profile that
     * uses them is written as version 2 and reads back the same. */
    p->stages[0].fwd_grad_tmp_bytes = 1;
    p->stages[0].bwd_freed_bytes = 9;
    free(rec);
    rec = encode_checked(p, &plan, &len);
    struct remat_profile *r;
    struct remat_plan back2;
    assert_int_equal(rematd_plan_decode(rec, len, &r, &back2), 0);
    assert_int_equal(r->stages[0].fwd_grad_tmp_bytes, 1);
    assert_int_equal(r->stages[0].bwd_freed_bytes, 9);
    remat_plan_clear(&back2);
    remat_profile_free(r);
    remat_plan_clear(&back);
    remat_profile_free(q);
    free(v1);
    free(rec);
    remat_plan_clear(&plan);
    remat_profile_free(p);
}

static void test_compact(void **state)
{
    (void)state;
    /* The point of the record: a 50-stage plan well under its JSON. */
    struct remat_plan plan;
    struct remat_profile *p = solved(3, 50, RANDCHAIN_POOLING, &plan);
    size_t len, jlen;
    unsigned char *rec = encode_checked(p, &plan, &len);
    char *json = remat_plan_dumps(p, &plan, &jlen);
    assert_non_null(json);
    assert_true(len * 2 < jlen);
    free(json);
    free(rec);
    remat_plan_clear(&plan);
    remat_profile_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip), cmocka_unit_test(test_prefixes_and_version),
        cmocka_unit_test(test_damage),     cmocka_unit_test(test_version_1),
        cmocka_unit_test(test_compact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
