/*
 * jobs/fits_sharded.c - POST /v1/fits for one rank of a data-parallel job
 * (docs/scheduling.md, "Sharded jobs"): "parallel", "param_dtype",
 * "reduce_dtype", "master_weights" and "global_batch" read into a struct
 * remat_shard_job, and the answers of remat_fits_sharded, each with its
 * per-rank breakdown and, with a global batch, its schedule
 * (remat_fits_schedule).  Pure, as fits_read.c.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "jobs/fits.h"

static const char *const parallel_fields[] = {
    "data", "strategy", "shard_group", "bucket_cap_mb", "gradient_as_bucket_view", NULL};

static int bad(struct rematd_problem *p, const char *ptr, const char *msg)
{
    rematd_problem_set(p, 400, "validation", ptr, "%s", msg);
    return -1;
}

static int get_dtype(struct rematd_problem *pr, json_t *body, const char *name, int *out)
{
    json_t *v = json_object_get(body, name);
    if (v == NULL)
        return 0;
    char ptr[32];
    snprintf(ptr, sizeof ptr, "/%s", name);
    *out = remat_dtype_bytes(json_string_value(v));
    if (*out == 0)
        return bad(pr, ptr,
                   "must be float32, bfloat16, float16 or float64 (or fp32, bf16, fp16, fp64)");
    return 0;
}

int rematd_fits_read_parallel(json_t *body, struct rematd_fits_req *f, struct rematd_problem *pr)
{
    json_t *par = json_object_get(body, "parallel");
    static const char *const needs[] = {"param_dtype", "reduce_dtype", "master_weights",
                                        "global_batch"};
    for (size_t k = 0; par == NULL && k < 4; k++)
        if (json_object_get(body, needs[k]) != NULL) {
            char ptr[32];
            snprintf(ptr, sizeof ptr, "/%s", needs[k]);
            rematd_problem_set(pr, 400, "validation", ptr,
                               "%s is read for one rank of a data-parallel job: give parallel too",
                               needs[k]);
            return -1;
        }
    if (par == NULL)
        return 0;
    if (!json_is_object(par))
        return bad(pr, "/parallel", "parallel must be an object {data, strategy, ...}");
    if (rematd_problem_unknown(pr, par, "/parallel", parallel_fields) < 0)
        return -1;
    struct remat_shard_job *s = &f->job;
    remat_shard_job_init(s);
    json_t *v = json_object_get(par, "data");
    if (!json_is_integer(v) || json_integer_value(v) < 1 ||
        json_integer_value(v) > REMAT_SHARD_MAX_RANKS)
        return bad(pr, "/parallel/data",
                   "data (the data-parallel ranks) must be an integer in "
                   "1..1048576");
    s->data = json_integer_value(v);
    v = json_object_get(par, "strategy");
    if (v != NULL &&
        (!json_is_string(v) || remat_shard_parse(json_string_value(v), &s->strategy) < 0))
        return bad(pr, "/parallel/strategy",
                   "strategy must be ddp, zero1, zero2, zero3, fsdp or hsdp");
    v = json_object_get(par, "shard_group");
    if (s->strategy == REMAT_SHARD_HSDP) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > s->data ||
            s->data % json_integer_value(v) != 0)
            return bad(pr, "/parallel/shard_group",
                       "hsdp needs shard_group, an integer that divides data");
        s->shard_group = json_integer_value(v);
    } else if (v != NULL) {
        return bad(pr, "/parallel/shard_group", "shard_group is for strategy hsdp only");
    }
    v = json_object_get(par, "bucket_cap_mb");
    if (v != NULL) {
        double mb = json_is_number(v) ? json_number_value(v) : -1;
        if (!(mb > 0 && mb <= 1048576))
            return bad(pr, "/parallel/bucket_cap_mb",
                       "bucket_cap_mb must be a number in (0, 2^20]");
        s->bucket_bytes = (int64_t)(mb * 1048576.0);
        s->bucket_bytes = s->bucket_bytes < 1 ? 1 : s->bucket_bytes;
    }
    v = json_object_get(par, "gradient_as_bucket_view");
    if (v != NULL && !json_is_boolean(v))
        return bad(pr, "/parallel/gradient_as_bucket_view", "must be true or false");
    s->bucket_view = json_is_true(v);
    if (get_dtype(pr, body, "param_dtype", &s->param_bytes) < 0 ||
        get_dtype(pr, body, "reduce_dtype", &s->grad_bytes) < 0)
        return -1;
    v = json_object_get(body, "master_weights");
    if (v != NULL && !json_is_boolean(v))
        return bad(pr, "/master_weights", "master_weights must be true or false");
    s->master_weights = v == NULL ? -1 : json_is_true(v);
    /* The state's precision, when the optimizer says (rematd_fits_read
     * checks it). */
    json_t *ov = json_object_get(body, "optimizer");
    v = json_is_object(ov) ? json_object_get(ov, "state_elem_bytes") : NULL;
    s->state_bytes = json_is_integer(v) ? (int)json_integer_value(v) : 0;
    v = json_object_get(body, "global_batch");
    f->global_batch = 0;
    if (v != NULL) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) > REMAT_FITS_MAX_GLOBAL_BATCH)
            return bad(pr, "/global_batch", "global_batch must be an integer in 1..2^40");
        f->global_batch = json_integer_value(v);
    }
    f->sharded = 1;
    return 0;
}

