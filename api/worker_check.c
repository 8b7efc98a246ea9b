/* worker_check.c - a worker's result against its job (worker_check.h). */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "rematx/pointer.h"
#include "rematx/rematx.h"
#include "worker_check.h"

static int refuse(struct remat_error *err, const char *pointer, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rematx_verror(err, REMAT_EINVAL, pointer, fmt, ap);
    va_end(ap);
    return REMAT_EINVAL;
}

/* Whether a measured device name fits the job's device: a cpu job is
 * measured on "cpu"; a cuda job on anything else (workers report the
 * card's name), and on "cuda:M" only when the job names that index. */
static int device_fits(const char *want, const char *got)
{
    if (!want || !got || !got[0] || strlen(got) >= REMATD_RESULT_MAX_STRING)
        return 0;
    if (strcmp(want, "cpu") == 0)
        return strcmp(got, "cpu") == 0;
    if (strcmp(got, "cpu") == 0)
        return 0;
    if (strncmp(got, "cuda", 4) == 0 && strncmp(want, "cuda:", 5) == 0)
        return strcmp(got, want) == 0 || strcmp(got, "cuda") == 0;
    if (strncmp(got, "cuda:", 5) == 0)
        return strcmp(want, "cuda") == 0;
    return 1;
}

static int same(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

/* What a profile of the job's model must say. */
struct expected_model {
    char name[64];      /* as the worker names it */
    size_t n_stages;    /* 0: not known here */
    const char *source; /* who gives n_stages, for the message */
};

/* The model the job names: a zoo model or a layer list, one stage per
 * layer; a Hugging Face config, one per block and two; or an uploaded model, named by its id, whose
 * stages are known here only when the job lists them (by default the worker finds them in the
 * module's forward graph, which only it reads).  -1 when the job's model cannot be expanded. */
static int expect_model(const json_t *spec, struct expected_model *e)
{
    const json_t *zoo = json_object_get(spec, "model");
    const char *model_id = json_string_value(json_object_get(spec, "model_id"));
    e->n_stages = 0;
    if (model_id) {
        snprintf(e->name, sizeof e->name, "uploaded:%.40s", model_id);
        e->source = "the job lists";
        e->n_stages = json_array_size(json_object_get(spec, "stages"));
        return 0;
    }
    const json_t *hf = json_object_get(spec, "hf_config");
    if (hf) {
        /* The embedding, one stage per decoder block, the head. */
        struct rematx_hf h;
        if (rematx_hf_read(hf, "", &h, NULL) != REMAT_OK)
            return -1;
        snprintf(e->name, sizeof e->name, "hf:%s", h.model_type);
        e->source = "the job's config has";
        e->n_stages = (size_t)h.layers + 2;
        return 0;
    }
    snprintf(e->name, sizeof e->name, "%.63s",
             json_is_string(zoo) ? json_string_value(zoo) : "layers");
    e->source = "the job's model has";
    const json_t *layers = json_object_get(spec, "layers");
    if (layers) {
        e->n_stages = json_array_size(layers);
        return e->n_stages > 0 ? 0 : -1;
    }
    const struct rematx_zoo_model *zm = rematx_zoo_find(json_string_value(zoo));
    if (!zm)
        return -1;
    json_int_t values[REMATX_ZOO_MAX_OPTIONS];
    if (rematx_zoo_options(zm, json_object_get(spec, "model_options"), values, NULL) != REMAT_OK)
        return -1;
    json_t *list = rematx_zoo_layers(zm, values);
    if (!list)
        return -1;
    e->n_stages = json_array_size(list);
    json_decref(list);
    return 0;
}

static int check_profile(const json_t *spec, const json_t *result, struct remat_error *err)
{
    struct remat_profile *p = remat_profile_from_json(result, "/result", err);
    if (!p)
        return err && err->code ? err->code : REMAT_EINVAL;
    struct expected_model want;
    int expanded = expect_model(spec, &want);
    const char *dtype = json_string_value(json_object_get(spec, "dtype"));
    const char *device = json_string_value(json_object_get(spec, "device"));
    json_int_t batch = json_integer_value(json_object_get(spec, "batch_size"));
    int rc = REMAT_OK;
    if (!same(p->model, want.name))
        rc = refuse(err, "/result/model", "the job is for model %s; the profile is for %.100s",
                    want.name, p->model ? p->model : "no model");
    else if (p->batch_size != batch)
        rc = refuse(err, "/result/batch_size",
                    "the job is for batch_size %lld; the profile is for %lld", (long long)batch,
                    (long long)p->batch_size);
    else if (!same(p->dtype, dtype))
        rc = refuse(err, "/result/dtype", "the job is for dtype %s; the profile is for %.100s",
                    dtype ? dtype : "?", p->dtype ? p->dtype : "no dtype");
    else if (!device_fits(device, p->device))
        rc = refuse(err, "/result/device",
                    "the job is for device %s; the profile was measured on %.100s",
                    device ? device : "?", p->device ? p->device : "no device");
    else if (expanded < 0)
        rc = refuse(err, "/result", "the job's model cannot be expanded to check the profile");
    else if (want.n_stages == 0 && p->n_stages == 0)
        rc = refuse(err, "/result/stages", "the profile has no stages");
    else if (want.n_stages != 0 && p->n_stages != want.n_stages)
        rc = refuse(err, "/result/stages", "%s %zu stages; the profile has %zu", want.source,
                    want.n_stages, p->n_stages);
    if (rc == REMAT_OK) {
        /* The optimizer the job asked the worker to measure, and no other. */
        const char *want_opt =
            json_string_value(json_object_get(json_object_get(spec, "optimizer"), "name"));
        const char *got = remat_optim_name(p->optimizer.kind);
        if (!same(got, want_opt ? want_opt : "none"))
            rc = refuse(err, "/result/optimizer",
                        "the job is for optimizer %s; the profile measured %s",
                        want_opt ? want_opt : "none", got);
    }
    remat_profile_free(p);
    return rc;
}

enum field_type { F_BYTES, F_COUNT, F_MS, F_REAL, F_STRING, F_TIMELINE, F_OPTIM };

static const struct {
    const char *name;
    enum field_type type;
    int required;
} validation_fields[] = {
    {"measured_peak_bytes", F_BYTES, 1},
    {"predicted_peak_bytes", F_BYTES, 1},
    {"relative_error", F_REAL, 0},
    {"step_ms", F_MS, 0},
    {"step_ms_min", F_MS, 0},
    {"step_ms_max", F_MS, 0},
    {"predicted_step_ms", F_MS, 0},
    {"step_time_error", F_REAL, 0},
    {"store_all_step_ms", F_MS, 0},
    {"store_all_measured_peak_bytes", F_BYTES, 0},
    {"max_grad_diff", F_MS, 0},
    {"device", F_STRING, 1},
    {"model", F_STRING, 0},
    {"batch_size", F_COUNT, 0},
    {"dtype", F_STRING, 0},
    {"n_ops", F_COUNT, 0},
    {"driver", F_STRING, 0},
    {"libtorch", F_STRING, 0},
    {"timeline", F_TIMELINE, 0},
    {"optimizer", F_OPTIM, 0},
    /* On a GPU: the caching allocator's view (docs/accuracy.md). */
    {"measured_reserved_bytes", F_BYTES, 0},
    {"measured_requested_bytes", F_BYTES, 0},
    {"cold_peak_bytes", F_BYTES, 0},
};

/* A validation's optimizer: its name and each measured and predicted
 * byte count, nothing else. */
static const char *const optim_bytes[] = {"measured_state_bytes",     "predicted_state_bytes",
                                          "measured_step_tmp_bytes",  "predicted_step_tmp_bytes",
                                          "measured_step_peak_bytes", "predicted_step_peak_bytes"};
#define N_VALIDATION_FIELDS (sizeof validation_fields / sizeof validation_fields[0])

static int check_field(const char *name, enum field_type t, const json_t *v,
                       struct remat_error *err)
{
    char ptr[96];
    snprintf(ptr, sizeof ptr, "/result/%s", name);
    switch (t) {
    case F_BYTES:
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) > REMAT_MAX_BYTES)
            return refuse(err, ptr, "%s is an integer in 0..2^60", name);
        return REMAT_OK;
    case F_COUNT:
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) > REMAT_MAX_STAGES * (json_int_t)16)
            return refuse(err, ptr, "%s is a non-negative integer", name);
        return REMAT_OK;
    case F_MS:
        if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < 0)
            return refuse(err, ptr, "%s is a finite number >= 0", name);
        return REMAT_OK;
    case F_REAL:
        if (!json_is_number(v) || !isfinite(json_number_value(v)))
            return refuse(err, ptr, "%s is a finite number", name);
        return REMAT_OK;
    case F_STRING:
        if (!json_is_string(v) || json_string_length(v) == 0 ||
            json_string_length(v) >= REMATD_RESULT_MAX_STRING ||
            strlen(json_string_value(v)) != json_string_length(v))
            return refuse(err, ptr, "%s is a string of 1..%d bytes", name,
                          REMATD_RESULT_MAX_STRING - 1);
        return REMAT_OK;
    case F_TIMELINE:
        if (!json_is_array(v))
            return refuse(err, ptr, "%s is an array", name);
        return REMAT_OK;
    case F_OPTIM: {
        size_t nb = sizeof optim_bytes / sizeof optim_bytes[0];
        if (!json_is_object(v) || json_object_size(v) != nb + 1)
            return refuse(err, ptr, "%s is {name, measured_* and predicted_* bytes}", name);
        enum remat_optim_kind kind;
        if (remat_optim_parse(json_string_value(json_object_get(v, "name")), &kind) != REMAT_OK)
            return refuse(err, "/result/optimizer/name", "not an optimizer's name");
        for (size_t i = 0; i < nb; i++) {
            const json_t *b = json_object_get(v, optim_bytes[i]);
            if (!json_is_integer(b) || json_integer_value(b) < 0 ||
                json_integer_value(b) > REMAT_MAX_BYTES) {
                snprintf(ptr, sizeof ptr, "/result/optimizer/%s", optim_bytes[i]);
                return refuse(err, ptr, "%s is an integer in 0..2^60", optim_bytes[i]);
            }
        }
        return REMAT_OK;
    }
    }
    return REMAT_OK;
}

