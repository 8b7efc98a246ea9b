/*
 * shim.cpp - remat-worker's only C++: builds a model with libtorch, measures
 * every stage, and runs plans for real (worker/shim.h is its contract, and
 * docs/worker.md says what each measured number means).
 *
 * One translation unit on purpose: <torch/torch.h> alone costs 15-28 s of
 * compile time on a small machine.
 *
 * How a model runs here.  A model is a chain of stages, each a
 * torch::nn::Sequential.  Both the measurement and the plan executor drive
 * the chain one stage at a time: a grad-enabled forward of stage i takes a
 * fresh leaf that shares x_{i-1}'s storage, and its backward is one
 * torch::autograd::backward call on x_i with δ_i, which leaves δ_{i-1} in the
 * leaf's grad and ∂W_i in the parameters'.  So every op of a schedule
 * (docs/memory-model.md: F_none, F_ck, F_all, loss, B) is one call here, and
 * what the measurement of a stage sees is what the same op costs inside a
 * plan: the memory model's rules and the executor describe one thing.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <c10/core/CPUAllocator.h>
#include <torch/torch.h>

#ifdef REMAT_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "shim.h"

namespace
{

/* ------------------------------------------------------------------------
 * Failures.  Each carries the one line the job's reason will say.
 */

struct Failure : std::runtime_error {
    bool retryable;
    bool abandoned;
    Failure(const std::string &what, bool retry = false, bool abandon = false)
        : std::runtime_error(what), retryable(retry), abandoned(abandon)
    {
    }
};

/* The first line of a libtorch message: its backtraces are many lines long. */
std::string first_line(const char *msg)
{
    std::string s(msg != nullptr ? msg : "");
    size_t nl = s.find('\n');
    if (nl != std::string::npos)
        s.resize(nl);
    if (s.size() > 300)
        s.resize(300);
    return s;
}

bool is_oom(const std::string &msg)
{
    return msg.find("out of memory") != std::string::npos ||
           msg.find("can't allocate memory") != std::string::npos;
}

/* ------------------------------------------------------------------------
 * The CPU counting allocator.  oneDNN's raw_allocate insists that a DataPtr's
 * context is its data pointer, so the size of each block lives in a side
 * table under a lock instead.  The state is allocated once and never freed:
 * libtorch frees static tensors after our statics would be destroyed.
 */

struct CpuCounts {
    std::mutex lock;
    std::unordered_map<void *, size_t> sizes;
    int64_t current = 0;
    int64_t peak = 0;
    int64_t limit = 0; /* 0: none */
};

CpuCounts *cpu_counts = nullptr;

void counting_free(void *p)
{
    if (p == nullptr)
        return;
    {
        std::lock_guard<std::mutex> g(cpu_counts->lock);
        auto it = cpu_counts->sizes.find(p);
        if (it != cpu_counts->sizes.end()) {
            cpu_counts->current -= (int64_t)it->second;
            cpu_counts->sizes.erase(it);
        }
    }
    std::free(p);
}

c10::DataPtr counting_allocate(size_t n)
{
    void *p = nullptr;
    if (n > 0) {
        {
            std::lock_guard<std::mutex> g(cpu_counts->lock);
            if (cpu_counts->limit > 0 && cpu_counts->current + (int64_t)n > cpu_counts->limit)
                TORCH_CHECK(false, "CPU out of memory: tried to allocate ", n, " bytes with ",
                            cpu_counts->current, " bytes live (the worker's limit is ",
                            cpu_counts->limit, " bytes)");
        }
        /* 64-byte alignment, as c10's own CPU allocator gives. */
        if (posix_memalign(&p, 64, n) != 0)
            TORCH_CHECK(false, "CPU out of memory: cannot allocate ", n, " bytes");
        std::lock_guard<std::mutex> g(cpu_counts->lock);
        cpu_counts->sizes[p] = n;
        cpu_counts->current += (int64_t)n;
        cpu_counts->peak = std::max(cpu_counts->peak, cpu_counts->current);
    }
    return {p, p, &counting_free, c10::Device(c10::DeviceType::CPU)};
}

struct CountingAllocator final : c10::Allocator {
#ifdef REMAT_TORCH_ALLOCATE_CONST
    c10::DataPtr allocate(size_t n) const override
    {
        return counting_allocate(n);
    }
#else
    c10::DataPtr allocate(size_t n) override
    {
        return counting_allocate(n);
    }
#endif
    c10::DeleterFnPtr raw_deleter() const override
    {
        return &counting_free;
    }
#ifdef REMAT_TORCH_HAS_COPY_DATA
    void copy_data(void *dest, const void *src, std::size_t count) const override
    {
        std::memcpy(dest, src, count);
    }
#endif
};

CountingAllocator *counting_allocator = nullptr;

/* ------------------------------------------------------------------------
 * The device: where tensors live, how live bytes are read, how time is taken.
 */

struct Device {
    c10::Device dev{c10::DeviceType::CPU};
    bool cuda = false;
    int index = 0;

    int64_t current() const
    {
#ifdef REMAT_TORCH_CUDA
        if (cuda)
            return (int64_t)c10::cuda::CUDACachingAllocator::getDeviceStats(index)
                .allocated_bytes[0]
                .current;
#endif
        std::lock_guard<std::mutex> g(cpu_counts->lock);
        return cpu_counts->current;
    }
    int64_t peak() const
    {
#ifdef REMAT_TORCH_CUDA
        if (cuda)
            return (int64_t)c10::cuda::CUDACachingAllocator::getDeviceStats(index)
                .allocated_bytes[0]
                .peak;
#endif
        std::lock_guard<std::mutex> g(cpu_counts->lock);
        return cpu_counts->peak;
    }
    void reset_peak() const
    {
#ifdef REMAT_TORCH_CUDA
        if (cuda) {
            c10::cuda::CUDACachingAllocator::resetPeakStats(index);
            return;
        }
#endif
        std::lock_guard<std::mutex> g(cpu_counts->lock);
        cpu_counts->peak = cpu_counts->current;
    }
    void sync() const
    {
#ifdef REMAT_TORCH_CUDA
        if (cuda)
            c10::cuda::device_synchronize();
#endif
    }
    /* Gives cached blocks back after a failure, so the next job starts clean. */
    void release_cache() const
    {
#ifdef REMAT_TORCH_CUDA
        if (cuda)
            c10::cuda::CUDACachingAllocator::emptyCache();
#endif
    }
};

Device g_device;
bool g_open = false;

/* Times a region: CUDA events on a GPU (the device's own clock, no host
 * gaps), the steady clock on CPU. */
