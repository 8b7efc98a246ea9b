/* test_sharded.c - one rank's memory under each data-parallel strategy
 * (src/sharded.c): the ZeRO paper's figures, hand-computed values for every
 * term of every strategy, and every bad spec refused with its pointer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "remat_private.h"

static void test_dtypes(void **state)
{
    (void)state;
    assert_int_equal(remat_dtype_bytes("bfloat16"), 2);
    assert_int_equal(remat_dtype_bytes("bf16"), 2);
    assert_int_equal(remat_dtype_bytes("fp32"), 4);
    assert_int_equal(remat_dtype_bytes("float64"), 8);
    assert_int_equal(remat_dtype_bytes("int8"), 0);
    assert_int_equal(remat_dtype_bytes(NULL), 0);
}

static void test_names(void **state)
{
    (void)state;
    static const char *const all[] = {"ddp", "zero1", "zero2", "zero3", "fsdp", "hsdp"};
    for (int k = 0; k < REMAT_SHARD_COUNT; k++) {
        enum remat_shard_strategy out;
        assert_string_equal(remat_shard_name(k), all[k]);
        assert_int_equal(remat_shard_parse(all[k], &out), REMAT_OK);
        assert_int_equal((int)out, k);
    }
    enum remat_shard_strategy out = REMAT_SHARD_ZERO2;
    assert_int_equal(remat_shard_parse("DDP", &out), REMAT_EINVAL);
    assert_int_equal(remat_shard_parse(NULL, &out), REMAT_EINVAL);
    assert_int_equal((int)out, REMAT_SHARD_ZERO2);
    assert_string_equal(remat_shard_name(REMAT_SHARD_COUNT), "?");
    assert_string_equal(remat_shard_name(-1), "?");
}

/* The ZeRO paper's Figure 1 (Rajbhandari et al., SC'20): Ψ = 7.5B, Nd =
 * 64, mixed-precision Adam (2Ψ + 2Ψ + 12Ψ): 120 GB, 31.4 GB (Pos), 16.6 GB
 * (Pos+g), 1.9 GB (Pos+g+p).  Exactly: 120e9, 30e9 + 12 * 7.5e9 / 64,
 * 15e9 + 14 * 7.5e9 / 64, 16 * 7.5e9 / 64. */
static int64_t states(enum remat_shard_strategy st)
{
    struct remat_shard_spec s;
    remat_shard_spec_init(&s);
    s.strategy = st;
    s.data = 64;
    s.params = INT64_C(7500000000);
    s.param_bytes = 2;
    s.grad_bytes = 2;
    s.optim_bytes = 12;
    struct remat_shard_breakdown b;
    struct remat_error err;
    assert_int_equal(remat_shard_memory(&s, &b, &err), REMAT_OK);
    return b.weights + b.gradients + b.optimizer;
}

static void test_zero_paper(void **state)
{
    (void)state;
    assert_true(states(REMAT_SHARD_DDP) == INT64_C(120000000000));
    assert_true(states(REMAT_SHARD_ZERO1) == INT64_C(31406250000));
    assert_true(states(REMAT_SHARD_ZERO2) == INT64_C(16640625000));
    assert_true(states(REMAT_SHARD_ZERO3) == INT64_C(1875000000));
    assert_true(states(REMAT_SHARD_FSDP) == INT64_C(1875000000));
    /* The paper's rounding to 0.1 GB. */
    assert_true(states(REMAT_SHARD_ZERO1) / 100000000 == 314);
    assert_true((states(REMAT_SHARD_ZERO2) + 50000000) / 100000000 == 166);
    assert_true((states(REMAT_SHARD_ZERO3) + 50000000) / 100000000 == 19);
}

/* Ψ = 1001 elements (not a multiple of the ranks: shards round up), the
 * largest unit 300, bf16 weights, fp32 gradients, K = 12, a 1000-byte
 * bucket, 5000 bytes of activations, a 6000-byte foreach step. */
