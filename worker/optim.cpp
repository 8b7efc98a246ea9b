/*
 * optim.cpp - the optimizer of a training step, run for real: libtorch's
 * own torch::optim classes (SGD, Adam, AdamW) over the model's parameters,
 * the same single-tensor step PyTorch runs off the GPU.  A profile job with
 * an optimizer measures what its step costs on the device (the state it
 * keeps, the transient above that during a step, the step's time); a
 * validation job runs the step after the plan's last backward, inside the
 * measured peak (docs/worker.md, "The optimizer").
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <ATen/ops/randn_like.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/GradMode.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <string>
#include <vector>

#include "shim_private.h"

namespace rw
{

OptimSpec read_optim_spec(const json_t *spec)
{
    OptimSpec s;
    const json_t *o = json_object_get(spec, "optimizer");
    if (o == nullptr || json_is_null(o))
        return s;
    const json_t *name = json_is_object(o) ? json_object_get(o, "name") : o;
    if (!json_is_string(name))
        throw Failure("optimizer must be a name or an object with a name");
    s.name = json_string_value(name);
    if (s.name != "none" && s.name != "sgd" && s.name != "sgd-momentum" && s.name != "adam" &&
        s.name != "adamw")
        throw Failure("optimizer " + s.name + " is not none, sgd, sgd-momentum, adam or adamw");
    if (json_is_object(o)) {
        if (json_is_true(json_object_get(o, "foreach")))
            throw Failure("optimizer: the worker runs libtorch's single-tensor step; foreach is "
                          "modelled, not measured");
        s.weight_decay = json_is_true(json_object_get(o, "weight_decay"));
    }
    return s;
}

struct Optim::Impl {
    std::vector<at::Tensor> params;
    std::unique_ptr<torch::optim::Optimizer> opt;
};

Optim::Optim(Model &m, const OptimSpec &s, double lr) : impl(new Impl)
{
    impl->params = parameters(m);
    /* Weight decay, when asked, at a usual value: what matters for memory
     * is whether the step makes grad + wd * p (adam, sgd) or decays in
     * place (adamw). */
    double wd = s.weight_decay ? 0.01 : 0.0;
    if (s.name == "sgd" || s.name == "sgd-momentum")
        impl->opt.reset(
            new torch::optim::SGD(impl->params, torch::optim::SGDOptions(lr)
                                                    .momentum(s.name == "sgd-momentum" ? 0.9 : 0.0)
                                                    .weight_decay(wd)));
    else if (s.name == "adam")
        impl->opt.reset(
            new torch::optim::Adam(impl->params, torch::optim::AdamOptions(lr).weight_decay(wd)));
    else if (s.name == "adamw")
        /* libtorch's AdamW defaults to decay 0.01 (PyTorch's too). */
        impl->opt.reset(new torch::optim::AdamW(
            impl->params, torch::optim::AdamWOptions(lr).weight_decay(s.weight_decay ? wd : 0)));
}

Optim::~Optim() = default;

bool Optim::active() const
{
    return impl->opt != nullptr;
}

void Optim::step()
{
    if (!impl->opt)
        return;
    try {
        c10::NoGradGuard ng;
        impl->opt->step();
    } catch (const c10::Error &e) {
        std::string msg = first_line(e.what_without_backtrace());
        if (is_oom(msg))
            throw Failure("device out of memory in the optimizer step: " + msg);
        throw Failure("the optimizer step failed: " + msg);
    }
}

int64_t Optim::make_state(const Device &d)
{
    if (!impl->opt)
        return 0;
    /* Zero gradients, so that every parameter gets its state (an optimizer
     * skips a parameter without a gradient) and, with lr 0 or not, adam's
     * first moments stay what they were. */
    for (auto &p : impl->params)
        p.mutable_grad() = at::zeros_like(p);
    d.sync();
    int64_t before = d.current();
    step();
    d.sync();
    int64_t state = d.current() - before;
    for (auto &p : impl->params)
        p.mutable_grad() = at::Tensor();
    return state;
}

json_t *measure_optimizer(Model &m, const OptimSpec &s, const Device &d, int warmup, int repeats)
{
    Optim o(m, s, 1e-3);
    if (!o.active())
        return nullptr;
    int64_t state = o.make_state(d);
    /* The step after a backward: every weight gradient live (random, as
     * a backward leaves them), every activation gone. */
    for (auto &p : parameters(m))
        p.mutable_grad() = at::randn_like(p);
    Timer timer(d);
    std::vector<double> ms;
    int64_t tmp = 0;
    for (int r = 0; r < warmup + repeats; r++) {
        d.sync();
        int64_t before = d.current();
        d.reset_peak();
        timer.start();
        o.step();
        double t = timer.stop_ms();
        d.sync();
        if (r >= warmup) {
            tmp = std::max(tmp, d.peak() - before);
            ms.push_back(t);
        }
    }
    clear_grads(m);
    return json_pack("{s:s, s:b, s:I, s:I, s:f}", "name", s.name.c_str(), "foreach", 0,
                     "state_bytes", (json_int_t)state, "step_tmp_bytes", (json_int_t)tmp, "step_ms",
                     median(ms));
}

} // namespace rw
