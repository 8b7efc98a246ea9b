/* test_minpeak.c - the min-peak solver against exhaustive search over the
 * simulator (the `traced` model), the fast sweep against the quadratic
 * reference, and hand-built chains where the traced accounting matters. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "exhaustive.h"
#include "solve_minpeak.h"
#include "randchain.h"

static const enum remat__minpeak_method methods[] = {
    REMAT__MINPEAK_AUTO, REMAT__MINPEAK_REF, REMAT__MINPEAK_TREE, REMAT__MINPEAK_EARLY_SWITCH};

/* randchain's chains, and (variant 1) the same with large forward
 * temporaries on a third of the stages and small backward ones, so that the
 * recompute term gam_e + U decides many segments. */
static struct remat_profile *chain_variant(uint64_t seed, size_t n, int dist, int full, int variant)
{
    struct remat_profile *p = randchain_profile(seed, n, (enum randchain_dist)dist, full);
    assert_non_null(p);
    if (variant) {
        struct randchain_rng r;
        randchain_seed(&r, seed * 31 + n);
        for (size_t i = 0; i < n; i++) {
            struct remat_stage *s = &p->stages[i];
            if (randchain_below(&r, 3) == 0) {
                s->fwd_tmp_bytes = s->out_bytes * (int64_t)(1 + randchain_below(&r, 8));
                s->fwd_grad_tmp_bytes = s->fwd_tmp_bytes;
            }
            s->bwd_tmp_bytes = s->bwd_tmp_bytes / 8;
        }
        assert_int_equal(remat_profile_validate(p, NULL), REMAT_OK);
    }
    return p;
}

static int64_t simulate_peak(const struct remat_profile *p, const size_t *ck, size_t m)
{
    int64_t v = -1;
    assert_int_equal(exhaustive_value(p, REMAT_MODEL_TRACED, ck, m, &v), REMAT_OK);
    return v;
}

/* Every subset, simulated: the least peak, and the set the solver is
 * documented to return (docs/min-peak.md, section 7): starting from no
 * checkpoints, stop as soon as the checkpoints so far are an optimal set;
 * otherwise, if adding one checkpoint makes an optimal set, add the least
 * such and stop; otherwise add the largest next checkpoint with which some
 * optimal set begins. */
static void greedy_optimum(const struct remat_profile *p, int64_t *value, size_t *best,
                           size_t *best_m, double *least_recompute)
{
    size_t n = p->n_stages, ck[EXHAUSTIVE_MAX_N];
    uint32_t subsets = (uint32_t)1 << (n - 1);
    uint8_t *opt = calloc(subsets, 1);
    assert_non_null(opt);
    int have = 0;
    for (uint32_t mask = 0; mask < subsets; mask++) {
        size_t m = exhaustive_set_of(mask, n, ck);
        int64_t v = simulate_peak(p, ck, m);
        if (!have || v < *value) {
            memset(opt, 0, subsets);
            *value = v;
            have = 1;
        }
        if (v == *value)
            opt[mask] = 1;
    }
    *least_recompute = -1;
    for (uint32_t mask = 0; mask < subsets; mask++) {
        if (!opt[mask])
            continue;
        size_t top = 0;
        for (size_t c = 1; c < n; c++)
            if (mask & ((uint32_t)1 << (c - 1)))
                top = c;
        double r = remat__recompute_ms(p, top);
        if (*least_recompute < 0 || r < *least_recompute)
            *least_recompute = r;
    }
    /* prefix: the checkpoints chosen so far, all below `last` + 1. */
    uint32_t prefix = 0;
    size_t last = 0;
    *best_m = 0;
    while (!opt[prefix]) {
        size_t next = 0, finish = 0;
        for (size_t c = n - 1; c > last; c--)
            if (opt[prefix | ((uint32_t)1 << (c - 1))])
                finish = c;
        if (finish > 0) {
            prefix |= (uint32_t)1 << (finish - 1);
            best[(*best_m)++] = finish;
            break;
        }
        for (uint32_t mask = 0; mask < subsets; mask++) {
            if (!opt[mask] || (mask & (((uint32_t)1 << last) - 1)) != prefix)
                continue;
            /* The least checkpoint of mask above last. */
            for (size_t c = last + 1; c < n; c++)
                if (mask & ((uint32_t)1 << (c - 1))) {
                    if (c > next)
                        next = c;
                    break;
                }
        }
        assert_true(next > last);
        prefix |= (uint32_t)1 << (next - 1);
        best[(*best_m)++] = next;
        last = next;
    }
    free(opt);
}

