/*
 * model.cpp - a model from a spec: a layer list or zoo model built into
 * stages (with layers.cpp), an uploaded TorchScript module's stages (its
 * children, a list the job gives, or those graph.cpp finds in its forward),
 * a config's transformer (hf.cpp), and running one stage's forward or
 * backward (docs/worker.md, "Models").
 *
 * With layers.cpp, hf.cpp and opcheck.cpp, the only files of the worker
 * that include libtorch's module headers.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/csrc/jit/serialization/import.h>
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
#include <torch/utils.h>
#include <torch/version.h>

#include <cmath>
#include <string>
#include <unordered_set>
#include <utility>

#include "graph.h"
#include "hf.h"
#include "layers.h"
#include "rematx/layers.h"
#include "rematx/zoo.h"
#include "shim_private.h"

namespace rw
{

/* A stage: a Sequential the layer builder made, a submodule of an
 * uploaded TorchScript module, or a graph found in an uploaded module's
 * forward (graph.h), run with the module itself as its self. */
struct StageNet {
    torch::nn::Sequential seq;
    bool is_script = false;
    torch::jit::Module mod;
    std::shared_ptr<torch::jit::GraphFunction> fn; /* a graph stage: mod is the whole model */
    std::vector<at::Tensor> graph_params, graph_buffers;

    at::Tensor forward(const at::Tensor &x)
    {
        if (!is_script)
            return seq->forward(x);
        c10::IValue y;
        if (fn) {
            torch::jit::Stack stack{c10::IValue(mod._ivalue()), x};
            fn->run(stack);
            y = stack.back();
        } else {
            y = mod.forward({x});
        }
        if (!y.isTensor())
            throw Failure("returned " + y.tagKind() + ", not a single tensor");
        return y.toTensor();
    }
    std::vector<at::Tensor> parameters() const
    {
        if (!is_script)
            return seq->parameters();
        if (fn)
            return graph_params;
        std::vector<at::Tensor> v;
        for (const at::Tensor &p : mod.parameters())
            v.push_back(p);
        return v;
    }
    std::vector<at::Tensor> buffers() const
    {
        if (!is_script)
            return seq->buffers();
        if (fn)
            return graph_buffers;
        std::vector<at::Tensor> v;
        for (const at::Tensor &b : mod.buffers())
            v.push_back(b);
        return v;
    }
    void train(bool on)
    {
        if (is_script)
            mod.train(on);
        else
            seq->train(on);
    }
};

struct Script {
    torch::jit::Module root;
    std::vector<torch::jit::Module> stages;
    /* Found in the forward's graph (no list given, and the forward is not
     * its top-level children in order): then stages is empty. */
    std::vector<GraphStage> graph_stages;
    bool default_stages = false; /* found by remat, not a list given */
};

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

