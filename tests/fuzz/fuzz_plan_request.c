/* fuzz_plan_request.c - the plan request reader of POST /v1/plans and
 * POST /v1/validations (api/plans/request.c) on any body, linked as rematd
 * links it: the reader fills a struct rematd_problem and does no HTTP, so
 * nothing of rematd is stubbed here.  A refusal is a 4xx problem naming a
 * field (never a 5xx); an accepted request gives a profile that validates
 * within the server's stage limit and options a solver accepts as such.
 * The three ways in must agree: the whole body as POST /v1/plans reads it
 * (rematd_plan_req_read, its fast path included), the parsed tree
 * (rematd_plan_request), and the tree with the profile read by the
 * streaming reader (rematd_plan_request_parsed).  No profile job exists
 * (the context has no lookup): a profile_id is a 404, or a 400 when it is
 * no id. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "plans/request.h"
#include "rematd.h"

struct outcome {
    int status;
    char pointer[160];
    char *options;
    size_t n_stages;
};

static const struct rematd_read_ctx ctx = {.max_stages = 1000};

/* Checks one reading (rc, what it filled) and keeps what it said in out. */
static void judge(int rc, struct remat_profile *p, const struct remat_options *o, json_t *oj,
                  struct rematd_problem *prob, struct outcome *out)
{
    memset(out, 0, sizeof *out);
    if (rc < 0) {
        FUZZ_CHECK(p == NULL && oj == NULL, "a refusal left a profile or options");
        FUZZ_CHECK(prob->status >= 400 && prob->status < 500, "refused with status %d",
                   prob->status);
        FUZZ_CHECK(prob->slug != NULL && prob->detail[0] != '\0', "a refusal without a type");
        FUZZ_CHECK(prob->pointer[0] == '\0' || prob->pointer[0] == '/', "pointer '%s'",
                   prob->pointer);
        out->status = prob->status;
        memcpy(out->pointer, prob->pointer, sizeof out->pointer);
        rematd_problem_clear(prob);
        return;
    }
    FUZZ_CHECK(prob->status == 0, "accepted after a problem %d", prob->status);
    FUZZ_CHECK(p != NULL && json_is_object(oj), "accepted without a profile or options");
    FUZZ_CHECK(remat_profile_validate(p, NULL) == REMAT_OK, "an accepted profile is invalid");
    FUZZ_CHECK(p->n_stages <= ctx.max_stages, "%zu stages over the limit", p->n_stages);
    FUZZ_CHECK(o->algorithm < REMAT_ALG_COUNT, "algorithm %d", (int)o->algorithm);
    FUZZ_CHECK(o->budget_bytes >= 0 && o->budget_bytes <= REMAT_MAX_BYTES, "budget out of range");
    FUZZ_CHECK(o->mem_slots <= 100000, "mem_slots %zu", o->mem_slots);
    out->status = 200;
    out->options = json_dumps(oj, JSON_COMPACT | JSON_SORT_KEYS);
    out->n_stages = p->n_stages;
}

static void same(const struct outcome *a, const struct outcome *b, const char *what)
{
    FUZZ_CHECK(a->status == b->status, "%s: tree %d (%s), other %d (%s)", what, a->status,
               a->pointer, b->status, b->pointer);
    FUZZ_CHECK(strcmp(a->pointer, b->pointer) == 0 || a->status == 200,
               "%s: tree at '%s', other at '%s'", what, a->pointer, b->pointer);
    FUZZ_CHECK(a->status != 200 ||
                   (strcmp(a->options, b->options) == 0 && a->n_stages == b->n_stages),
               "%s: options %s against %s", what, a->options, b->options);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rematd_problem prob = {0};
    /* The whole body, as POST /v1/plans reads it. */
    struct rematd_plan_req req;
    int rc = rematd_plan_req_read(&ctx, (const char *)data, size, &req, &prob);
    struct outcome whole;
    judge(rc, req.profile, &req.opts, req.options, &prob, &whole);
    rematd_plan_req_clear(&req);

    json_t *body = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(body)) {
        FUZZ_CHECK(whole.status == 400, "a body that is no JSON object read as %d", whole.status);
        json_decref(body);
        free(whole.options);
        return 0;
    }
    struct remat_profile *p = NULL;
    struct remat_options o;
    json_t *oj = NULL;
    rc = rematd_plan_request(&ctx, body, &p, &o, &oj, &prob);
    struct outcome tree;
    judge(rc, p, &o, oj, &prob, &tree);
    remat_profile_free(p);
    json_decref(oj);
    /* A body jansson takes is one the reader of the whole body takes the
     * same way, unless it holds a NUL byte or is nested past the depth
     * limit (both refused there first). */
    if (!memchr(data, 0, size) &&
        rematd_json_depth(body, REMATD_MAX_JSON_DEPTH + 1) <= REMATD_MAX_JSON_DEPTH)
        same(&tree, &whole, "whole body");

    /* The streaming reader's profile, as the fast path hands it over: only
     * for an inline profile that reader accepts. */
    json_t *pj = json_object_get(body, "profile");
    char *ptext = json_is_object(pj) ? json_dumps(pj, JSON_COMPACT) : NULL;
    struct remat_profile *parsed =
        ptext ? remat_profile_parse(ptext, strlen(ptext), "/profile", NULL) : NULL;
    free(ptext);
    if (parsed) {
        p = NULL;
        oj = NULL;
        rc = rematd_plan_request_parsed(&ctx, body, parsed, &p, &o, &oj, &prob);
        struct outcome fast;
        judge(rc, p, &o, oj, &prob, &fast);
        remat_profile_free(p);
        json_decref(oj);
        /* The tree path may refuse on its stage limit before reading the
         * profile; so does the fast path, after: the same answer. */
        same(&tree, &fast, "parsed profile");
        free(fast.options);
    }
    free(tree.options);
    free(whole.options);
    json_decref(body);
    return 0;
}