static void solve_with(const struct remat_profile *p, enum remat__minpeak_method method,
                       struct remat_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    struct remat_error err;
    int rc = remat__min_peak_with(p, method, plan, &err);
    if (rc != REMAT_OK)
        fail_msg("min-peak failed: %s", err.message);
    for (size_t k = 0; k < plan->n_checkpoints; k++) {
        assert_true(plan->checkpoints[k] >= 1 && plan->checkpoints[k] < p->n_stages);
        if (k > 0)
            assert_true(plan->checkpoints[k] > plan->checkpoints[k - 1]);
    }
}

/* Checks one small chain against brute force under every method;
 * counts the chains whose optimum is unique and those where the set is the
 * canonical one (docs/memory-model.md, Ties). */
static void check_small(const struct remat_profile *p, size_t *n_unique, size_t *n_canonical)
{
    struct exhaustive_result ex;
    assert_int_equal(exhaustive_search(p, REMAT_MODEL_TRACED, &ex), REMAT_OK);
    int64_t lv = 0;
    double least_rc;
    size_t lset[EXHAUSTIVE_MAX_N], lm = 0;
    greedy_optimum(p, &lv, lset, &lm, &least_rc);
    assert_int_equal(lv, ex.value);
    for (size_t k = 0; k < sizeof methods / sizeof methods[0]; k++) {
        struct remat_plan plan;
        solve_with(p, methods[k], &plan);
        assert_int_equal(plan.objective_value, ex.value);
        assert_int_equal(simulate_peak(p, plan.checkpoints, plan.n_checkpoints), ex.value);
        size_t m = plan.n_checkpoints;
        if (methods[k] == REMAT__MINPEAK_EARLY_SWITCH) {
            /* The greedy rule alone (docs/min-peak.md, section 7). */
            assert_int_equal(m, lm);
            for (size_t c = 0; c < lm; c++)
                assert_int_equal(plan.checkpoints[c], lset[c]);
        } else {
            /* The least recompute among all optimal sets, and never after
             * the greedy rule's set in the tie order. */
            double rc = remat__recompute_ms(p, m > 0 ? plan.checkpoints[m - 1] : 0);
            assert_true(rc == least_rc);
            assert_true(remat__tie_cmp(p, plan.checkpoints, m, lset, lm) <= 0);
            int canonical =
                m == ex.n_checkpoints && (m == 0 || memcmp(plan.checkpoints, ex.checkpoints,
                                                           m * sizeof ex.checkpoints[0]) == 0);
            if (ex.n_optimal == 1)
                assert_true(canonical);
            if (k == 0) {
                *n_canonical += (size_t)canonical;
                *n_unique += ex.n_optimal == 1;
            }
        }
        remat_plan_clear(&plan);
    }
}

/* 2,400 seeded chains, n = 1..14, every distribution, sizes and times
 * random (full = 1) and at their defaults (full = 0), and with large forward
 * temporaries. */
static void test_exhaustive_random(void **state)
{
    (void)state;
    size_t chains = 0, unique = 0, canonical = 0;
    for (uint64_t seed = 1; seed <= 200; seed++)
        for (int dist = 0; dist < RANDCHAIN_N_DISTS; dist++)
            for (int full = 0; full <= 2; full++) {
                size_t n = 1 + (size_t)((seed * 7 + (uint64_t)dist * 3 + (uint64_t)full) % 14);
                struct remat_profile *p = chain_variant(seed, n, dist, full > 0, full == 2);
                check_small(p, &unique, &canonical);
                remat_profile_free(p);
                chains++;
            }
    assert_true(chains >= 2000);
    /* The set check above must have had unique optima to bite on. */
    assert_true(unique >= 200);
    print_message("%zu chains, %zu with a unique optimum, %zu where the set is the canonical "
                  "one\n",
                  chains, unique, canonical);
}

