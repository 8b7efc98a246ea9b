/* profile.c - remat.profile/v1: parsing, checking, printing (docs/profile.md).
 *
 * A profile of a million stages must parse fast and small, so the stages
 * live in one array and every stage name in one arena, both allocated once
 * their sizes are known (the array only after its length passed the limit). */
#include <math.h>
#include <stdio.h>

#include "remat_private.h"

/* Documented defaults (docs/profile.md). */
#define DEFAULT_FWD_MS 1.0
#define DEFAULT_BWD_MS 2.0

struct profile_priv {
    char *names; /* arena of every stage name, NUL-separated */
};

static const char empty_name[] = "";

static void join_pointer(char *buf, size_t size, const char *prefix, const char *suffix)
{
    snprintf(buf, size, "%s%s", prefix != NULL ? prefix : "", suffix);
}

/* No stage: a top-level field. */
#define TOP SIZE_MAX

/* The JSON pointer of a field, built only when an error needs it (a
 * million stages must not cost millions of snprintf calls). */
static const char *field_pointer(char *buf, size_t size, const char *prefix, size_t stage,
                                 const char *key)
{
    if (stage == TOP)
        snprintf(buf, size, "%s/%s", prefix != NULL ? prefix : "", key);
    else
        snprintf(buf, size, "%s/stages/%zu/%s", prefix != NULL ? prefix : "", stage, key);
    return buf;
}

/* A byte count: a JSON integer in [0, REMAT_MAX_BYTES]. */
static int get_bytes(const json_t *obj, const char *key, int required, int64_t dflt, int64_t *out,
                     const char *prefix, size_t stage, struct remat_error *err)
{
    char ptr[128];
    const json_t *v = json_object_get(obj, key);
    if (v == NULL) {
        if (required)
            return remat__error(err, REMAT_EINVAL,
                                field_pointer(ptr, sizeof ptr, prefix, stage, key), "%s is missing",
                                key);
        *out = dflt;
        return REMAT_OK;
    }
    if (!json_is_integer(v))
        return remat__error(err, REMAT_EINVAL, field_pointer(ptr, sizeof ptr, prefix, stage, key),
                            "%s must be an integer byte count", key);
    json_int_t x = json_integer_value(v);
    if (x < 0)
        return remat__error(err, REMAT_EINVAL, field_pointer(ptr, sizeof ptr, prefix, stage, key),
                            "%s must not be negative", key);
    if (x > REMAT_MAX_BYTES)
        return remat__error(err, REMAT_ELIMIT, field_pointer(ptr, sizeof ptr, prefix, stage, key),
                            "%s is over the limit of 2^60 bytes", key);
    *out = (int64_t)x;
    return REMAT_OK;
}

/* A time in milliseconds: a finite, non-negative JSON number. */
static int get_ms(const json_t *obj, const char *key, double dflt, double *out, const char *prefix,
                  size_t stage, struct remat_error *err)
{
    const json_t *v = json_object_get(obj, key);
    if (v == NULL) {
        *out = dflt;
        return REMAT_OK;
    }
    char ptr[128];
    if (!json_is_number(v))
        return remat__error(err, REMAT_EINVAL, field_pointer(ptr, sizeof ptr, prefix, stage, key),
                            "%s must be a number", key);
    double x = json_number_value(v);
    if (!isfinite(x) || x < 0)
        return remat__error(err, REMAT_EINVAL, field_pointer(ptr, sizeof ptr, prefix, stage, key),
                            "%s must be finite and not negative", key);
    *out = x;
    return REMAT_OK;
}

/* An optional metadata string: copied into *out (new) or left NULL. */
static int get_meta(const json_t *root, const char *key, char **out, const char *prefix,
                    struct remat_error *err)
{
    const json_t *v = json_object_get(root, key);
    if (v == NULL || json_is_null(v))
        return REMAT_OK;
    char ptr[128];
    char rel[64];
    snprintf(rel, sizeof rel, "/%s", key);
    join_pointer(ptr, sizeof ptr, prefix, rel);
    if (!json_is_string(v))
        return remat__error(err, REMAT_EINVAL, ptr, "%s must be a string", key);
    size_t len = json_string_length(v);
    if (len > REMAT_MAX_NAME)
        return remat__error(err, REMAT_ELIMIT, ptr, "%s is longer than %d bytes", key,
                            REMAT_MAX_NAME);
    *out = malloc(len + 1);
    if (*out == NULL)
        return remat__error(err, REMAT_ENOMEM, ptr, "out of memory");
    memcpy(*out, json_string_value(v), len);
    (*out)[len] = '\0';
    return REMAT_OK;
}

