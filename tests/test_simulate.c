/* test_simulate.c - the simulator on a 3-stage chain worked out by hand, in
 * every model, plus the schedules it must refuse. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "remat_private.h"

/* The hand chain: x_0 = 2 and
 *   stage  out  saved  fwd_tmp  bwd_tmp  param  fwd_ms  bwd_ms
 *     1     4     6       1        3      10     1.0     2.0
 *     2     3     3       0        2       0     1.5     2.5
 *     3     5     7       2        1       5     0.5     1.0
 * W = 15, so the traced live bytes start at W + x_0 = 17. */
static struct remat_profile *hand_chain(void)
{
    struct remat_profile *p = remat_profile_new(3, NULL);
    assert_non_null(p);
    p->input_bytes = 2;
    const int64_t v[3][5] = {{4, 6, 1, 3, 10}, {3, 3, 0, 2, 0}, {5, 7, 2, 1, 5}};
    const double ms[3][2] = {{1.0, 2.0}, {1.5, 2.5}, {0.5, 1.0}};
    for (int i = 0; i < 3; i++) {
        struct remat_stage *s = &p->stages[i];
        s->out_bytes = v[i][0];
        s->saved_bytes = v[i][1];
        s->fwd_tmp_bytes = v[i][2];
        s->fwd_grad_tmp_bytes = v[i][2];
        s->bwd_tmp_bytes = v[i][3];
        s->param_bytes = v[i][4];
        s->fwd_ms = ms[i][0];
        s->bwd_ms = ms[i][1];
    }
    assert_int_equal(remat_profile_validate(p, NULL), REMAT_OK);
    return p;
}

static void expect_sim(const struct remat_profile *p, enum remat_model model, const size_t *ck,
                       size_t m, int64_t peak, size_t peak_phase, const int64_t *timeline,
                       size_t n_phases)
{
    struct remat_sim sim;
    struct remat_error err;
    assert_int_equal(remat_simulate_checkpoints(p, model, ck, m, 1, &sim, &err), REMAT_OK);
    assert_int_equal(sim.peak_bytes, peak);
    assert_int_equal(sim.peak_phase, peak_phase);
    assert_int_equal(sim.n_phases, n_phases);
    for (size_t k = 0; k < n_phases; k++)
        assert_int_equal(sim.timeline[k], timeline[k]);
    remat_sim_clear(&sim);
}

/* Traced, C = {} (store-all): F_all 1..3, loss, B 3..1.
 *   F_all(1): during 17+6+1 = 24, L = 23      F_all(2): 23+3+0 = 26, L = 26
 *   F_all(3): 26+7+2 = 35, L = 33             loss: 33+5 = 38, L = 38
 *   B(3): 38 + x_2 3 + p 5 + b 1 = 47; L = 38+3+5-7-5 = 34 (x_2 is in x̄_2, kept)
 *   B(2): 34+4+0+2 = 40; L = 34+4-3-3 = 32    B(1): 32+0+10+3 = 45; L = 32+10-6-4 = 32
 * The end state is x_0 + W + ∂W = 2 + 15 + 15 = 32. */
static void traced_store_all(void **state)
{
    (void)state;
    struct remat_profile *p = hand_chain();
    const int64_t tl[] = {23, 26, 33, 38, 34, 32, 32};
    expect_sim(p, REMAT_MODEL_TRACED, NULL, 0, 47, 4, tl, 7);
    struct remat_sim sim;
    assert_int_equal(remat_simulate_checkpoints(p, REMAT_MODEL_TRACED, NULL, 0, 0, &sim, NULL), 0);
    assert_null(sim.timeline);
    assert_true(sim.total_ms == 1.0 + 1.5 + 0.5 + 2.0 + 2.5 + 1.0);
    assert_true(sim.recompute_ms == 0.0);
    remat_profile_free(p);
}

/* Traced, C = {1}: F_ck(1) F_all(2) F_all(3) loss B(3) B(2) F_all(1) B(1).
 *   F_ck(1): 17+4+1 = 22, L = 21    F_all(2): 21+3 = 24, L = 24    F_all(3): 33, L = 31
 *   loss: 36, L = 36                B(3): 36+3+5+1 = 45, L = 32
 *   B(2): 32+4+2 = 38, L = 32+4-3-3 = 30, then the plain x_1 is freed: 26
 *   F_all(1): 26+6+1 = 33, L = 32   B(1): 32+10+3 = 45, L = 32
 * The peak is 45, first reached by B(3) (phase 4); recompute is fwd_ms of stage 1. */