/* Every method's plan equals the quadratic program's (value and set) and
 * re-simulates to it. */
static void check_against_ref(const struct remat_profile *p)
{
    struct remat_plan ref;
    solve_with(p, REMAT__MINPEAK_REF, &ref);
    assert_int_equal(simulate_peak(p, ref.checkpoints, ref.n_checkpoints), ref.objective_value);
    for (size_t k = 0; k < sizeof methods / sizeof methods[0]; k++) {
        if (methods[k] == REMAT__MINPEAK_REF)
            continue;
        struct remat_plan plan;
        solve_with(p, methods[k], &plan);
        assert_int_equal(plan.objective_value, ref.objective_value);
        assert_int_equal(simulate_peak(p, plan.checkpoints, plan.n_checkpoints),
                         ref.objective_value);
        if (methods[k] != REMAT__MINPEAK_EARLY_SWITCH) {
            /* The same M and the same set rules: the same set. */
            assert_int_equal(plan.n_checkpoints, ref.n_checkpoints);
            for (size_t c = 0; c < ref.n_checkpoints; c++)
                assert_int_equal(plan.checkpoints[c], ref.checkpoints[c]);
        }
        remat_plan_clear(&plan);
    }
    remat_plan_clear(&ref);
}

/* Raises each stage's forward-with-grad transient where the chain's draw
 * left it below what the sweep needs (docs/min-peak.md, Lemma 2:
 * x̄ + g >= x + f), so that the sweep, not its fallback, runs. */
static void make_sweepable(struct remat_profile *p)
{
    for (size_t i = 0; i < p->n_stages; i++) {
        struct remat_stage *s = &p->stages[i];
        int64_t need = s->out_bytes + s->fwd_tmp_bytes - s->saved_bytes;
        if (s->fwd_grad_tmp_bytes < need)
            s->fwd_grad_tmp_bytes = need;
    }
}

/* Whether the sweep runs on p with both block fields in play: the
 * transients of the two forwards differ somewhere, some backward's net
 * transient is below zero, and Lemma 2 holds. */
static int sweeps_blocks(const struct remat_profile *p)
{
    int differ = 0, negative = 0;
    for (size_t i = 0; i < p->n_stages; i++) {
        const struct remat_stage *s = &p->stages[i];
        if (s->saved_bytes + s->fwd_grad_tmp_bytes < s->out_bytes + s->fwd_tmp_bytes)
            return 0;
        differ |= s->fwd_grad_tmp_bytes != s->fwd_tmp_bytes;
        negative |= s->bwd_freed_bytes > s->bwd_tmp_bytes;
    }
    return differ && negative;
}

/* The tree, the scans and the switch between them against the quadratic
 * program, up to n = 2000; most chains are made sweepable, the others take
 * the fallback for a stage beyond Lemma 2. */
static void test_fast_vs_ref(void **state)
{
    (void)state;
    static const size_t sizes[] = {15, 40, 97, 150, 300, 700, 2000};
    size_t chains = 0, blocks = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t reps = sizes[s] >= 2000 ? 4 : sizes[s] >= 700 ? 8 : 30;
        for (uint64_t seed = 1; seed <= reps; seed++)
            for (int dist = 0; dist < RANDCHAIN_N_DISTS; dist++) {
                struct remat_profile *p =
                    chain_variant(1000 + seed, sizes[s], dist, seed % 4 != 0, seed % 3 == 0);
                if (seed % 5 != 0)
                    make_sweepable(p);
                assert_int_equal(remat_profile_validate(p, NULL), REMAT_OK);
                blocks += (size_t)sweeps_blocks(p);
                check_against_ref(p);
                remat_profile_free(p);
                chains++;
            }
    }
    assert_true(chains >= 300);
    /* The sweep met the block fields on most full chains. */
    assert_true(blocks >= 200);
    print_message("%zu chains, %zu swept with both block fields in play\n", chains, blocks);
}

