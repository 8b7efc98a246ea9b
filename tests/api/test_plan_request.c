/* The plan request reader (api/plans/request.c) called as it is, with no
 * server: the problems it fills (status, type, pointer), the options it
 * normalises, profile jobs through the reader's context, the stage limit,
 * and the fast path (the profile read in place) against the plain one on
 * the same bodies (cmocka). */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "plans/request.h"

#define P3 "{\"input_bytes\":8,\"stages\":[{\"out_bytes\":8},{\"out_bytes\":8},{\"out_bytes\":8}]}"
#define JOB_DONE "0123456789abcdef0123456789abcdef"
#define JOB_RUNNING "fedcba9876543210fedcba9876543210"

/* The context's lookup: one done profile job, one still running. */
static struct remat_profile *lookup(void *cls, const char *id, const char *pointer,
                                    struct rematd_problem *p)
{
    int *calls = cls;
    (*calls)++;
    if (strcmp(id, JOB_DONE) == 0)
        return remat_profile_parse(P3, strlen(P3), pointer, NULL);
    rematd_problem_set(p, 409, "job-not-ready", pointer, "the profile job is running, not done");
    return NULL;
}

static int calls;
static const struct rematd_read_ctx ctx = {
    .max_stages = 1000, .profile_by_id = lookup, .cls = &calls};

/* Reads body as POST /v1/plans does; returns the status (200 when read)
 * and leaves the problem in *p, the request in *out. */
static int read_body(const struct rematd_read_ctx *c, const char *body, size_t len,
                     struct rematd_plan_req *out, struct rematd_problem *p)
{
    memset(p, 0, sizeof *p);
    int rc = rematd_plan_req_read(c, body, len, out, p);
    if (rc < 0) {
        assert_null(out->profile);
        assert_null(out->options);
        assert_non_null(p->slug);
        return p->status;
    }
    assert_int_equal(p->status, 0);
    assert_non_null(out->profile);
    return 200;
}

static int read_str(const char *body, struct rematd_plan_req *out, struct rematd_problem *p)
{
    return read_body(&ctx, body, strlen(body), out, p);
}

