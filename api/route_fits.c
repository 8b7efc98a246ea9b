/*
 * POST /v1/fits: what a cluster scheduler asks (docs/scheduling.md).  From
 * profiles of one model at a few batch sizes (inline, or done profile jobs
 * by id) and one or more memory sizes (bytes or GPU names), answers, per
 * memory, the largest batch whose min-peak plan fits with that plan and the
 * peak at batch + 1, store-all's largest batch, and the throughput-best
 * batch with its min-time plan (remat_fits).  Synchronous, 200: nothing is
 * stored.  The work (a few dozen solves) runs on a planning thread, under
 * the bounds of POST /v1/plans (rematd_solve_begin).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_common.h"
#include "rematd.h"

static const char *const fields[] = {"profiles",  "profile_ids",  "optimizer",
                                     "memory",    "margin_bytes", "margin_fraction",
                                     "max_batch", "throughput",   NULL};
static const char *const optim_fields[] = {
    "name",           "foreach",      "param_elem_bytes", "state_elem_bytes",
    "master_weights", "weight_decay", "step_ms",          NULL};

struct fits_req {
    struct remat_profile *ps[REMAT_FITS_MAX_PROFILES];
    size_t n;
    int64_t mem[REMAT_FITS_MAX_MEMORIES];
    size_t n_mem;
    struct remat_fits_options o;
};

static void fits_req_free(struct fits_req *f)
{
    for (size_t k = 0; k < f->n; k++)
        remat_profile_free(f->ps[k]);
    f->n = 0;
}

static int bad(struct rematd_request *r, const char *ptr, const char *msg)
{
    rematd_req_problem(r, 400, "validation", ptr, "%s", msg);
    return -1;
}

static int get_optimizer(struct rematd_request *r, json_t *v, struct remat_optim_spec *spec)
{
    json_t *name = json_is_object(v) ? json_object_get(v, "name") : v;
    const char *ptr = json_is_object(v) ? "/optimizer/name" : "/optimizer";
    if (!json_is_string(name) || remat_optim_parse(json_string_value(name), &spec->kind) < 0)
        return bad(r, ptr, "optimizer must be none, sgd, sgd-momentum, adam or adamw");
    if (!json_is_object(v))
        return 0;
    if (rematd_req_reject_unknown(r, v, "/optimizer", optim_fields) < 0)
        return -1;
    static const char *const flags[] = {"foreach", "master_weights", "weight_decay"};
    int *dst[] = {&spec->foreach, &spec->master_weights, &spec->weight_decay};
    for (int k = 0; k < 3; k++) {
        json_t *f = json_object_get(v, flags[k]);
        char p[64];
        snprintf(p, sizeof p, "/optimizer/%s", flags[k]);
        if (f != NULL && !json_is_boolean(f))
            return bad(r, p, "must be true or false");
        *dst[k] = json_is_true(f);
    }
    static const char *const elems[] = {"param_elem_bytes", "state_elem_bytes"};
    int *edst[] = {&spec->param_elem_bytes, &spec->state_elem_bytes};
    for (int k = 0; k < 2; k++) {
        json_t *f = json_object_get(v, elems[k]);
        char p[64];
        snprintf(p, sizeof p, "/optimizer/%s", elems[k]);
        if (f == NULL)
            continue;
        json_int_t x = json_is_integer(f) ? json_integer_value(f) : -1;
        if (x != 1 && x != 2 && x != 4 && x != 8)
            return bad(r, p, "must be 1, 2, 4 or 8");
        *edst[k] = (int)x;
    }
    json_t *ms = json_object_get(v, "step_ms");
    if (ms != NULL) {
        if (!json_is_number(ms) || json_number_value(ms) < 0 || json_number_value(ms) > 1e9)
            return bad(r, "/optimizer/step_ms", "step_ms must be a number in [0, 1e9]");
        spec->step_ms = json_number_value(ms);
    }
    return 0;
}

static int get_profiles(struct rematd_request *r, json_t *body, struct fits_req *f)
{
    json_t *inl = json_object_get(body, "profiles");
    json_t *ids = json_object_get(body, "profile_ids");
    if ((inl != NULL) == (ids != NULL))
        return bad(r, inl ? "/profile_ids" : "/profiles",
                   "give exactly one of profiles and profile_ids");
    json_t *arr = inl ? inl : ids;
    const char *name = inl ? "/profiles" : "/profile_ids";
    if (!json_is_array(arr) || json_array_size(arr) == 0)
        return bad(r, name, "must be a non-empty array");
    if (json_array_size(arr) > REMAT_FITS_MAX_PROFILES) {
        rematd_req_problem(r, 400, "limit-exceeded", name, "%zu profiles; at most %d",
                           json_array_size(arr), REMAT_FITS_MAX_PROFILES);
        return -1;
    }
    size_t i;
    json_t *v;
    json_array_foreach (arr, i, v) {
        char p[64];
        snprintf(p, sizeof p, "%s/%zu", name, i);
        if (ids) {
            if (!json_is_string(v))
                return bad(r, p, "a profile id is a string");
            f->ps[f->n] = rematd_profile_by_id(r, json_string_value(v), p);
        } else {
            json_t *stages = json_object_get(v, "stages");
            if (json_is_array(stages) && json_array_size(stages) > r->srv->cfg.max_stages) {
                rematd_req_problem(r, 400, "limit-exceeded", p,
                                   "%zu stages; this server accepts at most %zu",
                                   json_array_size(stages), r->srv->cfg.max_stages);
                return -1;
            }
            struct remat_error err = {0};
            f->ps[f->n] = remat_profile_from_json(v, p, &err);
            if (f->ps[f->n] == NULL)
                rematd_answer_remat_error(r, err.code ? err.code : REMAT_EINVAL, &err, NULL);
        }
        if (f->ps[f->n] == NULL)
            return -1;
        f->n++;
    }
    return 0;
}

static int get_memory(struct rematd_request *r, json_t *body, struct fits_req *f)
{
    json_t *m = json_object_get(body, "memory");
    if (!json_is_array(m) || json_array_size(m) == 0)
        return bad(r, "/memory", "memory must be a non-empty array of byte counts or GPU names");
    if (json_array_size(m) > REMAT_FITS_MAX_MEMORIES) {
        rematd_req_problem(r, 400, "limit-exceeded", "/memory", "%zu memory sizes; at most %d",
                           json_array_size(m), REMAT_FITS_MAX_MEMORIES);
        return -1;
    }
    size_t i;
    json_t *v;
    json_array_foreach (m, i, v) {
        char p[32];
        snprintf(p, sizeof p, "/memory/%zu", i);
        if (json_is_integer(v) && json_integer_value(v) >= 1 &&
            json_integer_value(v) <= REMAT_MAX_BYTES)
            f->mem[f->n_mem++] = json_integer_value(v);
        else if (json_is_string(v) &&
                 remat_gpu_memory_bytes(json_string_value(v), &f->mem[f->n_mem]) == REMAT_OK)
            f->n_mem++;
        else
            return bad(r, p,
                       "a memory size is bytes in 1..2^60 or a GPU name (docs/scheduling.md)");
    }
    return 0;
}

static int parse(struct rematd_request *r, json_t *body, struct fits_req *f)
{
    if (rematd_req_reject_unknown(r, body, "", fields) < 0)
        return -1;
    remat_fits_options_init(&f->o);
    json_t *v;
    if ((v = json_object_get(body, "margin_bytes")) != NULL) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) > REMAT_MAX_BYTES)
            return bad(r, "/margin_bytes", "margin_bytes must be an integer in 0..2^60");
        f->o.margin_bytes = json_integer_value(v);
    }
    if ((v = json_object_get(body, "margin_fraction")) != NULL) {
        if (!json_is_number(v) || !(json_number_value(v) >= 0 && json_number_value(v) <= 0.9))
            return bad(r, "/margin_fraction", "margin_fraction must be a number in [0, 0.9]");
        f->o.margin_fraction = json_number_value(v);
    }
    if ((v = json_object_get(body, "max_batch")) != NULL) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) > REMAT_FITS_MAX_BATCH)
            return bad(r, "/max_batch", "max_batch must be an integer in 1..16777216");
        f->o.max_batch = json_integer_value(v);
    }
    if ((v = json_object_get(body, "throughput")) != NULL) {
        if (!json_is_boolean(v))
            return bad(r, "/throughput", "throughput must be true or false");
        f->o.want_throughput = json_is_true(v);
    }
    if (get_memory(r, body, f) < 0)
        return -1;
    struct remat_optim_spec spec;
    remat_optim_spec_init(&spec);
    json_t *ov = json_object_get(body, "optimizer");
    if (ov != NULL && get_optimizer(r, ov, &spec) < 0)
        return -1;
    if (get_profiles(r, body, f) < 0)
        return -1;
    /* The optimizer asked for models profiles that were measured without
     * one; a measured optimizer is kept. */
    for (size_t k = 0; ov != NULL && k < f->n; k++) {
        struct remat_error err = {0};
        if (f->ps[k]->optimizer.kind == REMAT_OPTIM_NONE &&
            remat_optim_estimate(f->ps[k], &spec, &f->ps[k]->optimizer, &err) < 0) {
            char p[160];
            snprintf(p, sizeof p, "%.100s", err.pointer[0] ? err.pointer : "/optimizer");
            rematd_answer_remat_error(r, err.code, &err, NULL);
            return -1;
        }
    }
    return 0;
}

