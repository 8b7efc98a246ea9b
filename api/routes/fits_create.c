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

#include "jobs_common.h"
#include "plan_common.h"
#include "rematd.h"

static const char *const fields[] = {
    "profiles",    "profile_ids", "optimizer", "memory", "margin_bytes", "margin_fraction",
    "max_batch",   "throughput",  "model",     "layers", "model_id",     "model_options",
    "input_shape", "input",       "stages",    "dtype",  "device",       "warmup",
    "repeats",     "batches",     "confirm",   NULL};
/* What a model spec passes on to its profile jobs (POST /v1/profiles). */
static const char *const profile_fields[] = {
    "model", "layers", "model_id", "model_options", "input_shape", "input", "stages",
    "dtype", "device", "warmup",   "repeats",       "optimizer",   NULL};
#define MAX_BATCHES 8

/* Whether the request has its answer (on a planning thread, it waits in
 * pending until the connection resumes). */
static int answered(const struct rematd_request *r)
{
    return r->responded || r->pending != NULL || r->pending_status != 0;
}
static const char *const optim_fields[] = {
    "name",           "foreach",      "param_elem_bytes", "state_elem_bytes",
    "master_weights", "weight_decay", "step_ms",          NULL};

struct fits_req {
    struct remat_profile *ps[REMAT_FITS_MAX_PROFILES];
    char ids[REMAT_FITS_MAX_PROFILES][REMATD_ID_LEN + 1]; /* profile jobs, when by id */
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
            snprintf(f->ids[f->n], sizeof f->ids[f->n], "%.32s", json_string_value(v));
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

/* The answer's options and memories (every source of profiles). */
static int parse_options(struct rematd_request *r, json_t *body, struct fits_req *f)
{
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
    return get_memory(r, body, f);
}

static int parse(struct rematd_request *r, json_t *body, struct fits_req *f)
{
    if (parse_options(r, body, f) < 0)
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
        if (f->ids[0][0]) {
            json_t *ids = json_array();
            for (size_t k = 0; ids != NULL && k < f->n; k++)
                json_array_append_new(ids, json_string(f->ids[k]));
            fail |= ids == NULL || json_object_set_new(root, "profile_ids", ids) < 0;
        }
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
/* The answer under POST /v1/plans's bounds (plan_common.h): the memory
 * bound of the whole answer reserved from --solve-memory-bytes, every solve
 * canceled at --solve-timeout-ms, a client that hung up, or shutdown.
 * Returns the answer (new), or NULL after answering the problem. */
static json_t *answer_bounded(struct rematd_request *r, struct fits_req *f)
{
    struct remat_error err = {0};
    int64_t need = 0;
    int rc = remat_fits_memory_bound((const struct remat_profile *const *)f->ps, f->n, f->n_mem,
                                     &f->o, &need, &err);
    if (rc < 0) {
        rematd_answer_remat_error(r, rc, &err, NULL);
        return NULL;
    }
    struct rematd_solve_guard g;
    if (rematd_solve_begin(r, need, "answer", &g) < 0)
        return NULL;
    f->o.cancel = rematd_solve_cancel;
    f->o.cancel_arg = &g;
    json_t *out = answer(f, &err, &rc);
    if (rematd_solve_end(&g, out != NULL ? REMAT_OK : rc, "answer") < 0) {
        json_decref(out);
        return NULL;
    }
    if (out == NULL)
        rematd_answer_remat_error(r, rc, &err, NULL);
    return out;
}

/* ------------------------------------------------------------------------
 * A model spec instead of profiles: the profiles it needs, cached or
 * queued (docs/scheduling.md, "A model spec").
 */

/* The batches to measure: "batches" (1..8 distinct sizes), default 8, 32. */
static int get_batches(struct rematd_request *r, json_t *body, json_int_t *b, size_t *n)
{
    json_t *v = json_object_get(body, "batches");
    *n = 0;
    if (v == NULL) {
        b[(*n)++] = 8;
        b[(*n)++] = 32;
        return 0;
    }
    if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > MAX_BATCHES)
        return bad(r, "/batches", "batches is 1 to 8 distinct batch sizes to profile");
    size_t i;
    json_t *x;
    json_array_foreach (v, i, x) {
        char p[32];
        snprintf(p, sizeof p, "/batches/%zu", i);
        if (!json_is_integer(x) || json_integer_value(x) < 1 || json_integer_value(x) > 65536)
            return bad(r, p, "a batch size is an integer in 1..65536");
        for (size_t k = 0; k < *n; k++)
            if (b[k] == json_integer_value(x))
                return bad(r, p, "the batch sizes must be distinct");
        b[(*n)++] = json_integer_value(x);
    }
    return 0;
}

/* The normalised spec of the profile job at batch, or NULL after answering. */
static json_t *profile_spec_at(struct rematd_request *r, json_t *body, json_int_t batch)
{
    json_t *pb = json_object();
    for (size_t k = 0; pb != NULL && profile_fields[k]; k++) {
        json_t *v = json_object_get(body, profile_fields[k]);
        if (v != NULL)
            json_object_set(pb, profile_fields[k], v);
    }
    if (pb == NULL || json_object_set_new(pb, "batch_size", json_integer(batch)) < 0) {
        json_decref(pb);
        rematd_req_problem(r, 500, "internal", NULL, "out of memory");
        return NULL;
    }
    json_t *spec = rematd_profile_spec(r, pb);
    json_decref(pb);
    return spec;
}

/* The profile job at batch: a done one of the same reuse key (*done = 1),
 * else a new queued one.  id gets its id.  0, or -1 after answering. */
static int profile_job_at(struct rematd_request *r, json_t *body, json_int_t batch,
                          char id[REMATD_ID_LEN + 1], int *done)
{
    json_t *spec = profile_spec_at(r, body, batch);
    if (spec == NULL)
        return -1;
    char key[65];
    char *text = rematd_profile_reuse_key(spec, key) == 0 ? json_dumps(spec, JSON_COMPACT) : NULL;
    const char *device = json_string_value(json_object_get(spec, "device"));
    struct rematd_job j;
    enum rematd_store_result got =
        text ? rematd_store_find_reusable(r->srv->store, "profile", key, &j) : REMATD_STORE_ERROR;
    *done = 0;
    if (got == REMATD_STORE_OK) {
        snprintf(id, REMATD_ID_LEN + 1, "%s", j.id);
        rematd_job_clear(&j);
        *done = 1;
    } else if (got == REMATD_STORE_NOT_FOUND) {
        rematd_new_id(id);
        struct rematd_job_new job = {
            .model_id = json_string_value(json_object_get(spec, "model_id")),
            .id = id,
            .created_at = rematd_now(),
            .kind = "profile",
            .device = device ? device : "cpu",
            .spec = text,
            .reuse_key = key,
        };
        struct rematd_idem existing;
        got = rematd_store_create_job(r->srv->store, &job, &existing);
        if (got == REMATD_STORE_FULL) {
            rematd_req_header(r, "Retry-After", "30");
            rematd_req_problem(r, 503, "queue-full", NULL,
                               "the job queue is full (--max-queued-jobs); try again later");
        } else if (got == REMATD_STORE_NOT_FOUND) {
            rematd_req_problem(r, 409, "model-deleted", "/model_id",
                               "model %s was deleted; upload it again",
                               json_string_value(json_object_get(spec, "model_id")));
        }
    }
    free(text);
    json_decref(spec);
    if (got != REMATD_STORE_OK) {
        if (!answered(r))
            rematd_req_problem(r, 503, "unavailable", NULL, "the store did not answer");
        return -1;
    }
    return 0;
}

/* The answer from the done profile jobs of a "profiles" map ({"batch":
 * id}).  *pending counts those not done yet (then NULL, nothing answered);
 * a failed one is 422 profile-failed.  Returns the answer (new), or NULL
 * with *pending set or after answering. */
static json_t *answer_from_jobs(struct rematd_request *r, json_t *request, json_t *profiles,
                                size_t *pending)
{
    struct fits_req f;
    memset(&f, 0, sizeof f);
    *pending = 0;
    json_t *out = NULL;
    if (parse_options(r, request, &f) < 0)
        return NULL;
    const char *batch;
    json_t *idv;
    json_object_foreach (profiles, batch, idv) {
        const char *id = json_string_value(idv);
        struct rematd_job j;
        enum rematd_store_result got =
            id ? rematd_store_get_job(r->srv->store, id, &j) : REMATD_STORE_NOT_FOUND;
        if (got != REMATD_STORE_OK) {
            rematd_req_problem(r, 503, "unavailable", NULL, "profile job %.32s cannot be read",
                               id ? id : "?");
            goto out;
        }
        int failed = strcmp(j.status, "failed") == 0, done = strcmp(j.status, "done") == 0;
        if (failed)
            rematd_req_problem(r, 422, "profile-failed", NULL,
                               "the profile at batch %s (job %.32s) failed: %.300s", batch, id,
                               j.reason ? j.reason : "no reason given");
        rematd_job_clear(&j);
        if (failed)
            goto out;
        if (!done) {
            (*pending)++;
            continue;
        }
        if (f.n == REMAT_FITS_MAX_PROFILES)
            continue;
        f.ps[f.n] = rematd_profile_by_id(r, id, "/profiles");
        if (f.ps[f.n] == NULL)
            goto out;
        snprintf(f.ids[f.n], sizeof f.ids[f.n], "%s", id);
        f.n++;
    }
    if (*pending == 0)
        out = answer_bounded(r, &f);
out:
    fits_req_free(&f);
    return out;
}

/* The batches to confirm: each answer's largest batch where the answer
 * lies outside the measured batches and that batch is not measured yet. */
static size_t to_confirm(json_t *ans, json_t *profiles, json_int_t *b)
{
    size_t n = 0, i;
    json_t *a;
    json_array_foreach (json_object_get(ans, "answers"), i, a) {
        json_int_t x = json_integer_value(json_object_get(json_object_get(a, "largest"), "batch"));
        char key[32];
        snprintf(key, sizeof key, "%lld", (long long)x);
        if (!json_is_true(json_object_get(a, "extrapolated")) || x < 1 || x > 65536 ||
            json_object_get(profiles, key) != NULL)
            continue;
        size_t k = 0;
        while (k < n && b[k] != x)
            k++;
        if (k == n && n < MAX_BATCHES)
            b[n++] = x;
    }
    return n;
}

/* Queues the confirming profiles of ans into profiles.  Returns how many
 * were added (0: nothing to confirm), or -1 after answering. */
static int confirm(struct rematd_request *r, json_t *request, json_t *ans, json_t *profiles)
{
    json_int_t b[MAX_BATCHES];
    size_t n = to_confirm(ans, profiles, b);
    for (size_t k = 0; k < n; k++) {
        char id[REMATD_ID_LEN + 1], key[32];
        int done = 0;
        if (profile_job_at(r, request, b[k], id, &done) < 0)
            return -1;
        snprintf(key, sizeof key, "%lld", (long long)b[k]);
        json_object_set_new(profiles, key, json_string(id));
    }
    return (int)n;
}

/* POST /v1/fits with a model spec: 200 at once when every profile it needs
 * is cached (and nothing is to be confirmed), else a fits job (202). */
static void fits_model(struct rematd_request *r, json_t *body)
{
    if (json_object_get(body, "profiles") || json_object_get(body, "profile_ids")) {
        bad(r, json_object_get(body, "profiles") ? "/profiles" : "/profile_ids",
            "give profiles, profile_ids or a model spec, one of them");
        return;
    }
    json_t *c = json_object_get(body, "confirm");
    if (c != NULL && !json_is_boolean(c)) {
        bad(r, "/confirm", "confirm must be true or false");
        return;
    }
    struct fits_req f;
    memset(&f, 0, sizeof f);
    json_int_t b[MAX_BATCHES];
    size_t nb = 0;
    if (parse_options(r, body, &f) < 0 || get_batches(r, body, b, &nb) < 0)
        return;
    json_t *request = json_deep_copy(body);
    json_t *profiles = json_object();
    size_t queued = 0;
    if (!request || !profiles) {
        rematd_req_problem(r, 500, "internal", NULL, "out of memory");
        goto out;
    }
    for (size_t k = 0; k < nb; k++) {
        char id[REMATD_ID_LEN + 1], key[32];
        int done = 0;
        if (profile_job_at(r, body, b[k], id, &done) < 0)
            goto out;
        snprintf(key, sizeof key, "%lld", (long long)b[k]);
        json_object_set_new(profiles, key, json_string(id));
        queued += !done;
    }
    int confirmed = 0;
    if (queued == 0) {
        size_t pending = 0;
        json_t *ans = answer_from_jobs(r, request, profiles, &pending);
        if (ans == NULL)
            goto out;
        int added = json_is_true(c) ? confirm(r, request, ans, profiles) : 0;
        confirmed = 1;
        if (added <= 0) {
            if (added == 0)
                rematd_req_json(r, 200, ans);
            else
                json_decref(ans);
            goto out;
        }
        json_decref(ans);
    }
    /* A job: the request, its profile jobs by batch, and whether the
     * confirming profiles were queued already. */
    json_t *dev = json_object_get(body, "device");
    json_t *spec =
        json_pack("{s:O, s:O, s:b, s:s}", "request", request, "profiles", profiles, "confirmed",
                  confirmed, "device", json_is_string(dev) ? json_string_value(dev) : "cuda");
    if (spec == NULL) {
        rematd_req_problem(r, 500, "internal", NULL, "out of memory");
        goto out;
    }
    rematd_queue_job(r, "fits", spec);
out:
    json_decref(request);
    json_decref(profiles);
}

static void fits_job(struct rematd_request *r)
{
    json_t *body = rematd_req_body_json(r);
    if (body != NULL && rematd_req_reject_unknown(r, body, "", fields) == 0) {
        struct fits_req f;
        memset(&f, 0, sizeof f);
        if (json_object_get(body, "model") || json_object_get(body, "layers") ||
            json_object_get(body, "model_id")) {
            fits_model(r, body);
        } else {
            static const char *const model_only[] = {
                "model_options", "input_shape", "input",   "stages",  "dtype",
                "device",        "warmup",      "repeats", "batches", "confirm"};
            for (size_t k = 0; k < sizeof model_only / sizeof model_only[0]; k++)
                if (json_object_get(body, model_only[k])) {
                    char p[32];
                    snprintf(p, sizeof p, "/%s", model_only[k]);
                    bad(r, p, "this field goes with a model spec (model, layers or model_id)");
                    break;
                }
            if (!answered(r) && parse(r, body, &f) == 0) {
                json_t *out = answer_bounded(r, &f);
                if (out != NULL)
                    rematd_req_json(r, 200, out);
            }
        }
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
                                               /* a model spec without cached profiles */
                                               .created_status = 202,
                                               .handler = create};

/* GET /v1/fits/{id}: a fits job, advanced when read.  While its profiles
 * are measured it is queued, its progress counting the done ones; when they
 * are all done the answer is made (on this planning thread, under the solve
 * bounds).  With "confirm": true an answer outside the measured batches
 * first queues a profile at each chosen batch, once, and waits for them.
 * Then it is done with the answer as its result, or failed when a profile
 * failed. */
static void fits_get_job(struct rematd_request *r)
{
    struct rematd_job j;
    enum rematd_store_result got = rematd_store_get_job(r->srv->store, r->id, &j);
    if (got == REMATD_STORE_ERROR) {
        rematd_req_problem(r, 503, "unavailable", NULL, "the store did not answer");
        goto resume;
    }
    if (got != REMATD_STORE_OK || strcmp(j.kind, "fits") != 0) {
        if (got == REMATD_STORE_OK)
            rematd_job_clear(&j);
        rematd_req_problem(r, 404, "not-found", NULL, "no fits job with id %s", r->id);
        goto resume;
    }
    json_t *spec = strcmp(j.status, "queued") == 0 ? json_loads(j.spec, 0, NULL) : NULL;
    rematd_job_clear(&j);
    json_t *request = json_object_get(spec, "request");
    json_t *profiles = json_object_get(spec, "profiles");
    size_t pending = 0;
    if (spec != NULL) {
        json_t *ans = answer_from_jobs(r, request, profiles, &pending);
        if (ans == NULL && answered(r) && r->pending_status == 422) {
            /* A profile failed, or the answer cannot be made: so fails the
             * job, and this GET shows it. */
            rematd_store_advance_job(r->srv->store, r->id, "failed", NULL, NULL,
                                     "a profile job failed or the answer could not be made");
        }
        int added = 0;
        if (ans != NULL && json_is_true(json_object_get(request, "confirm")) &&
            !json_is_true(json_object_get(spec, "confirmed"))) {
            added = confirm(r, request, ans, profiles);
            json_object_set_new(spec, "confirmed", json_true());
            if (added >= 0) {
                char *text = json_dumps(spec, JSON_COMPACT);
                if (text == NULL || rematd_store_advance_job(r->srv->store, r->id, "queued", text,
                                                             NULL, NULL) != REMATD_STORE_OK)
                    added = -1;
                free(text);
                if (added < 0 && !answered(r))
                    rematd_req_problem(r, 503, "unavailable", NULL, "the store did not answer");
            }
            pending = added > 0 ? (size_t)added : 0;
        }
        if (ans != NULL && added == 0) {
            char *text = json_dumps(ans, JSON_COMPACT);
            if (text == NULL || rematd_store_advance_job(r->srv->store, r->id, "done", NULL, text,
                                                         NULL) != REMATD_STORE_OK)
                rematd_req_problem(r, 503, "unavailable", NULL, "the store did not answer");
            free(text);
        }
        json_decref(ans);
    }
    json_decref(spec);
    if (answered(r) && r->pending_status != 422)
        goto resume;
    if (answered(r)) {
        /* The failure is in the job now: show the job instead. */
        if (r->pending)
            MHD_destroy_response(r->pending);
        r->pending = NULL;
        r->pending_status = 0;
        for (int k = 0; k < r->n_headers; k++) {
            free(r->header_name[k]);
            free(r->header_value[k]);
            r->header_name[k] = r->header_value[k] = NULL;
        }
        r->n_headers = 0;
        free(r->problem_type);
        r->problem_type = NULL;
    }
    got = rematd_store_get_job(r->srv->store, r->id, &j);
    json_t *v = got == REMATD_STORE_OK ? rematd_job_view(&j) : NULL;
    int waiting = got == REMATD_STORE_OK && strcmp(j.status, "queued") == 0;
    json_t *sp = waiting ? json_loads(j.spec, 0, NULL) : NULL;
    if (got == REMATD_STORE_OK)
        rematd_job_clear(&j);
    if (v == NULL) {
        json_decref(sp);
        rematd_req_problem(r, 503, "unavailable", NULL, "the store did not answer");
        goto resume;
    }
    if (waiting) {
        size_t total = json_object_size(json_object_get(sp, "profiles"));
        json_object_set_new(v, "progress",
                            json_pack("{s:I, s:I, s:s, s:s}", "stage",
                                      (json_int_t)(total - pending), "stages", (json_int_t)total,
                                      "activity", "measuring", "phase", "measuring"));
        rematd_req_header(r, "Retry-After", "2");
    }
    json_decref(sp);
    rematd_req_json(r, 200, v);
resume:
    rematd_req_resume(r);
}

static enum rematd_handled get(struct rematd_request *r)
{
    return rematd_req_defer(r, fits_get_job) < 0 ? REMATD_HANDLED : REMATD_SUSPENDED;
}

const struct rematd_route rematd_route_fits_get = {.method = "GET",
                                                   .pattern = "/v1/fits/{id}",
                                                   .name = "fits_get",
                                                   .auth = REMATD_AUTH_CLIENT,
                                                   .handler = get};