static void spec_small(struct remat_shard_spec *s, enum remat_shard_strategy st)
{
    remat_shard_spec_init(s);
    s->strategy = st;
    s->data = 4;
    s->shard_group = 2;
    s->params = 1001;
    s->largest_unit = 300;
    s->param_bytes = 2;
    s->grad_bytes = 4;
    s->optim_bytes = 12;
    s->bucket_bytes = 1000;
    s->activations = 5000;
    s->step_tmp = 6000;
}

static void test_terms(void **state)
{
    (void)state;
    static const struct {
        enum remat_shard_strategy st;
        int64_t w, g, o, gathered, buckets, step;
    } want[] = {
        /* ddp: everything, the buckets a copy of the gradients, the step
         * over every tensor: 6000 - 5000 above the activations. */
        {REMAT_SHARD_DDP, 2002, 4004, 12012, 0, 4004, 1000},
        /* zero1: the state of ceil(1001/4) = 251 parameters; the step is a
         * quarter (1500) and under the activations. */
        {REMAT_SHARD_ZERO1, 2002, 4004, 3012, 0, 4004, 0},
        /* zero2: and the gradients; two 1000-byte buckets. */
        {REMAT_SHARD_ZERO2, 2002, 1004, 3012, 0, 2000, 0},
        /* zero3: and the weights; 2 * 300 * 2 + 300 * 4 gathered. */
        {REMAT_SHARD_ZERO3, 502, 1004, 3012, 2400, 0, 0},
        {REMAT_SHARD_FSDP, 502, 1004, 3012, 2400, 0, 0},
        /* hsdp: sharded over 2, ceil(1001/2) = 501. */
        {REMAT_SHARD_HSDP, 1002, 2004, 6012, 2400, 0, 0},
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        struct remat_shard_spec s;
        spec_small(&s, want[k].st);
        struct remat_shard_breakdown b;
        struct remat_error err;
        assert_int_equal(remat_shard_memory(&s, &b, &err), REMAT_OK);
        if (b.weights != want[k].w || b.gradients != want[k].g || b.optimizer != want[k].o ||
            b.gathered != want[k].gathered || b.buckets != want[k].buckets ||
            b.activations != 5000 || b.step_tmp != want[k].step)
            fail_msg("%s: %lld %lld %lld %lld %lld %lld %lld", remat_shard_name(want[k].st),
                     (long long)b.weights, (long long)b.gradients, (long long)b.optimizer,
                     (long long)b.gathered, (long long)b.buckets, (long long)b.activations,
                     (long long)b.step_tmp);
        assert_true(b.peak == b.weights + b.gradients + b.optimizer + b.gathered + b.buckets +
                                  b.activations + b.step_tmp);
    }
}

