/* test_fits.c - the batch model and remat_fits against exhaustive search
 * over batch sizes on synthetic profiles. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>

#include <cmocka.h>

#include "randchain.h"
#include "remat_private.h"

/* A chain whose fields at batch b are a + c * b per field (a: the seed
 * chain's values / 4, c: its values), weights fixed, times the same way. */
static struct remat_profile *at(const struct remat_profile *base, int64_t b)
{
    struct remat_profile *p = remat_profile_new(base->n_stages, NULL);
    assert_non_null(p);
    p->batch_size = b;
    p->input_bytes = base->input_bytes * b;
    p->optimizer = base->optimizer;
    for (size_t i = 0; i < base->n_stages; i++) {
        const struct remat_stage *s = &base->stages[i];
        struct remat_stage *d = &p->stages[i];
        d->out_bytes = s->out_bytes / 4 + s->out_bytes * b;
        d->saved_bytes = s->saved_bytes / 4 + s->saved_bytes * b;
        d->fwd_tmp_bytes = s->fwd_tmp_bytes * b;
        d->fwd_grad_tmp_bytes = s->fwd_grad_tmp_bytes * b;
        d->bwd_tmp_bytes = s->bwd_tmp_bytes / 2 + s->bwd_tmp_bytes * b;
        d->param_bytes = s->param_bytes;
        d->fwd_ms = 0.25 + s->fwd_ms * (double)b;
        d->bwd_ms = 0.5 + s->bwd_ms * (double)b;
    }
    assert_int_equal(remat_profile_validate(p, NULL), REMAT_OK);
    return p;
}

static struct remat_profile *base_chain(uint64_t seed, size_t n)
{
    struct remat_profile *p = randchain_profile(seed, n, (enum randchain_dist)(seed % 4), 1);
    assert_non_null(p);
    int64_t w = 0;
    for (size_t i = 0; i < n; i++)
        w += p->stages[i].param_bytes;
    p->optimizer.kind = REMAT_OPTIM_ADAM;
    p->optimizer.state_bytes = 2 * w;
    p->optimizer.step_tmp_bytes = w / 3;
    p->optimizer.step_ms = 0.75;
    return p;
}

static void assert_same_profile(const struct remat_profile *a, const struct remat_profile *b)
{
    assert_int_equal(a->input_bytes, b->input_bytes);
    assert_int_equal(a->n_stages, b->n_stages);
    for (size_t i = 0; i < a->n_stages; i++) {
        assert_int_equal(a->stages[i].out_bytes, b->stages[i].out_bytes);
        assert_int_equal(a->stages[i].saved_bytes, b->stages[i].saved_bytes);
        assert_int_equal(a->stages[i].fwd_tmp_bytes, b->stages[i].fwd_tmp_bytes);
        assert_int_equal(a->stages[i].fwd_grad_tmp_bytes, b->stages[i].fwd_grad_tmp_bytes);
        assert_int_equal(a->stages[i].bwd_tmp_bytes, b->stages[i].bwd_tmp_bytes);
        assert_int_equal(a->stages[i].param_bytes, b->stages[i].param_bytes);
        assert_true(fabs(a->stages[i].fwd_ms - b->stages[i].fwd_ms) < 1e-9);
        assert_true(fabs(a->stages[i].bwd_ms - b->stages[i].bwd_ms) < 1e-9);
    }
}

/* Linear data: two measured batches predict every other batch exactly,
 * inside and outside the range, and say which is which. */