static void traced_one_checkpoint(void **state)
{
    (void)state;
    struct remat_profile *p = hand_chain();
    const size_t ck[] = {1};
    const int64_t tl[] = {21, 24, 31, 36, 32, 26, 32, 32};
    expect_sim(p, REMAT_MODEL_TRACED, ck, 1, 45, 4, tl, 8);
    struct remat_sim sim;
    assert_int_equal(remat_simulate_checkpoints(p, REMAT_MODEL_TRACED, ck, 1, 0, &sim, NULL), 0);
    assert_true(sim.recompute_ms == 1.0);
    assert_true(sim.total_ms == 9.5);
    remat_profile_free(p);
}

/* Traced, C = {1, 2}: F_ck(1) F_ck(2) F_all(3) loss B(3) F_all(2) B(2) F_all(1) B(1).
 *   F_ck(1): 22, L = 21   F_ck(2): 21+3 = 24, L = 24 (x_1 kept)   F_all(3): 33, L = 31
 *   loss: 36              B(3): 45, L = 32, x_2 plain freed: 29
 *   F_all(2): 29+3 = 32   B(2): 32+4+2 = 38, L = 30, x_1 freed: 26
 *   F_all(1): 33, L = 32  B(1): 45, L = 32 */
static void traced_two_checkpoints(void **state)
{
    (void)state;
    struct remat_profile *p = hand_chain();
    const size_t ck[] = {1, 2};
    const int64_t tl[] = {21, 24, 31, 36, 29, 32, 26, 32, 32};
    expect_sim(p, REMAT_MODEL_TRACED, ck, 2, 45, 4, tl, 9);
    remat_profile_free(p);
}

/* A block's refinements on the hand chain: stage 2's forward without grad
 * holds 9 for a moment (f_2 = 9, g_2 = 0), and stages 1 and 3 free saved
 * tensors before their backward's peak (r_1 = 10, r_3 = 6: net transients
 * 3 - 10 = -7 and 1 - 6 = -5).  Traced, C = {2}:
 *   F_ck(1): 17+4+1 = 22, L = 21
 *   F_∅(2): 21+3+f_2 9 = 33, L = 24, the plain unkept x_1 freed: 20
 *   F_all(3): 20+7+2 = 29, L = 27     loss: 32, L = 32
 *   B(3): 32 + x_2 3 + p 5 + 1 - 6 = 35; L = 32+3+5-7-5 = 28, plain x_2 freed: 25
 *   F_all(1): 25+6+1 = 32, L = 31     F_all(2): 31+3+g_2 0 = 34, L = 34
 *   B(2): 34+4+0+2 = 40, L = 32       B(1): 32+0+10+3-10 = 35, L = 32
 * The peak is B(2)'s 40 (phase 7); without the refinements B(1) would
 * reach 45. */
static void traced_block_fields(void **state)
{
    (void)state;
    struct remat_profile *p = hand_chain();
    p->stages[1].fwd_tmp_bytes = 9;
    p->stages[1].fwd_grad_tmp_bytes = 0;
    p->stages[0].bwd_freed_bytes = 10;
    p->stages[2].bwd_freed_bytes = 6;
    assert_int_equal(remat_profile_validate(p, NULL), REMAT_OK);
    const size_t ck[] = {2};
    const int64_t tl[] = {21, 20, 27, 32, 25, 31, 34, 32, 32};
    expect_sim(p, REMAT_MODEL_TRACED, ck, 1, 40, 7, tl, 9);
    /* Store-all (both of the simulator's paths): F_all(2) adds g_2 = 0,
     * B(3) 38+3+5+1-6 = 41, B(1) 32+10+3-10 = 35; the peak is B(3)'s 41. */
    const int64_t tl0[] = {23, 26, 33, 38, 34, 32, 32};
    expect_sim(p, REMAT_MODEL_TRACED, NULL, 0, 41, 4, tl0, 7);
    struct remat_sim sim;
    assert_int_equal(remat_simulate_checkpoints(p, REMAT_MODEL_TRACED, NULL, 0, 0, &sim, NULL), 0);
    assert_int_equal(sim.peak_bytes, 41);
    remat_sim_clear(&sim);
    /* One byte more than x̄_1 + x_1 freed is refused. */
    p->stages[0].bwd_freed_bytes = 11;
    struct remat_error err;
    assert_int_equal(remat_profile_validate(p, &err), REMAT_EINVAL);
    assert_string_equal(err.pointer, "/stages/0/bwd_freed_bytes");
    remat_profile_free(p);
}