struct Timer {
    const Device &d;
    std::chrono::steady_clock::time_point t0;
#ifdef REMAT_TORCH_CUDA
    at::cuda::CUDAEvent e0{cudaEventDefault}, e1{cudaEventDefault};
#endif
    explicit Timer(const Device &dev) : d(dev)
    {
    }
    void start()
    {
#ifdef REMAT_TORCH_CUDA
        if (d.cuda) {
            e0.record();
            return;
        }
#endif
        t0 = std::chrono::steady_clock::now();
    }
    double stop_ms()
    {
#ifdef REMAT_TORCH_CUDA
        if (d.cuda) {
            e1.record();
            e1.synchronize();
            return (double)e0.elapsed_time(e1);
        }
#endif
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
            .count();
    }
};

/* ------------------------------------------------------------------------
 * Layers.  Shapes are per sample (the batch dimension is left out).
 */

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape &s)
{
    std::string r = "[";
    for (size_t i = 0; i < s.size(); i++)
        r += (i ? "," : "") + std::to_string(s[i]);
    return r + "]";
}

int64_t numel(const Shape &s)
{
    int64_t n = 1;
    for (int64_t d : s)
        n *= d;
    return n;
}

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
 * Specs: a JSON layer list (or a zoo name, which becomes one) to stages.
 */

struct Stage {
    std::string name;
    std::string type;
    torch::nn::Sequential seq;
    Shape in_shape, out_shape;
    int64_t param_bytes = 0;
};

struct Model {
    std::string name;
    std::vector<Stage> stages;
    Shape input_shape;
    bool token_input = false;
    int64_t vocab = 0;
    int64_t batch = 1;
    c10::ScalarType dtype = c10::kFloat;
    std::string dtype_name = "fp32";
};

std::string jstr(const json_t *o, const char *key, const char *dflt)
{
    const json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : dflt;
}

int64_t jint(const json_t *o, const char *key, int64_t dflt, const std::string &where)
{
    const json_t *v = json_object_get(o, key);
    if (v == nullptr || json_is_null(v))
        return dflt;
    if (!json_is_integer(v))
        throw Failure(where + ": " + key + " must be an integer");
    return (int64_t)json_integer_value(v);
}

/* kernel_size and friends: an integer or a [h, w] pair. */
std::pair<int64_t, int64_t> jpair(const json_t *o, const char *key, int64_t dflt,
                                  const std::string &where)
{
    const json_t *v = json_object_get(o, key);
    if (json_is_array(v) && json_array_size(v) == 2 && json_is_integer(json_array_get(v, 0)) &&
        json_is_integer(json_array_get(v, 1)))
        return {json_integer_value(json_array_get(v, 0)), json_integer_value(json_array_get(v, 1))};
    int64_t x = jint(o, key, dflt, where);
    return {x, x};
}

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

/* Appends one layer to seq and advances the per-sample shape s. */
void add_layer(torch::nn::Sequential &seq, const json_t *L, Shape &s, const std::string &where,
               int64_t seq_len_hint)
{
    namespace nn = torch::nn;
    need(json_is_object(L), where, "a layer must be an object");
    std::string type = jstr(L, "type", "");
    std::string w = where + " (" + (type.empty() ? "?" : type) + ")";
    need(!type.empty(), w, "type is missing");
    if (type == "conv2d") {
        need_chw(s, w);
        int64_t out = jint(L, "out_channels", -1, w);
        auto k = jpair(L, "kernel_size", 3, w), st = jpair(L, "stride", 1, w),
             pd = jpair(L, "padding", 0, w);
        need(out > 0 && k.first > 0 && k.second > 0 && st.first > 0 && st.second > 0 &&
                 pd.first >= 0 && pd.second >= 0,
             w, "out_channels, kernel_size and stride must be positive, padding not negative");
        int64_t h = pool_out(s[1], k.first, st.first, pd.first),
                ww = pool_out(s[2], k.second, st.second, pd.second);
        need(s[1] + 2 * pd.first >= k.first && s[2] + 2 * pd.second >= k.second && h > 0 && ww > 0,
             w,
             "kernel " + std::to_string(k.first) + "x" + std::to_string(k.second) +
                 " does not fit the input " + shape_str(s));
        int64_t groups = jint(L, "groups", 1, w);
        need(groups > 0 && s[0] % groups == 0 && out % groups == 0, w,
             "groups must divide the input channels " + std::to_string(s[0]) +
                 " and out_channels " + std::to_string(out));
        bool bias = !json_is_false(json_object_get(L, "bias"));
        seq->push_back(nn::Conv2d(nn::Conv2dOptions(s[0], out, {k.first, k.second})
                                      .stride({st.first, st.second})
                                      .padding({pd.first, pd.second})
                                      .groups(groups)
                                      .bias(bias)));
        s = {out, h, ww};
    } else if (type == "batchnorm2d") {
        need_chw(s, w);
        seq->push_back(nn::BatchNorm2d(s[0]));
    } else if (type == "relu") {
        seq->push_back(nn::ReLU());
    } else if (type == "flatten") {
        seq->push_back(nn::Flatten());
        s = {numel(s)};
    } else if (type == "dropout") {
        const json_t *p = json_object_get(L, "p");
        double pv = json_is_number(p) ? json_number_value(p) : 0.5;
        need(pv >= 0 && pv <= 1, w, "p must be in [0, 1]");
        seq->push_back(nn::Dropout(pv));
    } else if (type == "maxpool2d" || type == "avgpool2d") {
        need_chw(s, w);
        auto k = jpair(L, "kernel_size", 2, w);
        auto st = jpair(L, "stride", k.first, w), pd = jpair(L, "padding", 0, w);
        need(k.first > 0 && k.second > 0 && st.first > 0 && st.second > 0 && pd.first >= 0 &&
                 pd.second >= 0 && 2 * pd.first <= k.first && 2 * pd.second <= k.second,
             w, "kernel_size and stride must be positive, padding at most half the kernel");
        int64_t h = pool_out(s[1], k.first, st.first, pd.first),
                ww = pool_out(s[2], k.second, st.second, pd.second);
        need(s[1] + 2 * pd.first >= k.first && s[2] + 2 * pd.second >= k.second && h > 0 && ww > 0,
             w,
             "kernel " + std::to_string(k.first) + "x" + std::to_string(k.second) +
                 " does not fit the input " + shape_str(s));
        if (type == "maxpool2d")
            seq->push_back(nn::MaxPool2d(nn::MaxPool2dOptions({k.first, k.second})
                                             .stride({st.first, st.second})
                                             .padding({pd.first, pd.second})));
        else
            seq->push_back(nn::AvgPool2d(nn::AvgPool2dOptions({k.first, k.second})
                                             .stride({st.first, st.second})
                                             .padding({pd.first, pd.second})));
        s = {s[0], h, ww};
    } else if (type == "adaptive_avgpool2d") {
        need_chw(s, w);
        auto o = jpair(L, "output_size", 1, w);
        need(o.first > 0 && o.second > 0, w, "output_size must be positive");
        seq->push_back(nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions({o.first, o.second})));
        s = {s[0], o.first, o.second};
    } else if (type == "linear") {
        need(!s.empty(), w, "expects an input with a feature dimension");
        int64_t out = jint(L, "out_features", -1, w);
        need(out > 0, w, "out_features must be positive");
        if (json_is_integer(json_object_get(L, "in_features")))
            need(jint(L, "in_features", 0, w) == s.back(), w,
                 "in_features " + std::to_string(jint(L, "in_features", 0, w)) +
                     " does not match the input " + shape_str(s));
        bool bias = !json_is_false(json_object_get(L, "bias"));
        seq->push_back(nn::Linear(nn::LinearOptions(s.back(), out).bias(bias)));
        s.back() = out;
    } else if (type == "residual_block") {
        need_chw(s, w);
        std::string v = jstr(L, "variant", "basic");
        need(v == "basic" || v == "bottleneck", w, "variant must be \"basic\" or \"bottleneck\"");
        int64_t planes = jint(L, "planes", -1, w), stride = jint(L, "stride", 1, w);
        need(planes > 0 && stride > 0, w, "planes and stride must be positive");
        int64_t out = v == "bottleneck" ? 4 * planes : planes;
        seq->push_back(ResidualBlock(s[0], planes, stride, v == "bottleneck"));
        s = {out, (s[1] - 1) / stride + 1, (s[2] - 1) / stride + 1};
    } else if (type == "transformer_block") {
        need(s.size() == 2, w, "expects a [seq, d_model] input, got " + shape_str(s));
        int64_t d = jint(L, "d_model", s[1], w), h = jint(L, "heads", 8, w);
        need(d == s[1], w,
             "d_model " + std::to_string(d) + " does not match the input " + shape_str(s));
        need(h > 0 && d % h == 0, w, "heads must divide d_model");
        seq->push_back(TransformerBlock(d, h, s[0]));
    } else if (type == "gpt_embedding") {
        need(s.size() == 1, w, "expects [seq_len] token ids, got " + shape_str(s));
        int64_t vocab = jint(L, "vocab", 50257, w), d = jint(L, "d_model", 768, w);
        need(vocab > 0 && d > 0, w, "vocab and d_model must be positive");
        seq->push_back(GptEmbedding(vocab, d, std::max(s[0], seq_len_hint)));
        s = {s[0], d};
    } else if (type == "layernorm") {
        need(!s.empty(), w, "expects an input with a feature dimension");
        seq->push_back(nn::LayerNorm(nn::LayerNormOptions({s.back()})));
    } else if (type == "sequential") {
        const json_t *inner = json_object_get(L, "layers");
        need(json_is_array(inner) && json_array_size(inner) > 0, w,
             "layers must be a non-empty list");
        for (size_t k = 0; k < json_array_size(inner); k++)
            add_layer(seq, json_array_get(inner, k), s,
                      where + ".layers[" + std::to_string(k) + "]", seq_len_hint);
    } else {
        throw Failure(w + ": unknown layer type");
    }
}