static void test_linear_exact(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 10; seed++) {
        struct remat_profile *base = base_chain(seed, 12);
        struct remat_profile *m[2] = {at(base, 16), at(base, 4)};
        for (int64_t b = 1; b <= 40; b++) {
            int ex = -1;
            struct remat_error err;
            struct remat_profile *pred =
                remat_profile_at_batch((const struct remat_profile *const *)m, 2, b, &ex, &err);
            assert_non_null(pred);
            struct remat_profile *truth = at(base, b);
            assert_same_profile(pred, truth);
            assert_int_equal(ex, b < 4 || b > 16);
            assert_int_equal(pred->batch_size, b);
            assert_int_equal(pred->optimizer.state_bytes, base->optimizer.state_bytes);
            remat_profile_free(truth);
            remat_profile_free(pred);
        }
        /* A third batch inside the range checks the fit: zero error. */
        struct remat_profile *three[3] = {m[0], m[1], at(base, 9)};
        struct remat_fit_check chk[3];
        size_t nchk = 9;
        assert_int_equal(
            remat_batch_fit_check((const struct remat_profile *const *)three, 3, chk, &nchk, NULL),
            REMAT_OK);
        assert_int_equal(nchk, 1);
        assert_int_equal(chk[0].batch, 9);
        for (int f = 0; f < REMAT_FIT_N_FIELDS; f++)
            assert_true(chk[0].rel_err[f] < 1e-9);
        /* Perturb the middle one: its out_bytes error is what we put in. */
        three[2]->stages[0].out_bytes += three[2]->stages[0].out_bytes / 10;
        three[2]->stages[0].saved_bytes += three[2]->stages[0].out_bytes;
        assert_int_equal(
            remat_batch_fit_check((const struct remat_profile *const *)three, 3, chk, &nchk, NULL),
            REMAT_OK);
        if (three[2]->stages[0].out_bytes > 20)
            assert_true(chk[0].rel_err[REMAT_FIT_OUT_BYTES] > 0);
        remat_profile_free(three[2]);
        remat_profile_free(m[0]);
        remat_profile_free(m[1]);
        remat_profile_free(base);
    }
}

/* Noisy measurements that shrink with the batch: the prediction is still
 * non-decreasing in every field, and exact at the measured batches where
 * they already grow. */
static void test_monotone(void **state)
{
    (void)state;
    struct remat_profile *base = base_chain(3, 8);
    struct remat_profile *m[3] = {at(base, 2), at(base, 8), at(base, 32)};
    m[1]->stages[3].bwd_tmp_bytes = m[2]->stages[3].bwd_tmp_bytes + 1000; /* falls after 8 */
    m[1]->stages[5].fwd_ms = m[2]->stages[5].fwd_ms + 3;
    struct remat_profile *prev = NULL;
    for (int64_t b = 1; b <= 64; b++) {
        struct remat_profile *p =
            remat_profile_at_batch((const struct remat_profile *const *)m, 3, b, NULL, NULL);
        assert_non_null(p);
        if (prev != NULL)
            for (size_t i = 0; i < p->n_stages; i++) {
                assert_true(p->stages[i].out_bytes >= prev->stages[i].out_bytes);
                assert_true(p->stages[i].saved_bytes >= prev->stages[i].saved_bytes);
                assert_true(p->stages[i].fwd_tmp_bytes >= prev->stages[i].fwd_tmp_bytes);
                assert_true(p->stages[i].bwd_tmp_bytes >= prev->stages[i].bwd_tmp_bytes);
                assert_true(p->stages[i].fwd_ms >= prev->stages[i].fwd_ms);
                assert_true(p->stages[i].bwd_ms >= prev->stages[i].bwd_ms);
            }
        if (b == 2)
            assert_same_profile(p, m[0]);
        if (b == 8)
            assert_same_profile(p, m[1]);
        if (b == 32) /* the running maximum keeps batch 8's larger value */
            assert_int_equal(p->stages[3].bwd_tmp_bytes, m[1]->stages[3].bwd_tmp_bytes);
        remat_profile_free(prev);
        prev = p;
    }
    remat_profile_free(prev);
    for (int k = 0; k < 3; k++)
        remat_profile_free(m[k]);
    remat_profile_free(base);
}

