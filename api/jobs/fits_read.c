/*
 * jobs/fits_read.c - reading a POST /v1/fits request (jobs/fits.h): its
 * options and memories, its profiles (inline, or done profile jobs through
 * the reader's context), the optimizer, the batches of a model spec; and
 * the answer from profiles read (remat_fits).  Pure: no HTTP, no store;
 * what is wrong fills a struct rematd_problem.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "jobs/fits.h"

const char *const rematd_fits_fields[] = {"profiles",
                                          "profile_ids",
                                          "optimizer",
                                          "memory",
                                          "margin_bytes",
                                          "margin_fraction",
                                          "max_batch",
                                          "throughput",
                                          "model",
                                          "layers",
                                          "model_id",
                                          "model_options",
                                          "input_shape",
                                          "input",
                                          "stages",
                                          "dtype",
                                          "device",
                                          "warmup",
                                          "repeats",
                                          "batches",
                                          "confirm",
                                          "parallel",
                                          "param_dtype",
                                          "reduce_dtype",
                                          "master_weights",
                                          "global_batch",
                                          "hf_config",
                                          "seq_len",
                                          "measure_seq_lens",
                                          NULL};
/* What a model spec passes on to its profile jobs (POST /v1/profiles). */
const char *const rematd_fits_profile_fields[] = {
    "model",       "layers",  "model_id",         "model_options",
    "input_shape", "input",   "stages",           "dtype",
    "device",      "warmup",  "repeats",          "optimizer",
    "hf_config",   "seq_len", "measure_seq_lens", NULL};

static const char *const optim_fields[] = {
    "name",           "foreach",      "param_elem_bytes", "state_elem_bytes",
    "master_weights", "weight_decay", "step_ms",          NULL};

void rematd_fits_req_free(struct rematd_fits_req *f)
{
    for (size_t k = 0; k < f->n; k++)
        remat_profile_free(f->ps[k]);
    f->n = 0;
}

static int bad(struct rematd_problem *p, const char *ptr, const char *msg)
{
    rematd_problem_set(p, 400, "validation", ptr, "%s", msg);
    return -1;
}

static int get_optimizer(struct rematd_problem *pr, json_t *v, struct remat_optim_spec *spec)
{
    json_t *name = json_is_object(v) ? json_object_get(v, "name") : v;
    const char *ptr = json_is_object(v) ? "/optimizer/name" : "/optimizer";
    if (!json_is_string(name) || remat_optim_parse(json_string_value(name), &spec->kind) < 0)
        return bad(pr, ptr, "optimizer must be none, sgd, sgd-momentum, adam or adamw");
    if (!json_is_object(v))
        return 0;
    if (rematd_problem_unknown(pr, v, "/optimizer", optim_fields) < 0)
        return -1;
    static const char *const flags[] = {"foreach", "master_weights", "weight_decay"};
    int *dst[] = {&spec->foreach, &spec->master_weights, &spec->weight_decay};
    for (int k = 0; k < 3; k++) {
        json_t *f = json_object_get(v, flags[k]);
        char p[64];
        snprintf(p, sizeof p, "/optimizer/%s", flags[k]);
        if (f != NULL && !json_is_boolean(f))
            return bad(pr, p, "must be true or false");
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
            return bad(pr, p, "must be 1, 2, 4 or 8");
        *edst[k] = (int)x;
    }
    json_t *ms = json_object_get(v, "step_ms");
    if (ms != NULL) {
        if (!json_is_number(ms) || json_number_value(ms) < 0 || json_number_value(ms) > 1e9)
            return bad(pr, "/optimizer/step_ms", "step_ms must be a number in [0, 1e9]");
        spec->step_ms = json_number_value(ms);
    }
    return 0;
}

