/*
 * jobs/profile_spec.c - a profile job's spec (docs/jobs.md), read from the
 * body of POST /v1/profiles (or made by POST /v1/fits for a model spec): a
 * zoo model name, a JSON layer list, an uploaded model (model_id, with
 * its input and optionally its stages) or a Hugging Face config (hf_config,
 * with seq_len), with batch size, input shape,
 * dtype and device, checked, with the defaults filled in: the normalised
 * spec the worker receives, and its reuse key.  Pure: what is wrong fills
 * a struct rematd_problem, and an uploaded model is looked up through the
 * reader's context.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/profile_spec.h"
#include "rematd.h"
#include "request_limits.h"
#include "rematx/pointer.h"
#include "rematx/rematx.h"

static const char *const fields[] = {
    "model",     "layers",  "model_options",    "batch_size", "input_shape", "dtype", "device",
    "warmup",    "repeats", "model_id",         "input",      "stages",      "reuse", "optimizer",
    "hf_config", "seq_len", "measure_seq_lens", NULL};

/* One layer, by the layer table (src/rematx/layers.h), a sequential's
 * inner layers with it: a request's types only, the zoo's own are not
 * given by hand. */
static int check_layer(struct rematd_problem *pr, json_t *l, const char *ptr)
{
    struct remat_error err = {0};
    int rc = rematx_layer_check(l, ptr, 0, &err);
    if (rc != REMAT_OK) {
        rematd_problem_set(pr, 400, rc == REMAT_ELIMIT ? "limit-exceeded" : "validation",
                           err.pointer, "%s", err.message);
        return -1;
    }
    return 0;
}

static int check_layers(struct rematd_problem *pr, json_t *layers, const char *prefix, size_t max)
{
    if (rematd_problem_array(pr, layers, prefix, max, "layers must be a non-empty array",
                             "layers") < 0)
        return -1;
    size_t i;
    json_t *l;
    json_array_foreach (layers, i, l) {
        char p[180];
        snprintf(p, sizeof p, "%.150s/%zu", prefix, i);
        if (check_layer(pr, l, p) < 0)
            return -1;
    }
    return 0;
}

static int get_int(struct rematd_problem *pr, json_t *body, const char *name, json_int_t lo,
                   json_int_t hi, json_int_t dflt, json_t *spec)
{
    json_int_t x = dflt;
    if (rematd_problem_int(pr, body, name, lo, hi, NULL, &x) < 0)
        return -1;
    json_object_set_new(spec, name, json_integer(x));
    return 0;
}

static int is_float_dtype(const char *d)
{
    return d && (strcmp(d, "fp32") == 0 || strcmp(d, "fp16") == 0 || strcmp(d, "bf16") == 0);
}

/* input_shape and model_options belong to zoo models and layer lists: a
 * model spec of another kind that carries one is refused at its pointer,
 * with what that kind takes instead (takes): fills pr and returns -1.
 * Returns 0 when it carries neither. */
static int refuse_layer_members(const json_t *body, const char *takes, struct rematd_problem *pr)
{
    static const char *const not_with[] = {"input_shape", "model_options", NULL};
    for (size_t i = 0; not_with[i]; i++)
        if (json_object_get(body, not_with[i])) {
            char p[32];
            snprintf(p, sizeof p, "/%s", not_with[i]);
            rematd_problem_set(pr, 400, "validation", p, "%s is for zoo models and layer lists; %s",
                               not_with[i], takes);
            return -1;
        }
    return 0;
}

/* An uploaded model's job: model_id (a stored model), input {shape, dtype,
 * high} and stages (submodule names, or none for the top-level children).
 * Fills spec, or fills pr and returns -1. */
static int normalise_uploaded(const struct rematd_read_ctx *ctx, json_t *body, json_t *spec,
                              struct rematd_problem *pr)
{
    if (refuse_layer_members(body, "an uploaded model takes input {shape, dtype, high}", pr) != 0)
        return -1;
    const char *id = json_string_value(json_object_get(body, "model_id"));
    if (!rematd_is_id(id)) {
        rematd_problem_set(pr, 400, "validation", "/model_id",
                           "model_id is the id POST /v1/models gave (32 hexadecimal digits)");
        return -1;
    }
    struct rematd_read_model m;
    if (rematd_read_model_by_id(ctx, id, &m, pr) < 0)
        return -1;
    json_object_set_new(spec, "model_id", json_string(m.id));
    json_object_set_new(spec, "model_sha256", json_string(m.sha256));
    json_object_set_new(spec, "model_bytes", json_integer(m.bytes));