/* Prefix, C = {1}; d = [2, 4, 3, 5].  B(C) = max(2 + 4, 2 + 4 + 3 + 5) = 14.
 * Replay from L = x_0 = 2: F_ck(1) 6, F_all(2) 9, F_all(3) 14, loss 14,
 * B(3) frees x_3: 9, B(2) frees x_2 and the plain x_1: 2, F_all(1) 6, B(1) 2. */
static void prefix_one_checkpoint(void **state)
{
    (void)state;
    struct remat_profile *p = hand_chain();
    const size_t ck[] = {1};
    const int64_t tl[] = {6, 9, 14, 14, 9, 2, 6, 2};
    expect_sim(p, REMAT_MODEL_PREFIX, ck, 1, 14, 2, tl, 8);
    assert_int_equal(remat__prefix_value(p, ck, 1), 14);
    remat_profile_free(p);
}

/* Sum, C = {1}: b = {0, 1, 3}, members 2 + 4 + 5 = 11, interiors (0,1) = 0 and
 * (1,3) = x_2 = 3, so A(C) = 14.  Replay: members count from the start (11);
 * F_all(2) adds the interior x_2 (14) and B(2) frees it. */
static void sum_one_checkpoint(void **state)
{
    (void)state;
    struct remat_profile *p = hand_chain();
    const size_t ck[] = {1};
    const int64_t tl[] = {11, 14, 14, 14, 14, 11, 11, 11};
    expect_sim(p, REMAT_MODEL_SUM, ck, 1, 14, 1, tl, 8);
    assert_int_equal(remat__sum_value(p, ck, 1), 14);
    /* C = {}: 2 + 5 + (4 + 3) = 14 as well; C = {1, 2}: 2+4+3+5 = 14. */
    assert_int_equal(remat__sum_value(p, NULL, 0), 14);
    remat_profile_free(p);
}

static void sum_needs_checkpoints(void **state)
{
    (void)state;
    struct remat_profile *p = hand_chain();
    struct remat_schedule s;
    remat_schedule_init(&s);
    assert_int_equal(remat_schedule_from_checkpoints(p, NULL, 0, &s, NULL), 0);
    struct remat_sim sim;
    struct remat_error err;
    assert_int_equal(remat_simulate(p, REMAT_MODEL_SUM, &s, 0, &sim, &err), REMAT_EUNSUPPORTED);
    assert_int_equal(remat_simulate(p, REMAT_MODEL_TRACED, &s, 0, &sim, &err), REMAT_OK);
    assert_int_equal(sim.peak_bytes, 47);
    remat_sim_clear(&sim);
    remat_schedule_clear(&s);
    remat_profile_free(p);
}

/* A schedule given as (kind, stage) pairs must fail at op `bad`. */
static void expect_invalid(const struct remat_profile *p, const uint8_t (*ops)[2], size_t n_ops,
                           const char *pointer)
{
    struct remat_schedule s;
    remat_schedule_init(&s);
    for (size_t k = 0; k < n_ops; k++)
        assert_int_equal(remat_schedule_push(&s, ops[k][0], ops[k][1]), 0);
    struct remat_sim sim;
    struct remat_error err;
    assert_int_equal(remat_simulate(p, REMAT_MODEL_TRACED, &s, 1, &sim, &err), REMAT_EINVAL);
    assert_string_equal(err.pointer, pointer);
    assert_null(sim.timeline);
    remat_schedule_clear(&s);
}