static int get_profiles(const struct rematd_read_ctx *ctx, json_t *body, struct rematd_fits_req *f,
                        struct rematd_problem *pr)
{
    json_t *inl = json_object_get(body, "profiles");
    json_t *ids = json_object_get(body, "profile_ids");
    if ((inl != NULL) == (ids != NULL))
        return bad(pr, inl ? "/profile_ids" : "/profiles",
                   "give exactly one of profiles and profile_ids");
    json_t *arr = inl ? inl : ids;
    const char *name = inl ? "/profiles" : "/profile_ids";
    if (rematd_problem_array(pr, arr, name, REMAT_FITS_MAX_PROFILES, "must be a non-empty array",
                             "profiles") < 0)
        return -1;
    size_t i;
    json_t *v;
    json_array_foreach (arr, i, v) {
        char p[64];
        snprintf(p, sizeof p, "%s/%zu", name, i);
        if (ids) {
            if (!json_is_string(v))
                return bad(pr, p, "a profile id is a string");
            f->ps[f->n] = rematd_read_profile_by_id(ctx, json_string_value(v), p, pr);
            snprintf(f->ids[f->n], sizeof f->ids[f->n], "%.32s", json_string_value(v));
        } else {
            json_t *stages = json_object_get(v, "stages");
            if (json_is_array(stages) && json_array_size(stages) > ctx->max_stages) {
                rematd_problem_set(pr, 400, "limit-exceeded", p,
                                   "%zu stages; this server accepts at most %zu",
                                   json_array_size(stages), ctx->max_stages);
                return -1;
            }
            struct remat_error err = {0};
            f->ps[f->n] = remat_profile_from_json(v, p, &err);
            if (f->ps[f->n] == NULL)
                rematd_problem_remat(pr, err.code ? err.code : REMAT_EINVAL, &err, NULL);
        }
        if (f->ps[f->n] == NULL)
            return -1;
        f->n++;
    }
    /* One model at a few batch sizes: profiles that name different models
     * (the worker names each: a zoo name, "layers", "uploaded:<id>") would
     * be fitted as one, and their stages may even agree by chance.  A
     * profile without a name is taken on its stages alone. */
    for (size_t k = 1; k < f->n; k++) {
        const char *m0 = f->ps[0]->model, *mk = f->ps[k]->model;
        if (m0 == NULL || mk == NULL || strcmp(m0, mk) == 0)
            continue;
        char p[64];
        snprintf(p, sizeof p, inl ? "%s/%zu/model" : "%s/%zu", name, k);
        rematd_problem_set(pr, 400, "validation", p,
                           "profile %zu is of model '%.100s', profile 0 of '%.100s': fits reads "
                           "the profiles of one model at a few batch sizes",
                           k, mk, m0);
        return -1;
    }
    return 0;
}

static int get_memory(struct rematd_problem *pr, json_t *body, struct rematd_fits_req *f)
{
    json_t *m = json_object_get(body, "memory");
    if (rematd_problem_array(pr, m, "/memory", REMAT_FITS_MAX_MEMORIES,
                             "memory must be a non-empty array of byte counts or GPU names",
                             "memory sizes") < 0)
        return -1;
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
            snprintf(f->gpu[f->n_mem++], sizeof f->gpu[0], "%s", json_string_value(v));
        else
            return bad(pr, p,
                       "a memory size is bytes in 1..2^60 or a GPU name (docs/scheduling.md)");
    }
    return 0;
}

int rematd_fits_read_options(json_t *body, struct rematd_fits_req *f, struct rematd_problem *pr)
{
    remat_fits_options_init(&f->o);
    json_int_t x = f->o.margin_bytes;
    if (rematd_problem_int(pr, body, "margin_bytes", 0, REMAT_MAX_BYTES, "0..2^60", &x) < 0)
        return -1;
    f->o.margin_bytes = x;
    json_t *v;
    if ((v = json_object_get(body, "margin_fraction")) != NULL) {
        if (!json_is_number(v) || !(json_number_value(v) >= 0 && json_number_value(v) <= 0.9))
            return bad(pr, "/margin_fraction", "margin_fraction must be a number in [0, 0.9]");
        f->o.margin_fraction = json_number_value(v);
    }
    x = f->o.max_batch;
    if (rematd_problem_int(pr, body, "max_batch", 1, REMAT_FITS_MAX_BATCH, NULL, &x) < 0)
        return -1;
    f->o.max_batch = x;
    if ((v = json_object_get(body, "throughput")) != NULL) {
        if (!json_is_boolean(v))
            return bad(pr, "/throughput", "throughput must be true or false");
        f->o.want_throughput = json_is_true(v);
    }
    if (rematd_fits_read_parallel(body, f, pr) < 0)
        return -1;
    /* The lengths are checked with the profile jobs' spec (POST
     * /v1/profiles's rules); here only that they go with a config. */
    f->seq_len = 0;
    if ((v = json_object_get(body, "measure_seq_lens")) != NULL) {
        if (json_object_get(body, "hf_config") == NULL)
            return bad(pr, "/measure_seq_lens", "measure_seq_lens is for hf_config");
        json_int_t a = json_integer_value(json_array_get(v, 0));
        json_int_t b = json_integer_value(json_array_get(v, 1));
        f->seq_len = json_integer_value(json_object_get(body, "seq_len"));
        f->seq_lens[0] = a < b ? a : b;
        f->seq_lens[1] = a < b ? b : a;
    }
    return get_memory(pr, body, f);
}

int rematd_fits_read(const struct rematd_read_ctx *ctx, json_t *body, struct rematd_fits_req *f,
                     struct rematd_problem *pr)
{
    if (rematd_fits_read_options(body, f, pr) < 0)
        return -1;
    struct remat_optim_spec spec;
    remat_optim_spec_init(&spec);
    json_t *ov = json_object_get(body, "optimizer");
    if (ov != NULL && get_optimizer(pr, ov, &spec) < 0)
        return -1;
    if (get_profiles(ctx, body, f, pr) < 0)
        return -1;
    /* The optimizer asked for models profiles that were measured without
     * one; a measured optimizer is kept. */
    for (size_t k = 0; ov != NULL && k < f->n; k++) {
        struct remat_error err = {0};
        if (f->ps[k]->optimizer.kind == REMAT_OPTIM_NONE &&
            remat_optim_estimate(f->ps[k], &spec, &f->ps[k]->optimizer, &err) < 0) {
            rematd_problem_remat(pr, err.code, &err, NULL);
            return -1;
        }
    }
    return 0;
}

