/* test_optimizer.c - the optimizer in the whole step: names, the memory
 * model's numbers, the simulator's accounting, and every solver still exact
 * against exhaustive search once the state and the step are in the peak. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "exhaustive.h"
#include "randchain.h"
#include "remat_private.h"

static void test_names(void **state)
{
    (void)state;
    static const char *const all[] = {"none", "sgd", "sgd-momentum", "adam", "adamw"};
    for (int k = 0; k < REMAT_OPTIM_COUNT; k++) {
        enum remat_optim_kind out;
        assert_string_equal(remat_optim_name(k), all[k]);
        assert_int_equal(remat_optim_parse(all[k], &out), REMAT_OK);
        assert_int_equal((int)out, k);
    }
    enum remat_optim_kind out = REMAT_OPTIM_ADAM;
    assert_int_equal(remat_optim_parse("Adam", &out), REMAT_EINVAL);
    assert_int_equal(remat_optim_parse(NULL, &out), REMAT_EINVAL);
    assert_int_equal((int)out, REMAT_OPTIM_ADAM);
    assert_string_equal(remat_optim_name(REMAT_OPTIM_COUNT), "?");
    assert_string_equal(remat_optim_name(-1), "?");
}

/* Three stages of 1000, 3000 and 0 bytes of fp32 weights. */
static struct remat_profile *weights_profile(void)
{
    struct remat_profile *p = remat_profile_new(3, NULL);
    assert_non_null(p);
    p->input_bytes = 100;
    int64_t w[3] = {1000, 3000, 0};
    for (size_t i = 0; i < 3; i++) {
        p->stages[i].out_bytes = 200;
        p->stages[i].saved_bytes = 400;
        p->stages[i].param_bytes = w[i];
    }
    return p;
}

static void estimate(const struct remat_profile *p, enum remat_optim_kind kind, int foreach, int pe,
                     int se, int master, int decay, int64_t state_bytes, int64_t tmp_bytes)
{
    struct remat_optim_spec spec;
    remat_optim_spec_init(&spec);
    spec.kind = kind;
    spec.foreach = foreach;
    spec.param_elem_bytes = pe;
    spec.state_elem_bytes = se;
    spec.master_weights = master;
    spec.weight_decay = decay;
    spec.step_ms = 1.5;
    struct remat_optimizer o;
    struct remat_error err;
    assert_int_equal(remat_optim_estimate(p, &spec, &o, &err), REMAT_OK);
    assert_int_equal(o.kind, kind);
    assert_int_equal(o.state_bytes, state_bytes);
    assert_int_equal(o.step_tmp_bytes, tmp_bytes);
    assert_true(o.step_ms == 1.5);
}

static void test_estimate(void **state)
{
    (void)state;
    struct remat_profile *p = weights_profile();
    /* W = 4000, largest stage 3000. */
    estimate(p, REMAT_OPTIM_NONE, 0, 0, 0, 0, 0, 0, 0);
    estimate(p, REMAT_OPTIM_SGD, 0, 0, 0, 0, 0, 0, 0);
    estimate(p, REMAT_OPTIM_SGD, 0, 0, 0, 0, 1, 0, 3000);
    estimate(p, REMAT_OPTIM_SGD, 1, 0, 0, 0, 1, 0, 4000);
    estimate(p, REMAT_OPTIM_SGD_MOMENTUM, 0, 0, 0, 0, 0, 4000, 0);
    estimate(p, REMAT_OPTIM_ADAM, 0, 0, 0, 0, 0, 8000, 6000);
    estimate(p, REMAT_OPTIM_ADAM, 0, 0, 0, 0, 1, 8000, 9000);
    estimate(p, REMAT_OPTIM_ADAM, 1, 0, 0, 0, 0, 8000, 8000);
    estimate(p, REMAT_OPTIM_ADAMW, 0, 0, 0, 0, 1, 8000, 6000);
    /* bf16 weights (2000 elements), fp32 state and an fp32 master copy. */
    estimate(p, REMAT_OPTIM_ADAMW, 0, 2, 4, 1, 0, 2 * 8000 + 8000, 2 * 6000);
    /* fp16 state of fp32 weights halves it. */
    estimate(p, REMAT_OPTIM_ADAM, 0, 4, 2, 0, 0, 4000, 3000);

    struct remat_optim_spec spec;
    remat_optim_spec_init(&spec);
    struct remat_optimizer o;
    struct remat_error err;
    spec.kind = REMAT_OPTIM_ADAM;
    spec.param_elem_bytes = 3;
    assert_int_equal(remat_optim_estimate(p, &spec, &o, &err), REMAT_EINVAL);
    assert_string_equal(err.pointer, "/param_elem_bytes");
    spec.param_elem_bytes = 4;
    spec.state_elem_bytes = 16;
    assert_int_equal(remat_optim_estimate(p, &spec, &o, &err), REMAT_EINVAL);
    assert_string_equal(err.pointer, "/state_elem_bytes");
    spec.state_elem_bytes = 0;
    spec.kind = (enum remat_optim_kind)REMAT_OPTIM_COUNT;
    assert_int_equal(remat_optim_estimate(p, &spec, &o, &err), REMAT_EINVAL);
    assert_string_equal(err.pointer, "/optimizer");
    remat_profile_free(p);
}

