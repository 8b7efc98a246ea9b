/* plans/request.c - reading a plan request (plans/request.h): the fields
 * and their checks, shared by every route that takes them, and POST
 * /v1/plans's reading of its body in one pass.  No HTTP here: what is
 * wrong fills a struct rematd_problem (problem.h) that the route sends. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plans/request.h"
#include "rematd.h"
#include "request_limits.h"
#include "rematx/rematx.h"

static const char *const plan_fields[] = {"profile",      "profile_id", "algorithm", "segments",
                                          "budget_bytes", "model",      "mem_slots", NULL};

static int get_count(struct rematd_problem *prob, json_t *body, const char *name, json_int_t lo,
                     json_int_t hi, json_int_t *out)
{
    json_t *v = json_object_get(body, name);
    if (!v)
        return 0;
    char ptr[64];
    snprintf(ptr, sizeof ptr, "/%s", name);
    if (!json_is_integer(v)) {
        rematd_problem_set(prob, 400, "validation", ptr, "%s must be an integer", name);
        return -1;
    }
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi) {
        rematd_problem_set(prob, 400, "validation", ptr, "%s must be in %lld..%lld", name,
                           (long long)lo, (long long)hi);
        return -1;
    }
    *out = x;
    return 1;
}

int rematd_plan_request(const struct rematd_read_ctx *ctx, json_t *body,
                        struct remat_profile **profile, struct remat_options *opts,
                        json_t **options_json, struct rematd_problem *prob)
{
    return rematd_plan_request_parsed(ctx, body, NULL, profile, opts, options_json, prob);
}

static int plan_request(const struct rematd_read_ctx *ctx, json_t *body,
                        struct remat_profile **given, struct remat_profile **profile,
                        struct remat_options *opts, json_t **options_json,
                        struct rematd_problem *prob);

int rematd_plan_request_parsed(const struct rematd_read_ctx *ctx, json_t *body,
                               struct remat_profile *parsed, struct remat_profile **profile,
                               struct remat_options *opts, json_t **options_json,
                               struct rematd_problem *prob)
{
    /* plan_request takes `parsed` (setting it to NULL) only when it uses
     * it; whatever it left is freed here, on every path. */
    int rc = plan_request(ctx, body, &parsed, profile, opts, options_json, prob);
    remat_profile_free(parsed);
    return rc;
}

static int plan_request(const struct rematd_read_ctx *ctx, json_t *body,
                        struct remat_profile **given, struct remat_profile **profile,
                        struct remat_options *opts, json_t **options_json,
                        struct rematd_problem *prob)
{
    struct remat_profile *parsed = *given;
    *profile = NULL;
    *options_json = NULL;
    if (rematd_problem_unknown(prob, body, "", plan_fields) < 0)
        return -1;
    remat_options_init(opts);
    json_t *oj = json_object();
    json_t *v = json_object_get(body, "algorithm");
    if (v) {
        if (!json_is_string(v) ||
            remat_algorithm_parse(json_string_value(v), &opts->algorithm) != 0) {
            json_decref(oj);
            char names[256];
            rematd_problem_set(prob, 400, "validation", "/algorithm", "algorithm must be one of %s",
                               rematx_algorithm_names(names, sizeof names));
            return -1;
        }
    }
    json_object_set_new(oj, "algorithm", json_string(remat_algorithm_name(opts->algorithm)));
    v = json_object_get(body, "model");
    if (v) {
        if (!json_is_string(v) || remat_model_parse(json_string_value(v), &opts->model) != 0) {
            json_decref(oj);
            rematd_problem_set(prob, 400, "validation", "/model",
                               "model must be sum, prefix or traced");
            return -1;
        }
        opts->has_model = 1;
        json_object_set_new(oj, "model", json_string(remat_model_name(opts->model)));
    }
    json_int_t x;
    int got;
    if ((got = get_count(prob, body, "segments", 1, REMAT_MAX_STAGES, &x)) < 0)
        goto bad;
    if (got) {
        opts->segments = (size_t)x;
        json_object_set_new(oj, "segments", json_integer(x));
    }
    if ((got = get_count(prob, body, "budget_bytes", 1, REMAT_MAX_BYTES, &x)) < 0)
        goto bad;
    if (got) {
        opts->budget_bytes = x;
        json_object_set_new(oj, "budget_bytes", json_integer(x));
    }
    if ((got = get_count(prob, body, "mem_slots", 1, REMATD_MAX_MEM_SLOTS, &x)) < 0)
        goto bad;
    if (got) {
        opts->mem_slots = (size_t)x;
        json_object_set_new(oj, "mem_slots", json_integer(x));
    }
    json_t *pj = json_object_get(body, "profile");
    json_t *pid = json_object_get(body, "profile_id");
    if ((pj != NULL) == (pid != NULL)) {
        rematd_problem_set(prob, 400, "validation", pj ? "/profile_id" : "/profile",
                           "give exactly one of profile and profile_id");
        goto bad;
    }
    if (parsed != NULL && pid == NULL) {
        /* The inline profile was read from the text already (and without
         * error, or the caller would not pass it); only this server's own
         * limit is left, checked as below. */
        if (parsed->n_stages > ctx->max_stages) {
            rematd_problem_set(prob, 400, "limit-exceeded", "/profile/stages",
                               "%zu stages; this server accepts at most %zu", parsed->n_stages,
                               ctx->max_stages);
            goto bad;
        }
        *profile = parsed;
        *given = NULL;
    } else if (pid) {
        if (!json_is_string(pid)) {
            rematd_problem_set(prob, 400, "validation", "/profile_id",
                               "profile_id must be a string");
            goto bad;
        }
        *profile = rematd_read_profile_by_id(ctx, json_string_value(pid), "/profile_id", prob);
        if (!*profile)
            goto bad;
        json_object_set(oj, "profile_id", pid);
    } else {
        if (!json_is_object(pj)) {
            rematd_problem_set(prob, 400, "validation", "/profile", "profile must be an object");
            goto bad;
        }
        json_t *stages = json_object_get(pj, "stages");
        if (json_is_array(stages) && json_array_size(stages) > ctx->max_stages) {
            rematd_problem_set(prob, 400, "limit-exceeded", "/profile/stages",
                               "%zu stages; this server accepts at most %zu",
                               json_array_size(stages), ctx->max_stages);
            goto bad;
        }
        struct remat_error err = {0};
        *profile = remat_profile_from_json(pj, "/profile", &err);
        if (!*profile) {
            rematd_problem_remat(prob, err.code ? err.code : REMAT_EINVAL, &err, NULL);
            goto bad;
        }
    }
    *options_json = oj;
    return 0;
bad:
    json_decref(oj);
    return -1;
}

