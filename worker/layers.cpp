/*
 * layers.cpp - the layer builder: a JSON layer list (src/rematx/layers.h)
 * into stages with their shapes inferred, the custom modules it uses
 * (residual and transformer blocks, GPT's embedding), and the zoo's models
 * expanded into such lists by src/rematx/zoo.c (docs/worker.md, "Models").
 * model.cpp builds a model's stages with it.
 *
 * With model.cpp, hf.cpp and opcheck.cpp, the only files of the worker
 * that include libtorch's module headers.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <torch/nn/module.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/pooling.h>

#include <cmath>
#include <string>

#include "layers.h"
#include "rematx/layers.h"
#include "rematx/zoo.h"

namespace rw
{

namespace
{

/* ------------------------------------------------------------------------
 * Custom modules.
 */

struct ResidualBlockImpl : torch::nn::Module {
    torch::nn::Sequential body{nullptr}, down{nullptr};
    ResidualBlockImpl(int64_t in, int64_t planes, int64_t stride, bool bottleneck)
    {
        namespace nn = torch::nn;
        int64_t out = bottleneck ? planes * 4 : planes;
        body = nn::Sequential();
        auto relu = [] { return nn::ReLU(nn::ReLUOptions().inplace(true)); };
        if (bottleneck) {
            /* torchvision's v1.5 bottleneck: the stride sits on the 3x3. */
            body->push_back(nn::Conv2d(nn::Conv2dOptions(in, planes, 1).bias(false)));
            body->push_back(nn::BatchNorm2d(planes));
            body->push_back(relu());
            body->push_back(nn::Conv2d(
                nn::Conv2dOptions(planes, planes, 3).stride(stride).padding(1).bias(false)));
            body->push_back(nn::BatchNorm2d(planes));
            body->push_back(relu());
            body->push_back(nn::Conv2d(nn::Conv2dOptions(planes, out, 1).bias(false)));
            body->push_back(nn::BatchNorm2d(out));
        } else {
            body->push_back(
                nn::Conv2d(nn::Conv2dOptions(in, planes, 3).stride(stride).padding(1).bias(false)));
            body->push_back(nn::BatchNorm2d(planes));
            body->push_back(relu());
            body->push_back(
                nn::Conv2d(nn::Conv2dOptions(planes, planes, 3).padding(1).bias(false)));
            body->push_back(nn::BatchNorm2d(planes));
        }
        register_module("body", body);
        if (stride != 1 || in != out) {
            down =
                nn::Sequential(nn::Conv2d(nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)),
                               nn::BatchNorm2d(out));
            register_module("down", down);
        }
    }
    torch::Tensor forward(torch::Tensor x)
    {
        torch::Tensor y = body->forward(x);
        /* As torchvision: the sum and the ReLU overwrite the last norm's output. */
        y.add_(down ? down->forward(x) : x);
        return y.relu_();
    }
};
TORCH_MODULE(ResidualBlock);

/* A GPT-2 style pre-norm block: causal self-attention and a 4x GELU MLP. */
struct TransformerBlockImpl : torch::nn::Module {
    torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
    torch::nn::Linear qkv{nullptr}, proj{nullptr}, fc1{nullptr}, fc2{nullptr};
    torch::Tensor mask;
    int64_t heads;
    TransformerBlockImpl(int64_t d, int64_t h, int64_t seq) : heads(h)
    {
        namespace nn = torch::nn;
        ln1 = register_module("ln1", nn::LayerNorm(nn::LayerNormOptions({d})));
        qkv = register_module("qkv", nn::Linear(d, 3 * d));
        proj = register_module("proj", nn::Linear(d, d));
        ln2 = register_module("ln2", nn::LayerNorm(nn::LayerNormOptions({d})));
        fc1 = register_module("fc1", nn::Linear(d, 4 * d));
        fc2 = register_module("fc2", nn::Linear(4 * d, d));
        mask = register_buffer("mask", torch::ones({seq, seq}, torch::kBool).triu(1));
    }
    torch::Tensor forward(torch::Tensor x)
    {
        int64_t B = x.size(0), T = x.size(1), D = x.size(2), dh = D / heads;
        auto p = qkv->forward(ln1->forward(x)).view({B, T, 3, heads, dh}).permute({2, 0, 3, 1, 4});
        auto q = p[0], k = p[1], v = p[2];
        auto att = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt((double)dh));
        att = torch::softmax(att.masked_fill(mask.slice(0, 0, T).slice(1, 0, T), -INFINITY), -1);
        auto y = torch::matmul(att, v).transpose(1, 2).reshape({B, T, D});
        x = x + proj->forward(y);
        return x + fc2->forward(torch::gelu(fc1->forward(ln2->forward(x))));
    }
};
TORCH_MODULE(TransformerBlock);

