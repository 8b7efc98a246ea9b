/* layers.h - the layer builder of layers.cpp, for model.cpp: a JSON layer
 * list's layers appended to a stage, a zoo model's list, and the dtypes a
 * spec names.  Included only by the worker's files that see libtorch's
 * module headers. */
#ifndef REMAT_WORKER_LAYERS_H
#define REMAT_WORKER_LAYERS_H

#include <torch/nn/modules/container/sequential.h>

#include <jansson.h>

#include <string>

#include "shim_private.h"

namespace rw
{

/* Appends layer L (where: its JSON path, for errors) to seq and advances
 * the per-sample shape s; seq_len_hint is the sequence length a token
 * model's layers are sized for.  A Failure names what is wrong. */
void add_layer(torch::nn::Sequential &seq, const json_t *L, Shape &s, const std::string &where,
               int64_t seq_len_hint);

/* A zoo model's layer list (new: the caller owns it), its options checked
 * as rematd checks them; *input_shape (new) its per-sample input shape. */
json_t *zoo_layers(const std::string &name, const json_t *options, json_t **input_shape);

/* fp32, fp16 or bf16 (or their long names); a Failure otherwise. */
c10::ScalarType parse_dtype(const std::string &s);

int64_t elem_size(c10::ScalarType t);

} // namespace rw

#endif