/* A chain whose last stage is huge: every plan pays it, every M(i) is large,
 * so no direct scan stops early and the default method moves to the tree
 * (the scans alone would be quadratic).  Its answer must not change.  (Much
 * of the answer is decided by that stage; the switch itself is exercised at
 * varied points by REMAT__MINPEAK_EARLY_SWITCH in the tests above.) */
static void test_switch_to_tree(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        struct remat_profile *p = randchain_profile(seed, 3000, RANDCHAIN_UNIFORM, 1);
        assert_non_null(p);
        struct remat_stage *last = &p->stages[p->n_stages - 1];
        last->out_bytes = INT64_C(1) << 40;
        last->saved_bytes = last->out_bytes;
        make_sweepable(p);
        assert_int_equal(remat_profile_validate(p, NULL), REMAT_OK);
        assert_true(sweeps_blocks(p));
        check_against_ref(p);
        remat_profile_free(p);
    }
}

/* The least-recompute pass is skipped where it would give up on its
 * budget (solve_minpeak_set.c predicts that without its work): on chains
 * from 100 to 20,000 stages of every distribution, some of them past that
 * budget (1,000 stages and up give up on most), the set is the one the pass
 * run until it gives up leaves, and so is everything else in the plan. */
static void test_skipped_pass_same_set(void **state)
{
    (void)state;
    static const size_t sizes[] = {100, 300, 1000, 3000, 20000};
    for (int dist = 0; dist < RANDCHAIN_N_DISTS; dist++) {
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            for (uint64_t seed = 1; seed <= 3; seed++) {
                struct remat_profile *p =
                    randchain_profile(seed * 7 + (uint64_t)dist, sizes[si],
                                      (enum randchain_dist)dist, (int)(seed % 2));
                assert_non_null(p);
                struct remat_plan a, b;
                memset(&a, 0, sizeof a);
                memset(&b, 0, sizeof b);
                assert_int_equal(remat__min_peak_with(p, REMAT__MINPEAK_AUTO, &a, NULL), REMAT_OK);
                assert_int_equal(remat__min_peak_with(p, REMAT__MINPEAK_SPENT_PASS, &b, NULL),
                                 REMAT_OK);
                assert_int_equal(a.objective_value, b.objective_value);
                assert_int_equal(a.n_checkpoints, b.n_checkpoints);
                for (size_t k = 0; k < a.n_checkpoints; k++)
                    assert_int_equal(a.checkpoints[k], b.checkpoints[k]);
                remat_plan_clear(&a);
                remat_plan_clear(&b);
                remat_profile_free(p);
            }
        }
    }
}

/* A profile from arrays; times 1 ms forward, 2 ms backward. */
static struct remat_profile *make_chain(int64_t input, size_t n, const int64_t *out,
                                        const int64_t *saved, const int64_t *ftmp,
                                        const int64_t *btmp, const int64_t *param)
{
    struct remat_profile *p = remat_profile_new(n, NULL);
    assert_non_null(p);
    p->input_bytes = input;
    for (size_t i = 0; i < n; i++) {
        struct remat_stage *s = &p->stages[i];
        s->out_bytes = out[i];
        s->saved_bytes = saved ? saved[i] : out[i];
        s->fwd_tmp_bytes = ftmp ? ftmp[i] : 0;
        s->fwd_grad_tmp_bytes = s->fwd_tmp_bytes;
        s->bwd_tmp_bytes = btmp ? btmp[i] : 0;
        s->param_bytes = param ? param[i] : 0;
        s->fwd_ms = 1;
        s->bwd_ms = 2;
    }
    assert_int_equal(remat_profile_validate(p, NULL), REMAT_OK);
    return p;
}