namespace
{

/* The forward of a stage must take one tensor and give one back: the
 * chain's rule, checked from the TorchScript schema before anything runs. */
void check_stage_schema(const torch::jit::Module &mod, const std::string &what)
{
    if (!mod.find_method("forward"))
        throw Failure(what + " has no forward (a ModuleList or ModuleDict? list its members "
                             "as stages, e.g. blocks.0, blocks.1)");
    const c10::FunctionSchema &sc = mod.get_method("forward").function().getSchema();
    size_t needed = 0;
    std::string args;
    for (size_t k = 1; k < sc.arguments().size(); k++) {
        const c10::Argument &a = sc.arguments()[k];
        args += (args.empty() ? "" : ", ") + a.name();
        if (!a.default_value())
            needed++;
    }
    if (needed != 1)
        throw Failure(what + ": forward takes " + std::to_string(needed) + " inputs (" + args +
                      "); a stage of a chain takes one tensor");
    if (sc.returns().size() != 1 || sc.returns()[0].type()->kind() != c10::TypeKind::TensorType)
        throw Failure(what + ": forward returns " +
                      (sc.returns().size() == 1 ? sc.returns()[0].type()->str()
                                                : std::to_string(sc.returns().size()) + " values") +
                      ", not a single tensor; a stage of a chain gives one tensor to the next");
}

std::shared_ptr<Script> load_script(const std::string &path, const json_t *names,
                                    std::vector<std::string> &stage_names)
{
    auto sc = std::make_shared<Script>();
    /* The graph executor's optimisations (fusion, differentiable graphs)
     * would make a scripted stage keep other tensors for backward than the
     * same ops run one by one; off, each op runs as in eager mode, which is
     * what the memory model describes. */
    torch::jit::setGraphExecutorOptimize(false);
    try {
        sc->root = torch::jit::load(path, c10::Device(c10::DeviceType::CPU));
    } catch (const c10::Error &e) {
        std::string archive = "unknown";
        try {
            caffe2::serialize::PyTorchStreamReader reader(path);
            archive = std::to_string(reader.version());
        } catch (const std::exception &) {
        }
        throw Failure("model: torch::jit::load failed: " + first_line(e.what_without_backtrace()) +
                      " (archive format version " + archive + "; this worker's libtorch is " +
                      TORCH_VERSION + ", reading formats up to " +
                      std::to_string(caffe2::serialize::kMaxSupportedFileFormatVersion) + ")");
    }
    /* Before any of its code runs (the stages' forwards below only read
     * schemas): an operator outside remat's allow-list fails the job. */
    if (op_check_on())
        check_ops(sc->root);
    if (json_is_array(names)) {
        for (size_t i = 0; i < json_array_size(names); i++) {
            const char *n = json_string_value(json_array_get(names, i));
            std::string name = n != nullptr ? n : "";
            std::string where = "stages[" + std::to_string(i) + "] \"" + name + "\"";
            torch::jit::Module cur = sc->root;
            size_t pos = 0;
            while (pos <= name.size()) {
                size_t dot = name.find('.', pos);
                std::string part = name.substr(pos, dot == std::string::npos ? dot : dot - pos);
                if (part.empty() || !cur.hasattr(part) || !cur.attr(part).isModule()) {
                    std::string kids;
                    for (const auto &c : cur.named_children())
                        kids += (kids.empty() ? "" : ", ") + c.name;
                    throw Failure(where + ": no submodule \"" + part + "\" there (its children: " +
                                  (kids.empty() ? "none" : kids) + ")");
                }
                cur = cur.attr(part).toModule();
                if (dot == std::string::npos)
                    break;
                pos = dot + 1;
            }
            check_stage_schema(cur, where);
            sc->stages.push_back(cur);
            stage_names.push_back(name);
        }
    } else {
        sc->default_stages = true;
        /* The model's own forward takes one tensor and gives one; its
         * stages are its top-level children when it runs them in order,
         * else the pieces its forward's graph is cut into. */
        check_stage_schema(sc->root, "the model");
        try {
            sc->graph_stages = discover_stages(sc->root);
        } catch (const c10::Error &e) {
            throw Failure("the model: its forward's graph could not be cut into stages (" +
                          first_line(e.what_without_backtrace()) +
                          "); list its stages in the job's stages");
        }
        for (const GraphStage &g : sc->graph_stages)
            stage_names.push_back(g.name);
        if (sc->graph_stages.empty()) {
            for (const auto &c : sc->root.named_children()) {
                check_stage_schema(c.value, "stage " + std::to_string(sc->stages.size() + 1) +
                                                " (" + c.name + ")");
                sc->stages.push_back(c.value);
                stage_names.push_back(c.name);
            }
        }
    }
    return sc;
}

/* batch_size (1..REMATX_MAX_BATCH, 1 by default) and dtype (fp32 by
 * default), read alike for every kind of spec. */
void read_batch_dtype(const json_t *spec, ModelSpec &m)
{
    m.batch = jint(spec, "batch_size", 1, "batch_size");
    if (m.batch <= 0 || m.batch > REMATX_MAX_BATCH)
        throw Failure("batch_size must be in 1.." + std::to_string(REMATX_MAX_BATCH));
    m.dtype_name = jstr(spec, "dtype", "fp32");
    m.dtype = parse_dtype(m.dtype_name);
}

ModelSpec read_script_spec(const json_t *spec)
{
    ModelSpec m;
    m.layers.reset(json_array(), json_decref);
    m.name = "uploaded:" + jstr(spec, "model_id", "local");
    read_batch_dtype(spec, m);
    const json_t *in = json_object_get(spec, "input");
    const json_t *shape = json_object_get(in, "shape");
    if (!json_is_array(shape) || json_array_size(shape) == 0 || json_array_size(shape) > 8)
        throw Failure("input.shape must be a list of 1 to 8 integers in 1.." +
                      std::to_string(REMATX_MAX_DIM));
    for (size_t i = 0; i < json_array_size(shape); i++) {
        const json_t *d = json_array_get(shape, i);
        if (!json_is_integer(d) || json_integer_value(d) <= 0 ||
            json_integer_value(d) > REMATX_MAX_DIM)
            throw Failure("input.shape must be a list of 1 to 8 integers in 1.." +
                          std::to_string(REMATX_MAX_DIM));
        m.input_shape.push_back(json_integer_value(d));
    }
    std::string in_dtype = jstr(in, "dtype", m.dtype_name.c_str());
    if (in_dtype == "int64") {
        m.token_input = true;
        m.vocab = jint(in, "high", -1, "input");
        if (m.vocab <= 0)
            throw Failure("input.high must be a positive integer for an int64 input");
    } else if (parse_dtype(in_dtype) != m.dtype) {
        throw Failure("input.dtype " + in_dtype + " differs from the model's dtype " +
                      m.dtype_name);
    }
    m.script =
        load_script(jstr(spec, "model_path", ""), json_object_get(spec, "stages"), m.stage_names);
    return m;
}

/* A Hugging Face config's job: the config read again by rematd's rules
 * (a spec run by hand is held to them too), token ids of input_shape
 * [seq_len] below the vocabulary. */
ModelSpec read_hf_spec(const json_t *spec)
{
    ModelSpec m;
    m.layers.reset(json_array(), json_decref);
    auto h = std::make_shared<struct rematx_hf>();
    struct remat_error err = {};
    if (rematx_hf_read(json_object_get(spec, "hf_config"), "hf_config", h.get(), &err) != REMAT_OK)
        throw Failure(std::string(err.pointer) + ": " + err.message);
    m.hf = h;
    m.name = std::string("hf:") + h->model_type;
    read_batch_dtype(spec, m);
    const json_t *is = json_object_get(spec, "input_shape");
    int64_t seq = 0;
    if (json_array_size(is) == 1 && json_is_integer(json_array_get(is, 0)))
        seq = json_integer_value(json_array_get(is, 0));
    /* A request's body run by hand (remat spec prints one) gives seq_len. */
    if (is == nullptr && json_is_integer(json_object_get(spec, "seq_len")))
        seq = json_integer_value(json_object_get(spec, "seq_len"));
    if (seq < 1 || seq > h->max_positions)
        throw Failure("input_shape: an hf_config job's is [seq_len] (or seq_len), seq_len in 1.." +
                      std::to_string(h->max_positions));
    m.input_shape = {seq};
    m.token_input = true;
    m.vocab = h->vocab;
    for (int64_t i = 0; i < h->layers + 2; i++)
        m.stage_names.push_back(i == 0               ? "embedding"
                                : i == h->layers + 1 ? "head"
                                                     : "block" + std::to_string(i - 1));
    return m;
}

} // namespace