    json_t *in = json_object_get(body, "input");
    static const char *const in_fields[] = {"shape", "dtype", "high", NULL};
    if (!json_is_object(in)) {
        rematd_problem_set(pr, 400, "validation", "/input",
                           "an uploaded model needs input: {\"shape\": [...], \"dtype\": "
                           "\"fp32|fp16|bf16|int64\", \"high\": N}");
        return -1;
    }
    if (rematd_problem_unknown(pr, in, "/input", in_fields) < 0)
        return -1;
    json_t *shape = json_object_get(in, "shape");
    size_t i;
    json_t *d;
    int ok = json_is_array(shape) && json_array_size(shape) >= 1 && json_array_size(shape) <= 6;
    json_array_foreach (shape, i, d)
        ok = ok && json_is_integer(d) && json_integer_value(d) >= 1 &&
             json_integer_value(d) <= REMATD_MAX_INPUT_DIM;
    if (!ok) {
        rematd_problem_set(pr, 400, "validation", "/input/shape",
                           "shape is 1 to 6 positive integers, batch dimension excluded");
        return -1;
    }
    json_t *jd = json_object_get(body, "dtype");
    const char *dtype = json_string_value(jd);
    json_t *idt = json_object_get(in, "dtype");
    const char *in_dtype = idt ? json_string_value(idt) : dtype ? dtype : "fp32";
    if (!in_dtype || (!is_float_dtype(in_dtype) && strcmp(in_dtype, "int64") != 0)) {
        rematd_problem_set(pr, 400, "validation", "/input/dtype",
                           "input dtype must be fp32, fp16, bf16 or int64");
        return -1;
    }
    if (is_float_dtype(in_dtype)) {
        if (dtype && strcmp(dtype, in_dtype) != 0) {
            rematd_problem_set(pr, 400, "validation", "/input/dtype",
                               "a floating input has the model's dtype (%s)", dtype);
            return -1;
        }
        if (!jd)
            json_object_set_new(body, "dtype", json_string(in_dtype));
    }
    json_t *high = json_object_get(in, "high");
    int is_int = strcmp(in_dtype, "int64") == 0;
    if (is_int != (high != NULL) ||
        (high && (!json_is_integer(high) || json_integer_value(high) < 1 ||
                  json_integer_value(high) > ((json_int_t)1 << 40)))) {
        rematd_problem_set(pr, 400, "validation", "/input/high",
                           is_int ? "an int64 input needs high, a positive integer: token ids "
                                    "are drawn below it"
                                  : "high is for int64 inputs only");
        return -1;
    }
    json_t *input = json_pack("{s:O, s:s}", "shape", shape, "dtype", in_dtype);
    if (high)
        json_object_set(input, "high", high);
    json_object_set_new(spec, "input", input);
    json_object_set(spec, "input_shape", shape);

    json_t *stages = json_object_get(body, "stages");
    if (stages) {
        size_t max = ctx->max_stages;
        if (!json_is_array(stages) || json_array_size(stages) == 0 ||
            json_array_size(stages) > max) {
            rematd_problem_set(pr, 400, "validation", "/stages",
                               "stages is a list of 1 to %zu submodule names", max);
            return -1;
        }
        json_array_foreach (stages, i, d) {
            const char *n = json_string_value(d);
            size_t len = n ? strlen(n) : 0;
            int good = len > 0 && len < REMAT_MAX_NAME && n[0] != '.' && n[len - 1] != '.';
            for (size_t k = 0; good && k < len; k++)
                good = (n[k] >= 'a' && n[k] <= 'z') || (n[k] >= 'A' && n[k] <= 'Z') ||
                       (n[k] >= '0' && n[k] <= '9') || n[k] == '_' ||
                       (n[k] == '.' && n[k + 1] != '.');
            if (!good) {
                char p[48];
                snprintf(p, sizeof p, "/stages/%zu", i);
                rematd_problem_set(pr, 400, "validation", p,
                                   "a stage is a submodule's dotted name (blocks.0), under %d "
                                   "bytes",
                                   REMAT_MAX_NAME);
                return -1;
            }
        }
        json_object_set(spec, "stages", stages);
    }
    return 0;
}

