/* problem.c - filling a struct rematd_problem (problem.h): the helpers
 * every reader shares.  Nothing here answers; http/response.c sends. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "problem.h"
#include "rematd.h"
#include "rematx/pointer.h"

void rematd_problem_clear(struct rematd_problem *p)
{
    json_decref(p->extra);
    p->extra = NULL;
    p->status = 0;
    p->slug = NULL;
    p->pointer[0] = '\0';
    p->detail[0] = '\0';
    p->retry_after = NULL;
}

void rematd_problem_set(struct rematd_problem *p, int status, const char *slug, const char *pointer,
                        const char *fmt, ...)
{
    rematd_problem_clear(p);
    p->status = status;
    p->slug = slug;
    snprintf(p->pointer, sizeof p->pointer, "%s", pointer ? pointer : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->detail, sizeof p->detail, fmt, ap);
    va_end(ap);
}

void rematd_problem_remat(struct rematd_problem *p, int rc, const struct remat_error *err,
                          const struct remat_plan *plan)
{
    const char *ptr = err->pointer[0] ? err->pointer : NULL;
    switch (rc) {
    case REMAT_EINVAL:
        rematd_problem_set(p, 400, "validation", ptr, "%s", err->message);
        break;
    case REMAT_ELIMIT:
        rematd_problem_set(p, 400, "limit-exceeded", ptr, "%s", err->message);
        break;
    case REMAT_EINFEASIBLE:
        rematd_problem_set(p, 422, "infeasible", ptr, "%s",
                           err->message[0] ? err->message : "no schedule fits the budget");
        p->extra =
            json_pack("{s:I}", "min_budget_bytes", (json_int_t)(plan ? plan->min_budget_bytes : 0));
        break;
    case REMAT_EUNSUPPORTED:
        rematd_problem_set(p, 501, "unsupported", ptr, "%s",
                           err->message[0] ? err->message : "this solver cannot answer yet");
        break;
    default:
        rematd_problem_set(p, 500, "internal", NULL, "%s",
                           err->message[0] ? err->message : remat_strerror(rc));
    }
}

int rematd_problem_array(struct rematd_problem *p, json_t *v, const char *pointer, size_t max,
                         const char *empty, const char *noun)
{
    if (!json_is_array(v) || json_array_size(v) == 0) {
        rematd_problem_set(p, 400, "validation", pointer, "%s", empty);
        return -1;
    }
    if (json_array_size(v) > max) {
        rematd_problem_set(p, 400, "limit-exceeded", pointer, "%zu %s; at most %zu",
                           json_array_size(v), noun, max);
        return -1;
    }
    return 0;
}

int rematd_problem_int(struct rematd_problem *p, json_t *obj, const char *name, json_int_t lo,
                       json_int_t hi, const char *range, json_int_t *out)
{
    json_t *v = json_object_get(obj, name);
    if (v == NULL)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        char ptr[64], digits[48];
        snprintf(ptr, sizeof ptr, "/%s", name);
        snprintf(digits, sizeof digits, "%lld..%lld", (long long)lo, (long long)hi);
        rematd_problem_set(p, 400, "validation", ptr, "%s must be an integer in %s", name,
                           range != NULL ? range : digits);
        return -1;
    }
    *out = json_integer_value(v);
    return 0;
}

int rematd_problem_unknown(struct rematd_problem *p, json_t *obj, const char *prefix,
                           const char *const *allowed)
{
    const char *k;
    json_t *v;
    json_object_foreach (obj, k, v) {
        int ok = 0;
        for (size_t i = 0; allowed[i]; i++)
            if (strcmp(allowed[i], k) == 0)
                ok = 1;
        if (!ok) {
            char ptr[160];
            snprintf(ptr, sizeof ptr, "%s", prefix);
            rematx_pointer_append(ptr, sizeof ptr, k);
            rematd_problem_set(p, 400, "validation", ptr, "unknown field '%.100s'", k);
            return -1;
        }
    }
    return 0;
}

json_t *rematd_body_parse(const char *text, size_t len, struct rematd_problem *p)
{
    if (len == 0) {
        rematd_problem_set(p, 400, "invalid-json", NULL,
                           "the body is empty; a JSON object is expected");
        return NULL;
    }
    /* jansson skips a NUL byte right after a number or literal ("[1\0]"
     * loads); JSON has no such byte outside an escape, and libremat's
     * streaming reader refuses it, so every path refuses it here. */
    if (memchr(text, 0, len)) {
        rematd_problem_set(p, 400, "invalid-json", NULL,
                           "the body holds a NUL byte (write it as \\u0000 inside a string)");
        return NULL;
    }
    json_error_t e;
    json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &e);
    if (!j) {
        if (json_error_code(&e) == json_error_stack_overflow)
            rematd_problem_set(p, 400, "json-too-deep", NULL, "nesting deeper than %d levels",
                               REMATD_MAX_JSON_DEPTH);
        else
            rematd_problem_set(p, 400, "invalid-json", NULL, "line %d, column %d: %s", e.line,
                               e.column, e.text);
        return NULL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        rematd_problem_set(p, 400, "invalid-json", "", "the body must be a JSON object");
        return NULL;
    }
    if (rematd_json_depth(j, REMATD_MAX_JSON_DEPTH + 1) > REMATD_MAX_JSON_DEPTH) {
        json_decref(j);
        rematd_problem_set(p, 400, "json-too-deep", NULL, "nesting deeper than %d levels",
                           REMATD_MAX_JSON_DEPTH);
        return NULL;
    }
    return j;
}

struct remat_profile *rematd_read_profile_by_id(const struct rematd_read_ctx *ctx, const char *id,
                                                const char *pointer, struct rematd_problem *p)
{
    if (ctx->profile_by_id == NULL) {
        rematd_problem_set(p, 404, "not-found", pointer, "no profile job with this id");
        return NULL;
    }
    return ctx->profile_by_id(ctx->cls, id, pointer, p);
}

int rematd_read_model_by_id(const struct rematd_read_ctx *ctx, const char *id,
                            struct rematd_read_model *m, struct rematd_problem *p)
{
    if (ctx->model_by_id == NULL) {
        rematd_problem_set(p, 404, "not-found", "/model_id", "no uploaded model with id %s", id);
        return -1;
    }
    return ctx->model_by_id(ctx->cls, id, m, p);
}