static void test_errors(void **state)
{
    (void)state;
    struct remat_profile *base = base_chain(5, 6);
    struct remat_profile *m[3] = {at(base, 2), at(base, 8), at(base, 8)};
    struct remat_error err;
    const struct remat_profile *const *pm = (const struct remat_profile *const *)m;
    assert_null(remat_profile_at_batch(pm, 3, 4, NULL, &err));
    assert_int_equal(err.code, REMAT_EINVAL);
    assert_string_equal(err.pointer, "/profiles/2/batch_size");
    m[2]->batch_size = 9;
    m[2]->stages[4].param_bytes += 1;
    assert_null(remat_profile_at_batch(pm, 3, 4, NULL, &err));
    assert_string_equal(err.pointer, "/profiles/2/stages/4/param_bytes");
    m[2]->stages[4].param_bytes -= 1;
    m[2]->batch_size = 0;
    assert_null(remat_profile_at_batch(pm, 3, 4, NULL, &err));
    assert_string_equal(err.pointer, "/profiles/2/batch_size");
    m[2]->batch_size = 9;
    m[2]->stages[1].saved_bytes = m[2]->stages[1].out_bytes - 1;
    assert_null(remat_profile_at_batch(pm, 3, 4, NULL, &err));
    assert_string_equal(err.pointer, "/profiles/2/stages/1/saved_bytes");
    m[2]->stages[1].saved_bytes = m[2]->stages[1].out_bytes;
    assert_null(remat_profile_at_batch(pm, 3, 0, NULL, &err));
    assert_string_equal(err.pointer, "/batch");
    assert_null(remat_profile_at_batch(pm, 0, 4, NULL, &err));
    assert_string_equal(err.pointer, "/profiles");

    int64_t mem[2] = {1 << 20, 0};
    struct remat_fits_answer ans[2];
    assert_int_equal(remat_fits(pm, 2, mem, 2, NULL, ans, &err), REMAT_EINVAL);
    assert_string_equal(err.pointer, "/memory/1");
    struct remat_fits_options o;
    remat_fits_options_init(&o);
    o.margin_fraction = 0.95;
    assert_int_equal(remat_fits(pm, 2, mem, 1, &o, ans, &err), REMAT_EINVAL);
    assert_string_equal(err.pointer, "/margin_fraction");
    remat_fits_options_init(&o);
    o.margin_bytes = 1 << 20;
    assert_int_equal(remat_fits(pm, 2, mem, 1, &o, ans, &err), REMAT_EINVAL);
    assert_string_equal(err.pointer, "/margin_bytes");
    for (int k = 0; k < 3; k++)
        remat_profile_free(m[k]);
    remat_profile_free(base);
}

static int64_t peak_at(const struct remat_profile *const *m, size_t nm, int64_t b,
                       enum remat_algorithm alg, double *total_ms, int64_t budget)
{
    struct remat_profile *p = remat_profile_at_batch(m, nm, b, NULL, NULL);
    assert_non_null(p);
    struct remat_options o;
    remat_options_init(&o);
    o.algorithm = alg;
    o.budget_bytes = budget;
    struct remat_plan plan;
    int rc = remat_solve(p, &o, &plan, NULL);
    int64_t v = rc == REMAT_OK ? plan.peak_bytes : INT64_MAX;
    if (total_ms != NULL)
        *total_ms = rc == REMAT_OK ? plan.total_ms : -1;
    remat_plan_clear(&plan);
    remat_profile_free(p);
    return v;
}

/* The largest batch, for min-peak and store-all, is the one a scan over
 * every batch finds; batch + 1 does not fit; the throughput-best batch is
 * the scan's best wherever the search covers every batch (up to 24) and
 * within 2% of it above. */