/* ---- the fast path: no jansson tree of the profile ------------------
 *
 * A request is mostly its profile.  Reading it into jansson's tree and then
 * into a profile cost several times the solve, and so did printing the
 * plan through a tree.  Here a small scanner finds the top-level "profile"
 * member's value, the rest of the body (the envelope, with a placeholder in
 * that value's place) goes to jansson, the profile text to
 * remat_profile_parse, and the plan is written by remat_plan_dumps.
 *
 * The answers must not change, so the fast path only ever answers what the
 * plain path would: whenever anything is unusual or wrong (bad JSON
 * anywhere, a bad profile, escapes in top-level keys, "profile" given twice,
 * deep nesting) it gives up before answering and the plain path runs on the
 * whole body.  A valid profile cannot change which envelope error comes
 * first, so envelope errors are answered by the same code on either path. */

static const char *skip_ws(const char *p, const char *e)
{
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

/* p at a '"': past the closing quote, or NULL.  *escaped is set when the
 * string has a backslash. */
static const char *skip_string(const char *p, const char *e, int *escaped)
{
    for (p++; p < e; p++) {
        if (*p == '\\') {
            *escaped = 1;
            p++;
        } else if (*p == '"') {
            return p + 1;
        }
    }
    return NULL;
}

/* One value at p (after whitespace): its end, or NULL.  Loose about what is
 * inside (jansson and remat_profile_parse check that); *depth gets the
 * deepest bracket nesting, as rematd_json_depth counts it. */
static const char *skip_value(const char *p, const char *e, size_t *depth)
{
    int escaped = 0;
    size_t d = 0;
    *depth = 0;
    if (p < e && *p == '"')
        return skip_string(p, e, &escaped);
    if (p < e && (*p == '{' || *p == '[')) {
        while (p < e) {
            if (*p == '"') {
                p = skip_string(p, e, &escaped);
                if (p == NULL)
                    return NULL;
                continue;
            }
            if (*p == '{' || *p == '[') {
                if (++d > *depth)
                    *depth = d;
            } else if (*p == '}' || *p == ']') {
                if (--d == 0)
                    return p + 1;
            }
            p++;
        }
        return NULL;
    }
    const char *b = p;
    while (p < e && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\t' && *p != '\n' &&
           *p != '\r')
        p++;
    return p > b ? p : NULL;
}

/* Reads the body's top level: the profile (new) from the one "profile"
 * member, read in place by the streaming reader, which says where it ended,
 * and that value's span.  NULL when the scan saw anything odd, including a
 * profile the reader refused. */
static struct remat_profile *find_profile(const char *body, size_t len, size_t *vs, size_t *ve)
{
    const char *p = body, *e = body + len;
    struct remat_profile *profile = NULL;
    p = skip_ws(p, e);
    if (p >= e || *p != '{')
        return NULL;
    p = skip_ws(p + 1, e);
    if (p < e && *p == '}')
        return NULL;
    for (;;) {
        p = skip_ws(p, e);
        if (p >= e || *p != '"')
            goto odd;
        const char *k = p + 1;
        int escaped = 0;
        p = skip_string(p, e, &escaped);
        if (p == NULL || escaped)
            goto odd;
        int is_profile = p - 1 - k == 7 && memcmp(k, "profile", 7) == 0;
        p = skip_ws(p, e);
        if (p >= e || *p != ':')
            goto odd;
        p = skip_ws(p + 1, e);
        const char *v = p;
        if (is_profile) {
            if (profile != NULL)
                goto odd;
            int depth = 0;
            size_t used = 0;
            struct remat_error err;
            profile = rematx_profile_parse_prefix(v, (size_t)(e - v), "/profile", NULL, &depth,
                                                  &used, &err);
            /* rematd_json_depth's limit applies to the whole body: a
             * profile nested deeper than usual goes the plain way. */
            if (profile == NULL || depth > 8)
                goto odd;
            p = v + used;
            *vs = (size_t)(v - body);
            *ve = (size_t)(p - body);
        } else {
            size_t d;
            p = skip_value(p, e, &d);
            if (p == NULL)
                goto odd;
        }
        p = skip_ws(p, e);
        if (p < e && *p == ',') {
            p++;
            continue;
        }
        if (p < e && *p == '}')
            break;
        goto odd;
    }
    if (profile != NULL && skip_ws(p + 1, e) == e)
        return profile;
odd:
    remat_profile_free(profile);
    return NULL;
}

/* The fast path's reading.  1: *out filled; -1: prob filled (with what
 * the plain path would say too); 0: nothing done, take the plain path. */
static int read_fast(const struct rematd_read_ctx *ctx, const char *body, size_t len,
                     struct rematd_plan_req *out, struct rematd_problem *prob)
{
    size_t vs = 0, ve = 0;
    struct remat_profile *profile = len > 0 ? find_profile(body, len, &vs, &ve) : NULL;
    if (profile == NULL)
        return 0;
    /* The envelope: the body with "0" for the profile's value. */
    size_t elen = len - (ve - vs) + 1;
    char *env_text = malloc(elen);
    if (env_text == NULL) {
        remat_profile_free(profile);
        return 0;
    }
    memcpy(env_text, body, vs);
    env_text[vs] = '0';
    memcpy(env_text + vs + 1, body + ve, len - ve);
    json_t *env = json_loadb(env_text, elen, JSON_REJECT_DUPLICATES, NULL);
    free(env_text);
    if (env == NULL || !json_is_object(env) || !json_is_integer(json_object_get(env, "profile")) ||
        rematd_json_depth(env, 9) > 8) {
        json_decref(env);
        remat_profile_free(profile);
        return 0;
    }
    int rc = rematd_plan_request_parsed(ctx, env, profile, &out->profile, &out->opts, &out->options,
                                        prob);
    json_decref(env);
    return rc < 0 ? -1 : 1;
}

int rematd_plan_req_read(const struct rematd_read_ctx *ctx, const char *text, size_t len,
                         struct rematd_plan_req *out, struct rematd_problem *prob)
{
    memset(out, 0, sizeof *out);
    /* A NUL byte is refused by the plain path (rematd_body_parse); the
     * fast path's envelope must not take it either (jansson skips one after
     * a number). */
    if (len > 0 && memchr(text, 0, len)) {
        json_decref(rematd_body_parse(text, len, prob)); /* NULL: fills prob */
        return -1;
    }
    int rc = read_fast(ctx, text, len, out, prob);
    if (rc != 0)
        return rc < 0 ? -1 : 0;
    json_t *body = rematd_body_parse(text, len, prob);
    if (!body)
        return -1;
    rc = rematd_plan_request(ctx, body, &out->profile, &out->opts, &out->options, prob);
    json_decref(body);
    return rc;
}

void rematd_plan_req_clear(struct rematd_plan_req *pr)
{
    remat_profile_free(pr->profile);
    json_decref(pr->options);
    pr->profile = NULL;
    pr->options = NULL;
}