static int check_timeline(const json_t *spec, const json_t *tl, struct remat_error *err)
{
    if (!json_is_true(json_object_get(spec, "timeline")))
        return refuse(err, "/result/timeline", "the job did not ask for a timeline");
    const json_t *prof = json_object_get(spec, "profile");
    size_t n = json_array_size(json_object_get(prof, "stages"));
    /* An op per forward, recomputation and backward: never more than
     * n + 1 + n * (n + 1) / 2 + n for a chain of n; the cap is looser. */
    if (json_array_size(tl) > 4 * (n + 1) * (n + 1))
        return refuse(err, "/result/timeline", "more ops than any plan of %zu stages has", n);
    size_t i;
    const json_t *e;
    json_array_foreach (tl, i, e) {
        char ptr[64];
        snprintf(ptr, sizeof ptr, "/result/timeline/%zu", i);
        enum remat_op_kind k;
        const json_t *st = json_object_get(e, "stage"), *pk = json_object_get(e, "peak_bytes"),
                     *af = json_object_get(e, "after_bytes"), *ms = json_object_get(e, "ms"),
                     *rs = json_object_get(e, "reserved_peak_bytes");
        /* The op's wall time and (on a GPU) the allocator's reserved bytes
         * are optional: workers before them send four fields. */
        size_t want = 4 + (ms != NULL) + (rs != NULL);
        if ((ms != NULL && (!json_is_number(ms) || !isfinite(json_number_value(ms)) ||
                            json_number_value(ms) < 0)) ||
            (rs != NULL && (!json_is_integer(rs) || json_integer_value(rs) < 0)))
            return refuse(err, ptr,
                          "a timeline entry's ms is a time >= 0 and its "
                          "reserved_peak_bytes a byte count");
        if (!json_is_object(e) || json_object_size(e) != want ||
            remat_op_parse(json_string_value(json_object_get(e, "op")), &k) != REMAT_OK ||
            !json_is_integer(st) || json_integer_value(st) < 0 ||
            json_integer_value(st) > (json_int_t)n || !json_is_integer(pk) ||
            json_integer_value(pk) < 0 || !json_is_integer(af) || json_integer_value(af) < 0)
            return refuse(err, ptr,
                          "a timeline entry is {op, stage (0..%zu), peak_bytes, after_bytes} "
                          "and optionally ms and reserved_peak_bytes",
                          n);
    }
    return REMAT_OK;
}

