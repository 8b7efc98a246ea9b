/* The job readers of api/jobs/, called as they are with no server: a
 * profile job's spec (jobs/profile_spec.c: defaults, the problems it fills,
 * an uploaded model through the reader's context, the reuse key) and the
 * POST /v1/fits reader (jobs/fits_read.c: options, memories, profiles
 * inline and by id, batches) (cmocka). */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "jobs/fits.h"
#include "jobs/profile_spec.h"

#define MODEL_ID "00112233445566778899aabbccddeeff"
#define P3 "{\"input_bytes\":8,\"batch_size\":4,\"stages\":[{\"out_bytes\":8},{\"out_bytes\":8}]}"

static int model_lookup(void *cls, const char *id, struct rematd_read_model *m,
                        struct rematd_problem *p)
{
    (void)cls;
    if (strcmp(id, MODEL_ID) != 0) {
        rematd_problem_set(p, 404, "not-found", "/model_id", "no uploaded model with id %s", id);
        return -1;
    }
    snprintf(m->id, sizeof m->id, "%s", id);
    memset(m->sha256, 'a', 64);
    m->sha256[64] = '\0';
    m->bytes = 1234;
    return 0;
}

/* Two done profile jobs, of two models: PROF_A of alexnet, PROF_B of vgg11. */
#define PROF_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define PROF_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define PM(model, batch)                                                                           \
    "{\"model\":\"" model "\",\"input_bytes\":8,\"batch_size\":" #batch                            \
    ",\"stages\":[{\"out_bytes\":8},{\"out_bytes\":8}]}"

static struct remat_profile *profile_lookup(void *cls, const char *id, const char *pointer,
                                            struct rematd_problem *p)
{
    (void)cls;
    const char *text = strcmp(id, PROF_A) == 0   ? PM("alexnet", 4)
                       : strcmp(id, PROF_B) == 0 ? PM("vgg11", 8)
                                                 : NULL;
    if (!text) {
        rematd_problem_set(p, 404, "not-found", pointer, "no profile job with this id");
        return NULL;
    }
    struct remat_error err = {0};
    struct remat_profile *prof = remat_profile_loadb(text, strlen(text), &err);
    assert_non_null(prof);
    return prof;
}

static const struct rematd_read_ctx ctx = {
    .max_stages = 100, .model_by_id = model_lookup, .profile_by_id = profile_lookup};

static json_t *spec_of(const char *text, struct rematd_problem *p)
{
    json_t *body = json_loads(text, 0, NULL);
    assert_non_null(body);
    memset(p, 0, sizeof *p);
    json_t *spec = rematd_profile_spec(&ctx, body, p);
    json_decref(body);
    if (spec == NULL)
        assert_true(p->status >= 400 && p->slug != NULL);
    else
        assert_int_equal(p->status, 0);
    return spec;
}

static void test_spec_defaults(void **state)
{
    (void)state;
    struct rematd_problem p;
    json_t *a = spec_of("{\"model\":\"resnet18\"}", &p);
    json_t *b = spec_of("{\"device\":\"cuda\",\"model\":\"resnet18\",\"dtype\":\"fp32\","
                        "\"batch_size\":1,\"warmup\":2,\"repeats\":5}",
                        &p);
    assert_non_null(a);
    assert_non_null(b);
    assert_string_equal(json_string_value(json_object_get(a, "device")), "cuda");
    assert_int_equal(json_integer_value(json_object_get(a, "repeats")), 5);
    assert_true(json_is_array(json_object_get(a, "input_shape")));
    /* Spelling the defaults out or not is the same job: one reuse key. */
    char ka[65], kb[65];
    assert_int_equal(rematd_profile_reuse_key(a, ka), 0);
    assert_int_equal(rematd_profile_reuse_key(b, kb), 0);
    assert_string_equal(ka, kb);
    json_decref(a);
    json_decref(b);
}

static void spec_refused(const char *text, int status, const char *slug, const char *pointer)
{
    struct rematd_problem p;
    json_t *spec = spec_of(text, &p);
    if (spec != NULL || p.status != status || strcmp(p.slug, slug) != 0 ||
        strcmp(p.pointer, pointer) != 0)
        fail_msg("%s: got %d %s at '%s' (%s), want %d %s at '%s'", text, p.status, p.slug,
                 p.pointer, p.detail, status, slug, pointer);
    rematd_problem_clear(&p);
}

static void test_spec_refusals(void **state)
{
    (void)state;
    spec_refused("{\"model\":\"resnet18\",\"bogus\":1}", 400, "validation", "/bogus");
    spec_refused("{\"model\":\"nope\"}", 400, "validation", "/model");
    spec_refused("{}", 400, "validation", "/model");
    spec_refused("{\"model\":\"resnet18\",\"device\":\"tpu\"}", 400, "validation", "/device");
    spec_refused("{\"model\":\"resnet18\",\"dtype\":\"fp64\"}", 400, "validation", "/dtype");
    spec_refused("{\"model\":\"resnet18\",\"batch_size\":0}", 400, "validation", "/batch_size");
    spec_refused("{\"model\":\"resnet18\",\"optimizer\":{\"name\":\"adam\",\"foreach\":true}}", 400,
                 "validation", "/optimizer/foreach");
    spec_refused("{\"layers\":[{\"type\":\"relu\"}]}", 400, "validation", "/input_shape");
    spec_refused("{\"layers\":[{\"type\":\"warp\"}],\"input_shape\":[3]}", 400, "validation",
                 "/layers/0/type");
    spec_refused("{\"layers\":[{\"type\":\"linear\",\"a/b\":1}],\"input_shape\":[3]}", 400,
                 "validation", "/layers/0/a~1b");
    spec_refused("{\"model_id\":\"ffffffffffffffffffffffffffffffff\",\"input\":{\"shape\":[3]}}",
                 404, "not-found", "/model_id");
    spec_refused("{\"model_id\":\"xyz\"}", 400, "validation", "/model_id");
}