static void test_validate(void **state)
{
    (void)state;
    struct remat_profile *p = weights_profile();
    struct remat_error err;
    assert_int_equal(remat_profile_validate(p, &err), REMAT_OK);
    p->optimizer.state_bytes = 5;
    assert_int_equal(remat_profile_validate(p, &err), REMAT_EINVAL);
    assert_string_equal(err.pointer, "/optimizer/name");
    p->optimizer.kind = REMAT_OPTIM_ADAM;
    assert_int_equal(remat_profile_validate(p, &err), REMAT_OK);
    p->optimizer.step_tmp_bytes = -1;
    assert_int_equal(remat_profile_validate(p, &err), REMAT_EINVAL);
    assert_string_equal(err.pointer, "/optimizer/step_tmp_bytes");
    p->optimizer.step_tmp_bytes = REMAT_MAX_BYTES;
    p->optimizer.state_bytes = REMAT_MAX_BYTES;
    assert_int_equal(remat_profile_validate(p, &err), REMAT_ELIMIT);
    p->optimizer.state_bytes = 0;
    p->optimizer.step_tmp_bytes = 0;
    p->optimizer.step_ms = -1;
    assert_int_equal(remat_profile_validate(p, &err), REMAT_EINVAL);
    assert_string_equal(err.pointer, "/optimizer/step_ms");
    remat_profile_free(p);
}

/* The store-all run of weights_profile by hand: live starts at
 * x_0 + W + state = 100 + 4000 + S; the forward adds 400 per stage (peak
 * 1300 above the start), the loss 200, and the backward trades saved
 * tensors for gradients. */