static struct remat_profile *profile_alloc(size_t n, size_t names_len, struct remat_error *err)
{
    struct remat_profile *p = calloc(1, sizeof *p);
    struct profile_priv *priv = calloc(1, sizeof *priv);
    struct remat_stage *stages = calloc(n, sizeof *stages);
    char *names = names_len > 0 ? malloc(names_len) : NULL;
    if (p == NULL || priv == NULL || stages == NULL || (names_len > 0 && names == NULL)) {
        free(p);
        free(priv);
        free(stages);
        free(names);
        remat__error(err, REMAT_ENOMEM, "", "out of memory for a profile of %zu stages", n);
        return NULL;
    }
    priv->names = names;
    p->priv = priv;
    p->stages = stages;
    p->n_stages = n;
    return p;
}

void remat_profile_free(struct remat_profile *profile)
{
    if (profile == NULL)
        return;
    struct profile_priv *priv = profile->priv;
    if (priv != NULL)
        free(priv->names);
    free(priv);
    free(profile->stages);
    free(profile->model);
    free(profile->dtype);
    free(profile->device);
    free(profile->driver);
    free(profile->libtorch);
    free(profile);
}

struct remat_profile *remat_profile_new(size_t n_stages, struct remat_error *err)
{
    if (n_stages == 0) {
        remat__error(err, REMAT_EINVAL, "/stages", "a profile needs at least one stage");
        return NULL;
    }
    if (n_stages > REMAT_MAX_STAGES) {
        remat__error(err, REMAT_ELIMIT, "/stages", "%zu stages is over the limit of %d", n_stages,
                     REMAT_MAX_STAGES);
        return NULL;
    }
    struct remat_profile *p = profile_alloc(n_stages, 0, err);
    if (p == NULL)
        return NULL;
    for (size_t i = 0; i < n_stages; i++) {
        struct remat_stage *s = &p->stages[i];
        s->name = empty_name;
        s->fwd_ms = DEFAULT_FWD_MS;
        s->bwd_ms = DEFAULT_BWD_MS;
    }
    return p;
}

int remat__profile_total_bytes(const struct remat_profile *p, int64_t *out)
{
    /* Each field is at most REMAT_MAX_BYTES = 2^60 and the running total is
     * checked against 2^60 after every stage, so no partial sum here exceeds
     * 2^60 + 5 * 2^60 < 2^63. */
    int64_t total = p->input_bytes;
    for (size_t i = 0; i < p->n_stages; i++) {
        const struct remat_stage *s = &p->stages[i];
        total += s->out_bytes + s->saved_bytes + s->fwd_tmp_bytes + s->bwd_tmp_bytes +
                 2 * s->param_bytes;
        if (total > REMAT_MAX_BYTES)
            return REMAT_ELIMIT;
    }
    /* The optimizer's bytes count in the same total (each is at most 2^60). */
    total += p->optimizer.state_bytes + p->optimizer.step_tmp_bytes;
    if (total > REMAT_MAX_BYTES)
        return REMAT_ELIMIT;
    *out = total;
    return REMAT_OK;
}

static int check_bytes(int64_t v, const char *field, size_t stage, struct remat_error *err)
{
    char ptr[128];
    if (v < 0 || v > REMAT_MAX_BYTES) {
        if (stage == 0)
            snprintf(ptr, sizeof ptr, "/%s", field);
        else
            snprintf(ptr, sizeof ptr, "/stages/%zu/%s", stage - 1, field);
        return remat__error(err, v < 0 ? REMAT_EINVAL : REMAT_ELIMIT, ptr,
                            v < 0 ? "%s must not be negative" : "%s is over the limit of 2^60",
                            field);
    }
    return REMAT_OK;
}

