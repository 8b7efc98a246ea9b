/* zoo.h - the built-in model zoo, written once: rematd reads it for
 * GET /v1/models and for its checks of POST /v1/profiles, and remat-worker
 * expands a zoo model into the layer list its builder turns into stages
 * (docs/worker.md, "Models").
 *
 * A zoo model is a name, its family and description, the input shape it
 * takes when a request gives none, the dtypes it runs in, its options (each
 * with a default and limits), and a function of those options: its layer
 * list, the same JSON a request may give as "layers". */
#ifndef REMATX_ZOO_H
#define REMATX_ZOO_H

#include <stddef.h>

#include <jansson.h>

#include "remat.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most options a zoo model has: the size of the values array the
 * functions below read and fill. */
#define REMATX_ZOO_MAX_OPTIONS 8

struct rematx_zoo_option {
    const char *name;
    json_int_t dflt; /* the value when model_options leaves it out */
    json_int_t min, max;
};

struct rematx_zoo_model {
    const char *name;
    const char *family; /* "cnn", "transformer" */
    const char *description;
    size_t n_input_dims;
    json_int_t input_shape[3]; /* the default input shape, batch dimension excluded */
    /* NULL, or the option whose value is the default input shape's only
     * dimension (gpt's seq_len). */
    const char *input_shape_option;
    const char *const *dtypes; /* NULL-terminated */
    size_t n_options;
    const struct rematx_zoo_option *options; /* in the order GET /v1/models lists them */
    int kind, variant;                       /* zoo.c's own: which expansion, which depth */
};

/* The zoo, in the order GET /v1/models lists it. */
size_t rematx_zoo_count(void);
const struct rematx_zoo_model *rematx_zoo_at(size_t i); /* static storage; NULL past the end */
/* The model of that name (static storage), or NULL. */
const struct rematx_zoo_model *rematx_zoo_find(const char *name);

/* The body of GET /v1/models: {"models": [{name, family, description,
 * default_input_shape, dtypes, model_options (the defaults, only for a
 * model with options)}, ...]}.  Returns: new reference, or NULL when out of
 * memory. */
json_t *rematx_zoo_list_json(void);

/* Checks a request's model_options for model m (NULL: a layer list, which
 * takes no options) and fills values[0..m->n_options) with each option's
 * value, the default where model_options (may be NULL: absent) leaves it out.
 * Returns REMAT_OK, or REMAT_EINVAL with err naming the field
 * ("/model_options" or "/model_options/<name>"): model_options given for a
 * model without options or not an object, an unknown name, a value that is
 * not an integer within the option's limits. */
int rematx_zoo_options(const struct rematx_zoo_model *m, const json_t *model_options,
                       json_int_t values[REMATX_ZOO_MAX_OPTIONS], struct remat_error *err);

/* The default input shape of m with these option values (from
 * rematx_zoo_options).  Returns: new array, or NULL when out of memory. */
json_t *rematx_zoo_input_shape(const struct rematx_zoo_model *m, const json_int_t *values);

/* m's layer list with these option values (from rematx_zoo_options): one
 * entry per stage, each named.  Returns: new array, or NULL when out of
 * memory. */
json_t *rematx_zoo_layers(const struct rematx_zoo_model *m, const json_int_t *values);

#ifdef __cplusplus
}
#endif

#endif