/* Memory k's schedule (docs/scheduling.md, "Per GPU kind"): new, or NULL
 * with *rc and err. */
static json_t *schedule_json(struct rematd_fits_req *f, size_t k, const struct remat_fits_answer *a,
                             const struct remat_shard_breakdown *b, struct remat_error *err,
                             int *rc)
{
    struct remat_fits_schedule sch;
    *rc = remat_fits_schedule((const struct remat_profile *const *)f->ps, f->n, &f->o, &f->job,
                              f->global_batch, a, b, &sch, err);
    if (*rc < 0)
        return NULL;
    json_t *o = remat_fits_schedule_to_json(&sch, f->gpu[k][0] ? f->gpu[k] : NULL);
    if (o == NULL) {
        *rc = REMAT_ENOMEM;
        err->code = REMAT_ENOMEM;
        err->pointer[0] = '\0';
        snprintf(err->message, sizeof err->message, "out of memory");
    }
    return o;
}

json_t *rematd_fits_sharded_compute(struct rematd_fits_req *f, struct remat_error *err, int *rc)
{
    struct remat_fits_answer ans[REMAT_FITS_MAX_MEMORIES];
    struct remat_shard_breakdown br[REMAT_FITS_MAX_MEMORIES];
    struct remat_shard_spec used;
    *rc = remat_fits_sharded((const struct remat_profile *const *)f->ps, f->n, f->mem, f->n_mem,
                             &f->o, &f->job, ans, br, &used, err);
    if (*rc < 0)
        return NULL;
    json_t *arr = json_array();
    int bad = arr == NULL;
    for (size_t k = 0; k < f->n_mem; k++) {
        if (!bad && *rc == REMAT_OK) {
            json_t *a = remat_fits_answer_to_json(&ans[k]);
            json_t *r = a == NULL ? NULL : remat_shard_breakdown_to_json(&used, &br[k]);
            /* set_new and append_new take their reference also on failure. */
            if (a == NULL || r == NULL || json_object_set_new(a, "per_rank", r) < 0) {
                json_decref(a);
                bad = 1;
            } else if (json_array_append_new(arr, a) < 0) {
                bad = 1;
            } else if (f->global_batch > 0) {
                json_t *sch = schedule_json(f, k, &ans[k], &br[k], err, rc);
                bad |=
                    *rc == REMAT_OK && (sch == NULL || json_object_set_new(a, "schedule", sch) < 0);
            }
        }
        remat_fits_answer_clear(&ans[k]);
    }
    f->shard = used;
    if (*rc < 0) {
        json_decref(arr);
        return NULL;
    }
    if (bad) {
        json_decref(arr);
        *rc = REMAT_ENOMEM;
        err->code = REMAT_ENOMEM;
        err->pointer[0] = '\0';
        snprintf(err->message, sizeof err->message, "out of memory");
        return NULL;
    }
    return arr;
}
