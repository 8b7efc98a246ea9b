/* fuzz_plan_request.c - the plan request reader of POST /v1/plans and
 * POST /v1/validations (api/plan_common.c) on any body.  A refusal is a
 * 4xx problem naming a field (never a 5xx); an accepted request gives a
 * profile that validates within the server's stage limit and options a
 * solver accepts as such.  The fast path (the profile read by the
 * streaming reader, as POST /v1/plans does) must give the same answer as
 * the tree path.
 *
 * The HTTP side is replaced by the few functions plan_common.c calls: a
 * problem is recorded, not sent; no profile job exists.  The store's values
 * (api/store/values.c) are the real ones. */
#include "config.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fuzz_check.h"
#include "plan_common.h"

static struct answer {
    int status;
    char pointer[160];
} last;

void rematd_req_problem_json(struct rematd_request *r, int status, const char *slug,
                             const char *pointer, json_t *extra, const char *detail)
{
    (void)r;
    (void)slug;
    (void)detail;
    json_decref(extra);
    last.status = status;
    snprintf(last.pointer, sizeof last.pointer, "%s", pointer ? pointer : "");
}

void rematd_req_problem(struct rematd_request *r, int status, const char *slug, const char *pointer,
                        const char *fmt, ...)
{
    char detail[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    rematd_req_problem_json(r, status, slug, pointer, NULL, detail);
}

int rematd_req_reject_unknown(struct rematd_request *r, json_t *obj, const char *prefix,
                              const char *const *allowed)
{
    const char *k;
    json_t *v;
    json_object_foreach (obj, k, v) {
        int ok = 0;
        for (size_t i = 0; allowed[i]; i++)
            ok |= strcmp(allowed[i], k) == 0;
        if (!ok) {
            char ptr[160];
            snprintf(ptr, sizeof ptr, "%s/%.100s", prefix, k);
            rematd_req_problem(r, 400, "validation", ptr, "unknown field");
            return -1;
        }
    }
    return 0;
}

enum rematd_store_result rematd_store_get_job(struct rematd_store *st, const char *id,
                                              struct rematd_job *out)
{
    (void)st;
    (void)id;
    memset(out, 0, sizeof *out);
    return REMATD_STORE_NOT_FOUND;
}

/* plan_common.c's solve (not reached here) sets Retry-After. */
void rematd_req_header(struct rematd_request *r, const char *name, const char *value)
{
    (void)r;
    (void)name;
    (void)value;
}

/* plan_request.c's whole-body reader (not reached: the target calls the
 * two readers it compares directly). */
json_t *rematd_req_body_json(struct rematd_request *r)
{
    (void)r;
    return NULL;
}

enum rematd_store_result rematd_store_get_plan(struct rematd_store *st, const char *id,
                                               struct rematd_stored_plan *out)
{
    (void)st;
    (void)id;
    memset(out, 0, sizeof *out);
    return REMATD_STORE_NOT_FOUND;
}

struct outcome {
    int status;
    char pointer[160];
    char *options;
    size_t n_stages;
};

static void read_request(struct rematd_request *r, json_t *body, struct remat_profile *parsed,
                         int fast, struct outcome *out)
{
    struct remat_profile *p = NULL;
    struct remat_options o;
    json_t *oj = NULL;
    memset(&last, 0, sizeof last);
    int rc = fast ? rematd_plan_request_parsed(r, body, parsed, &p, &o, &oj)
                  : rematd_plan_request(r, body, &p, &o, &oj);
    memset(out, 0, sizeof *out);
    if (rc < 0) {
        FUZZ_CHECK(p == NULL && oj == NULL, "a refusal left a profile or options");
        FUZZ_CHECK(last.status >= 400 && last.status < 500, "refused with status %d", last.status);
        FUZZ_CHECK(last.pointer[0] == '\0' || last.pointer[0] == '/', "pointer '%s'", last.pointer);
        out->status = last.status;
        memcpy(out->pointer, last.pointer, sizeof out->pointer);
        return;
    }
    FUZZ_CHECK(last.status == 0, "accepted after answering %d", last.status);
    FUZZ_CHECK(p != NULL && json_is_object(oj), "accepted without a profile or options");
    FUZZ_CHECK(remat_profile_validate(p, NULL) == REMAT_OK, "an accepted profile is invalid");
    FUZZ_CHECK(p->n_stages <= r->srv->cfg.max_stages, "%zu stages over the limit", p->n_stages);
    FUZZ_CHECK(o.algorithm < REMAT_ALG_COUNT, "algorithm %d", (int)o.algorithm);
    FUZZ_CHECK(o.budget_bytes >= 0 && o.budget_bytes <= REMAT_MAX_BYTES, "budget out of range");
    FUZZ_CHECK(o.mem_slots <= 100000, "mem_slots %zu", o.mem_slots);
    out->status = 200;
    out->options = json_dumps(oj, JSON_COMPACT | JSON_SORT_KEYS);
    out->n_stages = p->n_stages;
    json_decref(oj);
    remat_profile_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *body = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(body)) {
        json_decref(body);
        return 0;
    }
    static struct rematd_server srv;
    srv.cfg.max_stages = 1000;
    struct rematd_request r;
    memset(&r, 0, sizeof r);
    r.srv = &srv;
    struct outcome tree, fast;
    read_request(&r, body, NULL, 0, &tree);
    /* The fast path, as POST /v1/plans takes it: only for an inline
     * profile the streaming reader accepts (a refusal there is answered
     * before the request is read). */
    json_t *pj = json_object_get(body, "profile");
    char *ptext = json_is_object(pj) ? json_dumps(pj, JSON_COMPACT) : NULL;
    struct remat_profile *parsed =
        ptext ? remat_profile_parse(ptext, strlen(ptext), "/profile", NULL) : NULL;
    free(ptext);
    if (parsed) {
        read_request(&r, body, parsed, 1, &fast);
        /* The tree path may refuse on its stage limit before reading the
         * profile; so does the fast path, after: the same answer. */
        FUZZ_CHECK(fast.status == tree.status, "tree %d (%s), fast %d (%s)", tree.status,
                   tree.pointer, fast.status, fast.pointer);
        FUZZ_CHECK(strcmp(fast.pointer, tree.pointer) == 0 || tree.status == 200,
                   "tree at '%s', fast at '%s'", tree.pointer, fast.pointer);
        FUZZ_CHECK(tree.status != 200 ||
                       (strcmp(tree.options, fast.options) == 0 && tree.n_stages == fast.n_stages),
                   "options %s against %s", tree.options, fast.options);
        free(fast.options);
    }
    free(tree.options);
    json_decref(body);
    return 0;
}