/* Whether a and b are the same number but for the last bits of a double. */
static int close_to(double a, double b, double rel)
{
    return fabs(a - b) <= rel * (1 + fabs(b));
}

/* The step times of a validation result: the prediction is the job's
 * plan's total_ms, the error (measured - predicted) / predicted, and the
 * median step_ms lies between the fastest and the slowest step. */
static int check_step_time(const json_t *plan, const json_t *result, struct remat_error *err)
{
    const json_t *ms = json_object_get(result, "step_ms");
    const json_t *lo = json_object_get(result, "step_ms_min");
    const json_t *hi = json_object_get(result, "step_ms_max");
    const json_t *pred = json_object_get(result, "predicted_step_ms");
    const json_t *te = json_object_get(result, "step_time_error");
    if ((lo || hi) && !(lo && hi && ms))
        return refuse(err, lo ? "/result/step_ms_min" : "/result/step_ms_max",
                      "step_ms_min and step_ms_max come together, with step_ms");
    if (lo && !(json_number_value(lo) <= json_number_value(ms) &&
                json_number_value(ms) <= json_number_value(hi)))
        return refuse(err, "/result/step_ms", "step_ms %.9g is not within [%.9g, %.9g]",
                      json_number_value(ms), json_number_value(lo), json_number_value(hi));
    const json_t *want = json_object_get(plan, "total_ms");
    if (pred && json_is_number(want) &&
        !close_to(json_number_value(pred), json_number_value(want), 1e-9))
        return refuse(err, "/result/predicted_step_ms", "the job's plan predicts %.9g ms, not %.9g",
                      json_number_value(want), json_number_value(pred));
    if (te) {
        if (!ms || !pred || !(json_number_value(pred) > 0))
            return refuse(err, "/result/step_time_error",
                          "step_time_error needs step_ms and a predicted_step_ms above 0");
        double p = json_number_value(pred), e = (json_number_value(ms) - p) / p;
        if (!close_to(json_number_value(te), e, 1e-6))
            return refuse(err, "/result/step_time_error",
                          "step_time_error is (step_ms - predicted_step_ms) / predicted_step_ms: "
                          "%.9g",
                          e);
    }
    return REMAT_OK;
}