/* "measure_seq_lens": a seq_len too long to run here, measured at two
 * shorter lengths on CPU and scaled to it by the worker (docs/scheduling.md,
 * "Sizes too large to run here"), in ascending order in the spec.  0, or
 * -1 with pr filled. */
static int normalise_seq_lens(json_t *body, json_t *spec, json_int_t seq, struct rematd_problem *pr)
{
    json_t *v = json_object_get(body, "measure_seq_lens");
    if (v == NULL)
        return 0;
    json_int_t a = json_integer_value(json_array_get(v, 0));
    json_int_t b = json_integer_value(json_array_get(v, 1));
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_integer(json_array_get(v, 0)) ||
        !json_is_integer(json_array_get(v, 1)) || a < 1 || b < 1 || a == b || a > seq || b > seq) {
        rematd_problem_set(pr, 400, "validation", "/measure_seq_lens",
                           "measure_seq_lens is two distinct sequence lengths in 1..seq_len");
        return -1;
    }
    json_t *dev = json_object_get(body, "device");
    if (!json_is_string(dev) || strcmp(json_string_value(dev), "cpu") != 0) {
        rematd_problem_set(pr, 400, "validation", "/device",
                           "measure_seq_lens is measured on CPU (its allocations traced): give "
                           "device cpu");
        return -1;
    }
    json_object_set_new(spec, "measure_seq_lens",
                        json_pack("[I, I]", a < b ? a : b, a < b ? b : a));
    return 0;
}

/* A transformer from its Hugging Face config.json (hf_config) with seq_len:
 * the config read strictly by src/rematx/hfconfig.h, an architecture or a
 * field remat does not build a 422 naming it, and the normalised config
 * (the fields that change the computation, nothing else) in the spec with
 * input_shape [seq_len].  Fills spec, or fills pr and returns -1. */
static int normalise_hf(const struct rematd_read_ctx *ctx, json_t *body, json_t *spec,
                        struct rematd_problem *pr)
{
    if (refuse_layer_members(body, "hf_config takes seq_len", pr) != 0)
        return -1;
    struct rematx_hf h;
    struct remat_error err = {0};
    int rc = rematx_hf_read(json_object_get(body, "hf_config"), "/hf_config", &h, &err);
    if (rc != REMAT_OK) {
        if (rc == REMAT_EUNSUPPORTED)
            rematd_problem_set(pr, 422, "unsupported-model", err.pointer, "%s", err.message);
        else
            rematd_problem_set(pr, 400, "validation", err.pointer, "%s", err.message);
        return -1;
    }
    /* Embedding, one stage per decoder block, final norm and head. */
    if ((size_t)h.layers + 2 > ctx->max_stages) {
        rematd_problem_set(pr, 400, "limit-exceeded",
                           h.family == REMATX_HF_GPT2 ? "/hf_config/n_layer"
                                                      : "/hf_config/num_hidden_layers",
                           "%lld blocks make %lld stages, more than this server's %zu",
                           (long long)h.layers, (long long)h.layers + 2, ctx->max_stages);
        return -1;
    }
    json_t *sl = json_object_get(body, "seq_len");
    if (!json_is_integer(sl) || json_integer_value(sl) < 1 ||
        json_integer_value(sl) > h.max_positions) {
        rematd_problem_set(pr, 400, "validation", "/seq_len",
                           "hf_config needs seq_len, an integer in 1..%lld (the config's "
                           "max positions)",
                           (long long)h.max_positions);
        return -1;
    }
    if (h.sliding_window > 0 && json_integer_value(sl) > h.sliding_window) {
        rematd_problem_set(pr, 422, "unsupported-model", "/hf_config/sliding_window",
                           "sliding-window attention is not built: seq_len must be at most the "
                           "window, %lld",
                           (long long)h.sliding_window);
        return -1;
    }
    json_t *norm = rematx_hf_json(&h);
    if (norm == NULL || json_object_set_new(spec, "hf_config", norm) < 0) {
        rematd_problem_set(pr, 500, "internal", NULL, "out of memory");
        return -1;
    }
    json_object_set_new(spec, "input_shape", json_pack("[O]", sl));
    return normalise_seq_lens(body, spec, json_integer_value(sl), pr);
}