static json_t *answer(struct fits_req *f, struct remat_error *err, int *rc)
{
    struct remat_fits_answer ans[REMAT_FITS_MAX_MEMORIES];
    struct remat_fit_check chk[REMAT_FITS_MAX_PROFILES];
    size_t n_chk = 0;
    const struct remat_profile *const *ps = (const struct remat_profile *const *)f->ps;
    *rc = remat_batch_fit_check(ps, f->n, chk, &n_chk, err);
    if (*rc < 0)
        return NULL;
    *rc = remat_fits(ps, f->n, f->mem, f->n_mem, &f->o, ans, err);
    if (*rc < 0)
        return NULL;
    json_t *root = json_object(), *arr = json_array(), *fit = json_array();
    int fail = root == NULL || arr == NULL || fit == NULL;
    for (size_t k = 0; !fail && k < f->n_mem; k++)
        fail |= json_array_append_new(arr, remat_fits_answer_to_json(&ans[k])) < 0;
    for (size_t k = 0; !fail && k < n_chk; k++) {
        json_t *e = json_object();
        fail |= e == NULL;
        for (int fl = 0; !fail && fl < REMAT_FIT_N_FIELDS; fl++)
            fail |=
                json_object_set_new(e, remat_fit_field_name(fl), json_real(chk[k].rel_err[fl])) < 0;
        json_t *c =
            fail ? NULL : json_pack("{s:I, s:o}", "batch", (json_int_t)chk[k].batch, "rel_err", e);
        fail |= c == NULL || json_array_append_new(fit, c) < 0;
    }
    for (size_t k = 0; k < f->n_mem; k++)
        remat_fits_answer_clear(&ans[k]);
    json_t *batches = json_array();
    for (size_t k = 0; !fail && batches != NULL && k < f->n; k++)
        fail |= json_array_append_new(batches, json_integer(f->ps[k]->batch_size)) < 0;
    fail |= batches == NULL;
    if (!fail) {
        fail |= json_object_set_new(root, "measured_batches", batches) < 0;
        fail |= json_object_set_new(root, "optimizer",
                                    json_string(remat_optim_name(f->ps[0]->optimizer.kind))) < 0;
        fail |= json_object_set_new(root, "answers", arr) < 0;
        fail |= json_object_set_new(root, "fit_check", fit) < 0;
    } else {
        json_decref(batches);
        json_decref(arr);
        json_decref(fit);
    }
    if (fail) {
        json_decref(root);
        *rc = REMAT_ENOMEM;
        snprintf(err->message, sizeof err->message, "out of memory");
        err->pointer[0] = '\0';
        return NULL;
    }
    return root;
}

