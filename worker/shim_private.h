/*
 * shim_private.h - what the worker's C++ files share behind shim.h: the
 * failure every error becomes, the device and its counters, the model as a
 * chain of stages, and the one entry point of each job.
 *
 * Who owns what:
 *   shim.cpp     shim.h's functions (the C boundary), failures, JSON fields
 *   device.cpp   the counting CPU allocator, the device's live bytes and
 *                peak, timers, the device's description
 *   model.cpp    custom modules, the layer builder, a model from a spec
 *                (the zoo's through src/rematx/zoo.h), running one stage
 *   opcheck.cpp  an uploaded model's operators against worker/allowed_ops.h
 *   hf.cpp       a transformer from a Hugging Face config (hf.h)
 *   measure.cpp  measuring every stage: the profile
 *   execute.cpp  running a plan's op list (libremat's) and validating it
 *   optim.cpp    the optimizer step (libtorch's torch::optim), measured
 *
 * Only model.cpp, opcheck.cpp and hf.cpp include libtorch's module headers: every other file sees
 * tensors (<ATen/core/Tensor.h>) and the few ops it calls, which keeps the
 * compile time of each small (one file with <torch/torch.h> costs 15-28 s).
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
#ifndef REMAT_WORKER_SHIM_PRIVATE_H
#define REMAT_WORKER_SHIM_PRIVATE_H

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <jansson.h>

#include "rematx/hfconfig.h"
#include "shim.h"

namespace torch
{
namespace jit
{
struct Module;
}
} // namespace torch

namespace rw
{

/* ------------------------------------------------------------------------
 * Failures and spec fields (shim.cpp).
 */

/* Every error of a job; what() is the one line its reason says. */
struct Failure : std::runtime_error {
    bool retryable;
    bool abandoned;
    Failure(const std::string &what, bool retry = false, bool abandon = false)
        : std::runtime_error(what), retryable(retry), abandoned(abandon)
    {
    }
};

/* The line of a libtorch message that says why (its backtraces are many
 * lines): the first non-blank one, or for the TorchScript interpreter's
 * "The following operation failed" the exception its traceback ends with
 * ("builtins.RuntimeError: the model's words"), so that the cause, not the
 * interpreter's preamble, reaches the job. */
std::string first_line(const char *msg);
/* s made fit for a job's reason: one line of UTF-8 text (a byte that is not
 * UTF-8 becomes '?', a control character a space) of at most max_bytes,
 * never cut inside a character, never empty. */
std::string job_reason(const std::string &s, size_t max_bytes);
/* Whether a libtorch message says the device is out of memory. */
bool is_oom(const std::string &msg);

/* o[key] as a string, or dflt. */
std::string jstr(const json_t *o, const char *key, const char *dflt);
/* o[key] as an integer, dflt when absent or null; anything else is a
 * Failure naming where. */
int64_t jint(const json_t *o, const char *key, int64_t dflt, const std::string &where);

/* Reports progress to shim.h's callback; throws an abandoning Failure when
 * the callback asks the job to stop. */
struct Progress {
    rw_progress_fn fn;
    void *ctx;
    void operator()(int stage, int stages, const char *activity) const;
};

inline double median(std::vector<double> v)
{
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ------------------------------------------------------------------------
 * The device (device.cpp).
 */

/* Where tensors live, how live bytes are read: on CPU the counting
 * allocator's counters, on cuda:N the caching allocator's statistics. */
struct Device {
    c10::Device dev{c10::DeviceType::CPU};
    bool cuda = false;
    int index = 0;

    int64_t current() const; /* live bytes */
    int64_t peak() const;    /* the most live bytes since reset_peak */
    void reset_peak() const;
    void sync() const;
    /* Gives cached blocks back after a failure, so the next job starts clean. */
    void release_cache() const;
    /* What the caching allocator holds from the device (its segments, in
     * use or cached) and the most it held since reset_peak: on cuda:N only,
     * -1 on CPU (no cache between the tensors and the system there). */
    int64_t reserved() const;
    int64_t reserved_peak() const;
    /* The most bytes live tensors asked for since reset_peak, before the
     * allocator rounded them up (a block's size is what current() and
     * peak() count): on cuda:N with libtorch 2.1+, else -1. */
    int64_t requested_peak() const;
    /* CPU only (a Failure on cuda): from trace_start, every allocation's
     * bytes and every free's, negated, in order, until trace_stop returns
     * them (how a profile is scaled to a sequence too long to run:
     * measure.cpp). */
    void trace_start() const;
    std::vector<int64_t> trace_stop() const;
};

/* Opens "cpu" or "cuda:N" once per process (shim.h's rw_open); throws a
 * Failure.  The counting allocator is installed on the first call. */
void open_device(const std::string &name, long long cpu_limit_bytes);
const Device &the_device();

/* Times a region: CUDA events on a GPU (the device's own clock, no host
 * gaps), the steady clock on CPU. */
class Timer
{
  public:
    explicit Timer(const Device &dev);
    ~Timer();
    void start();
    double stop_ms();

  private:
    struct Events; /* the CUDA events, on a CUDA build */
    const Device &d;
    std::chrono::steady_clock::time_point t0;
    std::unique_ptr<Events> ev;
};

/* New {"device", "driver", "libtorch"} for a profile's or result's metadata. */
json_t *device_info_json(const Device &d);
/* A Failure (retryable) when the spec's "device" is another kind than d. */
void check_device_matches(const json_t *spec, const Device &d);

/* ------------------------------------------------------------------------
 * The model (model.cpp).  Shapes are per sample (no batch dimension).
 */

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape &s);
int64_t numel(const Shape &s);