ModelSpec read_model_spec(const json_t *spec)
{
    if (!json_is_object(spec))
        throw Failure("spec must be an object");
    if (!jstr(spec, "model_path", "").empty())
        return read_script_spec(spec);
    if (json_object_get(spec, "hf_config") != nullptr)
        return read_hf_spec(spec);
    ModelSpec m;
    const json_t *layers = json_object_get(spec, "layers");
    std::string zoo = jstr(spec, "model", "");
    if (!zoo.empty() && layers != nullptr)
        throw Failure("spec: give either model or layers, not both");
    std::shared_ptr<json_t> zoo_shape;
    if (!zoo.empty()) {
        json_t *shape = nullptr;
        json_t *ls = zoo_layers(zoo, json_object_get(spec, "model_options"), &shape);
        m.layers.reset(ls, json_decref);
        zoo_shape.reset(shape, json_decref);
        m.name = zoo;
    } else {
        if (!json_is_array(layers) || json_array_size(layers) == 0)
            throw Failure("spec: layers must be a non-empty list (or give a zoo model)");
        m.layers.reset(json_incref(const_cast<json_t *>(layers)), json_decref);
        m.name = jstr(spec, "name", "layers");
    }
    read_batch_dtype(spec, m);
    /* Every layer by the table rematd checked a request's with (the zoo's
     * own types too), so that add_layer reads arguments of the right kinds
     * and a spec run by hand is held to what rematd would take. */
    for (size_t i = 0; i < json_array_size(m.layers.get()); i++) {
        char ptr[64];
        snprintf(ptr, sizeof ptr, "/layers/%zu", i);
        struct remat_error err = {};
        if (rematx_layer_check(json_array_get(m.layers.get(), i), ptr, 1, &err) != REMAT_OK)
            throw Failure(std::string(err.pointer + 1) + ": " + err.message);
    }
    const json_t *first = json_array_get(m.layers.get(), 0);
    m.token_input = jstr(first, "type", "") == "gpt_embedding";
    if (m.token_input)
        m.vocab = rematx_layer_int(first, REMATX_ARG_gpt_embedding_vocab);
    const json_t *is = json_object_get(spec, "input_shape");
    if (is == nullptr || json_is_null(is)) {
        /* The zoo's default, as rematd fills it in; a layer list has none. */
        if (zoo_shape == nullptr)
            throw Failure("input_shape: a layer list needs input_shape");
        is = zoo_shape.get();
    }
    if (!json_is_array(is) || json_array_size(is) == 0 || json_array_size(is) > 8)
        throw Failure("input_shape must be a list of 1 to 8 integers in 1.." +
                      std::to_string(REMATX_MAX_DIM));
    for (size_t i = 0; i < json_array_size(is); i++) {
        const json_t *d = json_array_get(is, i);
        if (!json_is_integer(d) || json_integer_value(d) <= 0 ||
            json_integer_value(d) > REMATX_MAX_DIM)
            throw Failure("input_shape must be a list of 1 to 8 integers in 1.." +
                          std::to_string(REMATX_MAX_DIM));
        m.input_shape.push_back(json_integer_value(d));
    }
    return m;
}