static void test_options(void **state)
{
    (void)state;
    struct remat_shard_spec s;
    struct remat_shard_breakdown b;
    struct remat_error err;
    /* Gradients as views of the buckets: no copy. */
    spec_small(&s, REMAT_SHARD_DDP);
    s.bucket_view = 1;
    assert_int_equal(remat_shard_memory(&s, &b, &err), REMAT_OK);
    assert_true(b.buckets == 0);
    /* The single-tensor step's transient is one tensor's, unsharded. */
    spec_small(&s, REMAT_SHARD_ZERO3);
    s.step_tmp_per_tensor = 1;
    assert_int_equal(remat_shard_memory(&s, &b, &err), REMAT_OK);
    assert_true(b.step_tmp == 1000);
    /* zero2's two buckets are no more than the whole gradient. */
    spec_small(&s, REMAT_SHARD_ZERO2);
    s.bucket_bytes = REMAT_SHARD_DEFAULT_BUCKET;
    assert_int_equal(remat_shard_memory(&s, &b, &err), REMAT_OK);
    assert_true(b.buckets == 4004);
    s.bucket_bytes = 3000;
    assert_int_equal(remat_shard_memory(&s, &b, &err), REMAT_OK);
    assert_true(b.buckets == 4004);
    /* One rank is the single-device job. */
    spec_small(&s, REMAT_SHARD_ZERO3);
    s.data = 1;
    assert_int_equal(remat_shard_memory(&s, &b, &err), REMAT_OK);
    assert_true(b.weights == 2002 && b.gradients == 4004 && b.optimizer == 12012);
    /* hsdp with one group is fsdp. */
    spec_small(&s, REMAT_SHARD_HSDP);
    s.shard_group = 4;
    struct remat_shard_breakdown f;
    assert_int_equal(remat_shard_memory(&s, &b, &err), REMAT_OK);
    spec_small(&s, REMAT_SHARD_FSDP);
    assert_int_equal(remat_shard_memory(&s, &f, &err), REMAT_OK);
    assert_true(b.peak == f.peak && b.weights == f.weights);
    /* The largest sizes stay exact: 2^50 parameters of 8 bytes, K = 64. */
    spec_small(&s, REMAT_SHARD_DDP);
    s.params = REMAT_SHARD_MAX_PARAMS;
    s.largest_unit = 0;
    s.param_bytes = 8;
    s.grad_bytes = 8;
    s.optim_bytes = 64;
    assert_int_equal(remat_shard_memory(&s, &b, &err), REMAT_OK);
    assert_true(b.peak == 6000 + REMAT_SHARD_MAX_PARAMS * (8 + 8 + 64 + 8));
    s.activations = REMAT_MAX_BYTES;
    assert_int_equal(remat_shard_memory(&s, &b, &err), REMAT_ELIMIT);
    assert_string_equal(err.pointer, "/parallel");
    assert_true(b.peak == 0 && b.weights == 0);
    s.strategy = REMAT_SHARD_FSDP;
    s.data = REMAT_SHARD_MAX_RANKS;
    s.activations = 0;
    assert_int_equal(remat_shard_memory(&s, &b, &err), REMAT_OK);
    assert_true(b.optimizer == 64 * (REMAT_SHARD_MAX_PARAMS >> 20));
}