/* ---- the zoo, written as layer lists ---- */

json_t *L_conv(int64_t out, int64_t k, int64_t s, int64_t p, bool bias = true)
{
    return json_pack("{s:s, s:I, s:I, s:I, s:I, s:b}", "type", "conv2d", "out_channels",
                     (json_int_t)out, "kernel_size", (json_int_t)k, "stride", (json_int_t)s,
                     "padding", (json_int_t)p, "bias", bias);
}
json_t *L_simple(const char *type)
{
    return json_pack("{s:s}", "type", type);
}
json_t *L_pool(const char *type, int64_t k, int64_t s, int64_t p = 0)
{
    return json_pack("{s:s, s:I, s:I, s:I}", "type", type, "kernel_size", (json_int_t)k, "stride",
                     (json_int_t)s, "padding", (json_int_t)p);
}
json_t *L_linear(int64_t out)
{
    return json_pack("{s:s, s:I}", "type", "linear", "out_features", (json_int_t)out);
}
json_t *L_adaptive(int64_t o)
{
    return json_pack("{s:s, s:[I,I]}", "type", "adaptive_avgpool2d", "output_size", (json_int_t)o,
                     (json_int_t)o);
}
json_t *L_dropout()
{
    return json_pack("{s:s, s:f}", "type", "dropout", "p", 0.5);
}
json_t *named(json_t *layer, const std::string &name)
{
    json_object_set_new(layer, "name", json_string(name.c_str()));
    return layer;
}

/* The classifier shared by AlexNet and VGG: the flatten rides with the
 * pooling stage, since a stage of its own would only be a view of its input. */
void classifier(json_t *ls, int64_t pool)
{
    json_array_append_new(ls, named(json_pack("{s:s, s:[o,o]}", "type", "sequential", "layers",
                                              L_adaptive(pool), L_simple("flatten")),
                                    "avgpool"));
    json_array_append_new(ls, named(L_dropout(), "drop6"));
    json_array_append_new(ls, named(L_linear(4096), "fc6"));
    json_array_append_new(ls, named(L_simple("relu"), "relu6"));
    json_array_append_new(ls, named(L_dropout(), "drop7"));
    json_array_append_new(ls, named(L_linear(4096), "fc7"));
    json_array_append_new(ls, named(L_simple("relu"), "relu7"));
    json_array_append_new(ls, named(L_linear(1000), "fc8"));
}

