/*
 * jobs/fits.c - what POST /v1/fits (routes/fits_create.c) and GET
 * /v1/fits/{id} (routes/fits_get.c) share: the answer under the solve
 * bounds, the answer from a fits job's profile jobs, and the profile jobs
 * a model spec needs (queued, or reused when done).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/fits.h"
#include "jobs_common.h"
#include "plan_common.h"

json_t *rematd_fits_answer(struct rematd_request *r, struct rematd_fits_req *f,
                           struct rematd_problem *p)
{
    struct remat_error err = {0};
    int64_t need = 0;
    int rc = remat_fits_memory_bound((const struct remat_profile *const *)f->ps, f->n, f->n_mem,
                                     &f->o, &need, &err);
    if (rc < 0) {
        rematd_problem_remat(p, rc, &err, NULL);
        return NULL;
    }
    /* One rank of a sharded job also holds the profiles' copies without
     * their weights, and one predicted at a micro-batch (libremat's
     * remat_fits_sharded, remat_fits_sharded_at). */
    if (f->sharded && f->n > 0) {
        int64_t one = (int64_t)sizeof(struct remat_profile) +
                      (int64_t)f->ps[0]->n_stages * (int64_t)sizeof(struct remat_stage) + 256;
        need += (2 * (int64_t)f->n + 1) * one;
    }
    struct rematd_solve_guard g;
    if (rematd_solve_begin(r, need, "answer", &g, p) < 0)
        return NULL;
    f->o.cancel = rematd_solve_cancel;
    f->o.cancel_arg = &g;
    json_t *out = rematd_fits_compute(f, &err, &rc);
    if (rematd_solve_end(&g, out != NULL ? REMAT_OK : rc, "answer", p) < 0) {
        json_decref(out);
        return NULL;
    }
    if (out == NULL)
        rematd_problem_remat(p, rc, &err, NULL);
    return out;
}

/* The normalised spec of the profile job at batch, or NULL after answering. */
static json_t *profile_spec_at(struct rematd_request *r, json_t *body, json_int_t batch)
{
    json_t *pb = json_object();
    for (size_t k = 0; pb != NULL && rematd_fits_profile_fields[k]; k++) {
        json_t *v = json_object_get(body, rematd_fits_profile_fields[k]);
        if (v != NULL)
            json_object_set(pb, rematd_fits_profile_fields[k], v);
    }
    if (pb == NULL || json_object_set_new(pb, "batch_size", json_integer(batch)) < 0) {
        json_decref(pb);
        rematd_req_problem(r, 500, "internal", NULL, "out of memory");
        return NULL;
    }
    struct rematd_read_ctx ctx;
    struct rematd_problem prob = {0};
    rematd_read_ctx_init(&ctx, r);
    json_t *spec = rematd_profile_spec(&ctx, pb, &prob);
    json_decref(pb);
    if (spec == NULL)
        rematd_req_send_problem(r, &prob);
    return spec;
}

int rematd_fits_profile_job(struct rematd_request *r, json_t *body, json_int_t batch,
                            char id[REMATD_ID_LEN + 1], int *done)
{
    json_t *spec = profile_spec_at(r, body, batch);
    if (spec == NULL)
        return -1;
    char key[65];
    char *text = rematd_profile_reuse_key(spec, key) == 0 ? json_dumps(spec, JSON_COMPACT) : NULL;
    rematd_tenant_reuse_key(r, key);
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
            .tenant = r->tenant,
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
        if (!rematd_req_answered(r))
            rematd_req_problem(r, 503, "unavailable", NULL, "the store did not answer");
        return -1;
    }
    return 0;
}

int rematd_fits_from_jobs(struct rematd_request *r, json_t *request, json_t *profiles, json_t **ans,
                          size_t *pending, struct rematd_problem *p)
{
    struct rematd_fits_req f;
    memset(&f, 0, sizeof f);
    *pending = 0;
    *ans = NULL;
    int rc = -1;
    if (rematd_fits_read_options(request, &f, p) < 0)
        return -1;
    const char *batch;
    json_t *idv;
    json_object_foreach (profiles, batch, idv) {
        const char *id = json_string_value(idv);
        struct rematd_job j;
        enum rematd_store_result got =
            id ? rematd_store_get_job(r->srv->store, id, &j) : REMATD_STORE_NOT_FOUND;
        if (got == REMATD_STORE_OK && !rematd_req_owns(r, j.tenant)) {
            rematd_job_clear(&j);
            got = REMATD_STORE_NOT_FOUND;
        }
        if (got != REMATD_STORE_OK) {
            rematd_problem_set(p, 503, "unavailable", NULL, "profile job %.32s cannot be read",
                               id ? id : "?");
            goto out;
        }
        int failed = j.status == REMATD_JOB_FAILED, done = j.status == REMATD_JOB_DONE;
        if (failed)
            rematd_problem_set(p, 422, "profile-failed", NULL,
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
        f.ps[f.n] = rematd_profile_lookup(r, id, "/profiles", p);
        if (f.ps[f.n] == NULL)
            goto out;
        snprintf(f.ids[f.n], sizeof f.ids[f.n], "%s", id);
        f.n++;
    }
    rc = 0;
    if (*pending == 0) {
        *ans = rematd_fits_answer(r, &f, p);
        rc = *ans ? 0 : -1;
    }
out:
    rematd_fits_req_free(&f);
    return rc;
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
        if (k == n && n < REMATD_FITS_MAX_BATCHES)
            b[n++] = x;
    }
    return n;
}

int rematd_fits_confirm(struct rematd_request *r, json_t *request, json_t *ans, json_t *profiles)
{
    json_int_t b[REMATD_FITS_MAX_BATCHES];
    size_t n = to_confirm(ans, profiles, b);
    for (size_t k = 0; k < n; k++) {
        char id[REMATD_ID_LEN + 1], key[32];
        int done = 0;
        if (rematd_fits_profile_job(r, request, b[k], id, &done) < 0)
            return -1;
        snprintf(key, sizeof key, "%lld", (long long)b[k]);
        json_object_set_new(profiles, key, json_string(id));
    }
    return (int)n;
}