/* A drop in x (stage 2: 2 -> 1) and a large forward temporary (f_3 = 12):
 * x_0 = 1, x = [2, 1, 8, 2], saved = out, no weights or backward
 * temporaries; Sb = [0, 2, 3, 11, 13], u = Sb + f = [2, 3, 23, 13],
 * beta = Sb + x_l + x_{l-1} = [4, 6, 20, 23], gam_j = x_j.
 * {2}: (0,2] costs 1 + max(gam_2 + U = 1 + 3, B = 6) = 7; the last segment
 *   (2,4] costs (1 + 1) + max(23, 23, loss 15) - 3 = 22.  Peak 22.
 * {3}: (0,3] recomputes stage 3 with delta_3 = 8 live:
 *   1 + gam_3 + U(0,3) = 1 + 8 + 23 = 32.  Peak 32.
 * {}: 1 + 23 = 24; {1}: (1,4] costs 3 + 23 - 2 = 24; {2,3}: (2,3] costs
 *   2 + 8 + 23 - 3 = 30.
 * So {2}, right after the drop, is the unique optimum at 22.  The gradient
 * term gam_j (1, then 8) is what rules out {3}: without forward temporaries
 * the answer is {3}. */
static void test_pooling_drop(void **state)
{
    (void)state;
    static const int64_t out[] = {2, 1, 8, 2};
    static const int64_t ftmp[] = {0, 0, 12, 0};
    struct remat_profile *p = make_chain(1, 4, out, NULL, ftmp, NULL, NULL);
    size_t three[] = {3};
    assert_int_equal(simulate_peak(p, three, 1), 32);
    for (size_t k = 0; k < sizeof methods / sizeof methods[0]; k++) {
        struct remat_plan plan;
        solve_with(p, methods[k], &plan);
        assert_int_equal(plan.objective_value, 22);
        assert_int_equal(plan.n_checkpoints, 1);
        assert_int_equal(plan.checkpoints[0], 2);
        remat_plan_clear(&plan);
    }
    size_t unique = 0, canonical = 0;
    check_small(p, &unique, &canonical);
    assert_int_equal(unique, 1);
    remat_profile_free(p);
    /* Without the temporary the recompute term no longer decides. */
    p = make_chain(1, 4, out, NULL, NULL, NULL, NULL);
    struct remat_plan plan;
    solve_with(p, REMAT__MINPEAK_AUTO, &plan);
    assert_int_equal(plan.n_checkpoints, 1);
    assert_int_equal(plan.checkpoints[0], 3);
    remat_plan_clear(&plan);
    remat_profile_free(p);
}

static int64_t paper_linear_traced(const struct remat_profile *p)
{
    struct remat_options o;
    remat_options_init(&o);
    o.algorithm = REMAT_ALG_PAPER_LINEAR;
    o.has_model = 1;
    o.model = REMAT_MODEL_TRACED;
    struct remat_plan plan;
    assert_int_equal(remat_solve(p, &o, &plan, NULL), REMAT_OK);
    int64_t v = plan.peak_bytes;
    remat_plan_clear(&plan);
    return v;
}

/* Saved tensors that the prefix model leaves out decide the placement:
 * x_0 = 1, x = [1, 2, 1, 4], saved = [5, 2, 3, 4], nothing else.
 * prefix (d = x): {3} costs max(1 + 4, 2 + 4) = 6 and {1,3} costs 7, so
 *   paper-linear picks {3} (its unique optimum).
 * traced: Sb = [0, 5, 7, 10, 14], u = Sb, beta = [6, 10, 13, 19].
 *   {3}: (0,3] costs 1 + B(0,3) = 1 + 13 = 14.  Peak 14.
 *   {1,3}: (0,1] 1 + 6 = 7; (1,3] 2 + 13 - 5 = 10; (3,4] 3 + 19 - 10 = 12.
 * min-peak must return {1,3} at 12, two bytes below paper-linear's set. */