json_t *zoo_layers(const std::string &name, const json_t *opts)
{
    json_t *ls = json_array();
    if (name == "alexnet") {
        /* torchvision's AlexNet, one layer per stage. */
        struct {
            int64_t out, k, s, p;
            bool pool;
        } c[] = {{64, 11, 4, 2, true},
                 {192, 5, 1, 2, true},
                 {384, 3, 1, 1, false},
                 {256, 3, 1, 1, false},
                 {256, 3, 1, 1, true}};
        for (int i = 0; i < 5; i++) {
            std::string n = std::to_string(i + 1);
            json_array_append_new(ls, named(L_conv(c[i].out, c[i].k, c[i].s, c[i].p), "conv" + n));
            json_array_append_new(ls, named(L_simple("relu"), "relu" + n));
            if (c[i].pool)
                json_array_append_new(ls, named(L_pool("maxpool2d", 3, 2), "pool" + n));
        }
        /* torchvision puts the dropout before each fully connected layer. */
        classifier(ls, 6);
        return ls;
    }
    if (name == "vgg11" || name == "vgg16" || name == "vgg19") {
        int per[3][5] = {{1, 1, 2, 2, 2}, {2, 2, 3, 3, 3}, {2, 2, 4, 4, 4}};
        int which = name == "vgg11" ? 0 : name == "vgg16" ? 1 : 2;
        int64_t width[5] = {64, 128, 256, 512, 512};
        int conv = 0;
        for (int b = 0; b < 5; b++) {
            for (int j = 0; j < per[which][b]; j++) {
                std::string n = std::to_string(++conv);
                json_array_append_new(ls, named(L_conv(width[b], 3, 1, 1), "conv" + n));
                json_array_append_new(ls, named(L_simple("relu"), "relu" + n));
            }
            json_array_append_new(ls,
                                  named(L_pool("maxpool2d", 2, 2), "pool" + std::to_string(b + 1)));
        }
        classifier(ls, 7);
        /* torchvision's VGG: Linear, ReLU, Dropout; reorder to that. */
        json_t *fixed = json_array();
        size_t n = json_array_size(ls);
        for (size_t i = 0; i < n; i++) {
            json_t *l = json_array_get(ls, i);
            std::string nm = jstr(l, "name", "");
            if (nm == "drop6" || nm == "drop7")
                continue;
            json_array_append(fixed, l);
            if (nm == "relu6")
                json_array_append_new(fixed, named(L_dropout(), "drop6"));
            if (nm == "relu7")
                json_array_append_new(fixed, named(L_dropout(), "drop7"));
        }
        json_decref(ls);
        return fixed;
    }
    if (name == "resnet18" || name == "resnet50" || name == "resnet101" || name == "resnet152") {
        static const int depth[4][4] = {{2, 2, 2, 2}, {3, 4, 6, 3}, {3, 4, 23, 3}, {3, 8, 36, 3}};
        const int *blocks = depth[name == "resnet18"    ? 0
                                  : name == "resnet50"  ? 1
                                  : name == "resnet101" ? 2
                                                        : 3];
        bool bottleneck = name != "resnet18";
        json_array_append_new(ls,
                              named(json_pack("{s:s, s:[o,o,o,o]}", "type", "sequential", "layers",
                                              L_conv(64, 7, 2, 3, false), L_simple("batchnorm2d"),
                                              L_simple("relu"), L_pool("maxpool2d", 3, 2, 1)),
                                    "stem"));
        for (int l = 0; l < 4; l++)
            for (int b = 0; b < blocks[l]; b++)
                json_array_append_new(
                    ls, named(json_pack("{s:s, s:s, s:I, s:I}", "type", "residual_block", "variant",
                                        bottleneck ? "bottleneck" : "basic", "planes",
                                        (json_int_t)(64 << l), "stride",
                                        (json_int_t)(l > 0 && b == 0 ? 2 : 1)),
                              "layer" + std::to_string(l + 1) + "." + std::to_string(b)));
        json_array_append_new(ls,
                              named(json_pack("{s:s, s:[o,o,o]}", "type", "sequential", "layers",
                                              L_adaptive(1), L_simple("flatten"), L_linear(1000)),
                                    "head"));
        return ls;
    }
    if (name == "gpt") {
        json_int_t d = 768, heads = 12, layers = 12, vocab = 50257;
        if (json_is_object(opts)) {
            d = jint(opts, "d_model", d, "model_options");
            heads = jint(opts, "heads", heads, "model_options");
            layers = jint(opts, "layers", layers, "model_options");
            vocab = jint(opts, "vocab", vocab, "model_options");
        }
        if (d <= 0 || heads <= 0 || layers <= 0 || vocab <= 0 || layers > 10000) {
            json_decref(ls);
            throw Failure("model_options: d_model, heads, layers and vocab must be positive");
        }
        json_array_append_new(ls, named(json_pack("{s:s, s:I, s:I}", "type", "gpt_embedding",
                                                  "vocab", vocab, "d_model", d),
                                        "embedding"));
        for (json_int_t i = 0; i < layers; i++)
            json_array_append_new(ls,
                                  named(json_pack("{s:s, s:I, s:I}", "type", "transformer_block",
                                                  "d_model", d, "heads", heads),
                                        "block" + std::to_string(i)));
        json_array_append_new(ls,
                              named(json_pack("{s:s, s:[{s:s}, {s:s, s:I, s:b}]}", "type",
                                              "sequential", "layers", "type", "layernorm", "type",
                                              "linear", "out_features", vocab, "bias", 0),
                                    "head"));
        return ls;
    }
    json_decref(ls);
    throw Failure(
        "model: unknown zoo model \"" + name +
        "\" (alexnet, vgg11, vgg16, vgg19, resnet18, resnet50, resnet101, resnet152, gpt)");
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

int64_t param_bytes(const torch::nn::Module &m)
{
    int64_t b = 0;
    for (const auto &p : m.parameters())
        b += p.numel() * (int64_t)p.element_size();
    return b;
}

Model build_model(const json_t *spec)
{
    if (!json_is_object(spec))
        throw Failure("spec must be an object");
    Model m;
    const json_t *layers = json_object_get(spec, "layers");
    std::string zoo = jstr(spec, "model", "");
    json_t *owned = nullptr;
    if (!zoo.empty() && layers != nullptr)
        throw Failure("spec: give either model or layers, not both");
    if (!zoo.empty()) {
        owned = zoo_layers(zoo, json_object_get(spec, "model_options"));
        layers = owned;
        m.name = zoo;
    } else {
        if (!json_is_array(layers) || json_array_size(layers) == 0)
            throw Failure("spec: layers must be a non-empty list (or give a zoo model)");
        m.name = jstr(spec, "name", "layers");
    }
    try {
        m.batch = jint(spec, "batch_size", 1, "batch_size");
        if (m.batch <= 0 || m.batch > (1 << 20))
            throw Failure("batch_size must be in 1..2^20");
        m.dtype_name = jstr(spec, "dtype", "fp32");
        m.dtype = parse_dtype(m.dtype_name);
        const json_t *is = json_object_get(spec, "input_shape");
        const json_t *first = json_array_get(layers, 0);
        m.token_input = jstr(first, "type", "") == "gpt_embedding";
        if (m.token_input)
            m.vocab = jint(first, "vocab", 50257, "layers[0]");
        if (is == nullptr || json_is_null(is)) {
            if (m.token_input) {
                const json_t *o = json_object_get(spec, "model_options");
                m.input_shape = {json_is_object(o) ? jint(o, "seq_len", 512, "model_options")
                                                   : 512};
            } else {
                m.input_shape = {3, 224, 224};
            }
        } else {
            if (!json_is_array(is) || json_array_size(is) == 0 || json_array_size(is) > 8)
                throw Failure("input_shape must be a list of 1 to 8 positive integers");
            for (size_t i = 0; i < json_array_size(is); i++) {
                const json_t *d = json_array_get(is, i);
                if (!json_is_integer(d) || json_integer_value(d) <= 0)
                    throw Failure("input_shape must be a list of 1 to 8 positive integers");
                m.input_shape.push_back(json_integer_value(d));
            }
        }
        Shape s = m.input_shape;
        for (size_t i = 0; i < json_array_size(layers); i++) {
            const json_t *L = json_array_get(layers, i);
            Stage st;
            st.type = jstr(L, "type", "?");
            st.name = jstr(L, "name", "");
            if (st.name.empty())
                st.name = st.type + std::to_string(i + 1);
            st.in_shape = s;
            st.seq = torch::nn::Sequential();
            add_layer(st.seq, L, s, "layers[" + std::to_string(i) + "]", m.input_shape[0]);
            st.out_shape = s;
            for (int64_t d : s)
                if (d <= 0)
                    throw Failure("layers[" + std::to_string(i) + "] (" + st.type +
                                  "): the output shape " + shape_str(s) + " is empty");
            m.stages.push_back(std::move(st));
        }
    } catch (...) {
        json_decref(owned);
        throw;
    }
    json_decref(owned);
    return m;
}

/* Parameters and floating buffers to the device and dtype; integer buffers
 * (BatchNorm's counter, the attention mask) keep theirs. */
void place(Model &m, const Device &d)
{
    for (auto &st : m.stages) {
        for (auto &p : st.seq->parameters())
            p.set_data(p.detach().to(d.dev, m.dtype));
        for (auto &b : st.seq->buffers())
            b.set_data(b.is_floating_point() ? b.to(d.dev, m.dtype) : b.to(d.dev));
        st.seq->train();
        st.param_bytes = param_bytes(*st.seq);
    }
}

int64_t elem_size(c10::ScalarType t)
{
    return (int64_t)c10::elementSize(t);
}

torch::Tensor make_input(const Model &m, const Device &d)
{
    std::vector<int64_t> shape = {m.batch};
    shape.insert(shape.end(), m.input_shape.begin(), m.input_shape.end());
    torch::manual_seed(12345);
    if (m.token_input)
        return torch::randint(0, m.vocab, shape, torch::TensorOptions().dtype(torch::kLong))
            .to(d.dev);
    return torch::randn(shape, torch::TensorOptions().dtype(m.dtype).device(d.dev));
}

int64_t input_bytes(const Model &m)
{
    return m.batch * numel(m.input_shape) * (m.token_input ? 8 : elem_size(m.dtype));
}

int64_t out_bytes(const Model &m, size_t i)
{
    return m.batch * numel(m.stages[i].out_shape) * elem_size(m.dtype);
}

/* Runs stage i on x.  Dropout draws from a generator seeded per stage, so a
 * recomputation makes the same mask as the first pass.  A stage whose output
 * would be a view of its input gets a copy: the memory model gives every
 * stage output a buffer of its own. */
torch::Tensor run_stage(Model &m, size_t i, const torch::Tensor &x)
{
    torch::manual_seed(1000 + (uint64_t)i);
    torch::Tensor y;
    try {
        y = m.stages[i].seq->forward(x);
    } catch (const c10::Error &e) {
        std::string msg = first_line(e.what_without_backtrace());
        if (is_oom(msg))
            throw Failure("device out of memory in the forward of stage " + std::to_string(i + 1) +
                          " (" + m.stages[i].name + "): " + msg);
        throw Failure("stage " + std::to_string(i + 1) + " (layers[" + std::to_string(i) + "], " +
                      m.stages[i].type + ") failed with dtype " + m.dtype_name + ": " + msg);
    }
    if (y.defined() && x.defined() && y.storage().is_alias_of(x.storage()))
        y = y.clone();
    return y;
}

void backward(Model &m, size_t i, const torch::Tensor &y, const torch::Tensor &dy)
{
    try {
        torch::autograd::backward({y}, {dy});
    } catch (const c10::Error &e) {
        std::string msg = first_line(e.what_without_backtrace());
        if (is_oom(msg))
            throw Failure("device out of memory in the backward of stage " + std::to_string(i + 1) +
                          " (" + m.stages[i].name + "): " + msg);
        throw Failure("backward of stage " + std::to_string(i + 1) + " (" + m.stages[i].type +
                      ") failed with dtype " + m.dtype_name + ": " + msg);
    }
}

void clear_grads(Model &m)
{
    for (auto &st : m.stages)
        for (auto &p : st.seq->parameters())
            p.mutable_grad() = torch::Tensor();
}

double median(std::vector<double> v)
{
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct Progress {
    rw_progress_fn fn;
    void *ctx;
    void operator()(int stage, int stages, const char *phase) const
    {
        if (fn != nullptr && fn(ctx, stage, stages, phase) != 0)
            throw Failure("abandoned: the lease was lost or the worker is stopping", true, true);
    }
};

/* ------------------------------------------------------------------------
 * Measuring one stage (docs/worker.md).
 */

struct StageCost {
    int64_t saved = 0, fwd_tmp = 0, bwd_tmp = 0;
    double fwd_ms = 0, bwd_ms = 0;
};

StageCost measure_stage(Model &m, size_t i, const torch::Tensor &x, int warmup, int repeats,
                        const Device &d)
{
    StageCost c;
    std::vector<double> tf, tb;
    bool input_grad = i > 0 && x.is_floating_point();
    int64_t in_bytes = input_grad ? x.numel() * (int64_t)x.element_size() : 0;
    int64_t p_bytes = m.stages[i].param_bytes;
    Timer timer(d);
    for (int r = 0; r < warmup + repeats; r++) {
        bool keep = r >= warmup;
        clear_grads(m);
        /* F_none: peak above what is live after (x_i added). */
        d.sync();
        d.reset_peak();
        {
            torch::NoGradGuard ng;
            torch::Tensor y = run_stage(m, i, x);
            d.sync();
            int64_t f = d.peak() - d.current();
            if (keep)
                c.fwd_tmp = std::max(c.fwd_tmp, f);
        }
        /* F_all: what stays live is x̄_i; the transient is above that. */
        torch::Tensor leaf = input_grad ? x.detach().requires_grad_(true) : x;
        d.sync();
        int64_t before = d.current();
        d.reset_peak();
        timer.start();
        torch::Tensor y = run_stage(m, i, leaf);
        double ms = timer.stop_ms();
        int64_t after = d.current();
        int64_t pk = d.peak();
        if (keep) {
            c.saved = std::max(c.saved, after - before);
            c.fwd_tmp = std::max(c.fwd_tmp, pk - after);
            tf.push_back(ms);
        }
        if (!y.requires_grad())
            continue;
        /* B: the transient above δ_{i-1} and ∂W_i, over what was live. */
        torch::Tensor dy = torch::randn_like(y);
        d.sync();
        before = d.current();
        d.reset_peak();
        timer.start();
        backward(m, i, y, dy);
        ms = timer.stop_ms();
        pk = d.peak();
        if (keep) {
            c.bwd_tmp = std::max(c.bwd_tmp, pk - before - in_bytes - p_bytes);
            tb.push_back(ms);
        }
    }
    clear_grads(m);
    c.fwd_ms = median(tf);
    c.bwd_ms = median(tb);
    return c;
}

std::string libtorch_version()
{
    return TORCH_VERSION;
}

json_t *device_info_json(const Device &d)
{
    std::string name = "cpu", driver = "none";
#ifdef REMAT_TORCH_CUDA
    if (d.cuda) {
        cudaDeviceProp *prop = at::cuda::getDeviceProperties(d.index);
        name = prop->name;
        int drv = 0, rt = 0;
        cudaDriverGetVersion(&drv);
        cudaRuntimeGetVersion(&rt);
        driver = "CUDA driver " + std::to_string(drv / 1000) + "." +
                 std::to_string(drv % 1000 / 10) + ", runtime " + std::to_string(rt / 1000) + "." +
                 std::to_string(rt % 1000 / 10);
    }
#endif
    if (!d.cuda)
        driver = "cpu, " + std::to_string(at::get_num_threads()) + " threads";
    return json_pack("{s:s, s:s, s:s}", "device", name.c_str(), "driver", driver.c_str(),
                     "libtorch", libtorch_version().c_str());
}

void check_device_matches(const json_t *spec, const Device &d)
{
    std::string want = jstr(spec, "device", "");
    if (want.empty())
        return;
    bool cuda_wanted = want.rfind("cuda", 0) == 0;
    if (cuda_wanted != d.cuda)
        throw Failure("the job wants device " + want + " but this worker runs on " +
                          (d.cuda ? "cuda:" + std::to_string(d.index) : std::string("cpu")),
                      true);
}

json_t *profile(const json_t *spec, const Progress &progress)
{
    const Device &d = g_device;
    check_device_matches(spec, d);
    progress(0, 0, "building");
    Model m = build_model(spec);
    int n = (int)m.stages.size();
    int warmup = (int)jint(spec, "warmup", 2, "warmup");
    int repeats = (int)jint(spec, "repeats", 5, "repeats");
    if (warmup < 0 || warmup > 100 || repeats < 1 || repeats > 1000)
        throw Failure("warmup must be in 0..100 and repeats in 1..1000");
    place(m, d);
    torch::Tensor x = make_input(m, d);
    json_t *stages = json_array();
    try {
        for (int i = 0; i < n; i++) {
            progress(i + 1, n, "measuring");
            StageCost c = measure_stage(m, (size_t)i, x, warmup, repeats, d);
            /* The output for the next stage, and a check of the inferred shape. */
            torch::Tensor y;
            {
                torch::NoGradGuard ng;
                y = run_stage(m, (size_t)i, x);
            }
            Shape got(y.sizes().begin() + 1, y.sizes().end());
            if (y.size(0) != m.batch || got != m.stages[i].out_shape)
                throw Failure("layers[" + std::to_string(i) + "] (" + m.stages[i].type +
                              "): the output shape " + shape_str(got) +
                              " differs from the inferred " + shape_str(m.stages[i].out_shape));
            int64_t ob = out_bytes(m, (size_t)i);
            if (y.numel() * (int64_t)y.element_size() != ob)
                throw Failure("layers[" + std::to_string(i) +
                              "]: output bytes differ from the shape");
            x = y;
            json_array_append_new(
                stages, json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:f, s:f}", "name",
                                  m.stages[i].name.c_str(), "out_bytes", (json_int_t)ob,
                                  "saved_bytes", (json_int_t)std::max(c.saved, ob), "fwd_tmp_bytes",
                                  (json_int_t)std::max<int64_t>(c.fwd_tmp, 0), "bwd_tmp_bytes",
                                  (json_int_t)std::max<int64_t>(c.bwd_tmp, 0), "param_bytes",
                                  (json_int_t)m.stages[i].param_bytes, "fwd_ms", c.fwd_ms, "bwd_ms",
                                  c.bwd_ms));
        }
    } catch (...) {
        json_decref(stages);
        throw;
    }
    json_t *info = device_info_json(d);
    json_t *p =
        json_pack("{s:s, s:s, s:I, s:s, s:I, s:o}", "format", "remat.profile/v1", "model",
                  m.name.c_str(), "batch_size", (json_int_t)m.batch, "dtype", m.dtype_name.c_str(),
                  "input_bytes", (json_int_t)input_bytes(m), "stages", stages);
    json_object_update(p, info);
    json_decref(info);
    return p;
}