/* The optimizer whose step the worker measures after the last backward
 * (docs/scheduling.md): a name, or {name, weight_decay}.  Normalised to
 * {"name", "weight_decay"}, and left out for "none", so that a profile
 * without one keeps the reuse key it had.  foreach is not measured:
 * libtorch's optimizers run the single-tensor step only. */
static int get_optimizer(struct rematd_problem *pr, json_t *body, json_t *spec)
{
    json_t *v = json_object_get(body, "optimizer");
    if (v == NULL)
        return 0;
    json_t *name = json_is_object(v) ? json_object_get(v, "name") : v;
    const char *ptr = json_is_object(v) ? "/optimizer/name" : "/optimizer";
    enum remat_optim_kind kind;
    if (!json_is_string(name) || remat_optim_parse(json_string_value(name), &kind) < 0) {
        rematd_problem_set(pr, 400, "validation", ptr,
                           "optimizer must be none, sgd, sgd-momentum, adam or adamw");
        return -1;
    }
    int wd = 0;
    if (json_is_object(v)) {
        static const char *const of[] = {"name", "weight_decay", "foreach", NULL};
        if (rematd_problem_unknown(pr, v, "/optimizer", of) < 0)
            return -1;
        json_t *f = json_object_get(v, "foreach");
        if (f != NULL && !json_is_false(f)) {
            rematd_problem_set(pr, 400, "validation", "/optimizer/foreach",
                               "the worker measures libtorch's single-tensor step; foreach is "
                               "modelled by POST /v1/fits");
            return -1;
        }
        json_t *w = json_object_get(v, "weight_decay");
        if (w != NULL && !json_is_boolean(w)) {
            rematd_problem_set(pr, 400, "validation", "/optimizer/weight_decay",
                               "weight_decay must be true or false");
            return -1;
        }
        wd = json_is_true(w);
    }
    if (kind == REMAT_OPTIM_NONE)
        return 0;
    json_object_set_new(
        spec, "optimizer",
        json_pack("{s:s, s:b}", "name", remat_optim_name(kind), "weight_decay", wd));
    return 0;
}