namespace
{

/* An uploaded model's stages, their shapes found by running the chain once
 * at batch 1 without grad (in eval mode, so that nothing is updated), and,
 * when the stages are the top-level children, the module's own forward
 * compared with the chain's: a forward that is not its children in order
 * (a skip connection across them, a reordering) is not a chain. */
Model build_script(const ModelSpec &spec)
{
    Model m;
    m.spec = spec;
    Script &sc = *spec.script;
    c10::NoGradGuard ng;
    sc.root.train(false);
    std::vector<int64_t> shape = {1};
    shape.insert(shape.end(), spec.input_shape.begin(), spec.input_shape.end());
    torch::manual_seed(12345);
    at::Tensor x0 = spec.token_input ? torch::randint(0, spec.vocab, shape,
                                                      torch::TensorOptions().dtype(torch::kLong))
                                     : torch::randn(shape);
    at::Tensor x = x0;
    size_t n = sc.graph_stages.empty() ? sc.stages.size() : sc.graph_stages.size();
    for (size_t i = 0; i < n; i++) {
        Stage st;
        st.name = spec.stage_names[i];
        st.net = std::make_shared<StageNet>();
        st.net->is_script = true;
        if (sc.graph_stages.empty()) {
            auto qn = sc.stages[i].type()->name();
            st.type = qn ? qn->name() : "module";
            st.net->mod = sc.stages[i];
        } else {
            const GraphStage &g = sc.graph_stages[i];
            st.type = g.type;
            st.net->mod = sc.root;
            st.net->fn = std::make_shared<torch::jit::GraphFunction>(
                "stage" + std::to_string(i + 1), g.graph, nullptr);
            st.net->graph_params = g.params;
            st.net->graph_buffers = g.buffers;
        }
        st.in_shape = Shape(x.sizes().begin() + 1, x.sizes().end());
        std::string where =
            "stage " + std::to_string(i + 1) + " (" + st.name + ", " + st.type + ")";
        at::Tensor y;
        try {
            y = st.net->forward(x);
        } catch (const Failure &e) {
            throw Failure(where + ": forward " + e.what());
        } catch (const c10::Error &e) {
            throw Failure(where + " does not accept " +
                          (i == 0 ? "the input" : "the output of stage " + std::to_string(i)) +
                          " of shape " + shape_str(Shape(x.sizes().begin(), x.sizes().end())) +
                          ": " + first_line(e.what_without_backtrace()));
        } catch (const std::runtime_error &e) {
            /* The interpreter's own failures (the model raised) are
             * std::runtime_error: their cause ends the traceback. */
            throw Failure(where + ": forward failed: " + first_line(e.what()));
        }
        if (y.dim() < 1 || y.size(0) != 1)
            throw Failure(where + ": the output of shape " +
                          shape_str(Shape(y.sizes().begin(), y.sizes().end())) +
                          " does not keep the batch dimension first");
        st.out_shape = Shape(y.sizes().begin() + 1, y.sizes().end());
        m.stages.push_back(std::move(st));
        x = y;
    }
    if (sc.default_stages) {
        at::Tensor whole;
        try {
            whole = sc.root.forward({x0}).toTensor();
        } catch (const c10::Error &e) {
            throw Failure("the model's own forward fails on the input: " +
                          first_line(e.what_without_backtrace()));
        } catch (const std::runtime_error &e) {
            throw Failure("the model's own forward fails on the input: " + first_line(e.what()));
        }
        if (!whole.sizes().equals(x.sizes()) || !at::allclose(whole, x, 1e-4, 1e-5))
            throw Failure(
                std::string(sc.graph_stages.empty()
                                ? "the model's forward is not its top-level children run in order ("
                                : "the model's forward is not the stages cut from its graph run "
                                  "in order (") +
                std::string(whole.sizes().equals(x.sizes())
                                ? "same shape, other values"
                                : "its output is " + shape_str(Shape(whole.sizes().begin(),
                                                                     whole.sizes().end()))) +
                "): list the submodules that are its stages in the job's stages");
    }
    sc.root.train(true);
    return m;
}

} // namespace