/* ------------------------------------------------------------------------
 * Running a plan for real.
 */

enum OpKind { F_NONE = 0, F_CK = 1, F_ALL = 2, LOSS = 3, BWD = 4 };
struct Op {
    OpKind kind;
    size_t stage; /* 1..n */
};

bool parse_op_name(const std::string &s, OpKind *k)
{
    static const struct {
        const char *name;
        OpKind kind;
    } names[] = {{"F_none", F_NONE}, {"F_ck", F_CK}, {"F_all", F_ALL}, {"loss", LOSS}, {"B", BWD},
                 {"F_NONE", F_NONE}, {"F_CK", F_CK}, {"F_ALL", F_ALL}, {"LOSS", LOSS}, {"b", BWD}};
    for (const auto &e : names)
        if (s == e.name) {
            *k = e.kind;
            return true;
        }
    return false;
}

/* The plan's schedule: [{"op": "F_ck", "stage": 3}, ...] (also "kind" for
 * "op", or ["F_ck", 3] pairs); without one, the single-level schedule of its
 * checkpoints, as docs/memory-model.md writes it. */
std::vector<Op> plan_ops(const json_t *plan, size_t n)
{
    std::vector<Op> ops;
    const json_t *sched = json_object_get(plan, "schedule");
    if (json_is_object(sched) && json_is_array(json_object_get(sched, "ops")))
        sched = json_object_get(sched, "ops");
    if (json_is_array(sched) && json_array_size(sched) > 0) {
        for (size_t k = 0; k < json_array_size(sched); k++) {
            const json_t *e = json_array_get(sched, k);
            std::string name;
            json_int_t stage = -1;
            if (json_is_object(e)) {
                name = jstr(e, "op", jstr(e, "kind", "").c_str());
                const json_t *st = json_object_get(e, "stage");
                if (json_is_integer(st))
                    stage = json_integer_value(st);
            } else if (json_is_array(e) && json_array_size(e) == 2) {
                name = json_is_string(json_array_get(e, 0))
                           ? json_string_value(json_array_get(e, 0))
                           : "";
                if (json_is_integer(json_array_get(e, 1)))
                    stage = json_integer_value(json_array_get(e, 1));
            }
            OpKind kind;
            if (!parse_op_name(name, &kind) || stage < 1 || (size_t)stage > n)
                throw Failure("plan: schedule[" + std::to_string(k) +
                              "] is not an op of stage 1.." + std::to_string(n));
            ops.push_back({kind, (size_t)stage});
        }
        return ops;
    }
    std::vector<size_t> ck = {0};
    const json_t *cks = json_object_get(plan, "checkpoints");
    for (size_t k = 0; json_is_array(cks) && k < json_array_size(cks); k++) {
        const json_t *c = json_array_get(cks, k);
        if (!json_is_integer(c) || json_integer_value(c) < 1 ||
            (size_t)json_integer_value(c) >= n || (size_t)json_integer_value(c) <= ck.back())
            throw Failure("plan: checkpoints must ascend within 1.." + std::to_string(n - 1));
        ck.push_back((size_t)json_integer_value(c));
    }
    size_t m = ck.size() - 1;
    ck.push_back(n);
    for (size_t k = 0; k < m; k++)
        for (size_t i = ck[k] + 1; i <= ck[k + 1]; i++)
            ops.push_back({i == ck[k] + 1 ? F_CK : F_NONE, i});
    for (size_t i = ck[m] + 1; i <= n; i++)
        ops.push_back({F_ALL, i});
    ops.push_back({LOSS, n});
    for (size_t i = n; i > ck[m]; i--)
        ops.push_back({BWD, i});
    for (size_t k = m; k-- > 0;) {
        for (size_t i = ck[k] + 1; i <= ck[k + 1]; i++)
            ops.push_back({F_ALL, i});
        for (size_t i = ck[k + 1]; i > ck[k]; i--)
            ops.push_back({BWD, i});
    }
    return ops;
}