static void test_inline(void **state)
{
    (void)state;
    struct rematd_plan_req req;
    struct rematd_problem p;
    assert_int_equal(
        read_str("{\"profile\":" P3 ",\"algorithm\":\"sqrt\",\"budget_bytes\":100}", &req, &p),
        200);
    assert_int_equal(req.profile->n_stages, 3);
    assert_int_equal(req.opts.algorithm, REMAT_ALG_SQRT);
    assert_int_equal(req.opts.budget_bytes, 100);
    char *o = json_dumps(req.options, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(o, "{\"algorithm\":\"sqrt\",\"budget_bytes\":100}");
    free(o);
    rematd_plan_req_clear(&req);
}

static void expect(const char *body, int status, const char *slug, const char *pointer)
{
    struct rematd_plan_req req;
    struct rematd_problem p;
    int got = read_str(body, &req, &p);
    if (got != status || strcmp(p.slug ? p.slug : "", slug) != 0 || strcmp(p.pointer, pointer) != 0)
        fail_msg("%s: got %d %s at '%s' (%s), want %d %s at '%s'", body, got, p.slug, p.pointer,
                 p.detail, status, slug, pointer);
    rematd_problem_clear(&p);
    rematd_plan_req_clear(&req);
}

static void test_refusals(void **state)
{
    (void)state;
    expect("", 400, "invalid-json", "");
    expect("[1]", 400, "invalid-json", "");
    expect("{\"profile\":", 400, "invalid-json", "");
    expect("{\"profile\":" P3 ",\"bogus\":1}", 400, "validation", "/bogus");
    /* The unknown key's pointer is escaped as RFC 6901 says (the fuzz
     * target's stub used to write it raw). */
    expect("{\"profile\":" P3 ",\"a/b~c\":1}", 400, "validation", "/a~1b~0c");
    expect("{\"profile\":" P3 ",\"algorithm\":\"fastest\"}", 400, "validation", "/algorithm");
    expect("{\"profile\":" P3 ",\"model\":3}", 400, "validation", "/model");
    expect("{\"profile\":" P3 ",\"segments\":0}", 400, "validation", "/segments");
    expect("{\"profile\":" P3 ",\"mem_slots\":1.5}", 400, "validation", "/mem_slots");
    expect("{\"profile\":" P3 ",\"profile_id\":\"" JOB_DONE "\"}", 400, "validation",
           "/profile_id");
    expect("{\"algorithm\":\"sqrt\"}", 400, "validation", "/profile");
    expect("{\"profile\":[]}", 400, "validation", "/profile");
    expect("{\"profile\":{\"input_bytes\":1,\"stages\":[{\"out_bytes\":-1}]}}", 400, "validation",
           "/profile/stages/0/out_bytes");
    expect("{\"profile_id\":7}", 400, "validation", "/profile_id");
}

static void test_nul(void **state)
{
    (void)state;
    static const char body[] = "{\"profile\":" P3 ",\"segments\":1\0}";
    struct rematd_plan_req req;
    struct rematd_problem p;
    assert_int_equal(read_body(&ctx, body, sizeof body - 1, &req, &p), 400);
    assert_string_equal(p.slug, "invalid-json");
    assert_non_null(strstr(p.detail, "NUL"));
}

static void test_profile_id(void **state)
{
    (void)state;
    struct rematd_plan_req req;
    struct rematd_problem p;
    calls = 0;
    assert_int_equal(read_str("{\"profile_id\":\"" JOB_DONE "\"}", &req, &p), 200);
    assert_int_equal(calls, 1);
    assert_int_equal(req.profile->n_stages, 3);
    assert_string_equal(json_string_value(json_object_get(req.options, "profile_id")), JOB_DONE);
    rematd_plan_req_clear(&req);
    /* The lookup's own problem is the reader's. */
    assert_int_equal(read_str("{\"profile_id\":\"" JOB_RUNNING "\"}", &req, &p), 409);
    assert_string_equal(p.slug, "job-not-ready");
    assert_string_equal(p.pointer, "/profile_id");
    /* A context with no lookup knows no job. */
    struct rematd_read_ctx bare = {.max_stages = 1000};
    const char *body = "{\"profile_id\":\"" JOB_DONE "\"}";
    assert_int_equal(read_body(&bare, body, strlen(body), &req, &p), 404);
}

static void test_stage_limit(void **state)
{
    (void)state;
    struct rematd_read_ctx small = ctx;
    small.max_stages = 2;
    /* The fast path (the profile read in place) and the plain one (an
     * escaped key sends the body there) refuse alike. */
    const char *bodies[] = {"{\"profile\":" P3 "}", "{\"\\u0070rofile\":" P3 "}"};
    for (int k = 0; k < 2; k++) {
        struct rematd_plan_req req;
        struct rematd_problem p;
        assert_int_equal(read_body(&small, bodies[k], strlen(bodies[k]), &req, &p), 400);
        assert_string_equal(p.slug, "limit-exceeded");
        assert_string_equal(p.pointer, "/profile/stages");
    }
}

/* The same bodies through the fast path and the plain one (the "profile"
 * key escaped): the same status, pointer and options. */
static void test_fast_equals_plain(void **state)
{
    (void)state;
    const char *rest[] = {
        "",
        ",\"algorithm\":\"min-time\",\"budget_bytes\":64",
        ",\"segments\":2",
        ",\"algorithm\":\"nope\"",
        ",\"x\":{\"y\":[1,{\"z\":\"\\\"\"}]}",
        ",\"model\":\"prefix\"",
    };
    for (size_t k = 0; k < sizeof rest / sizeof rest[0]; k++) {
        char fast[512], plain[512];
        snprintf(fast, sizeof fast, "{\"profile\":%s%s}", P3, rest[k]);
        snprintf(plain, sizeof plain, "{\"\\u0070rofile\":%s%s}", P3, rest[k]);
        struct rematd_plan_req a, b;
        struct rematd_problem pa, pb;
        int sa = read_str(fast, &a, &pa), sb = read_str(plain, &b, &pb);
        assert_int_equal(sa, sb);
        if (sa == 200) {
            char *oa = json_dumps(a.options, JSON_COMPACT | JSON_SORT_KEYS);
            char *ob = json_dumps(b.options, JSON_COMPACT | JSON_SORT_KEYS);
            assert_string_equal(oa, ob);
            assert_int_equal(a.profile->n_stages, b.profile->n_stages);
            free(oa);
            free(ob);
        } else {
            assert_string_equal(pa.slug, pb.slug);
            assert_string_equal(pa.pointer, pb.pointer);
        }
        rematd_plan_req_clear(&a);
        rematd_plan_req_clear(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inline),      cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_nul),         cmocka_unit_test(test_profile_id),
        cmocka_unit_test(test_stage_limit), cmocka_unit_test(test_fast_equals_plain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