static void test_simulate_step(void **state)
{
    (void)state;
    struct remat_profile *p = weights_profile();
    struct remat_sim a, b;
    assert_int_equal(remat_simulate_checkpoints(p, REMAT_MODEL_TRACED, NULL, 0, 0, &a, NULL),
                     REMAT_OK);
    int64_t base_peak = a.peak_bytes;
    double base_ms = a.total_ms;
    remat_sim_clear(&a);

    /* Small state, small step: the state adds to every phase. */
    p->optimizer.kind = REMAT_OPTIM_ADAM;
    p->optimizer.state_bytes = 10;
    p->optimizer.step_tmp_bytes = 1;
    p->optimizer.step_ms = 2.0;
    struct remat_schedule s;
    remat_schedule_init(&s);
    assert_int_equal(remat_schedule_from_checkpoints(p, NULL, 0, &s, NULL), REMAT_OK);
    assert_int_equal(remat_simulate(p, REMAT_MODEL_TRACED, &s, 1, &a, NULL), REMAT_OK);
    assert_int_equal(remat_simulate_checkpoints(p, REMAT_MODEL_TRACED, NULL, 0, 0, &b, NULL),
                     REMAT_OK);
    assert_int_equal(a.peak_bytes, base_peak + 10);
    assert_true(a.total_ms == base_ms + 2.0);
    assert_int_equal(b.peak_bytes, a.peak_bytes);
    assert_int_equal(b.peak_phase, a.peak_phase);
    assert_true(b.total_ms == a.total_ms);
    /* The last timeline entry: input, weights, gradients and state. */
    assert_int_equal(a.timeline[a.n_phases - 1], 100 + 2 * 4000 + 10);
    remat_sim_clear(&a);
    remat_sim_clear(&b);

    /* A large step: the peak is the step, after the last op. */
    p->optimizer.step_tmp_bytes = 100000;
    int64_t floor = 100 + 2 * 4000 + 10 + 100000;
    assert_int_equal(remat_optim_step_peak_bytes(p), floor);
    assert_int_equal(remat_simulate(p, REMAT_MODEL_TRACED, &s, 0, &a, NULL), REMAT_OK);
    assert_int_equal(remat_simulate_checkpoints(p, REMAT_MODEL_TRACED, NULL, 0, 0, &b, NULL),
                     REMAT_OK);
    assert_int_equal(a.peak_bytes, floor);
    assert_int_equal(a.peak_phase, s.n_ops);
    assert_int_equal(b.peak_bytes, floor);
    assert_int_equal(b.peak_phase, s.n_ops);
    remat_sim_clear(&a);
    remat_sim_clear(&b);
    /* The paper's models know no optimizer. */
    assert_int_equal(remat_simulate(p, REMAT_MODEL_PREFIX, &s, 0, &a, NULL), REMAT_OK);
    p->optimizer = (struct remat_optimizer){0};
    assert_int_equal(remat_simulate(p, REMAT_MODEL_PREFIX, &s, 0, &b, NULL), REMAT_OK);
    assert_int_equal(a.peak_bytes, b.peak_bytes);
    remat_sim_clear(&a);
    remat_sim_clear(&b);
    remat_schedule_clear(&s);
    remat_profile_free(p);
}

/* A random optimizer for a chain: state up to 3x the weights, a step
 * transient from nothing to far above everything else (so that in some
 * chains the step is the peak, in some it ties, in most it is not). */
static void add_optimizer(struct remat_profile *p, uint64_t seed)
{
    struct randchain_rng r;
    randchain_seed(&r, seed * 977 + 13);
    int64_t w = 0, act = 0;
    for (size_t i = 0; i < p->n_stages; i++) {
        w += p->stages[i].param_bytes;
        act += p->stages[i].saved_bytes;
    }
    p->optimizer.kind = 1 + (int)randchain_below(&r, REMAT_OPTIM_COUNT - 1);
    p->optimizer.state_bytes = w * (int64_t)randchain_below(&r, 4);
    switch (randchain_below(&r, 3)) {
    case 0:
        p->optimizer.step_tmp_bytes = 0;
        break;
    case 1:
        p->optimizer.step_tmp_bytes = (int64_t)randchain_below(&r, (uint64_t)act + 2);
        break;
    default:
        p->optimizer.step_tmp_bytes = act * (int64_t)(1 + randchain_below(&r, 3));
        break;
    }
    p->optimizer.step_ms = 0.25 * (double)randchain_below(&r, 8);
    assert_int_equal(remat_profile_validate(p, NULL), REMAT_OK);
}

static const enum remat_algorithm single[] = {REMAT_ALG_STORE_ALL,    REMAT_ALG_SQRT,
                                              REMAT_ALG_ACG,          REMAT_ALG_PAPER_CUBIC,
                                              REMAT_ALG_PAPER_LINEAR, REMAT_ALG_MIN_PEAK};

/* Every solver's traced peak is its set's simulation with the optimizer;
 * min-peak's is exhaustive search's least; min-time fits exactly at that
 * least and is infeasible one byte below, naming it. */