struct StepResult {
    int64_t peak_bytes = 0; /* as docs/memory-model.md counts: W + x_0 + what the step adds */
    double ms = 0;
};

/* One training step by the op list.  x[i] plain activations (no graph),
 * y[i] outputs with their graphs (x̄_i), leaf[i] the input leaf of stage
 * i's graph, dy[i] = δ_i.  Frees exactly what the memory model frees. */
StepResult run_ops(Model &m, const std::vector<Op> &ops, const torch::Tensor &x0, const Device &d,
                   const Progress &progress, json_t *timeline = nullptr)
{
    static const char *const op_names[] = {"F_none", "F_ck", "F_all", "loss", "B"};
    size_t n = m.stages.size();
    std::vector<torch::Tensor> x(n + 1), y(n + 1), leaf(n + 1), dy(n + 1);
    std::vector<bool> kept(n + 1, false);
    int64_t W = 0;
    for (const auto &st : m.stages)
        W += st.param_bytes;
    clear_grads(m);
    x[0] = x0;
    auto input_of = [&](size_t i) -> torch::Tensor {
        if (x[i - 1].defined())
            return x[i - 1];
        if (y[i - 1].defined())
            return y[i - 1].detach();
        throw Failure("plan: op needs x_" + std::to_string(i - 1) + ", which is not live");
    };
    Timer timer(d);
    d.sync();
    int64_t start = d.current();
    d.reset_peak();
    timer.start();
    size_t k = 0;
    int64_t base = W + x0.numel() * (int64_t)x0.element_size() - start, timeline_peak = 0;
    for (const Op &op : ops) {
        size_t i = op.stage;
        if ((k++ & 15) == 0)
            progress((int)i, (int)n, "validating");
        switch (op.kind) {
        case F_NONE:
        case F_CK: {
            torch::Tensor in = input_of(i);
            {
                torch::NoGradGuard ng;
                x[i] = run_stage(m, i - 1, in);
            }
            in = torch::Tensor();
            if (op.kind == F_CK)
                kept[i - 1] = true;
            else if (i >= 2 && x[i - 1].defined() && !kept[i - 1])
                x[i - 1] = torch::Tensor();
            break;
        }
        case F_ALL: {
            torch::Tensor in = input_of(i);
            leaf[i] = i >= 2 && in.is_floating_point() ? in.detach().requires_grad_(true) : in;
            y[i] = run_stage(m, i - 1, leaf[i]);
            break;
        }
        case LOSS: {
            if (!y[n].defined())
                throw Failure("plan: the loss needs x̄_n");
            torch::manual_seed(777);
            dy[n] = torch::randn_like(y[n]);
            break;
        }
        case BWD: {
            if (!y[i].defined() || !dy[i].defined())
                throw Failure("plan: B(" + std::to_string(i) + ") needs x̄_i and δ_i");
            if (y[i].requires_grad())
                backward(m, i - 1, y[i], dy[i]);
            if (i >= 2)
                dy[i - 1] = leaf[i].defined() ? leaf[i].grad() : torch::Tensor();
            leaf[i] = torch::Tensor();
            y[i] = torch::Tensor();
            dy[i] = torch::Tensor();
            if (i >= 2 && !y[i - 1].defined()) {
                x[i - 1] = torch::Tensor();
                kept[i - 1] = false;
            }
            if (i >= 2 && !dy[i - 1].defined())
                dy[i - 1] = torch::zeros(
                    [&] {
                        std::vector<int64_t> s = {m.batch};
                        s.insert(s.end(), m.stages[i - 2].out_shape.begin(),
                                 m.stages[i - 2].out_shape.end());
                        return s;
                    }(),
                    torch::TensorOptions().dtype(m.dtype).device(d.dev));
            break;
        }
        }
        if (timeline != nullptr) {
            /* The peak during this op and the live bytes after it, counted
             * as the simulator's timeline counts them. */
            d.sync();
            int64_t pk = d.peak() + base;
            timeline_peak = std::max(timeline_peak, pk);
            json_array_append_new(timeline,
                                  json_pack("{s:s, s:I, s:I, s:I}", "op", op_names[op.kind],
                                            "stage", (json_int_t)i, "peak_bytes", (json_int_t)pk,
                                            "after_bytes", (json_int_t)(d.current() + base)));
            d.reset_peak();
        }
    }
    StepResult r;
    r.ms = timer.stop_ms();
    d.sync();
    r.peak_bytes = timeline != nullptr ? timeline_peak : d.peak() + base;
    return r;
}