static void test_beats_paper_linear_by_hand(void **state)
{
    (void)state;
    static const int64_t out[] = {1, 2, 1, 4};
    static const int64_t saved[] = {5, 2, 3, 4};
    struct remat_profile *p = make_chain(1, 4, out, saved, NULL, NULL, NULL);
    struct remat_options o;
    remat_options_init(&o);
    o.algorithm = REMAT_ALG_PAPER_LINEAR;
    struct remat_plan pl;
    assert_int_equal(remat_solve(p, &o, &pl, NULL), REMAT_OK);
    assert_int_equal(pl.objective_value, 6);
    assert_int_equal(pl.n_checkpoints, 1);
    assert_int_equal(pl.checkpoints[0], 3);
    assert_int_equal(pl.peak_bytes, 14);
    remat_plan_clear(&pl);
    remat_options_init(&o);
    struct remat_plan mp;
    assert_int_equal(remat_solve(p, &o, &mp, NULL), REMAT_OK);
    assert_int_equal(mp.peak_bytes, 12);
    assert_int_equal(mp.objective_value, 12);
    assert_int_equal(mp.n_checkpoints, 2);
    assert_int_equal(mp.checkpoints[0], 1);
    assert_int_equal(mp.checkpoints[1], 3);
    remat_plan_clear(&mp);
    size_t unique = 0, canonical = 0;
    check_small(p, &unique, &canonical);
    assert_int_equal(unique, 1);
    remat_profile_free(p);
}

/* Through remat_solve: min-peak's plan re-simulates to its objective, never
 * exceeds paper-linear's set under `traced`, and beats it where the
 * gradients and weights that `prefix` leaves out decide the placement. */
static void test_beats_paper_linear(void **state)
{
    (void)state;
    size_t strictly = 0;
    for (uint64_t seed = 1; seed <= 40; seed++)
        for (int dist = 0; dist < RANDCHAIN_N_DISTS; dist++) {
            struct remat_profile *p = randchain_profile(500 + seed, 8 + (size_t)(seed % 60),
                                                        (enum randchain_dist)dist, 1);
            assert_non_null(p);
            struct remat_options o;
            remat_options_init(&o);
            struct remat_plan plan;
            assert_int_equal(remat_solve(p, &o, &plan, NULL), REMAT_OK);
            assert_int_equal(plan.algorithm, REMAT_ALG_MIN_PEAK);
            assert_int_equal(plan.objective_value, plan.peak_bytes);
            assert_int_equal(simulate_peak(p, plan.checkpoints, plan.n_checkpoints),
                             plan.peak_bytes);
            int64_t pl = paper_linear_traced(p);
            assert_true(plan.peak_bytes <= pl);
            if (plan.peak_bytes < pl)
                strictly++;
            remat_plan_clear(&plan);
            remat_profile_free(p);
        }
    assert_true(strictly > 0);
}

/* One stage: nothing to choose; the store-all peak. */
static void test_one_stage(void **state)
{
    (void)state;
    static const int64_t out[] = {5};
    static const int64_t btmp[] = {3};
    static const int64_t param[] = {7};
    struct remat_profile *p = make_chain(2, 1, out, NULL, NULL, btmp, param);
    struct remat_plan plan;
    solve_with(p, REMAT__MINPEAK_AUTO, &plan);
    assert_int_equal(plan.n_checkpoints, 0);
    /* W + x_0 + x̄_1 + δ_1, then B(1): + ∂W_1 + b_1 = 7 + 2 + 5 + 5 + 7 + 3. */
    assert_int_equal(plan.objective_value, 29);
    assert_int_equal(simulate_peak(p, NULL, 0), 29);
    remat_plan_clear(&plan);
    remat_profile_free(p);
}