static void test_spec_uploaded(void **state)
{
    (void)state;
    struct rematd_problem p;
    json_t *spec = spec_of("{\"model_id\":\"" MODEL_ID "\",\"input\":{\"shape\":[3,8,8]}}", &p);
    assert_non_null(spec);
    assert_string_equal(json_string_value(json_object_get(spec, "model_id")), MODEL_ID);
    assert_int_equal(json_integer_value(json_object_get(spec, "model_bytes")), 1234);
    json_decref(spec);
    assert_true(rematd_device_ok("cuda:3"));
    assert_false(rematd_device_ok("cuda:"));
    assert_false(rematd_device_ok("gpu"));
}

static int fits_read(const char *text, struct rematd_fits_req *f, struct rematd_problem *p)
{
    json_t *body = json_loads(text, 0, NULL);
    assert_non_null(body);
    memset(f, 0, sizeof *f);
    memset(p, 0, sizeof *p);
    int rc = rematd_fits_read(&ctx, body, f, p);
    json_decref(body);
    return rc;
}

static void test_fits(void **state)
{
    (void)state;
    struct rematd_fits_req f;
    struct rematd_problem p;
    assert_int_equal(fits_read("{\"profiles\":[" P3 "],\"memory\":[1000000,\"a100-40gb\"],"
                               "\"margin_bytes\":16}",
                               &f, &p),
                     0);
    assert_int_equal(f.n, 1);
    assert_int_equal(f.n_mem, 2);
    assert_int_equal(f.mem[0], 1000000);
    assert_true(f.mem[1] > 1000000);
    assert_int_equal(f.o.margin_bytes, 16);
    rematd_fits_req_free(&f);

    static const struct {
        const char *body, *slug, *pointer;
        int status;
    } bad[] = {
        {"{\"profiles\":[" P3 "]}", "validation", "/memory", 400},
        {"{\"profiles\":[" P3 "],\"memory\":[\"no-such-gpu\"]}", "validation", "/memory/0", 400},
        {"{\"memory\":[1]}", "validation", "/profiles", 400},
        {"{\"profiles\":[],\"memory\":[1]}", "validation", "/profiles", 400},
        {"{\"profiles\":[" P3 "],\"memory\":[1],\"throughput\":1}", "validation", "/throughput",
         400},
        {"{\"profiles\":[" P3 "],\"memory\":[1],\"optimizer\":\"lion\"}", "validation",
         "/optimizer", 400},
        /* No such profile job in this context. */
        {"{\"profile_ids\":[\"" MODEL_ID "\"],\"memory\":[1]}", "not-found", "/profile_ids/0", 404},
        /* Profiles of two models, inline and as jobs. */
        {"{\"profiles\":[" PM("alexnet", 4) "," PM("vgg11", 8) "],\"memory\":[1]}", "validation",
         "/profiles/1/model", 400},
        {"{\"profile_ids\":[\"" PROF_A "\",\"" PROF_B "\"],\"memory\":[1]}", "validation",
         "/profile_ids/1", 400},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        int rc = fits_read(bad[k].body, &f, &p);
        if (rc == 0 || p.status != bad[k].status || strcmp(p.slug, bad[k].slug) != 0 ||
            strcmp(p.pointer, bad[k].pointer) != 0)
            fail_msg("%s: got %d %s at '%s', want %d %s at '%s'", bad[k].body, p.status, p.slug,
                     p.pointer, bad[k].status, bad[k].slug, bad[k].pointer);
        rematd_fits_req_free(&f);
        rematd_problem_clear(&p);
    }

    /* One model at two batches, or a profile without a name beside one
     * with: read. */
    assert_int_equal(
        fits_read("{\"profiles\":[" PM("alexnet", 4) "," PM("alexnet", 8) "],\"memory\":[1]}", &f,
                  &p),
        0);
    assert_int_equal(f.n, 2);
    rematd_fits_req_free(&f);
    assert_int_equal(
        fits_read("{\"profiles\":[" PM("alexnet", 8) "," P3 "],\"memory\":[1]}", &f, &p), 0);
    rematd_fits_req_free(&f);

    json_t *body = json_loads("{\"batches\":[8,8]}", 0, NULL);
    json_int_t b[REMATD_FITS_MAX_BATCHES];
    size_t nb = 0;
    assert_int_equal(rematd_fits_read_batches(body, b, &nb, &p), -1);
    assert_string_equal(p.pointer, "/batches/1");
    json_decref(body);
    body = json_loads("{}", 0, NULL);
    assert_int_equal(rematd_fits_read_batches(body, b, &nb, &p), 0);
    assert_int_equal(nb, 2);
    json_decref(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec_defaults),
        cmocka_unit_test(test_spec_refusals),
        cmocka_unit_test(test_spec_uploaded),
        cmocka_unit_test(test_fits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