std::vector<torch::Tensor> grads(Model &m)
{
    std::vector<torch::Tensor> g;
    for (auto &st : m.stages)
        for (auto &p : st.seq->parameters())
            g.push_back(p.grad().defined() ? p.grad().detach().clone() : torch::Tensor());
    return g;
}

json_t *validate(const json_t *spec, const Progress &progress)
{
    const Device &d = g_device;
    const json_t *model_spec = json_object_get(spec, "model_spec");
    const json_t *plan = json_object_get(spec, "plan");
    if (!json_is_object(model_spec) || !json_is_object(plan))
        throw Failure("a validation spec needs model_spec and plan objects");
    check_device_matches(spec, d);
    int repeats = (int)jint(spec, "repeats", 3, "repeats");
    if (repeats < 1 || repeats > 100)
        throw Failure("repeats must be in 1..100");
    progress(0, 0, "building");
    Model m = build_model(model_spec);
    size_t n = m.stages.size();
    std::vector<Op> ops = plan_ops(plan, n);
    const json_t *pk = json_object_get(plan, "peak_bytes");
    int64_t predicted = json_is_integer(pk) ? (int64_t)json_integer_value(pk) : -1;
    place(m, d);
    torch::Tensor x0 = make_input(m, d);
    json_t *no_ck = json_pack("{s:[]}", "checkpoints");
    std::vector<Op> store_all = plan_ops(no_ck, n);
    json_decref(no_ck);

    /* Warm-ups of each, so that one-time allocations (oneDNN's caches,
     * cuDNN's autotuning, the cuBLAS workspace) are not charged to a step. */
    int warmup = (int)jint(spec, "warmup", 1, "warmup");
    if (warmup < 0 || warmup > 100)
        throw Failure("warmup must be in 0..100");
    for (int r = 0; r < warmup; r++) {
        run_ops(m, store_all, x0, d, progress);
        run_ops(m, ops, x0, d, progress);
    }
    std::vector<double> t_sa, t_plan;
    int64_t peak_sa = 0, peak_plan = 0;
    double max_diff = 0;
    for (int r = 0; r < repeats; r++) {
        StepResult a = run_ops(m, store_all, x0, d, progress);
        std::vector<torch::Tensor> ref = grads(m);
        StepResult b = run_ops(m, ops, x0, d, progress);
        std::vector<torch::Tensor> got = grads(m);
        clear_grads(m);
        for (size_t k = 0; k < ref.size(); k++) {
            if (ref[k].defined() != got[k].defined())
                throw Failure("the plan left a parameter gradient missing");
            if (ref[k].defined())
                max_diff =
                    std::max(max_diff, (ref[k].to(torch::kDouble) - got[k].to(torch::kDouble))
                                           .abs()
                                           .max()
                                           .item<double>());
        }
        peak_sa = std::max(peak_sa, a.peak_bytes);
        peak_plan = std::max(peak_plan, b.peak_bytes);
        t_sa.push_back(a.ms);
        t_plan.push_back(b.ms);
    }
    json_t *timeline = nullptr;
    if (json_is_true(json_object_get(spec, "timeline"))) {
        /* One more step of the plan, synchronised after every op: what each
         * op really peaked at, to set beside the simulator's timeline. */
        timeline = json_array();
        run_ops(m, ops, x0, d, progress, timeline);
        clear_grads(m);
    }
    json_t *info = device_info_json(d);
    json_t *res = json_pack(
        "{s:I, s:I, s:f, s:f, s:f, s:I, s:f, s:o, s:s, s:I, s:s, s:I}", "measured_peak_bytes",
        (json_int_t)peak_plan, "predicted_peak_bytes", (json_int_t)predicted, "relative_error",
        predicted > 0 ? (double)(predicted - peak_plan) / (double)peak_plan : 0.0, "step_ms",
        median(t_plan), "store_all_step_ms", median(t_sa), "store_all_measured_peak_bytes",
        (json_int_t)peak_sa, "max_grad_diff", max_diff, "device",
        json_deep_copy(json_object_get(info, "device")), "model", m.name.c_str(), "batch_size",
        (json_int_t)m.batch, "dtype", m.dtype_name.c_str(), "n_ops", (json_int_t)ops.size());
    if (timeline != nullptr)
        json_object_set_new(res, "timeline", timeline);
    json_object_set(res, "driver", json_object_get(info, "driver"));
    json_object_set(res, "libtorch", json_object_get(info, "libtorch"));
    json_decref(info);
    return res;
}