/* What was measured and what was scaled: each batch at the two lengths
 * measured, and the profiles the answer is made from at seq_len
 * (docs/scheduling.md, "Sizes too large to run here"). */
static int set_scaled(json_t *root, const struct rematd_fits_req *f)
{
    json_t *m = json_array();
    for (size_t k = 0; m != NULL && k < f->n; k++)
        for (int j = 0; m != NULL && j < 2; j++)
            if (json_array_append_new(m, json_pack("{s:I, s:I}", "batch_size",
                                                   (json_int_t)f->ps[k]->batch_size, "seq_len",
                                                   (json_int_t)f->seq_lens[j])) < 0) {
                json_decref(m);
                m = NULL;
            }
    if (m == NULL || json_object_set_new(root, "measured", m) < 0)
        return -1;
    return json_object_set_new(root, "scaled_from",
                               json_pack("{s:I, s:[I, I]}", "seq_len", (json_int_t)f->seq_len,
                                         "measured_seq_lens", (json_int_t)f->seq_lens[0],
                                         (json_int_t)f->seq_lens[1]));
}

json_t *rematd_fits_compute(struct rematd_fits_req *f, struct remat_error *err, int *rc)
{
    struct remat_fits_answer ans[REMAT_FITS_MAX_MEMORIES];
    struct remat_fit_check chk[REMAT_FITS_MAX_PROFILES];
    size_t n_chk = 0;
    const struct remat_profile *const *ps = (const struct remat_profile *const *)f->ps;
    *rc = remat_batch_fit_check(ps, f->n, chk, &n_chk, err);
    if (*rc < 0)
        return NULL;
    json_t *arr = NULL;
    if (f->sharded) {
        /* One rank of a data-parallel job (fits_sharded.c). */
        arr = rematd_fits_sharded_compute(f, err, rc);
    } else {
        *rc = remat_fits(ps, f->n, f->mem, f->n_mem, &f->o, ans, err);
        arr = *rc < 0 ? NULL : json_array();
    }
    if (*rc < 0)
        return NULL;
    json_t *root = json_object(), *fit = json_array();
    int fail = root == NULL || arr == NULL || fit == NULL;
    for (size_t k = 0; !f->sharded && !fail && k < f->n_mem; k++)
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
    for (size_t k = 0; !f->sharded && k < f->n_mem; k++)
        remat_fits_answer_clear(&ans[k]);
    json_t *batches = json_array();
    for (size_t k = 0; !fail && batches != NULL && k < f->n; k++)
        fail |= json_array_append_new(batches, json_integer(f->ps[k]->batch_size)) < 0;
    fail |= batches == NULL;
    if (!fail) {
        fail |= json_object_set_new(root, "measured_batches", batches) < 0;
        if (f->seq_len > 0)
            fail |= set_scaled(root, f) < 0;
        if (f->ids[0][0]) {
            json_t *ids = json_array();
            for (size_t k = 0; ids != NULL && k < f->n; k++)
                json_array_append_new(ids, json_string(f->ids[k]));
            fail |= ids == NULL || json_object_set_new(root, "profile_ids", ids) < 0;
        }
        fail |= json_object_set_new(root, "optimizer",
                                    json_string(remat_optim_name(f->ps[0]->optimizer.kind))) < 0;
        if (f->sharded)
            fail |= json_object_set_new(root, "parallel",
                                        json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}", "strategy",
                                                  remat_shard_name(f->shard.strategy), "data",
                                                  (json_int_t)f->shard.data, "params",
                                                  (json_int_t)f->shard.params, "param_bytes",
                                                  (json_int_t)f->shard.param_bytes, "grad_bytes",
                                                  (json_int_t)f->shard.grad_bytes, "optim_bytes",
                                                  (json_int_t)f->shard.optim_bytes)) < 0;
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

int rematd_fits_read_batches(json_t *body, json_int_t *b, size_t *n, struct rematd_problem *pr)
{
    json_t *v = json_object_get(body, "batches");
    *n = 0;
    if (v == NULL) {
        b[(*n)++] = 8;
        b[(*n)++] = 32;
        return 0;
    }
    if (!json_is_array(v) || json_array_size(v) == 0 ||
        json_array_size(v) > REMATD_FITS_MAX_BATCHES)
        return bad(pr, "/batches", "batches is 1 to 8 distinct batch sizes to profile");
    size_t i;
    json_t *x;
    json_array_foreach (v, i, x) {
        char p[32];
        snprintf(p, sizeof p, "/batches/%zu", i);
        if (!json_is_integer(x) || json_integer_value(x) < 1 || json_integer_value(x) > 65536)
            return bad(pr, p, "a batch size is an integer in 1..65536");
        for (size_t k = 0; k < *n; k++)
            if (b[k] == json_integer_value(x))
                return bad(pr, p, "the batch sizes must be distinct");
        b[(*n)++] = json_integer_value(x);
    }
    return 0;
}
