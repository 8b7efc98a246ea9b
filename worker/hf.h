/* hf.h - a transformer from its Hugging Face config (src/rematx/hfconfig.h)
 * as a chain of stages: the embedding, one stage per decoder block, the
 * final norm with the head and the loss.  Included by model.cpp and hf.cpp only, the
 * two files of the worker that see libtorch's module headers. */
#ifndef REMAT_WORKER_HF_H
#define REMAT_WORKER_HF_H

#include <torch/nn/modules/container/sequential.h>

#include <string>
#include <vector>

#include "rematx/hfconfig.h"

namespace rw
{

struct HfStage {
    std::string name, type;
    torch::nn::Sequential seq;
    std::vector<int64_t> out_shape; /* per sample: [seq, hidden], the loss's [] */
};

/* The stages of h at seq_len tokens, random weights from a fixed seed.
 * Their distinct parameters number exactly rematx_hf_params(h), stage by
 * stage as rematx_hf_embedding/block/head_params count them: a Failure
 * otherwise, so that what is measured is the model the config describes. */
std::vector<HfStage> hf_stages(const struct rematx_hf &h, int64_t seq_len);

} // namespace rw

#endif