static int check_ms(double v, const char *field, size_t stage, struct remat_error *err)
{
    if (isfinite(v) && v >= 0)
        return REMAT_OK;
    char ptr[128];
    snprintf(ptr, sizeof ptr, "/stages/%zu/%s", stage - 1, field);
    return remat__error(err, REMAT_EINVAL, ptr, "%s must be finite and not negative", field);
}

int remat_profile_validate(const struct remat_profile *profile, struct remat_error *err)
{
    if (profile == NULL)
        return remat__error(err, REMAT_EINVAL, "", "no profile");
    if (profile->n_stages == 0 || profile->stages == NULL)
        return remat__error(err, REMAT_EINVAL, "/stages", "a profile needs at least one stage");
    if (profile->n_stages > REMAT_MAX_STAGES)
        return remat__error(err, REMAT_ELIMIT, "/stages", "%zu stages is over the limit of %d",
                            profile->n_stages, REMAT_MAX_STAGES);
    int rc = check_bytes(profile->input_bytes, "input_bytes", 0, err);
    if (rc < 0)
        return rc;
    if (profile->batch_size < 0)
        return remat__error(err, REMAT_EINVAL, "/batch_size", "batch_size must not be negative");
    for (size_t i = 1; i <= profile->n_stages; i++) {
        const struct remat_stage *s = &profile->stages[i - 1];
        if ((rc = check_bytes(s->out_bytes, "out_bytes", i, err)) < 0 ||
            (rc = check_bytes(s->saved_bytes, "saved_bytes", i, err)) < 0 ||
            (rc = check_bytes(s->fwd_tmp_bytes, "fwd_tmp_bytes", i, err)) < 0 ||
            (rc = check_bytes(s->bwd_tmp_bytes, "bwd_tmp_bytes", i, err)) < 0 ||
            (rc = check_bytes(s->param_bytes, "param_bytes", i, err)) < 0 ||
            (rc = check_ms(s->fwd_ms, "fwd_ms", i, err)) < 0 ||
            (rc = check_ms(s->bwd_ms, "bwd_ms", i, err)) < 0)
            return rc;
        if (s->saved_bytes < s->out_bytes) {
            char ptr[128];
            snprintf(ptr, sizeof ptr, "/stages/%zu/saved_bytes", i - 1);
            return remat__error(err, REMAT_EINVAL, ptr,
                                "saved_bytes must be at least out_bytes (it holds the output)");
        }
        if (s->name != NULL && strlen(s->name) > REMAT_MAX_NAME) {
            char ptr[128];
            snprintf(ptr, sizeof ptr, "/stages/%zu/name", i - 1);
            return remat__error(err, REMAT_ELIMIT, ptr, "name is longer than %d bytes",
                                REMAT_MAX_NAME);
        }
    }
    if ((rc = remat__optimizer_validate(profile, err)) < 0)
        return rc;
    int64_t total;
    if (remat__profile_total_bytes(profile, &total) < 0)
        return remat__error(err, REMAT_ELIMIT, "/stages",
                            "the profile's byte counts add up to more than 2^60");
    return REMAT_OK;
}

static int parse_stage(const json_t *st, size_t i, const char *prefix, struct remat_stage *s,
                       struct remat_error *err)
{
    int rc;
    if ((rc = get_bytes(st, "out_bytes", 1, 0, &s->out_bytes, prefix, i, err)) < 0 ||
        (rc = get_bytes(st, "saved_bytes", 0, s->out_bytes, &s->saved_bytes, prefix, i, err)) < 0 ||
        (rc = get_bytes(st, "fwd_tmp_bytes", 0, 0, &s->fwd_tmp_bytes, prefix, i, err)) < 0 ||
        (rc = get_bytes(st, "bwd_tmp_bytes", 0, 0, &s->bwd_tmp_bytes, prefix, i, err)) < 0 ||
        (rc = get_bytes(st, "param_bytes", 0, 0, &s->param_bytes, prefix, i, err)) < 0 ||
        (rc = get_ms(st, "fwd_ms", DEFAULT_FWD_MS, &s->fwd_ms, prefix, i, err)) < 0 ||
        (rc = get_ms(st, "bwd_ms", DEFAULT_BWD_MS, &s->bwd_ms, prefix, i, err)) < 0)
        return rc;
    if (s->saved_bytes < s->out_bytes) {
        char ptr[128];
        return remat__error(err, REMAT_EINVAL,
                            field_pointer(ptr, sizeof ptr, prefix, i, "saved_bytes"),
                            "saved_bytes must be at least out_bytes (it holds the output)");
    }
    return REMAT_OK;
}