/* The 2^58 refusal (solve_minpeak_chain.h: no sum can overflow below it),
 * for every method: a total of exactly 2^58 is solved, one byte more is
 * REMAT_ELIMIT, and so is any negative count, one count past the limit on
 * its own, a total that passes it over several stages or through the
 * optimizer, and a bwd_freed_bytes outside 0..saved + out. */
static int limit_rc(int64_t input, int64_t saved2, int64_t btmp1, int64_t freed1, int64_t state)
{
    struct remat_profile *p = remat_profile_new(2, NULL);
    assert_non_null(p);
    p->input_bytes = input;
    for (size_t i = 0; i < 2; i++) {
        p->stages[i].out_bytes = 1;
        p->stages[i].saved_bytes = 1;
    }
    p->stages[1].saved_bytes = saved2;
    p->stages[0].bwd_tmp_bytes = btmp1;
    p->stages[0].bwd_freed_bytes = freed1;
    p->optimizer.state_bytes = state;
    int rc = 0;
    for (size_t k = 0; k < sizeof methods / sizeof methods[0]; k++) {
        struct remat_plan plan;
        memset(&plan, 0, sizeof plan);
        struct remat_error err;
        int got = remat__min_peak_with(p, methods[k], &plan, &err);
        if (k == 0)
            rc = got;
        assert_int_equal(got, rc); /* every method refuses the same */
        if (got == REMAT_ELIMIT)
            assert_string_equal(err.message,
                                "the profile's byte counts add up to more than 2^58 bytes");
        remat_plan_clear(&plan);
    }
    remat_profile_free(p);
    return rc;
}

static void test_byte_limit(void **state)
{
    (void)state;
    const int64_t lim = INT64_C(1) << 58;
    /* Stage bytes: 1 + 1 and 1 + saved2, so the total is input + 3 + saved2. */
    assert_int_equal(limit_rc(lim - 4, 1, 0, 0, 0), REMAT_OK);
    assert_int_equal(limit_rc(lim - 3, 1, 0, 0, 0), REMAT_ELIMIT);
    assert_int_equal(limit_rc(5, lim - 8, 0, 0, 0), REMAT_OK);
    assert_int_equal(limit_rc(5, lim - 7, 0, 0, 0), REMAT_ELIMIT);
    assert_int_equal(limit_rc(5, 1, lim + 1, 0, 0), REMAT_ELIMIT);
    assert_int_equal(limit_rc(5, 1, INT64_MAX, 0, 0), REMAT_ELIMIT);
    assert_int_equal(limit_rc(INT64_MAX, 1, 0, 0, 0), REMAT_ELIMIT);
    assert_int_equal(limit_rc(lim / 2, lim / 2, 0, 0, 0), REMAT_ELIMIT);
    assert_int_equal(limit_rc(-1, 1, 0, 0, 0), REMAT_ELIMIT);
    assert_int_equal(limit_rc(5, 1, -1, 0, 0), REMAT_ELIMIT);
    assert_int_equal(limit_rc(5, 1, 0, 2, 0), REMAT_OK);
    assert_int_equal(limit_rc(5, 1, 0, 3, 0), REMAT_ELIMIT);
    assert_int_equal(limit_rc(5, 1, 0, -1, 0), REMAT_ELIMIT);
    assert_int_equal(limit_rc(lim - 4 - 9, 1, 0, 0, 9), REMAT_OK);
    assert_int_equal(limit_rc(lim - 4 - 9, 1, 0, 0, 10), REMAT_ELIMIT);
    assert_int_equal(limit_rc(5, 1, 0, 0, -1), REMAT_ELIMIT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_stage),
        cmocka_unit_test(test_pooling_drop),
        cmocka_unit_test(test_beats_paper_linear_by_hand),
        cmocka_unit_test(test_exhaustive_random),
        cmocka_unit_test(test_fast_vs_ref),
        cmocka_unit_test(test_switch_to_tree),
        cmocka_unit_test(test_skipped_pass_same_set),
        cmocka_unit_test(test_beats_paper_linear),
        cmocka_unit_test(test_byte_limit),
        /* One per line, so that adding a test touches one line. */
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