/* A stage's torch::nn::Sequential; only model.cpp sees inside. */
struct StageNet;

struct Stage {
    std::string name;
    std::string type;
    std::shared_ptr<StageNet> net;
    Shape in_shape, out_shape;
    int64_t param_bytes = 0;
};

/* A spec read but not built: the layer list (a zoo model's expanded), the
 * input and the dtype.  Reading it touches no tensor, so a job can check
 * its plan against the stage count before anything is allocated. */
/* An uploaded TorchScript module, loaded, and the names of its stages;
 * only model.cpp sees inside. */
struct Script;

struct ModelSpec {
    std::string name;
    std::shared_ptr<json_t> layers; /* one entry per stage */
    /* An uploaded model (spec's model_path, set by main.c once the archive
     * is fetched and checked): the module and its stages' names.  The
     * stages are then the named submodules run one after the other. */
    std::shared_ptr<Script> script;
    std::vector<std::string> stage_names;
    /* A transformer from its Hugging Face config (spec's hf_config, read by
     * src/rematx/hfconfig.h): built by hf.cpp, its stages the embedding,
     * one per block, and the head with the loss. */
    std::shared_ptr<struct rematx_hf> hf;
    Shape input_shape;
    bool token_input = false;
    int64_t vocab = 0;
    int64_t batch = 1;
    c10::ScalarType dtype = c10::kFloat;
    std::string dtype_name = "fp32";
    size_t n_stages() const
    {
        if (hf)
            return (size_t)hf->layers + 2;
        return script ? stage_names.size() : json_array_size(layers.get());
    }
};

struct Model {
    ModelSpec spec;
    std::vector<Stage> stages;
};

/* Reads a profile job's spec (docs/worker.md, "Models"); throws a Failure.
 * An uploaded model is loaded here (torch::jit::load, on the CPU) and its
 * stages found and checked to take one tensor and return one. */
ModelSpec read_model_spec(const json_t *spec);
/* Builds the stages on the CPU, inferring every shape; throws a Failure
 * naming the layer at fault. */
Model build_model(const ModelSpec &spec);
/* Checks every operator an uploaded module's methods call (in every
 * submodule, hooks included, every call followed into the function or
 * method it runs) against worker/allowed_ops.h; throws a
 * Failure (not retryable) naming the first refused op and its method.
 * Runs nothing of the model (opcheck.cpp). */
void check_ops(const torch::jit::Module &root);
/* Whether load_script checks the operators: on, unless the worker was
 * started for a local run with --unsafe-no-op-check (shim.cpp). */
bool op_check_on();

/* Parameters and floating buffers to the device and dtype; fills param_bytes. */
void place(Model &m, const Device &d);
/* The model's input, from a fixed seed. */
at::Tensor make_input(const Model &m, const Device &d);
int64_t input_bytes(const Model &m);
int64_t out_bytes(const Model &m, size_t i);

/* The forward of stage i (0-based) on x: dropout seeded per stage, a view
 * of the input copied (the memory model gives every stage output a buffer
 * of its own).  Grad-enabled unless a NoGradGuard is active. */
at::Tensor run_stage(Model &m, size_t i, const at::Tensor &x);
/* The backward of stage i (0-based): y's graph with dy; retain_graph keeps
 * the graph for another backward (the profile's back-to-back timing). */
void backward(Model &m, size_t i, const at::Tensor &y, const at::Tensor &dy,
              bool retain_graph = false);
void clear_grads(Model &m);
/* A copy of every parameter's gradient (undefined where there is none). */
std::vector<at::Tensor> grads(Model &m);
/* Every parameter, stage by stage (the tensors themselves, not copies). */
std::vector<at::Tensor> parameters(Model &m);

/* ------------------------------------------------------------------------
 * The optimizer (optim.cpp).
 */

/* A job's "optimizer": a name or {name, weight_decay}; "none" when absent. */
struct OptimSpec {
    std::string name = "none";
    bool weight_decay = false;
};
/* Reads spec["optimizer"]; throws a Failure for a name libtorch has not,
 * or for foreach (libtorch runs the single-tensor step only). */
OptimSpec read_optim_spec(const json_t *spec);

/* libtorch's optimizer over the model's parameters (nothing for "none"). */
class Optim
{
  public:
    Optim(Model &m, const OptimSpec &s, double lr);
    ~Optim();
    Optim(const Optim &) = delete;
    Optim &operator=(const Optim &) = delete;
    bool active() const;
    /* One optimizer.step() over the gradients the parameters hold. */
    void step();
    /* Makes the state (one step over zero gradients, which are then
     * dropped); returns the live bytes it added. */
    int64_t make_state(const Device &d);

  private:
    struct Impl;
    std::unique_ptr<Impl> impl;
};

/* A profile's "optimizer" member, measured: state_bytes, step_tmp_bytes
 * (the most live above gradients and state during a step) and step_ms;
 * NULL for "none".  Leaves no gradient behind. */
json_t *measure_optimizer(Model &m, const OptimSpec &s, const Device &d, int warmup, int repeats);

/* ------------------------------------------------------------------------
 * The jobs.
 */

/* measure.cpp: a profile job's spec to a new remat.profile/v1 object. */
json_t *profile(const json_t *spec, const Progress &progress);
/* execute.cpp: a validation job's spec to a new result object. */
json_t *validate(const json_t *spec, const Progress &progress);

} // namespace rw

#endif