struct remat_profile *remat_profile_from_json(const json_t *root, const char *pointer_prefix,
                                              struct remat_error *err)
{
    const char *prefix = pointer_prefix != NULL ? pointer_prefix : "";
    char ptr[128];
    if (!json_is_object(root)) {
        join_pointer(ptr, sizeof ptr, prefix, "");
        remat__error(err, REMAT_EINVAL, ptr, "a profile must be a JSON object");
        return NULL;
    }
    const json_t *fmt = json_object_get(root, "format");
    if (fmt != NULL &&
        (!json_is_string(fmt) || strcmp(json_string_value(fmt), REMAT_PROFILE_FORMAT) != 0)) {
        join_pointer(ptr, sizeof ptr, prefix, "/format");
        remat__error(err, REMAT_EINVAL, ptr, "format must be \"%s\"", REMAT_PROFILE_FORMAT);
        return NULL;
    }
    int64_t input_bytes;
    if (get_bytes(root, "input_bytes", 1, 0, &input_bytes, prefix, TOP, err) < 0)
        return NULL;
    const json_t *stages = json_object_get(root, "stages");
    join_pointer(ptr, sizeof ptr, prefix, "/stages");
    if (stages == NULL) {
        remat__error(err, REMAT_EINVAL, ptr, "stages is missing");
        return NULL;
    }
    if (!json_is_array(stages)) {
        remat__error(err, REMAT_EINVAL, ptr, "stages must be an array");
        return NULL;
    }
    size_t n = json_array_size(stages);
    if (n == 0) {
        remat__error(err, REMAT_EINVAL, ptr, "a profile needs at least one stage");
        return NULL;
    }
    if (n > REMAT_MAX_STAGES) {
        remat__error(err, REMAT_ELIMIT, ptr, "%zu stages is over the limit of %d", n,
                     REMAT_MAX_STAGES);
        return NULL;
    }
    /* First pass: shapes and names, so the arena is sized exactly. */
    size_t names_len = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *st = json_array_get(stages, i);
        char rel[64];
        if (!json_is_object(st)) {
            snprintf(rel, sizeof rel, "/stages/%zu", i);
            join_pointer(ptr, sizeof ptr, prefix, rel);
            remat__error(err, REMAT_EINVAL, ptr, "a stage must be an object");
            return NULL;
        }
        const json_t *name = json_object_get(st, "name");
        if (name == NULL || json_is_null(name))
            continue;
        if (!json_is_string(name)) {
            remat__error(err, REMAT_EINVAL, field_pointer(ptr, sizeof ptr, prefix, i, "name"),
                         "name must be a string");
            return NULL;
        }
        size_t len = json_string_length(name);
        if (len > REMAT_MAX_NAME) {
            remat__error(err, REMAT_ELIMIT, field_pointer(ptr, sizeof ptr, prefix, i, "name"),
                         "name is longer than %d bytes", REMAT_MAX_NAME);
            return NULL;
        }
        names_len += len + 1;
    }
    struct remat_profile *p = profile_alloc(n, names_len, err);
    if (p == NULL)
        return NULL;
    p->input_bytes = input_bytes;
    char *arena = ((struct profile_priv *)p->priv)->names;
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *st = json_array_get(stages, i);
        struct remat_stage *s = &p->stages[i];
        const json_t *name = json_object_get(st, "name");
        if (json_is_string(name)) {
            size_t len = json_string_length(name);
            memcpy(arena + used, json_string_value(name), len);
            arena[used + len] = '\0';
            s->name = arena + used;
            used += len + 1;
        } else {
            s->name = empty_name;
        }
        if (parse_stage(st, i, prefix, s, err) < 0)
            goto fail;
    }
    if (get_meta(root, "model", &p->model, prefix, err) < 0 ||
        get_meta(root, "dtype", &p->dtype, prefix, err) < 0 ||
        get_meta(root, "device", &p->device, prefix, err) < 0 ||
        get_meta(root, "driver", &p->driver, prefix, err) < 0 ||
        get_meta(root, "libtorch", &p->libtorch, prefix, err) < 0)
        goto fail;
    const json_t *bs = json_object_get(root, "batch_size");
    if (bs != NULL && !json_is_null(bs)) {
        join_pointer(ptr, sizeof ptr, prefix, "/batch_size");
        if (!json_is_integer(bs) || json_integer_value(bs) < 0) {
            remat__error(err, REMAT_EINVAL, ptr, "batch_size must be a non-negative integer");
            goto fail;
        }
        p->batch_size = (int64_t)json_integer_value(bs);
    }
    int64_t total;
    if (remat__profile_total_bytes(p, &total) < 0) {
        join_pointer(ptr, sizeof ptr, prefix, "/stages");
        remat__error(err, REMAT_ELIMIT, ptr, "the profile's byte counts add up to more than 2^60");
        goto fail;
    }
    return p;