static void test_fits_exhaustive(void **state)
{
    (void)state;
    size_t answers = 0, with_ck = 0;
    double worst_ratio = 1;
    for (uint64_t seed = 1; seed <= 12; seed++) {
        size_t n = 4 + (size_t)(seed % 9);
        struct remat_profile *base = base_chain(seed, n);
        struct remat_profile *m[2] = {at(base, 4), at(base, 12)};
        const struct remat_profile *const *pm = (const struct remat_profile *const *)m;
        /* Memories from store-all's peak at a few batches. */
        int64_t mem[4];
        int64_t bs[4] = {1, 6, 17, 50};
        for (int k = 0; k < 4; k++)
            mem[k] = peak_at(pm, 2, bs[k], REMAT_ALG_STORE_ALL, NULL, 0) + (int64_t)seed * 7;
        struct remat_fits_options o;
        remat_fits_options_init(&o);
        o.max_batch = 400;
        struct remat_fits_answer ans[4];
        struct remat_error err;
        int rc = remat_fits(pm, 2, mem, 4, &o, ans, &err);
        if (rc != REMAT_OK)
            fail_msg("fits: %s at %s", err.message, err.pointer);
        for (int k = 0; k < 4; k++) {
            const struct remat_fits_answer *a = &ans[k];
            int64_t scan = 0, scan_sa = 0;
            double best_rate = 0;
            for (int64_t b = 1; b <= 401; b++) {
                double t;
                int64_t pk = peak_at(pm, 2, b, REMAT_ALG_MIN_PEAK, NULL, 0);
                if (pk <= a->usable_bytes)
                    scan = b;
                if (peak_at(pm, 2, b, REMAT_ALG_STORE_ALL, NULL, 0) <= a->usable_bytes)
                    scan_sa = b;
                if (b <= a->batch && (a->batch <= 24 || b % 7 == 0 || b == a->batch) &&
                    peak_at(pm, 2, b, REMAT_ALG_MIN_TIME, &t, a->usable_bytes) <= a->usable_bytes &&
                    (double)b * 1000.0 / t > best_rate) {
                    best_rate = (double)b * 1000.0 / t;
                }
            }
            assert_int_equal(a->batch, scan);
            assert_int_equal(a->store_all_batch, scan_sa);
            assert_true(a->store_all_batch <= a->batch);
            assert_true(a->plan.peak_bytes <= a->usable_bytes);
            assert_int_equal(a->next_peak_bytes,
                             peak_at(pm, 2, a->batch + 1, REMAT_ALG_MIN_PEAK, NULL, 0));
            assert_true(a->next_peak_bytes > a->usable_bytes);
            assert_true(a->store_all_next_peak_bytes > a->usable_bytes);
            assert_int_equal(a->capped, 0);
            with_ck += a->batch > a->store_all_batch;
            if (a->batch > 0) {
                assert_true(a->best_batch >= 1 && a->best_batch <= a->batch);
                assert_true(a->best_plan.peak_bytes <= a->usable_bytes);
                if (a->batch <= 24) {
                    assert_true(a->best_samples_per_s >= best_rate * (1 - 1e-12));
                } else {
                    double r = a->best_samples_per_s / best_rate;
                    worst_ratio = r < worst_ratio ? r : worst_ratio;
                    assert_true(r >= 0.98);
                }
            }
            json_t *j = remat_fits_answer_to_json(a);
            assert_non_null(j);
            assert_int_equal(
                json_integer_value(json_object_get(json_object_get(j, "largest"), "batch")),
                a->batch);
            json_decref(j);
            answers++;
        }
        for (int k = 0; k < 4; k++)
            remat_fits_answer_clear(&ans[k]);
        remat_profile_free(m[0]);
        remat_profile_free(m[1]);
        remat_profile_free(base);
    }
    assert_true(with_ck >= 10); /* checkpointing must have bought batch somewhere */
    print_message("%zu answers, %zu where checkpointing fits a larger batch; throughput at least "
                  "%.4f of the best scanned\n",
                  answers, with_ck, worst_ratio);
}

/* A memory too small for batch 1 answers batch 0 with batch 1's peak; one
 * larger than max_batch needs says capped. */
static void test_edges(void **state)
{
    (void)state;
    struct remat_profile *base = base_chain(7, 6);
    struct remat_profile *m[1] = {at(base, 8)};
    const struct remat_profile *const *pm = (const struct remat_profile *const *)m;
    int64_t mem[2] = {1, INT64_C(1) << 50};
    struct remat_fits_options o;
    remat_fits_options_init(&o);
    o.max_batch = 100;
    struct remat_fits_answer ans[2];
    assert_int_equal(remat_fits(pm, 1, mem, 2, &o, ans, NULL), REMAT_OK);
    assert_int_equal(ans[0].batch, 0);
    assert_int_equal(ans[0].store_all_batch, 0);
    assert_true(ans[0].next_peak_bytes > 1);
    assert_int_equal(ans[0].best_batch, 0);
    assert_int_equal(ans[1].batch, 100);
    assert_int_equal(ans[1].capped, 1);
    assert_int_equal(ans[1].extrapolated, 1); /* one profile: everything else is */
    remat_fits_answer_clear(&ans[0]);
    remat_fits_answer_clear(&ans[1]);
    remat_profile_free(m[0]);
    remat_profile_free(base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear_exact), cmocka_unit_test(test_monotone),
        cmocka_unit_test(test_errors),       cmocka_unit_test(test_fits_exhaustive),
        cmocka_unit_test(test_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
