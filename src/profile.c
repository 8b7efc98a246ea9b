/* profile.c - remat.profile/v1 in memory: making, checking, freeing and
 * printing a profile, and reading one from jansson's tree
 * (docs/profile.md).  The rules every reader follows are profile_rules.h's;
 * the text reader is profile_fast.c.
 *
 * A profile of a million stages must be small, so the stages live in one
 * array and every stage name in one arena. */
#include <math.h>
#include <stdio.h>

#include "profile_rules.h"

struct profile_priv {
    char *names; /* arena of every stage name, NUL-separated */
};

static const char empty_name[] = "";

static const char *stage_pointer(char *buf, size_t size, size_t i, const char *key)
{
    snprintf(buf, size, "/stages/%zu/%.64s", i, key);
    return buf;
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
#define FREE_FORMAT(key)
#define FREE_BYTES(key)
#define FREE_STAGES(key)
#define FREE_COUNT(key)
#define FREE_OPTIMIZER(key)
#define FREE_META(key) free(profile->key);
#define REMAT__X(key, kind) FREE_##kind(key)
    REMAT__ROOT_MEMBERS(REMAT__X)
#undef REMAT__X
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
#define REMAT__X(m, kind, required, dflt) s->m = (dflt);
        REMAT__STAGE_FIELDS(REMAT__X)
#undef REMAT__X
        /* Not the readers' default (fwd_tmp_bytes, 0 here): a program that
         * sets fwd_tmp_bytes later must not be left with a forward with grad
         * of no transient. */
        s->fwd_grad_tmp_bytes = REMAT_SAME_AS_FWD_TMP;
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
        /* One forward transient counts, the larger: no op holds both, and a
         * profile without fwd_grad_tmp_bytes totals what it always did.
         * bwd_freed_bytes only takes away. */
        int64_t fg = remat_stage_fwd_grad_tmp_bytes(s);
        int64_t f = s->fwd_tmp_bytes > fg ? s->fwd_tmp_bytes : fg;
        total += s->out_bytes + s->saved_bytes + f + s->bwd_tmp_bytes + 2 * s->param_bytes;
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

/* The rules of one numeric field (profile_rules.c), for a value by kind:
 * the pointer is made only for an error, as a million stages must not
 * cost millions of snprintf calls. */
static int check_REMAT__FIELD_BYTES(int64_t v, size_t i, const char *key, struct remat_error *err)
{
    if (v >= 0 && v <= REMAT_MAX_BYTES)
        return REMAT_OK;
    char ptr[128];
    return remat__check_bytes(v, key, stage_pointer(ptr, sizeof ptr, i, key), err);
}

static int check_REMAT__FIELD_MS(double v, size_t i, const char *key, struct remat_error *err)
{
    if (isfinite(v) && v >= 0 && v <= REMAT_MAX_MS)
        return REMAT_OK;
    char ptr[128];
    return remat__check_ms(v, key, stage_pointer(ptr, sizeof ptr, i, key), err);
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
    int rc = remat__check_bytes(profile->input_bytes, "input_bytes", "/input_bytes", err);
    if (rc < 0)
        return rc;
    if (profile->batch_size < 0)
        return remat__error(err, REMAT_EINVAL, "/batch_size", "batch_size must not be negative");
    char ptr[128];
    for (size_t i = 0; i < profile->n_stages; i++) {
        /* The stage as it is read: REMAT_SAME_AS_FWD_TMP stands for
         * fwd_tmp_bytes, any other negative value is refused. */
        struct remat_stage in_effect = profile->stages[i];
        in_effect.fwd_grad_tmp_bytes = remat_stage_fwd_grad_tmp_bytes(&in_effect);
        const struct remat_stage *s = &in_effect;
#define REMAT__X(m, kind, required, dflt)                                                          \
    if ((rc = check_##kind(s->m, i, #m, err)) < 0)                                                 \
        return rc;
        REMAT__STAGE_FIELDS(REMAT__X)
#undef REMAT__X
        if (s->saved_bytes < s->out_bytes)
            return remat__error(err, REMAT_EINVAL, stage_pointer(ptr, sizeof ptr, i, "saved_bytes"),
                                "saved_bytes must be at least out_bytes (it holds the output)");
        if (s->bwd_freed_bytes > s->saved_bytes + s->out_bytes)
            return remat__error(err, REMAT_EINVAL,
                                stage_pointer(ptr, sizeof ptr, i, "bwd_freed_bytes"),
                                "bwd_freed_bytes must be at most saved_bytes + out_bytes (what the "
                                "backward holds)");
        if (s->name != NULL && strlen(s->name) > REMAT_MAX_NAME)
            return remat__error(err, REMAT_ELIMIT, stage_pointer(ptr, sizeof ptr, i, "name"),
                                "name is longer than %d bytes", REMAT_MAX_NAME);
    }
    if ((rc = remat__optimizer_validate(profile, err)) < 0)
        return rc;
    int64_t total;
    if (remat__profile_total_bytes(profile, &total) < 0)
        return remat__error(err, REMAT_ELIMIT, "/stages",
                            "the profile's byte counts add up to more than 2^60");
    return REMAT_OK;
}

/* A jansson value as the lexer would have read it. */
static struct remat__jval jval_of(const json_t *v)
{
    struct remat__jval jv = {.type = REMAT__J_ABSENT};
    if (v == NULL)
        return jv;
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        jv.type = REMAT__J_OBJ;
        break;
    case JSON_ARRAY:
        jv.type = REMAT__J_ARR;
        break;
    case JSON_STRING:
        jv.type = REMAT__J_STR;
        jv.i = (int64_t)json_string_length(v);
        break;
    case JSON_INTEGER:
        jv.type = REMAT__J_INT;
        jv.i = (int64_t)json_integer_value(v);
        break;
    case JSON_REAL:
        jv.type = REMAT__J_REAL;
        jv.d = json_real_value(v);
        break;
    case JSON_TRUE:
        jv.type = REMAT__J_TRUE;
        break;
    case JSON_FALSE:
        jv.type = REMAT__J_FALSE;
        break;
    case JSON_NULL:
        jv.type = REMAT__J_NULL;
        break;
    }
    return jv;
}

/* One stage object into the builder.  REMAT_OK or ENOMEM. */
static int tree_stage(struct remat__pbuild *pb, const json_t *st)
{
    struct remat__pstage c;
    if (remat__pb_stage_begin(pb, &c) < 0)
        return REMAT_ENOMEM;
    for (int k = 0; k < REMAT__N_STAGE_FIELDS; k++)
        c.f[k] = jval_of(json_object_get(st, remat__stage_key[k]));
    const json_t *name = json_object_get(st, "name");
    if (json_is_string(name)) {
        if (remat__pb_stage_name(pb, &c, json_string_value(name), json_string_length(name)) < 0)
            return REMAT_ENOMEM;
    } else if (name != NULL) {
        remat__pb_stage_name_other(&c, jval_of(name).type);
    }
    remat__pb_stage_end(pb, &c);
    return REMAT_OK;
}

/* The jansson tree through the same builder as the text reader, so both
 * give the same profile and the same errors. */
struct remat_profile *remat_profile_from_json(const json_t *root, const char *pointer_prefix,
                                              struct remat_error *err)
{
    struct remat__pbuild pb;
    remat__pb_init(&pb, pointer_prefix);
    if (!json_is_object(root)) {
        remat__pb_root_not_object(&pb);
        return remat__pb_finish(&pb, err);
    }
    for (int j = 0; j < REMAT__N_ROOT; j++) {
        const json_t *v = json_object_get(root, remat__root_key[j]);
        enum remat__root_kind kind = remat__root_kind[j];
        if ((kind == REMAT__ROOT_FORMAT || kind == REMAT__ROOT_META) && json_is_string(v)) {
            if (remat__pb_root_string(&pb, j, json_string_value(v), json_string_length(v)) < 0)
                goto nomem;
            continue;
        }
        struct remat__jval jv = jval_of(v);
        remat__pb_root_value(&pb, j, &jv);
        if (kind == REMAT__ROOT_OPTIMIZER && json_is_object(v)) {
            for (int k = 0; k < REMAT__N_OPTIM_FIELDS; k++) {
                const json_t *m = json_object_get(v, remat__optim_key[k]);
                if (k == REMAT__OF_name && json_is_string(m)) {
                    remat__pb_optim_name(&pb, json_string_value(m), json_string_length(m));
                } else {
                    struct remat__jval mv = jval_of(m);
                    remat__pb_optim_value(&pb, k, &mv);
                }
            }
            continue;
        }
        if (kind != REMAT__ROOT_STAGES || !json_is_array(v))
            continue;
        size_t n = json_array_size(v);
        if (n > REMAT_MAX_STAGES) {
            pb.n = n; /* the count is the error: nothing is allocated */
            continue;
        }
        if (remat__pb_reserve(&pb, n) < 0)
            goto nomem;
        for (size_t i = 0; i < n; i++) {
            const json_t *st = json_array_get(v, i);
            int rc = json_is_object(st) ? tree_stage(&pb, st) : remat__pb_stage_not_object(&pb);
            if (rc < 0)
                goto nomem;
        }
    }
    return remat__pb_finish(&pb, err);
nomem:
    remat__pb_free(&pb);
    remat__error(err, REMAT_ENOMEM, "", "out of memory");
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

/* A stage field's JSON value, by its kind. */
#define json_REMAT__FIELD_BYTES(v) json_integer((json_int_t)(v))
#define json_REMAT__FIELD_MS(v) json_real(v)

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
    int bad = 0;
    /* The top-level members in table order, the stages last. */
#define TO_JSON_FORMAT(key) bad |= set_new(root, #key, json_string(REMAT_PROFILE_FORMAT));
#define TO_JSON_BYTES(key) bad |= set_new(root, #key, json_integer(profile->key));
#define TO_JSON_STAGES(key)
#define TO_JSON_META(key) bad |= set_meta(root, #key, profile->key);
#define TO_JSON_COUNT(key)                                                                         \
    if (profile->key > 0)                                                                          \
        bad |= set_new(root, #key, json_integer(profile->key));
#define TO_JSON_OPTIMIZER(key)                                                                     \
    if (profile->key.kind != REMAT_OPTIM_NONE)                                                     \
        bad |= set_new(                                                                            \
            root, #key,                                                                            \
            json_pack("{s:s, s:b, s:I, s:I, s:f}", "name", remat_optim_name(profile->key.kind),    \
                      "foreach", profile->key.foreach, "state_bytes",                              \
                      (json_int_t)profile->key.state_bytes, "step_tmp_bytes",                      \
                      (json_int_t)profile->key.step_tmp_bytes, "step_ms", profile->key.step_ms));
#define REMAT__X(key, kind) TO_JSON_##kind(key)
    REMAT__ROOT_MEMBERS(REMAT__X)
#undef REMAT__X
    if (bad)
        goto fail;
    for (size_t i = 0; i < profile->n_stages; i++) {
        /* The value REMAT_SAME_AS_FWD_TMP stands for is written, so that
         * every reader of the text sees the same profile. */
        struct remat_stage in_effect = profile->stages[i];
        in_effect.fwd_grad_tmp_bytes = remat_stage_fwd_grad_tmp_bytes(&in_effect);
        const struct remat_stage *s = &in_effect;
        json_t *st = json_object();
        if (st == NULL || set_new(st, "name", json_string(s->name != NULL ? s->name : "")) < 0)
            bad = 1;
#define REMAT__X(m, kind, required, dflt)                                                          \
    if (!bad && set_new(st, #m, json_##kind(s->m)) < 0)                                            \
        bad = 1;
        REMAT__STAGE_FIELDS(REMAT__X)
#undef REMAT__X
        if (bad) {
            json_decref(st);
            goto fail;
        }
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