fail:
    remat_profile_free(p);
    return NULL;
}

struct remat_profile *remat_profile_loadb(const char *text, size_t len, struct remat_error *err)
{
    return remat_profile_parse(text, len, "", err);
}

struct remat_profile *remat__profile_adopt(struct remat_stage *stages, size_t n, char *names,
                                           struct remat_error *err)
{
    struct remat_profile *p = calloc(1, sizeof *p);
    struct profile_priv *priv = calloc(1, sizeof *priv);
    if (p == NULL || priv == NULL) {
        free(p);
        free(priv);
        free(stages);
        free(names);
        remat__error(err, REMAT_ENOMEM, "", "out of memory for a profile of %zu stages", n);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        uintptr_t off = (uintptr_t)stages[i].name;
        stages[i].name = off == 0 ? empty_name : names + off - 1;
    }
    priv->names = names;
    p->priv = priv;
    p->stages = stages;
    p->n_stages = n;
    return p;
}

static int set_new(json_t *obj, const char *key, json_t *v)
{
    return v == NULL ? -1 : json_object_set_new(obj, key, v);
}

static int set_meta(json_t *obj, const char *key, const char *v)
{
    return v == NULL ? 0 : set_new(obj, key, json_string(v));
}

json_t *remat_profile_to_json(const struct remat_profile *profile)
{
    json_t *root = json_object();
    json_t *stages = json_array();
    if (root == NULL || stages == NULL)
        goto fail;
    int bad = set_new(root, "format", json_string(REMAT_PROFILE_FORMAT));
    bad |= set_new(root, "input_bytes", json_integer(profile->input_bytes));
    bad |= set_meta(root, "model", profile->model);
    bad |= set_meta(root, "dtype", profile->dtype);
    bad |= set_meta(root, "device", profile->device);
    bad |= set_meta(root, "driver", profile->driver);
    bad |= set_meta(root, "libtorch", profile->libtorch);
    if (profile->batch_size > 0)
        bad |= set_new(root, "batch_size", json_integer(profile->batch_size));
    if (bad)
        goto fail;
    for (size_t i = 0; i < profile->n_stages; i++) {
        const struct remat_stage *s = &profile->stages[i];
        json_t *st = json_pack(
            "{s:s, s:I, s:I, s:I, s:I, s:I, s:f, s:f}", "name", s->name != NULL ? s->name : "",
            "out_bytes", (json_int_t)s->out_bytes, "saved_bytes", (json_int_t)s->saved_bytes,
            "fwd_tmp_bytes", (json_int_t)s->fwd_tmp_bytes, "bwd_tmp_bytes",
            (json_int_t)s->bwd_tmp_bytes, "param_bytes", (json_int_t)s->param_bytes, "fwd_ms",
            s->fwd_ms, "bwd_ms", s->bwd_ms);
        if (st == NULL || json_array_append_new(stages, st) < 0)
            goto fail;
    }
    if (json_object_set(root, "stages", stages) < 0)
        goto fail;
    json_decref(stages);
    return root;
fail:
    json_decref(stages);
    json_decref(root);
    return NULL;
}