static void test_exhaustive(void **state)
{
    (void)state;
    size_t chains = 0, step_peaks = 0;
    for (uint64_t seed = 1; seed <= 60; seed++)
        for (int dist = 0; dist < RANDCHAIN_N_DISTS; dist++) {
            size_t n = 1 + (size_t)((seed * 5 + (uint64_t)dist) % 12);
            struct remat_profile *p = randchain_profile(seed, n, (enum randchain_dist)dist, 1);
            assert_non_null(p);
            add_optimizer(p, seed + (uint64_t)dist);
            struct exhaustive_result ex;
            assert_int_equal(exhaustive_search(p, REMAT_MODEL_TRACED, &ex), REMAT_OK);
            int64_t floor = remat_optim_step_peak_bytes(p);
            assert_true(ex.value >= floor);
            step_peaks += ex.value == floor;
            for (size_t a = 0; a < sizeof single / sizeof single[0]; a++) {
                struct remat_options o;
                remat_options_init(&o);
                o.algorithm = single[a];
                struct remat_plan plan;
                struct remat_error err;
                int rc = remat_solve(p, &o, &plan, &err);
                if (rc != REMAT_OK)
                    fail_msg("%s: %s", remat_algorithm_name(single[a]), err.message);
                int64_t v;
                assert_int_equal(exhaustive_value(p, REMAT_MODEL_TRACED, plan.checkpoints,
                                                  plan.n_checkpoints, &v),
                                 REMAT_OK);
                assert_int_equal(plan.peak_bytes, v);
                assert_true(v >= ex.value);
                if (single[a] == REMAT_ALG_MIN_PEAK) {
                    assert_int_equal(v, ex.value);
                    assert_int_equal(plan.objective_value, ex.value);
                    /* When the step reaches store-all, store-all is the plan. */
                    if (plan.store_all_peak_bytes <= floor)
                        assert_int_equal(plan.n_checkpoints, 0);
                }
                remat_plan_clear(&plan);
            }
            struct remat_options o;
            remat_options_init(&o);
            o.algorithm = REMAT_ALG_MIN_TIME;
            o.budget_bytes = ex.value;
            struct remat_plan plan;
            struct remat_error err;
            if (remat_solve(p, &o, &plan, &err) != REMAT_OK)
                fail_msg("min-time at %lld: %s", (long long)ex.value, err.message);
            assert_true(plan.peak_bytes <= ex.value);
            remat_plan_clear(&plan);
            /* Nested schedules may go below the single-level least; the
             * least budget min-time names is then exact: it fits, one byte
             * less does not, and it is never below the step. */
            o.budget_bytes = 1;
            assert_int_equal(remat_solve(p, &o, &plan, &err), REMAT_EINFEASIBLE);
            int64_t least = plan.min_budget_bytes;
            remat_plan_clear(&plan);
            assert_true(least <= ex.value && least >= floor);
            o.budget_bytes = least;
            assert_int_equal(remat_solve(p, &o, &plan, &err), REMAT_OK);
            assert_true(plan.peak_bytes <= least);
            remat_plan_clear(&plan);
            o.budget_bytes = least - 1;
            assert_int_equal(remat_solve(p, &o, &plan, &err), REMAT_EINFEASIBLE);
            assert_int_equal(plan.min_budget_bytes, least);
            remat_plan_clear(&plan);
            remat_profile_free(p);
            chains++;
        }
    assert_true(chains >= 200);
    /* The step must have been the peak in some chains, or the floor went
     * untested. */
    assert_true(step_peaks >= 20);
    print_message("%zu chains, %zu where the optimizer step is the peak\n", chains, step_peaks);
}

/* The frontier's points keep their order with a step floor: ascending
 * peak, strictly descending time, none below the floor. */
static void test_frontier(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        struct remat_profile *p = randchain_profile(seed, 10, RANDCHAIN_POOLING, 1);
        assert_non_null(p);
        add_optimizer(p, seed);
        struct remat_frontier f;
        assert_int_equal(remat_frontier_compute(p, 0, &f, NULL), REMAT_OK);
        assert_true(f.n_points >= 1);
        for (size_t k = 0; k < f.n_points; k++) {
            assert_true(f.points[k].peak_bytes >= remat_optim_step_peak_bytes(p));
            if (k > 0) {
                assert_true(f.points[k].peak_bytes > f.points[k - 1].peak_bytes);
                assert_true(f.points[k].total_ms < f.points[k - 1].total_ms);
            }
        }
        remat_frontier_clear(&f);
        remat_profile_free(p);
    }
}

