/* layers.c - the layer vocabulary's tables, checks and readers (layers.h). */
#include <stdio.h>
#include <string.h>

#include "rematx/error.h"
#include "rematx/layers.h"
#include "rematx/pointer.h"

enum { ORIGIN_REQUEST = 1, ORIGIN_ZOO = 0 };

static const struct {
    const char *name;
    int requestable;
} types[REMATX_N_LAYER_TYPES] = {
#define X(type, origin) [REMATX_LAYER_##type] = {#type, ORIGIN_##origin},
    REMATX_LAYER_TYPES(X)
#undef X
};

static const struct rematx_layer_arg_info args[REMATX_N_LAYER_ARGS] = {
#define X(type_, arg, kind_, required_, dflt_, min_, max_, choices_)                               \
    [REMATX_ARG_##type_##_##arg] = {.type = REMATX_LAYER_##type_,                                  \
                                    .name = #arg,                                                  \
                                    .kind = REMATX_ARG_##kind_,                                    \
                                    .required = required_,                                         \
                                    .dflt = dflt_,                                                 \
                                    .min = (double)(min_),                                         \
                                    .max = (double)(max_),                                         \
                                    .choices = choices_},
    REMATX_LAYER_ARGS(X)
#undef X
};

const char *rematx_layer_type_name(int type)
{
    return type >= 0 && type < REMATX_N_LAYER_TYPES ? types[type].name : NULL;
}

int rematx_layer_type_requestable(int type)
{
    return type >= 0 && type < REMATX_N_LAYER_TYPES && types[type].requestable;
}

int rematx_layer_type_find(const char *name)
{
    for (int t = 0; name != NULL && t < REMATX_N_LAYER_TYPES; t++)
        if (strcmp(name, types[t].name) == 0)
            return t;
    return -1;
}

const struct rematx_layer_arg_info *rematx_layer_arg_at(int a)
{
    return a >= 0 && a < REMATX_N_LAYER_ARGS ? &args[a] : NULL;
}

/* ------------------------------------------------------------------------
 * Checks
 */

/* Index of s in a '|'-separated list, or -1. */
static int choice_index(const char *choices, const char *s)
{
    size_t n = strlen(s);
    int k = 0;
    for (const char *c = choices; c != NULL; k++) {
        const char *bar = strchr(c, '|');
        size_t len = bar != NULL ? (size_t)(bar - c) : strlen(c);
        if (len == n && memcmp(c, s, n) == 0)
            return k;
        c = bar != NULL ? bar + 1 : NULL;
    }
    return -1;
}

/* The choices as a message says them: "a, b or c". */
static void choice_list(const char *choices, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (const char *c = choices; c != NULL && used < size;) {
        const char *bar = strchr(c, '|');
        size_t len = bar != NULL ? (size_t)(bar - c) : strlen(c);
        const char *sep = used == 0 ? "" : bar != NULL ? ", " : " or ";
        int w = snprintf(buf + used, size - used, "%s%.*s", sep, (int)len, c);
        used += w > 0 ? (size_t)w : 0;
        c = bar != NULL ? bar + 1 : NULL;
    }
}

static int is_int_in(const json_t *v, double min, double max)
{
    return json_is_integer(v) && (double)json_integer_value(v) >= min &&
           (double)json_integer_value(v) <= max;
}

static int check_list(const json_t *list, const char *pointer, int zoo_types,
                      struct remat_error *err);

static int check_arg(const struct rematx_layer_arg_info *a, const json_t *v, const char *p,
                     int zoo_types, struct remat_error *err)
{
    switch (a->kind) {
    case REMATX_ARG_INT:
        if (!is_int_in(v, a->min, a->max))
            return rematx_error(err, REMAT_EINVAL, p, "%s must be an integer in %.0f..%.0f",
                                a->name, a->min, a->max);
        return REMAT_OK;
    case REMATX_ARG_BOOL:
        if (!json_is_boolean(v))
            return rematx_error(err, REMAT_EINVAL, p, "%s must be true or false", a->name);
        return REMAT_OK;
    case REMATX_ARG_NUMBER:
        if (!json_is_number(v) || json_number_value(v) < a->min || json_number_value(v) > a->max)
            return rematx_error(err, REMAT_EINVAL, p, "%s must be a number in %g..%g", a->name,
                                a->min, a->max);
        return REMAT_OK;
    case REMATX_ARG_CHOICE:
        if (!json_is_string(v) || choice_index(a->choices, json_string_value(v)) < 0) {
            char list[128];
            choice_list(a->choices, list, sizeof list);
            return rematx_error(err, REMAT_EINVAL, p, "%s must be %s", a->name, list);
        }
        return REMAT_OK;
    case REMATX_ARG_SIZE2:
        if (!json_is_array(v) || json_array_size(v) != 2 ||
            !is_int_in(json_array_get(v, 0), a->min, a->max) ||
            !is_int_in(json_array_get(v, 1), a->min, a->max)) {
            if (a->max >= (double)INT64_MAX)
                return rematx_error(err, REMAT_EINVAL, p, "%s must be [h, w], both >= %.0f",
                                    a->name, a->min);
            return rematx_error(err, REMAT_EINVAL, p, "%s must be [h, w], both in %.0f..%.0f",
                                a->name, a->min, a->max);
        }
        return REMAT_OK;
    case REMATX_ARG_LAYERS:
        return check_list(v, p, zoo_types, err);
    }
    return rematx_error(err, REMAT_EINVAL, p, "%s: no rule for its kind", a->name);
}