/* The answer under POST /v1/plans's bounds (plan_common.h): the memory
 * bound of the whole answer reserved from --solve-memory-bytes, every solve
 * canceled at --solve-timeout-ms, a client that hung up, or shutdown. */
static void answer_bounded(struct rematd_request *r, struct fits_req *f)
{
    struct remat_error err = {0};
    int64_t need = 0;
    int rc = remat_fits_memory_bound((const struct remat_profile *const *)f->ps, f->n, f->n_mem,
                                     &f->o, &need, &err);
    if (rc < 0) {
        rematd_answer_remat_error(r, rc, &err, NULL);
        return;
    }
    struct rematd_solve_guard g;
    if (rematd_solve_begin(r, need, "answer", &g) < 0)
        return;
    f->o.cancel = rematd_solve_cancel;
    f->o.cancel_arg = &g;
    json_t *out = answer(f, &err, &rc);
    if (rematd_solve_end(&g, out != NULL ? REMAT_OK : rc, "answer") < 0)
        return;
    if (out != NULL)
        rematd_req_json(r, 200, out);
    else
        rematd_answer_remat_error(r, rc, &err, NULL);
}

static void fits_job(struct rematd_request *r)
{
    json_t *body = rematd_req_body_json(r);
    if (body != NULL) {
        struct fits_req f;
        memset(&f, 0, sizeof f);
        if (parse(r, body, &f) == 0)
            answer_bounded(r, &f);
        fits_req_free(&f);
    }
    if (!r->pending && r->pending_status >= 0)
        rematd_req_problem(r, 500, "internal", NULL, "the handler gave no answer");
    rematd_req_resume(r);
}

static enum rematd_handled create(struct rematd_request *r)
{
    return rematd_req_defer(r, fits_job) < 0 ? REMATD_HANDLED : REMATD_SUSPENDED;
}

const struct rematd_route rematd_route_fits = {.method = "POST",
                                               .pattern = "/v1/fits",
                                               .name = "fits",
                                               .auth = REMATD_AUTH_CLIENT,
                                               .handler = create};