struct GptEmbeddingImpl : torch::nn::Module {
    torch::nn::Embedding tok{nullptr};
    torch::Tensor pos;
    GptEmbeddingImpl(int64_t vocab, int64_t d, int64_t seq)
    {
        tok = register_module("tok", torch::nn::Embedding(vocab, d));
        pos = register_parameter("pos", torch::randn({seq, d}) * 0.02);
    }
    torch::Tensor forward(torch::Tensor ids)
    {
        return tok->forward(ids) + pos.slice(0, 0, ids.size(1));
    }
};
TORCH_MODULE(GptEmbedding);

/* ------------------------------------------------------------------------
 * The layer builder: a JSON layer list to stages.
 */

void need(bool ok, const std::string &where, const std::string &why)
{
    if (!ok)
        throw Failure(where + ": " + why);
}

void need_chw(const Shape &s, const std::string &where)
{
    need(s.size() == 3, where, "expects a [C,H,W] input, got " + shape_str(s));
}

int64_t pool_out(int64_t n, int64_t k, int64_t s, int64_t p)
{
    return (n + 2 * p - k) / s + 1;
}

/* An argument by the layer table (src/rematx/layers.h): the layer's value
 * or the table's default.  read_model_spec checked every layer by the same
 * table, so the kinds are right; what the table leaves to the builder (a
 * shape that fits, a positive count) is checked here. */
int64_t arg(const json_t *L, enum rematx_layer_arg a)
{
    return rematx_layer_int(L, a);
}

/* A kernel that fits the input, for convolutions and pools. */
void need_fits(const Shape &s, int64_t k, int64_t pd, int64_t h, int64_t ww, const std::string &w)
{
    need(s[1] + 2 * pd >= k && s[2] + 2 * pd >= k && h > 0 && ww > 0, w,
         "kernel " + std::to_string(k) + "x" + std::to_string(k) + " does not fit the input " +
             shape_str(s));
}

} // namespace