Model build_model(const ModelSpec &spec)
{
    if (spec.script)
        return build_script(spec);
    if (spec.hf) {
        Model m;
        m.spec = spec;
        for (HfStage &h : hf_stages(*spec.hf, spec.input_shape[0])) {
            Stage st;
            st.name = h.name;
            st.type = h.type;
            st.net = std::make_shared<StageNet>();
            st.net->seq = h.seq;
            st.in_shape = m.stages.empty() ? spec.input_shape : m.stages.back().out_shape;
            st.out_shape = h.out_shape;
            m.stages.push_back(std::move(st));
        }
        return m;
    }
    Model m;
    m.spec = spec;
    Shape s = spec.input_shape;
    const json_t *layers = spec.layers.get();
    for (size_t i = 0; i < json_array_size(layers); i++) {
        const json_t *L = json_array_get(layers, i);
        Stage st;
        st.type = jstr(L, "type", "?");
        st.name = jstr(L, "name", "");
        if (st.name.empty())
            st.name = st.type + std::to_string(i + 1);
        st.in_shape = s;
        st.net = std::make_shared<StageNet>();
        add_layer(st.net->seq, L, s, "layers[" + std::to_string(i) + "]", spec.input_shape[0]);
        st.out_shape = s;
        for (int64_t d : s)
            if (d <= 0)
                throw Failure("layers[" + std::to_string(i) + "] (" + st.type +
                              "): the output shape " + shape_str(s) + " is empty");
        m.stages.push_back(std::move(st));
    }
    return m;
}

/* Integer buffers (BatchNorm's counter, the attention mask) keep their dtype.
 * A parameter that several stages use (tied embeddings: the head's weight
 * is the embedding's) is one tensor in memory: its bytes count once, told
 * apart by its storage, in the last stage that uses it: that stage's
 * backward runs first and makes the gradient, which the memory model puts
 * where the weight's bytes are (the earlier stages' backwards add to it). */
void place(Model &m, const Device &d)
{
    for (auto &st : m.stages) {
        StageNet &net = *st.net;
        for (auto &p : net.parameters())
            p.set_data(p.detach().to(d.dev, m.spec.dtype));
        for (auto &b : net.buffers())
            b.set_data(b.is_floating_point() ? b.to(d.dev, m.spec.dtype) : b.to(d.dev));
        net.train(true);
    }
    std::unordered_set<const void *> counted;
    for (auto st = m.stages.rbegin(); st != m.stages.rend(); ++st) {
        st->param_bytes = 0;
        for (auto &p : st->net->parameters())
            if (counted.insert(p.storage().unsafeGetStorageImpl()).second)
                st->param_bytes += p.numel() * (int64_t)p.element_size();
    }
}