int rematx_layer_check(const json_t *layer, const char *pointer, int zoo_types,
                       struct remat_error *err)
{
    char p[256];
    if (!json_is_object(layer))
        return rematx_error(err, REMAT_EINVAL, pointer, "a layer is an object with a type");
    const json_t *t = json_object_get(layer, "type");
    int type = json_is_string(t) ? rematx_layer_type_find(json_string_value(t)) : -1;
    if (type < 0 || (!zoo_types && !types[type].requestable)) {
        snprintf(p, sizeof p, "%.200s/type", pointer);
        return rematx_error(err, REMAT_EINVAL, p, "unknown layer type");
    }
    const char *key;
    json_t *v;
    json_object_foreach ((json_t *)layer, key, v) {
        snprintf(p, sizeof p, "%.200s", pointer);
        rematx_pointer_append(p, sizeof p, key);
        if (strcmp(key, "type") == 0)
            continue;
        if (strcmp(key, "name") == 0) {
            if (!json_is_string(v) || strlen(json_string_value(v)) >= REMAT_MAX_NAME)
                return rematx_error(err, REMAT_EINVAL, p, "name must be a string under %d bytes",
                                    REMAT_MAX_NAME);
            continue;
        }
        int a = 0;
        while (a < REMATX_N_LAYER_ARGS &&
               (args[a].type != (enum rematx_layer_type)type || strcmp(args[a].name, key) != 0))
            a++;
        if (a == REMATX_N_LAYER_ARGS)
            return rematx_error(err, REMAT_EINVAL, p, "unknown field for a %s layer",
                                types[type].name);
        int rc = check_arg(&args[a], v, p, zoo_types, err);
        if (rc != REMAT_OK)
            return rc;
    }
    for (int a = 0; a < REMATX_N_LAYER_ARGS; a++)
        if (args[a].type == (enum rematx_layer_type)type && args[a].required &&
            json_object_get(layer, args[a].name) == NULL) {
            snprintf(p, sizeof p, "%.200s", pointer);
            rematx_pointer_append(p, sizeof p, args[a].name);
            return rematx_error(err, REMAT_EINVAL, p, "a %s layer needs %s", types[type].name,
                                args[a].name);
        }
    return REMAT_OK;
}

static int check_list(const json_t *list, const char *pointer, int zoo_types,
                      struct remat_error *err)
{
    if (!json_is_array(list) || json_array_size(list) == 0)
        return rematx_error(err, REMAT_EINVAL, pointer, "layers must be a non-empty array");
    if (json_array_size(list) > REMATX_MAX_NESTED_LAYERS)
        return rematx_error(err, REMAT_ELIMIT, pointer, "%zu layers; at most %d",
                            json_array_size(list), REMATX_MAX_NESTED_LAYERS);
    size_t i;
    json_t *l;
    json_array_foreach (list, i, l) {
        char p[256];
        snprintf(p, sizeof p, "%.200s/%zu", pointer, i);
        int rc = rematx_layer_check(l, p, zoo_types, err);
        if (rc != REMAT_OK)
            return rc;
    }
    return REMAT_OK;
}

/* ------------------------------------------------------------------------
 * Readers
 */

int rematx_layer_has(const json_t *layer, enum rematx_layer_arg a)
{
    return a < REMATX_N_LAYER_ARGS && json_object_get(layer, args[a].name) != NULL;
}

json_int_t rematx_layer_int(const json_t *layer, enum rematx_layer_arg a)
{
    const json_t *v = json_object_get(layer, args[a].name);
    return json_is_integer(v) ? json_integer_value(v) : (json_int_t)args[a].dflt;
}

int rematx_layer_bool(const json_t *layer, enum rematx_layer_arg a)
{
    const json_t *v = json_object_get(layer, args[a].name);
    return json_is_boolean(v) ? json_is_true(v) : args[a].dflt != 0;
}

double rematx_layer_number(const json_t *layer, enum rematx_layer_arg a)
{
    const json_t *v = json_object_get(layer, args[a].name);
    return json_is_number(v) ? json_number_value(v) : args[a].dflt;
}

int rematx_layer_choice(const json_t *layer, enum rematx_layer_arg a)
{
    const char *s = json_string_value(json_object_get(layer, args[a].name));
    int k = s != NULL ? choice_index(args[a].choices, s) : -1;
    return k >= 0 ? k : (int)args[a].dflt;
}

void rematx_layer_size2(const json_t *layer, enum rematx_layer_arg a, json_int_t out[2])
{
    const json_t *v = json_object_get(layer, args[a].name);
    for (size_t k = 0; k < 2; k++)
        out[k] = json_is_integer(json_array_get(v, k)) ? json_integer_value(json_array_get(v, k))
                                                       : (json_int_t)args[a].dflt;
}