/* Appends one layer to seq and advances the per-sample shape s. */
void add_layer(torch::nn::Sequential &seq, const json_t *L, Shape &s, const std::string &where,
               int64_t seq_len_hint)
{
    namespace nn = torch::nn;
    std::string type = jstr(L, "type", "");
    std::string w = where + " (" + (type.empty() ? "?" : type) + ")";
    switch (rematx_layer_type_find(type.c_str())) {
    case REMATX_LAYER_conv2d: {
        need_chw(s, w);
        int64_t out = arg(L, REMATX_ARG_conv2d_out_channels),
                k = arg(L, REMATX_ARG_conv2d_kernel_size), st = arg(L, REMATX_ARG_conv2d_stride),
                pd = arg(L, REMATX_ARG_conv2d_padding);
        need(out > 0 && k > 0 && st > 0, w,
             "out_channels, kernel_size and stride must be positive, padding not negative");
        int64_t h = pool_out(s[1], k, st, pd), ww = pool_out(s[2], k, st, pd);
        need_fits(s, k, pd, h, ww, w);
        int64_t groups = arg(L, REMATX_ARG_conv2d_groups);
        need(groups > 0 && s[0] % groups == 0 && out % groups == 0, w,
             "groups must divide the input channels " + std::to_string(s[0]) +
                 " and out_channels " + std::to_string(out));
        seq->push_back(nn::Conv2d(nn::Conv2dOptions(s[0], out, k)
                                      .stride(st)
                                      .padding(pd)
                                      .groups(groups)
                                      .bias(rematx_layer_bool(L, REMATX_ARG_conv2d_bias) != 0)));
        s = {out, h, ww};
        break;
    }
    case REMATX_LAYER_batchnorm2d:
        need_chw(s, w);
        seq->push_back(nn::BatchNorm2d(s[0]));
        break;
    case REMATX_LAYER_relu:
        seq->push_back(nn::ReLU());
        break;
    case REMATX_LAYER_flatten:
        seq->push_back(nn::Flatten());
        s = {numel(s)};
        break;
    case REMATX_LAYER_dropout:
        seq->push_back(nn::Dropout(rematx_layer_number(L, REMATX_ARG_dropout_p)));
        break;
    case REMATX_LAYER_maxpool2d:
    case REMATX_LAYER_avgpool2d: {
        need_chw(s, w);
        bool max = type == "maxpool2d";
        int64_t k =
            arg(L, max ? REMATX_ARG_maxpool2d_kernel_size : REMATX_ARG_avgpool2d_kernel_size);
        enum rematx_layer_arg sa = max ? REMATX_ARG_maxpool2d_stride : REMATX_ARG_avgpool2d_stride;
        /* The stride's default is the kernel's size, as PyTorch's. */
        int64_t st = rematx_layer_has(L, sa) ? arg(L, sa) : k,
                pd = arg(L, max ? REMATX_ARG_maxpool2d_padding : REMATX_ARG_avgpool2d_padding);
        need(k > 0 && st > 0 && 2 * pd <= k, w,
             "kernel_size and stride must be positive, padding at most half the kernel");
        int64_t h = pool_out(s[1], k, st, pd), ww = pool_out(s[2], k, st, pd);
        need_fits(s, k, pd, h, ww, w);
        if (max)
            seq->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(k).stride(st).padding(pd)));
        else
            seq->push_back(nn::AvgPool2d(nn::AvgPool2dOptions(k).stride(st).padding(pd)));
        s = {s[0], h, ww};
        break;
    }
    case REMATX_LAYER_adaptive_avgpool2d: {
        need_chw(s, w);
        json_int_t o[2];
        rematx_layer_size2(L, REMATX_ARG_adaptive_avgpool2d_output_size, o);
        seq->push_back(nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions({o[0], o[1]})));
        s = {s[0], o[0], o[1]};
        break;
    }
    case REMATX_LAYER_linear: {
        need(!s.empty(), w, "expects an input with a feature dimension");
        int64_t out = arg(L, REMATX_ARG_linear_out_features);
        need(out > 0, w, "out_features must be positive");
        bool bias = rematx_layer_bool(L, REMATX_ARG_linear_bias) != 0;
        seq->push_back(nn::Linear(nn::LinearOptions(s.back(), out).bias(bias)));
        s.back() = out;
        break;
    }
    case REMATX_LAYER_residual_block: {
        need_chw(s, w);
        /* The table's choices: "basic|bottleneck". */
        bool bottleneck = rematx_layer_choice(L, REMATX_ARG_residual_block_variant) == 1;
        int64_t planes = arg(L, REMATX_ARG_residual_block_planes),
                stride = arg(L, REMATX_ARG_residual_block_stride);
        need(planes > 0 && stride > 0, w, "planes and stride must be positive");
        int64_t out = bottleneck ? 4 * planes : planes;
        seq->push_back(ResidualBlock(s[0], planes, stride, bottleneck));
        s = {out, (s[1] - 1) / stride + 1, (s[2] - 1) / stride + 1};
        break;
    }
    case REMATX_LAYER_transformer_block: {
        need(s.size() == 2, w, "expects a [seq, d_model] input, got " + shape_str(s));
        /* d_model's default is the input's. */
        int64_t d = rematx_layer_has(L, REMATX_ARG_transformer_block_d_model)
                        ? arg(L, REMATX_ARG_transformer_block_d_model)
                        : s[1],
                h = arg(L, REMATX_ARG_transformer_block_heads);
        need(d == s[1], w,
             "d_model " + std::to_string(d) + " does not match the input " + shape_str(s));
        need(h > 0 && d % h == 0, w, "heads must divide d_model");
        seq->push_back(TransformerBlock(d, h, s[0]));
        break;
    }
    case REMATX_LAYER_gpt_embedding: {
        need(s.size() == 1, w, "expects [seq_len] token ids, got " + shape_str(s));
        int64_t vocab = arg(L, REMATX_ARG_gpt_embedding_vocab),
                d = arg(L, REMATX_ARG_gpt_embedding_d_model);
        seq->push_back(GptEmbedding(vocab, d, std::max(s[0], seq_len_hint)));
        s = {s[0], d};
        break;
    }
    case REMATX_LAYER_layernorm:
        need(!s.empty(), w, "expects an input with a feature dimension");
        seq->push_back(nn::LayerNorm(nn::LayerNormOptions({s.back()})));
        break;
    case REMATX_LAYER_sequential: {
        const json_t *inner = json_object_get(L, "layers");
        for (size_t k = 0; k < json_array_size(inner); k++)
            add_layer(seq, json_array_get(inner, k), s,
                      where + ".layers[" + std::to_string(k) + "]", seq_len_hint);
        break;
    }
    default:
        /* read_model_spec's check refuses what the table does not have. */
        throw Failure(w + ": unknown layer type");
    }
}

/* A zoo model's layer list (new), its options checked as rematd checks them. */
json_t *zoo_layers(const std::string &name, const json_t *options, json_t **input_shape)
{
    const struct rematx_zoo_model *zm = rematx_zoo_find(name.c_str());
    if (zm == nullptr) {
        std::string names;
        for (size_t i = 0; i < rematx_zoo_count(); i++)
            names += std::string(i ? ", " : "") + rematx_zoo_at(i)->name;
        throw Failure("model: unknown zoo model \"" + name + "\" (" + names + ")");
    }
    json_int_t values[REMATX_ZOO_MAX_OPTIONS];
    struct remat_error err = {};
    if (rematx_zoo_options(zm, options, values, &err) != REMAT_OK)
        throw Failure(std::string("model_options: ") + err.message);
    json_t *layers = rematx_zoo_layers(zm, values);
    *input_shape = rematx_zoo_input_shape(zm, values);
    if (layers == nullptr || *input_shape == nullptr) {
        json_decref(layers);
        json_decref(*input_shape);
        throw std::bad_alloc();
    }
    return layers;
}

c10::ScalarType parse_dtype(const std::string &s)
{
    if (s == "fp32" || s == "float32")
        return c10::kFloat;
    if (s == "fp16" || s == "float16")
        return c10::kHalf;
    if (s == "bf16" || s == "bfloat16")
        return c10::kBFloat16;
    throw Failure("dtype: \"" + s + "\" is not one of fp32, fp16, bf16");
}

int64_t elem_size(c10::ScalarType t)
{
    return (int64_t)c10::elementSize(t);
}

} // namespace rw