static int check_validation(const json_t *spec, const json_t *result, struct remat_error *err)
{
    const char *k;
    const json_t *v;
    json_object_foreach ((json_t *)result, k, v) {
        size_t i;
        for (i = 0; i < N_VALIDATION_FIELDS; i++)
            if (strcmp(validation_fields[i].name, k) == 0)
                break;
        if (i == N_VALIDATION_FIELDS) {
            char ptr[128];
            snprintf(ptr, sizeof ptr, "/result");
            rematx_pointer_append(ptr, sizeof ptr, k);
            return refuse(err, ptr, "unknown field '%.100s' in a validation result", k);
        }
        int rc = check_field(k, validation_fields[i].type, v, err);
        if (rc != REMAT_OK)
            return rc;
    }
    for (size_t i = 0; i < N_VALIDATION_FIELDS; i++)
        if (validation_fields[i].required && !json_object_get(result, validation_fields[i].name)) {
            char ptr[96];
            snprintf(ptr, sizeof ptr, "/result/%s", validation_fields[i].name);
            return refuse(err, ptr, "%s is required", validation_fields[i].name);
        }
    /* It must be this job's measurement. */
    const json_t *plan = json_object_get(spec, "plan"), *prof = json_object_get(spec, "profile");
    json_int_t predicted = json_integer_value(json_object_get(result, "predicted_peak_bytes"));
    json_int_t measured = json_integer_value(json_object_get(result, "measured_peak_bytes"));
    const json_t *want_peak = json_object_get(plan, "peak_bytes");
    if (!json_is_integer(want_peak) || json_integer_value(want_peak) != predicted)
        return refuse(err, "/result/predicted_peak_bytes",
                      "the job's plan predicts %lld bytes, not %lld",
                      (long long)json_integer_value(want_peak), (long long)predicted);
    static const char *const same_as_profile[] = {"model", "dtype"};
    for (size_t i = 0; i < 2; i++) {
        const json_t *got = json_object_get(result, same_as_profile[i]);
        const char *want = json_string_value(json_object_get(prof, same_as_profile[i]));
        if (got && !same(json_string_value(got), want)) {
            char ptr[64];
            snprintf(ptr, sizeof ptr, "/result/%s", same_as_profile[i]);
            return refuse(err, ptr, "the job's profile has %s %s", same_as_profile[i],
                          want ? want : "(none)");
        }
    }
    const json_t *bs = json_object_get(result, "batch_size");
    if (bs && json_integer_value(bs) != json_integer_value(json_object_get(prof, "batch_size")))
        return refuse(err, "/result/batch_size", "the job's profile has batch_size %lld",
                      (long long)json_integer_value(json_object_get(prof, "batch_size")));
    const char *device = json_string_value(json_object_get(spec, "device"));
    if (!device_fits(device, json_string_value(json_object_get(result, "device"))))
        return refuse(err, "/result/device", "the job is for device %s", device ? device : "?");
    const json_t *re = json_object_get(result, "relative_error");
    if (re && measured > 0) {
        double want = (double)(predicted - measured) / (double)measured;
        if (fabs(json_number_value(re) - want) > 1e-6 * (1 + fabs(want)))
            return refuse(err, "/result/relative_error",
                          "relative_error is (predicted - measured) / measured: %.9g", want);
    }
    int rc = check_step_time(plan, result, err);
    if (rc != REMAT_OK)
        return rc;
    const json_t *opt = json_object_get(result, "optimizer");
    const char *want_opt =
        json_string_value(json_object_get(json_object_get(prof, "optimizer"), "name"));
    if (!same(opt ? json_string_value(json_object_get(opt, "name")) : "none",
              want_opt ? want_opt : "none"))
        return refuse(err, "/result/optimizer", "the job's profile has optimizer %s",
                      want_opt ? want_opt : "none");
    const json_t *tl = json_object_get(result, "timeline");
    if (tl)
        return check_timeline(spec, tl, err);
    return REMAT_OK;
}

int rematd_check_result(const char *kind, const json_t *spec, const json_t *result,
                        struct remat_error *err)
{
    if (err)
        memset(err, 0, sizeof *err);
    if (!json_is_object(result))
        return refuse(err, "/result", "result is an object");
    if (!json_is_object(spec))
        return refuse(err, "/result", "the job's spec cannot be read");
    if (kind && strcmp(kind, "profile") == 0)
        return check_profile(spec, result, err);
    if (kind && strcmp(kind, "validation") == 0)
        return check_validation(spec, result, err);
    return refuse(err, "/result", "unknown job kind");
}