json_t *rematd_profile_spec(const struct rematd_read_ctx *ctx, json_t *body,
                            struct rematd_problem *pr)
{
    if (rematd_problem_unknown(pr, body, "", fields) < 0)
        return NULL;
    json_t *spec = json_object();
    json_t *model = json_object_get(body, "model");
    json_t *layers = json_object_get(body, "layers");
    json_t *model_id = json_object_get(body, "model_id");
    json_t *hf = json_object_get(body, "hf_config");
    if ((model != NULL) + (layers != NULL) + (model_id != NULL) + (hf != NULL) != 1) {
        rematd_problem_set(pr, 400, "validation", model ? "/layers" : "/model",
                           "give exactly one of model (a zoo name), layers, model_id (an "
                           "uploaded model) and hf_config (a Hugging Face config.json)");
        goto bad;
    }
    if (!hf && json_object_get(body, "measure_seq_lens")) {
        rematd_problem_set(pr, 400, "validation", "/measure_seq_lens",
                           "measure_seq_lens is for hf_config");
        goto bad;
    }
    if (!hf && json_object_get(body, "seq_len")) {
        rematd_problem_set(pr, 400, "validation", "/seq_len",
                           "seq_len is for hf_config (gpt takes model_options.seq_len)");
        goto bad;
    }
    if (!model_id && (json_object_get(body, "input") || json_object_get(body, "stages"))) {
        rematd_problem_set(pr, 400, "validation",
                           json_object_get(body, "input") ? "/input" : "/stages",
                           "input and stages are for an uploaded model (model_id)");
        goto bad;
    }
    if (hf) {
        if (normalise_hf(ctx, body, spec, pr) < 0 ||
            get_int(pr, body, "batch_size", 1, REMATD_MAX_BATCH, 1, spec) < 0)
            goto bad;
        goto common;
    }
    if (model_id) {
        if (normalise_uploaded(ctx, body, spec, pr) < 0 ||
            get_int(pr, body, "batch_size", 1, REMATD_MAX_BATCH, 1, spec) < 0)
            goto bad;
        goto common;
    }
    /* The zoo (src/rematx/zoo.c) says which names exist, which options
     * each takes within which limits, and the default input shape. */
    const struct rematx_zoo_model *zm = NULL;
    if (model) {
        zm = json_is_string(model) ? rematx_zoo_find(json_string_value(model)) : NULL;
        if (!zm) {
            rematd_problem_set(pr, 400, "validation", "/model",
                               "model must be a zoo name from GET /v1/models");
            goto bad;
        }
        json_object_set(spec, "model", model);
    } else {
        if (check_layers(pr, layers, "/layers", ctx->max_stages) < 0)
            goto bad;
        json_object_set(spec, "layers", layers);
    }
    json_t *mo = json_object_get(body, "model_options");
    json_int_t values[REMATX_ZOO_MAX_OPTIONS];
    struct remat_error err = {0};
    if (rematx_zoo_options(zm, mo, values, &err) != REMAT_OK) {
        rematd_problem_set(pr, 400, "validation", err.pointer, "%s", err.message);
        goto bad;
    }
    if (mo)
        json_object_set(spec, "model_options", mo);
    if (get_int(pr, body, "batch_size", 1, REMATD_MAX_BATCH, 1, spec) < 0)
        goto bad;
    json_t *shape = json_object_get(body, "input_shape");
    if (shape) {
        size_t i;
        json_t *d;
        int ok = json_is_array(shape) && json_array_size(shape) >= 1 && json_array_size(shape) <= 4;
        json_array_foreach (shape, i, d)
            ok = ok && json_is_integer(d) && json_integer_value(d) >= 1 &&
                 json_integer_value(d) <= REMATD_MAX_INPUT_DIM;
        if (!ok) {
            rematd_problem_set(pr, 400, "validation", "/input_shape",
                               "input_shape is 1 to 4 positive integers, batch dimension excluded");
            goto bad;
        }
        json_object_set(spec, "input_shape", shape);
    } else if (layers) {
        rematd_problem_set(pr, 400, "validation", "/input_shape", "a layer list needs input_shape");
        goto bad;
    } else {
        json_object_set_new(spec, "input_shape", rematx_zoo_input_shape(zm, values));
    }
common:;
    json_t *dt = json_object_get(body, "dtype");
    const char *dtype = dt ? json_string_value(dt) : "fp32";
    if (!dtype || (strcmp(dtype, "fp32") && strcmp(dtype, "fp16") && strcmp(dtype, "bf16"))) {
        rematd_problem_set(pr, 400, "validation", "/dtype", "dtype must be fp32, fp16 or bf16");
        goto bad;
    }
    json_object_set_new(spec, "dtype", json_string(dtype));
    json_t *dev = json_object_get(body, "device");
    const char *device = dev ? json_string_value(dev) : "cuda";
    if (!rematd_device_ok(device)) {
        rematd_problem_set(pr, 400, "validation", "/device", "device must be cpu, cuda or cuda:N");
        goto bad;
    }
    json_object_set_new(spec, "device", json_string(device));
    if (get_int(pr, body, "warmup", 0, REMATD_MAX_WARMUP, 2, spec) < 0 ||
        get_int(pr, body, "repeats", 1, REMATD_MAX_REPEATS, 5, spec) < 0 ||
        get_optimizer(pr, body, spec) < 0)
        goto bad;
    return spec;
bad:
    json_decref(spec);
    return NULL;
}

int rematd_device_ok(const char *d)
{
    if (!d)
        return 0;
    if (strcmp(d, "cpu") == 0 || strcmp(d, "cuda") == 0)
        return 1;
    if (strncmp(d, "cuda:", 5) != 0 || !d[5] || strlen(d) > 8)
        return 0;
    for (const char *p = d + 5; *p; p++)
        if (*p < '0' || *p > '9')
            return 0;
    return 1;
}

int rematd_profile_reuse_key(const json_t *spec, char key[65])
{
    /* The reuse key (docs/api.md, "Profile reuse"): the normalised spec is
     * everything the request says that changes the numbers, with every
     * default filled in, so two requests that differ only in spelling
     * (a default given or left out, member order) share it. */
    char *canon = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS);
    if (canon == NULL)
        return -1;
    rematd_sha256_hex(canon, strlen(canon), key);
    free(canon);
    return 0;
}