at::Tensor make_input(const Model &m, const Device &d)
{
    std::vector<int64_t> shape = {m.spec.batch};
    shape.insert(shape.end(), m.spec.input_shape.begin(), m.spec.input_shape.end());
    torch::manual_seed(12345);
    if (m.spec.token_input)
        return torch::randint(0, m.spec.vocab, shape, torch::TensorOptions().dtype(torch::kLong))
            .to(d.dev);
    return torch::randn(shape, torch::TensorOptions().dtype(m.spec.dtype).device(d.dev));
}

int64_t input_bytes(const Model &m)
{
    return m.spec.batch * numel(m.spec.input_shape) *
           (m.spec.token_input ? 8 : elem_size(m.spec.dtype));
}

int64_t out_bytes(const Model &m, size_t i)
{
    return m.spec.batch * numel(m.stages[i].out_shape) * elem_size(m.spec.dtype);
}

at::Tensor run_stage(Model &m, size_t i, const at::Tensor &x)
{
    torch::manual_seed(1000 + (uint64_t)i);
    torch::Tensor y;
    try {
        y = m.stages[i].net->forward(x);
    } catch (const Failure &e) {
        throw Failure("stage " + std::to_string(i + 1) + " (" + m.stages[i].name + "): forward " +
                      e.what());
    } catch (const c10::Error &e) {
        std::string msg = first_line(e.what_without_backtrace());
        if (is_oom(msg))
            throw Failure("device out of memory in the forward of stage " + std::to_string(i + 1) +
                          " (" + m.stages[i].name + "): " + msg);
        throw Failure("stage " + std::to_string(i + 1) + " (layers[" + std::to_string(i) + "], " +
                      m.stages[i].type + ") failed with dtype " + m.spec.dtype_name + ": " + msg);
    } catch (const std::runtime_error &e) {
        /* An uploaded model's code that raised: the interpreter's
         * exception, whose traceback ends with the cause. */
        throw Failure("stage " + std::to_string(i + 1) + " (" + m.stages[i].name + ", " +
                      m.stages[i].type + "): forward failed at batch " +
                      std::to_string(x.defined() && x.dim() > 0 ? x.size(0) : 0) + ": " +
                      first_line(e.what()));
    }
    if (y.defined() && x.defined() && y.storage().is_alias_of(x.storage()))
        y = y.clone();
    return y;
}

void backward(Model &m, size_t i, const at::Tensor &y, const at::Tensor &dy, bool retain_graph)
{
    try {
        torch::autograd::backward({y}, {dy}, retain_graph);
    } catch (const c10::Error &e) {
        std::string msg = first_line(e.what_without_backtrace());
        if (is_oom(msg))
            throw Failure("device out of memory in the backward of stage " + std::to_string(i + 1) +
                          " (" + m.stages[i].name + "): " + msg);
        throw Failure("backward of stage " + std::to_string(i + 1) + " (" + m.stages[i].type +
                      ") failed with dtype " + m.spec.dtype_name + ": " + msg);
    }
}

void clear_grads(Model &m)
{
    for (auto &st : m.stages)
        for (auto &p : st.net->parameters())
            p.mutable_grad() = torch::Tensor();
}

std::vector<at::Tensor> parameters(Model &m)
{
    /* A tied weight (a head that is the embedding) once: the
     * optimizer steps it once. */
    std::unordered_set<const void *> seen;
    std::vector<at::Tensor> ps;
    for (auto &st : m.stages)
        for (auto &p : st.net->parameters())
            if (seen.insert(p.unsafeGetTensorImpl()).second)
                ps.push_back(p);
    return ps;
}

std::vector<at::Tensor> grads(Model &m)
{
    std::vector<at::Tensor> g;
    for (auto &st : m.stages)
        for (auto &p : st.net->parameters())
            g.push_back(p.grad().defined() ? p.grad().detach().clone() : torch::Tensor());
    return g;
}

} // namespace rw
