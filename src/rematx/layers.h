/* layers.h - the layer vocabulary, written once: every layer type a layer
 * list may hold, with its arguments, their kinds, whether each is required,
 * its default and its bounds; and the limits on a profile spec that rematd
 * and remat-worker both hold it to.
 *
 * rematd checks a request's layer list by these tables
 * (rematx_layer_check, route_profiles_create.c); remat-worker checks the
 * spec it is given the same way and reads each argument through them
 * (rematx_layer_int and friends, worker/model.cpp), so an argument's
 * default lives here too; the zoo's expansions (zoo.c) are held to them by
 * tests/test_zoo.c, and the Python package's reverse mapping
 * (python/remat/_one.py, layer_of) by tests/python/test_layers.py, which
 * reads the rows below.  openapi.yaml's Layer schemas and docs/worker.md
 * ("Models") are the contract written out.
 *
 * A new layer type: a row in REMATX_LAYER_TYPES and one per argument in
 * REMATX_LAYER_ARGS, its module in add_layer (worker/model.cpp), its schema
 * in openapi.yaml, and, when PyTorch has the same module, its case in
 * layer_of.  Keep each row on one line: the Python test reads them. */
#ifndef REMATX_LAYERS_H
#define REMATX_LAYERS_H

#include <stdint.h>

#include <jansson.h>

#include "remat.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest count a layer argument may hold (channels, features, kernel
 * sizes) and the largest dimension of a request's input shape. */
#define REMATX_MAX_DIM (1 << 20)
/* The largest batch_size of a profiling job: rematd refuses more, and
 * remat-worker does too (a spec run by hand, `remat-worker --profile`). */
#define REMATX_MAX_BATCH (1 << 16)
/* The most layers in a nested "sequential" list (the top-level list is
 * bounded by rematd's max_stages). */
#define REMATX_MAX_NESTED_LAYERS 1000

/* The layer types: X(type, origin).  origin REQUEST: a request's layer
 * list may hold it; ZOO: only the zoo's own expansions do (gpt's
 * embedding and head), so rematd answers "unknown layer type" for it. */
#define REMATX_LAYER_TYPES(X)                                                                      \
    X(conv2d, REQUEST)                                                                             \
    X(batchnorm2d, REQUEST)                                                                        \
    X(relu, REQUEST)                                                                               \
    X(flatten, REQUEST)                                                                            \
    X(dropout, REQUEST)                                                                            \
    X(maxpool2d, REQUEST)                                                                          \
    X(avgpool2d, REQUEST)                                                                          \
    X(adaptive_avgpool2d, REQUEST)                                                                 \
    X(linear, REQUEST)                                                                             \
    X(residual_block, REQUEST)                                                                     \
    X(transformer_block, REQUEST)                                                                  \
    X(sequential, REQUEST)                                                                         \
    X(gpt_embedding, ZOO)                                                                          \
    X(layernorm, ZOO)

/* What an argument takes:
 *  INT:    a JSON integer in [min, max].
 *  BOOL:   true or false (dflt 1 or 0).
 *  NUMBER: a JSON number in [min, max].
 *  CHOICE: one of the strings of choices, '|'-separated; the first is the
 *          default.
 *  SIZE2:  [h, w], two integers in [min, max] (dflt for both).
 *  LAYERS: a non-empty layer list of at most REMATX_MAX_NESTED_LAYERS. */
enum rematx_arg_kind {
    REMATX_ARG_INT,
    REMATX_ARG_BOOL,
    REMATX_ARG_NUMBER,
    REMATX_ARG_CHOICE,
    REMATX_ARG_SIZE2,
    REMATX_ARG_LAYERS
};

/* No default in the table: the argument is required, or its default is the
 * builder's rule (a pool's stride is its kernel_size, a transformer
 * block's d_model the input's). */
#define REMATX_NO_DEFAULT (-1)

/* The arguments, by type, in the order a layer's checks run:
 * X(type, arg, kind, required, dflt, min, max, choices).  Besides these
 * every layer has "type" and may have "name" (under REMAT_MAX_NAME bytes).
 * The bounds of the counts are rematd's since its first release (0 is let
 * through to the builder, which says what it needs). */