/* Runs f, turning every exception into a filled rw_failure. */
template <class F> json_t *guarded(F f, struct rw_failure *why)
{
    std::string reason;
    bool retry = false, abandoned = false;
    try {
        if (!g_open)
            throw Failure("rw_open was not called");
        return f();
    } catch (const Failure &e) {
        reason = e.what();
        retry = e.retryable;
        abandoned = e.abandoned;
    } catch (const c10::Error &e) {
        reason = first_line(e.what_without_backtrace());
        if (is_oom(reason))
            reason = "device out of memory: " + reason;
    } catch (const std::bad_alloc &) {
        reason = "out of memory (host)";
    } catch (const std::exception &e) {
        reason = first_line(e.what());
    }
    g_device.release_cache();
    if (why != nullptr) {
        why->retryable = retry;
        why->abandoned = abandoned;
        snprintf(why->reason, sizeof why->reason, "%s", reason.c_str());
    }
    return nullptr;
}

} // namespace

extern "C" int rw_open(const char *device, long long cpu_limit_bytes, struct rw_failure *why)
{
    g_open = true; /* guarded() refuses to run before it */
    json_t *ok = guarded(
        [&]() -> json_t * {
            std::string dev = device != nullptr ? device : "cpu";
            if (cpu_counts == nullptr) {
                cpu_counts = new CpuCounts();
                counting_allocator = new CountingAllocator();
                c10::SetCPUAllocator(counting_allocator, 100);
            }
            cpu_counts->limit = cpu_limit_bytes > 0 ? cpu_limit_bytes : 0;
            if (dev == "cpu") {
                g_device = Device();
            } else if (dev.rfind("cuda", 0) == 0) {
#ifdef REMAT_TORCH_CUDA
                int idx = dev.size() > 5 ? std::atoi(dev.c_str() + 5) : 0;
                if (idx < 0 || idx >= (int)c10::cuda::device_count())
                    throw Failure("device " + dev + ": " +
                                  std::to_string(c10::cuda::device_count()) +
                                  " CUDA devices visible");
                g_device.cuda = true;
                g_device.index = idx;
                g_device.dev = c10::Device(c10::DeviceType::CUDA, (c10::DeviceIndex)idx);
                c10::cuda::set_device((c10::DeviceIndex)idx);
                /* Creates the CUDA context now, before any measurement. */
                torch::zeros({1}, torch::TensorOptions().device(g_device.dev)).sum().item<float>();
                /* And cuBLAS's handle on autograd's device thread, which has
                 * no current context of its own. */
                auto a = torch::ones({8, 8}, torch::TensorOptions().device(g_device.dev))
                             .requires_grad_(true);
                torch::mm(a, a).sum().backward();
#else
                throw Failure("device " + dev + ": this worker was built without CUDA");
#endif
            } else {
                throw Failure("device must be cpu or cuda:N, not " + dev);
            }
            return json_true();
        },
        why);
    if (ok == nullptr) {
        g_open = false;
        return -1;
    }
    json_decref(ok);
    return 0;
}

extern "C" json_t *rw_device_info(void)
{
    return device_info_json(g_device);
}

extern "C" json_t *rw_profile(const json_t *spec, rw_progress_fn progress, void *ctx,
                              struct rw_failure *why)
{
    Progress p{progress, ctx};
    return guarded([&] { return profile(spec, p); }, why);
}

extern "C" json_t *rw_validate(const json_t *spec, rw_progress_fn progress, void *ctx,
                               struct rw_failure *why)
{
    Progress p{progress, ctx};
    return guarded([&] { return validate(spec, p); }, why);
}