static void test_bad(void **state)
{
    (void)state;
    static const struct {
        int what;
        int64_t v;
        const char *ptr;
    } bad[] = {
        {0, -1, "/parallel/strategy"},
        {0, REMAT_SHARD_COUNT, "/parallel/strategy"},
        {1, 0, "/parallel/data"},
        {1, REMAT_SHARD_MAX_RANKS + 1, "/parallel/data"},
        {2, 3, "/parallel/shard_group"},
        {2, 0, "/parallel/shard_group"},
        {2, 8, "/parallel/shard_group"},
        {3, -1, "/params"},
        {3, REMAT_SHARD_MAX_PARAMS + 1, "/params"},
        {4, 1002, "/largest_unit"},
        {5, 3, "/param_dtype"},
        {6, 0, "/reduce_dtype"},
        {7, 65, "/optimizer"},
        {8, 0, "/parallel/bucket_cap_mb"},
        {9, -1, "/activations"},
        {10, REMAT_MAX_BYTES + 1, "/step_tmp"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        struct remat_shard_spec s;
        spec_small(&s, REMAT_SHARD_HSDP);
        switch (bad[k].what) {
        case 0:
            s.strategy = (enum remat_shard_strategy)bad[k].v;
            break;
        case 1:
            s.data = bad[k].v;
            break;
        case 2:
            s.shard_group = bad[k].v;
            break;
        case 3:
            s.params = bad[k].v;
            break;
        case 4:
            s.largest_unit = bad[k].v;
            break;
        case 5:
            s.param_bytes = (int)bad[k].v;
            break;
        case 6:
            s.grad_bytes = (int)bad[k].v;
            break;
        case 7:
            s.optim_bytes = bad[k].v;
            break;
        case 8:
            s.bucket_bytes = bad[k].v;
            break;
        case 9:
            s.activations = bad[k].v;
            break;
        default:
            s.step_tmp = bad[k].v;
            break;
        }
        struct remat_shard_breakdown b;
        struct remat_error err;
        int rc = remat_shard_memory(&s, &b, &err);
        if (rc != REMAT_EINVAL || strcmp(err.pointer, bad[k].ptr) != 0)
            fail_msg("case %zu: rc %d pointer %s, want %s", k, rc, err.pointer, bad[k].ptr);
        assert_true(b.peak == 0);
    }
    struct remat_error err;
    struct remat_shard_breakdown b;
    assert_int_equal(remat_shard_memory(NULL, &b, &err), REMAT_EINVAL);
}

/* Four stages of 1000 fp32 weights (4000 bytes) each, activations linear
 * in the batch; Adam, single-tensor. */
static struct remat_profile *chain(int64_t batch)
{
    struct remat_profile *p = remat_profile_new(4, NULL);
    assert_non_null(p);
    p->batch_size = batch;
    p->input_bytes = 100 * batch;
    for (size_t i = 0; i < 4; i++) {
        p->stages[i].param_bytes = 4000;
        p->stages[i].out_bytes = 1000 * batch;
        p->stages[i].saved_bytes = 2000 * batch;
        p->stages[i].fwd_tmp_bytes = 500 * batch;
        p->stages[i].bwd_tmp_bytes = 1500 * batch;
        p->stages[i].fwd_ms = 1;
        p->stages[i].bwd_ms = 2;
    }
    struct remat_optim_spec os;
    remat_optim_spec_init(&os);
    os.kind = REMAT_OPTIM_ADAM;
    assert_int_equal(remat_optim_estimate(p, &os, &p->optimizer, NULL), REMAT_OK);
    return p;
}

static void test_fits_sharded(void **state)
{
    (void)state;
    struct remat_profile *a = chain(2), *b = chain(4);
    const struct remat_profile *ps[2] = {a, b};
    int64_t mem[3] = {200000, 1000000, 50000};
    struct remat_fits_options o;
    remat_fits_options_init(&o);
    o.margin_bytes = 1000;
    o.want_throughput = 0;
    struct remat_fits_answer ans[3];
    struct remat_shard_breakdown br[3];
    struct remat_shard_spec used;
    struct remat_error err;
    for (int st = 0; st < REMAT_SHARD_COUNT; st++) {
        struct remat_shard_job j;
        remat_shard_job_init(&j);
        j.strategy = (enum remat_shard_strategy)st;
        j.data = 4;
        j.shard_group = 2;
        assert_int_equal(remat_fits_sharded(ps, 2, mem, 3, &o, &j, ans, br, &used, &err), REMAT_OK);
        /* Ψ = 4 * 4000 / 4, U = 1000, fp32 Adam: K = 8, no master copy. */
        assert_true(used.params == 4000 && used.largest_unit == 1000);
        assert_true(used.param_bytes == 4 && used.grad_bytes == 4 && used.optim_bytes == 8);
        for (int k = 0; k < 3; k++) {
            assert_true(ans[k].memory_bytes == mem[k] && ans[k].usable_bytes == mem[k] - 1000);
            int64_t rest =
                br[k].weights + br[k].gradients + br[k].optimizer + br[k].gathered + br[k].buckets;
            if (ans[k].batch > 0) {
                assert_true(br[k].peak <= ans[k].usable_bytes);
                assert_true(br[k].activations == ans[k].plan.peak_bytes);
                /* batch + 1's activations do not fit beside the rest. */
                assert_true(rest + ans[k].next_peak_bytes > ans[k].usable_bytes);
            } else {
                assert_true(br[k].activations == 0);
            }
            remat_fits_answer_clear(&ans[k]);
        }
    }
    /* At the largest batch the breakdown is the answer's; below it less. */
    struct remat_shard_job jj;
    remat_shard_job_init(&jj);
    jj.strategy = REMAT_SHARD_ZERO3;
    jj.data = 4;
    assert_int_equal(remat_fits_sharded(ps, 2, mem + 1, 1, &o, &jj, ans, br, &used, &err),
                     REMAT_OK);
    struct remat_shard_breakdown at;
    assert_true(ans[0].batch > 2);
    assert_int_equal(remat_fits_sharded_at(ps, 2, &jj, ans[0].batch, &at, &err), REMAT_OK);
    assert_true(at.peak == br[0].peak && at.activations == br[0].activations);
    assert_int_equal(remat_fits_sharded_at(ps, 2, &jj, ans[0].batch / 2, &at, &err), REMAT_OK);
    assert_true(at.peak < br[0].peak && at.weights == br[0].weights);
    assert_int_equal(remat_fits_sharded_at(ps, 2, &jj, 0, &at, &err), REMAT_EINVAL);
    assert_true(at.peak == 0);
    remat_fits_answer_clear(&ans[0]);
    /* DDP's 4 * 16000 + 32000 bytes of weights, gradients, buckets and
     * state fill 50000 bytes: no batch. */
    struct remat_shard_job j;
    remat_shard_job_init(&j);
    j.data = 4;
    assert_int_equal(remat_fits_sharded(ps, 2, mem + 2, 1, &o, &j, ans, br, &used, &err), REMAT_OK);
    assert_true(ans[0].batch == 0 && br[0].peak > 49000);
    remat_fits_answer_clear(&ans[0]);
    /* bf16 weights with fp32 gradients: a master copy by default. */
    j.param_bytes = 2;
    j.grad_bytes = 4;
    assert_int_equal(remat_fits_sharded(ps, 2, mem, 1, &o, &j, ans, br, &used, &err), REMAT_OK);
    assert_true(used.optim_bytes == 12 && br[0].weights == 8000 && br[0].gradients == 16000);
    remat_fits_answer_clear(&ans[0]);
    /* Errors are return values with the member's pointer. */
    j.shard_group = 3;
    j.strategy = REMAT_SHARD_HSDP;
    assert_int_equal(remat_fits_sharded(ps, 2, mem, 1, &o, &j, ans, br, &used, &err), REMAT_EINVAL);
    assert_string_equal(err.pointer, "/parallel/shard_group");
    j.strategy = REMAT_SHARD_DDP;
    int64_t zero = 0;
    assert_int_equal(remat_fits_sharded(ps, 2, &zero, 1, &o, &j, ans, br, &used, &err),
                     REMAT_EINVAL);
    assert_string_equal(err.pointer, "/memory/0");
    assert_int_equal(remat_fits_sharded(ps, 2, mem, 0, &o, &j, ans, br, &used, &err), REMAT_EINVAL);
    assert_int_equal(remat_fits_sharded(ps, 0, mem, 1, &o, &j, ans, br, &used, &err), REMAT_EINVAL);
    remat_profile_free(a);
    remat_profile_free(b);
}

/* Whether batch 1 fits at data ranks (test_least_data). */
static int fits_one(const struct remat_profile *const *ps, int64_t m, struct remat_shard_job j,
                    int64_t data)
{
    struct remat_fits_options o;
    remat_fits_options_init(&o);
    o.want_throughput = 0;
    struct remat_fits_answer a;
    struct remat_shard_breakdown b;
    struct remat_shard_spec s;
    j.data = data;
    assert_int_equal(remat_fits_sharded(ps, 2, &m, 1, &o, &j, &a, &b, &s, NULL), REMAT_OK);
    int yes = a.batch > 0;
    remat_fits_answer_clear(&a);
    return yes;
}

static void test_least_data(void **state)
{
    (void)state;
    struct remat_profile *a = chain(2), *b = chain(4);
    const struct remat_profile *ps[2] = {a, b};
    struct remat_error err;
    /* 16000 weights + 16000 gradients + 32000 state on one rank, a third
     * of it gathered: 40000 bytes hold batch 1 only once sharded. */
    int64_t m = 40000, least = -1;
    struct remat_shard_job j;
    remat_shard_job_init(&j);
    j.strategy = REMAT_SHARD_ZERO3;
    assert_int_equal(remat_fits_least_data(ps, 2, m, NULL, &j, 1024, &least, &err), REMAT_OK);
    assert_true(least > 1 && least <= 1024);
    assert_true(fits_one(ps, m, j, least) && !fits_one(ps, m, j, least - 1));
    /* Capped below the least: none. */
    assert_int_equal(remat_fits_least_data(ps, 2, m, NULL, &j, least - 1, &least, &err), REMAT_OK);
    assert_true(least == 0);
    /* DDP shards nothing: one rank or none. */
    j.strategy = REMAT_SHARD_DDP;
    assert_int_equal(remat_fits_least_data(ps, 2, m, NULL, &j, 1024, &least, &err), REMAT_OK);
    assert_true(least == 0);
    assert_int_equal(remat_fits_least_data(ps, 2, 10000000, NULL, &j, 1024, &least, &err),
                     REMAT_OK);
    assert_true(least == 1);
    /* hsdp: whole groups of 4 ranks. */
    j.strategy = REMAT_SHARD_HSDP;
    j.shard_group = 4;
    assert_int_equal(remat_fits_least_data(ps, 2, 10000000, NULL, &j, 1024, &least, &err),
                     REMAT_OK);
    assert_true(least == 4);
    assert_int_equal(remat_fits_least_data(ps, 2, 10000000, NULL, &j, 3, &least, &err), REMAT_OK);
    assert_true(least == 0);
    assert_int_equal(remat_fits_least_data(ps, 2, m, NULL, &j, 0, &least, &err), REMAT_EINVAL);
    assert_string_equal(err.pointer, "/global_batch");
    assert_int_equal(remat_fits_least_data(ps, 2, m, NULL, NULL, 8, &least, &err), REMAT_EINVAL);
    /* The schedule at 8 ranks for 512 samples per step. */
    j.strategy = REMAT_SHARD_ZERO3;
    j.data = 8;
    j.shard_group = 0;
    int64_t big = 10000000;
    struct remat_fits_options o;
    remat_fits_options_init(&o);
    o.want_throughput = 0;
    o.margin_bytes = 1000;
    struct remat_fits_answer ans;
    struct remat_shard_breakdown br;
    struct remat_shard_spec used;
    assert_int_equal(remat_fits_sharded(ps, 2, &big, 1, &o, &j, &ans, &br, &used, &err), REMAT_OK);
    assert_true(ans.batch > 64);
    struct remat_fits_schedule sch;
    assert_int_equal(remat_fits_schedule(ps, 2, &o, &j, 512, &ans, &br, &sch, &err), REMAT_OK);
    assert_true(sch.ranks == 8 && sch.micro_batch == 64 && sch.accumulation_steps == 1);
    assert_true(sch.samples_per_step == 512 && sch.least_data == 1);
    assert_true(sch.micro_peak_bytes < br.peak);
    assert_true(sch.device_memory_bytes == sch.micro_peak_bytes + 1000 + (INT64_C(1) << 30));
    /* 1000 samples: 125 per rank, two steps of 63 (126 >= 125). */
    ans.batch = 63;
    assert_int_equal(remat_fits_schedule(ps, 2, &o, &j, 1000, &ans, &br, &sch, &err), REMAT_OK);
    assert_true(sch.micro_batch == 63 && sch.accumulation_steps == 2);
    assert_true(sch.samples_per_step == 63 * 8 * 2);
    json_t *js = remat_fits_schedule_to_json(&sch, "h100-80gb");
    assert_non_null(js);
    json_t *req = json_object_get(js, "requests");
    assert_string_equal(json_string_value(json_object_get(req, "skypilot")), "H100:8");
    assert_true(json_integer_value(
                    json_object_get(json_object_get(req, "kubernetes"), "nvidia.com/gpu")) == 8);
    json_decref(js);
    ans.batch = 0;
    assert_int_equal(remat_fits_schedule(ps, 2, &o, &j, 0, &ans, &br, &sch, &err), REMAT_EINVAL);
    assert_string_equal(err.pointer, "/global_batch");
    ans.batch = 63;
    remat_fits_answer_clear(&ans);
    assert_string_equal(remat_gpu_skypilot("a100-80gb"), "A100-80GB");
    assert_null(remat_gpu_skypilot("x100"));
    assert_null(remat_gpu_skypilot(NULL));
    remat_profile_free(a);
    remat_profile_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),        cmocka_unit_test(test_dtypes),
        cmocka_unit_test(test_zero_paper),   cmocka_unit_test(test_terms),
        cmocka_unit_test(test_options),      cmocka_unit_test(test_bad),
        cmocka_unit_test(test_fits_sharded), cmocka_unit_test(test_least_data),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