#define REMATX_LAYER_ARGS(X)                                                                       \
    X(conv2d, out_channels, INT, 1, REMATX_NO_DEFAULT, 0, REMATX_MAX_DIM, NULL)                    \
    X(conv2d, kernel_size, INT, 0, 3, 0, REMATX_MAX_DIM, NULL)                                     \
    X(conv2d, stride, INT, 0, 1, 0, REMATX_MAX_DIM, NULL)                                          \
    X(conv2d, padding, INT, 0, 0, 0, REMATX_MAX_DIM, NULL)                                         \
    X(conv2d, groups, INT, 0, 1, 0, REMATX_MAX_DIM, NULL)                                          \
    X(conv2d, bias, BOOL, 0, 1, 0, 1, NULL)                                                        \
    X(dropout, p, NUMBER, 0, 0.5, 0, 1, NULL)                                                      \
    X(maxpool2d, kernel_size, INT, 0, 2, 0, REMATX_MAX_DIM, NULL)                                  \
    X(maxpool2d, stride, INT, 0, REMATX_NO_DEFAULT, 0, REMATX_MAX_DIM, NULL)                       \
    X(maxpool2d, padding, INT, 0, 0, 0, REMATX_MAX_DIM, NULL)                                      \
    X(avgpool2d, kernel_size, INT, 0, 2, 0, REMATX_MAX_DIM, NULL)                                  \
    X(avgpool2d, stride, INT, 0, REMATX_NO_DEFAULT, 0, REMATX_MAX_DIM, NULL)                       \
    X(avgpool2d, padding, INT, 0, 0, 0, REMATX_MAX_DIM, NULL)                                      \
    X(adaptive_avgpool2d, output_size, SIZE2, 0, 1, 1, INT64_MAX, NULL)                            \
    X(linear, out_features, INT, 1, REMATX_NO_DEFAULT, 0, REMATX_MAX_DIM, NULL)                    \
    X(linear, bias, BOOL, 0, 1, 0, 1, NULL)                                                        \
    X(residual_block, planes, INT, 1, REMATX_NO_DEFAULT, 0, REMATX_MAX_DIM, NULL)                  \
    X(residual_block, stride, INT, 0, 1, 0, REMATX_MAX_DIM, NULL)                                  \
    X(residual_block, variant, CHOICE, 0, 0, 0, 0, "basic|bottleneck")                             \
    X(transformer_block, d_model, INT, 0, REMATX_NO_DEFAULT, 0, REMATX_MAX_DIM, NULL)              \
    X(transformer_block, heads, INT, 0, 8, 0, REMATX_MAX_DIM, NULL)                                \
    X(sequential, layers, LAYERS, 1, REMATX_NO_DEFAULT, 0, 0, NULL)                                \
    X(gpt_embedding, vocab, INT, 1, REMATX_NO_DEFAULT, 1, REMATX_MAX_DIM, NULL)                    \
    X(gpt_embedding, d_model, INT, 1, REMATX_NO_DEFAULT, 1, REMATX_MAX_DIM, NULL)

enum rematx_layer_type {
#define REMATX__X(type, origin) REMATX_LAYER_##type,
    REMATX_LAYER_TYPES(REMATX__X)
#undef REMATX__X
        REMATX_N_LAYER_TYPES
};

/* One enumerator per row of REMATX_LAYER_ARGS: REMATX_ARG_conv2d_stride. */
enum rematx_layer_arg {
#define REMATX__X(type, arg, kind, required, dflt, min, max, choices) REMATX_ARG_##type##_##arg,
    REMATX_LAYER_ARGS(REMATX__X)
#undef REMATX__X
        REMATX_N_LAYER_ARGS
};

struct rematx_layer_arg_info {
    enum rematx_layer_type type;
    const char *name;
    enum rematx_arg_kind kind;
    int required;
    double dflt; /* REMATX_NO_DEFAULT, or the value when the layer leaves it out */
    double min, max;
    const char *choices; /* CHOICE's, '|'-separated; NULL for the others */
};

/* A type's name (static storage; NULL out of range), whether a request may
 * give it (else only the zoo emits it), and the type of a name (-1 when
 * none). */
const char *rematx_layer_type_name(int type);
int rematx_layer_type_requestable(int type);
int rematx_layer_type_find(const char *name);
/* Row a of REMATX_LAYER_ARGS (static storage; NULL out of range). */
const struct rematx_layer_arg_info *rematx_layer_arg_at(int a);

/* Checks one layer object by the tables, and a sequential's inner layers
 * in turn: its type (a request's types only, unless zoo_types), each
 * member's name and value, the required ones present.  pointer is the
 * layer's JSON pointer ("/layers/3"), which errors extend.  Returns
 * REMAT_OK; REMAT_EINVAL with err naming the member ("/layers/3/stride"),
 * or REMAT_ELIMIT for a nested list over REMATX_MAX_NESTED_LAYERS. */
int rematx_layer_check(const json_t *layer, const char *pointer, int zoo_types,
                       struct remat_error *err);

/* An argument of a layer rematx_layer_check passed: its value, or the
 * table's default when the layer leaves it out (REMATX_NO_DEFAULT for an
 * argument without one).  Each is for its kind: INT (int), BOOL (bool),
 * NUMBER (number), CHOICE (choice: the index in choices), SIZE2 (size2). */
int rematx_layer_has(const json_t *layer, enum rematx_layer_arg a);
json_int_t rematx_layer_int(const json_t *layer, enum rematx_layer_arg a);
int rematx_layer_bool(const json_t *layer, enum rematx_layer_arg a);
double rematx_layer_number(const json_t *layer, enum rematx_layer_arg a);
int rematx_layer_choice(const json_t *layer, enum rematx_layer_arg a);
void rematx_layer_size2(const json_t *layer, enum rematx_layer_arg a, json_int_t out[2]);

#ifdef __cplusplus
}
#endif

#endif