/* Both readers, on text and on jansson's tree of it: the same optimizer,
 * or the same error at the same pointer; and the writer round-trips. */
static struct remat_profile *parse_both(const char *text, struct remat_error *err)
{
    struct remat_error e1, e2;
    struct remat_profile *a = remat_profile_parse(text, strlen(text), "", &e1);
    json_t *root = json_loads(text, 0, NULL);
    assert_non_null(root);
    struct remat_profile *b = remat_profile_from_json(root, "", &e2);
    json_decref(root);
    assert_true((a == NULL) == (b == NULL));
    if (a == NULL) {
        assert_string_equal(e1.pointer, e2.pointer);
        assert_string_equal(e1.message, e2.message);
        *err = e1;
        return NULL;
    }
    assert_memory_equal(&a->optimizer, &b->optimizer, sizeof a->optimizer);
    remat_profile_free(b);
    return a;
}

static void test_parse(void **state)
{
    (void)state;
    static const char head[] = "{\"input_bytes\":8,\"stages\":[{\"out_bytes\":4,"
                               "\"param_bytes\":100}],\"optimizer\":";
    char text[512];
    struct remat_error err;
    snprintf(text, sizeof text, "%s%s}", head,
             "{\"name\":\"adamw\",\"foreach\":true,\"state_bytes\":200,"
             "\"step_tmp_bytes\":50,\"step_ms\":1.5,\"unknown\":[1]}");
    struct remat_profile *p = parse_both(text, &err);
    assert_non_null(p);
    assert_int_equal(p->optimizer.kind, REMAT_OPTIM_ADAMW);
    assert_int_equal(p->optimizer.foreach, 1);
    assert_int_equal(p->optimizer.state_bytes, 200);
    assert_int_equal(p->optimizer.step_tmp_bytes, 50);
    assert_true(p->optimizer.step_ms == 1.5);
    json_t *written = remat_profile_to_json(p);
    assert_non_null(written);
    char *out = json_dumps(written, JSON_COMPACT);
    json_decref(written);
    assert_non_null(out);
    struct remat_profile *q = parse_both(out, &err);
    assert_non_null(q);
    assert_memory_equal(&p->optimizer, &q->optimizer, sizeof p->optimizer);
    remat_profile_free(q);
    free(out);
    remat_profile_free(p);
    /* Absent and null: no optimizer. */
    snprintf(text, sizeof text, "%snull}", head);
    p = parse_both(text, &err);
    assert_non_null(p);
    assert_int_equal(p->optimizer.kind, REMAT_OPTIM_NONE);
    remat_profile_free(p);
    static const struct {
        const char *value, *pointer;
    } bad[] = {
        {"5", "/optimizer"},
        {"{}", "/optimizer/name"},
        {"{\"name\":\"lamb\"}", "/optimizer/name"},
        {"{\"name\":\"adam\",\"foreach\":1}", "/optimizer/foreach"},
        {"{\"name\":\"adam\",\"state_bytes\":-1}", "/optimizer/state_bytes"},
        {"{\"name\":\"adam\",\"step_ms\":\"x\"}", "/optimizer/step_ms"},
        {"{\"name\":\"none\",\"state_bytes\":1}", "/optimizer/name"},
        {"{\"name\":\"sgd\",\"state_bytes\":1152921504606846976}", "/stages"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        snprintf(text, sizeof text, "%s%s}", head, bad[k].value);
        assert_null(parse_both(text, &err));
        if (strcmp(err.pointer, bad[k].pointer) != 0)
            fail_msg("%s: pointer %s, want %s (%s)", bad[k].value, err.pointer, bad[k].pointer,
                     err.message);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),      cmocka_unit_test(test_estimate),
        cmocka_unit_test(test_validate),   cmocka_unit_test(test_simulate_step),
        cmocka_unit_test(test_exhaustive), cmocka_unit_test(test_frontier),
        cmocka_unit_test(test_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