static void invalid_schedules(void **state)
{
    (void)state;
    struct remat_profile *p = hand_chain();
    enum {
        N = REMAT_OP_F_NONE,
        K = REMAT_OP_F_CK,
        A = REMAT_OP_F_ALL,
        L = REMAT_OP_LOSS,
        B = REMAT_OP_B
    };
    /* Stage 2 before stage 1: its input is not live. */
    const uint8_t a[][2] = {{A, 2}};
    expect_invalid(p, a, 1, "/schedule/0");
    /* Computing x_1 twice. */
    const uint8_t b[][2] = {{A, 1}, {A, 1}};
    expect_invalid(p, b, 2, "/schedule/1");
    /* Backward before the loss. */
    const uint8_t c[][2] = {{A, 1}, {A, 2}, {A, 3}, {B, 3}};
    expect_invalid(p, c, 4, "/schedule/3");
    /* Backward out of order. */
    const uint8_t d[][2] = {{A, 1}, {A, 2}, {A, 3}, {L, 3}, {B, 2}};
    expect_invalid(p, d, 5, "/schedule/4");
    /* Backward of a stage whose saved tensors were not kept (F_∅ made x_2). */
    const uint8_t e[][2] = {{A, 1}, {N, 2}, {A, 3}, {L, 3}, {B, 3}, {B, 2}};
    expect_invalid(p, e, 6, "/schedule/5");
    /* The loss needs stage n. */
    const uint8_t f[][2] = {{A, 1}, {A, 2}, {A, 3}, {L, 2}};
    expect_invalid(p, f, 4, "/schedule/3");
    /* Ends with work left: no backward of stage 1. */
    const uint8_t g[][2] = {{A, 1}, {A, 2}, {A, 3}, {L, 3}, {B, 3}, {B, 2}};
    expect_invalid(p, g, 6, "/schedule/6");
    /* No such stage, unknown kind. */
    const uint8_t h[][2] = {{A, 4}};
    expect_invalid(p, h, 1, "/schedule/0");
    const uint8_t i[][2] = {{9, 1}};
    expect_invalid(p, i, 1, "/schedule/0");
    /* Recomputing x_1 after it was kept: F_ck(1) F_ck(2) ... then F_all(1)
     * while x_1 is still live. */
    const uint8_t j[][2] = {{K, 1}, {K, 2}, {A, 1}};
    expect_invalid(p, j, 3, "/schedule/2");
    remat_profile_free(p);
}

static void bad_checkpoints(void **state)
{
    (void)state;
    struct remat_profile *p = hand_chain();
    struct remat_sim sim;
    struct remat_error err;
    const size_t desc[] = {2, 1};
    assert_int_equal(remat_simulate_checkpoints(p, REMAT_MODEL_TRACED, desc, 2, 0, &sim, &err),
                     REMAT_EINVAL);
    assert_string_equal(err.pointer, "/checkpoints/1");
    const size_t last[] = {3};
    assert_int_equal(remat_simulate_checkpoints(p, REMAT_MODEL_PREFIX, last, 1, 0, &sim, &err),
                     REMAT_EINVAL);
    assert_string_equal(err.pointer, "/checkpoints/0");
    const size_t zero[] = {0};
    assert_int_equal(remat_simulate_checkpoints(p, REMAT_MODEL_SUM, zero, 1, 0, &sim, &err),
                     REMAT_EINVAL);
    assert_int_equal(remat_simulate_checkpoints(p, (enum remat_model)7, NULL, 0, 0, &sim, &err),
                     REMAT_EINVAL);
    remat_profile_free(p);
}

/* The schedule of a checkpoint set has 2n + 1 + c_m ops and recomputes
 * exactly stages 1..c_m. */
static void schedule_shape(void **state)
{
    (void)state;
    struct remat_profile *p = remat_profile_new(10, NULL);
    assert_non_null(p);
    for (size_t i = 0; i < 10; i++)
        p->stages[i].out_bytes = (int64_t)i + 1;
    const size_t ck[] = {2, 5, 7};
    struct remat_schedule s;
    remat_schedule_init(&s);
    assert_int_equal(remat_schedule_from_checkpoints(p, ck, 3, &s, NULL), 0);
    assert_int_equal(s.n_ops, 2 * 10 + 1 + 7);
    assert_int_equal(s.ops[0].kind, REMAT_OP_F_CK);
    assert_int_equal(s.ops[2].kind, REMAT_OP_F_CK);
    assert_int_equal(s.ops[2].stage, 3);
    assert_int_equal(s.ops[7].kind, REMAT_OP_F_ALL);
    assert_int_equal(s.ops[7].stage, 8);
    assert_int_equal(s.ops[10].kind, REMAT_OP_LOSS);
    struct remat_sim sim;
    assert_int_equal(remat_simulate(p, REMAT_MODEL_TRACED, &s, 0, &sim, NULL), 0);
    assert_true(sim.recompute_ms == 7.0);
    assert_true(sim.total_ms == 10 * 3.0 + 7.0);
    remat_schedule_clear(&s);
    remat_profile_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(traced_store_all),       cmocka_unit_test(traced_one_checkpoint),
        cmocka_unit_test(traced_two_checkpoints), cmocka_unit_test(prefix_one_checkpoint),
        cmocka_unit_test(sum_one_checkpoint),     cmocka_unit_test(sum_needs_checkpoints),
        cmocka_unit_test(invalid_schedules),      cmocka_unit_test(bad_checkpoints),
        cmocka_unit_test(schedule_shape),         cmocka_unit_test(traced_block_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
