/*
 * measure.cpp - a profile job: every stage measured in turn, warm-ups
 * first, then each repeat's forward without grad (F_none), forward with grad
 * (F_all) and backward (B), as docs/worker.md's table says, then the
 * optimizer's step when the job names one (optim.cpp); the result is a
 * remat.profile/v1 object.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <ATen/ops/randn_like.h>
#include <c10/core/GradMode.h>

#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "shim_private.h"

namespace rw
{

namespace
{

/* The bytes of docs/profile.md: fwd_tmp is the forward without grad's
 * transient, fwd_grad_tmp the forward with grad's, bwd_tmp the backward's
 * signed transient (below zero when it frees saved tensors before it has
 * made all its gradients; written as bwd_freed_bytes). */
struct StageCost {
    int64_t saved = 0, fwd_tmp = 0, fwd_grad_tmp = 0;
    int64_t bwd_tmp = std::numeric_limits<int64_t>::min();
    double fwd_ms = 0, bwd_ms = 0;
    /* When traced, the last repeat's allocations and frees (Device's
     * trace) in F_none, F_all and B, and the input gradient's bytes. */
    std::vector<int64_t> t_none, t_all, t_bwd;
    int64_t in_bytes = 0;
};

/* A GPU stage timed alone, between synchronisations, waits for the host to
 * launch each of its kernels; inside a step the host runs ahead and the
 * device goes from one kernel to the next.  So on a GPU fwd_ms and bwd_ms
 * are the mean of `repeats` forwards (with grad) and then of as many
 * backwards, each run back to back with no synchronisation between them:
 * what the stage adds to a step (docs/accuracy.md, "Step time"; timed
 * alone, ResNet-50 batch 32's stages summed to 24.0 ms for a store-all
 * step of 17.9 ms on an H200).  Each backward runs on the same graph,
 * retained, with the gradients cleared before it, as a step's first
 * backward finds them. */
void time_back_to_back(Model &m, size_t i, const at::Tensor &x, bool input_grad, int repeats,
                       const Device &d, StageCost &c)
{
    at::Tensor leaf = input_grad ? x.detach().requires_grad_(true) : x;
    Timer timer(d);
    at::Tensor y;
    d.sync();
    timer.start();
    for (int r = 0; r < repeats; r++) {
        y = at::Tensor(); /* never two graphs at once: the memory is measured alone */
        y = run_stage(m, i, leaf);
    }
    c.fwd_ms = timer.stop_ms() / repeats;
    if (!y.requires_grad())
        return;
    at::Tensor dy = at::randn_like(y);
    clear_grads(m);
    d.sync();
    timer.start();
    for (int r = 0; r < repeats; r++) {
        clear_grads(m);
        if (leaf.requires_grad())
            leaf.mutable_grad() = at::Tensor();
        backward(m, i, y, dy, r + 1 < repeats);
    }
    c.bwd_ms = timer.stop_ms() / repeats;
    clear_grads(m);
}

StageCost measure_stage(Model &m, size_t i, const at::Tensor &x, int warmup, int repeats,
                        const Device &d, bool trace)
{
    StageCost c;
    std::vector<double> tf, tb;
    bool input_grad = i > 0 && x.is_floating_point();
    int64_t in_bytes = input_grad ? x.numel() * (int64_t)x.element_size() : 0;
    int64_t p_bytes = m.stages[i].param_bytes;
    Timer timer(d);
    c.in_bytes = in_bytes;
    for (int r = 0; r < warmup + repeats; r++) {
        bool keep = r >= warmup;
        bool tr = trace && r + 1 == warmup + repeats;
        clear_grads(m);
        /* F_none: peak above what is live after (x_i added). */
        d.sync();
        d.reset_peak();
        if (tr)
            d.trace_start();
        {
            c10::NoGradGuard ng;
            at::Tensor y = run_stage(m, i, x);
            d.sync();
            int64_t f = d.peak() - d.current();
            if (tr)
                c.t_none = d.trace_stop();
            if (keep)
                c.fwd_tmp = std::max(c.fwd_tmp, f);
        }
        /* F_all: what stays live is x̄_i; the transient is above that. */
        at::Tensor leaf = input_grad ? x.detach().requires_grad_(true) : x;
        d.sync();
        int64_t before = d.current();
        d.reset_peak();
        if (tr)
            d.trace_start();
        timer.start();
        at::Tensor y = run_stage(m, i, leaf);
        double ms = timer.stop_ms();
        int64_t after = d.current();
        int64_t pk = d.peak();
        if (tr)
            c.t_all = d.trace_stop();
        if (keep) {
            c.saved = std::max(c.saved, after - before);
            c.fwd_grad_tmp = std::max(c.fwd_grad_tmp, pk - after);
            tf.push_back(ms);
        }
        if (!y.requires_grad())
            continue;
        /* B: the transient above δ_{i-1} and ∂W_i, over what was live:
         * signed, as the peak may come after the backward has freed more
         * of x̄_i than it has allocated (the largest over the repeats). */
        at::Tensor dy = at::randn_like(y);
        d.sync();
        before = d.current();
        d.reset_peak();
        if (tr)
            d.trace_start();
        timer.start();
        backward(m, i, y, dy);
        ms = timer.stop_ms();
        pk = d.peak();
        if (tr)
            c.t_bwd = d.trace_stop();
        if (keep) {
            c.bwd_tmp = std::max(c.bwd_tmp, pk - before - in_bytes - p_bytes);
            tb.push_back(ms);
        }
    }
    clear_grads(m);
    if (c.bwd_tmp == std::numeric_limits<int64_t>::min())
        c.bwd_tmp = 0; /* no backward ran (nothing needs a gradient) */
    c.fwd_ms = median(tf);
    c.bwd_ms = median(tb);
    if (d.cuda)
        time_back_to_back(m, i, x, input_grad, repeats, d, c);
    return c;
}

/* A stage's numbers as the profile writes them. */
struct StageNumbers {
    int64_t out = 0, saved = 0, fwd_tmp = 0, fwd_grad_tmp = 0, bwd_tmp = 0, freed = 0, param = 0;
    double fwd_ms = 0, bwd_ms = 0;
    bool operator==(const StageNumbers &o) const
    {
        return out == o.out && saved == o.saved && fwd_tmp == o.fwd_tmp &&
               fwd_grad_tmp == o.fwd_grad_tmp && bwd_tmp == o.bwd_tmp && freed == o.freed &&
               param == o.param;
    }
};

/* From the measured (or scaled) transients: bwd signed as measured. */
StageNumbers numbers(int64_t ob, int64_t saved, int64_t fwd_tmp, int64_t fwd_grad_tmp, int64_t bwd,
                     int64_t param, double fwd_ms, double bwd_ms)
{
    StageNumbers n;
    n.out = ob;
    n.saved = std::max(saved, ob);
    n.fwd_tmp = std::max<int64_t>(fwd_tmp, 0);
    n.fwd_grad_tmp = std::max<int64_t>(fwd_grad_tmp, 0);
    if (bwd == std::numeric_limits<int64_t>::min())
        bwd = 0; /* no backward ran (nothing needs a gradient) */
    n.bwd_tmp = std::max<int64_t>(bwd, 0);
    /* A backward below zero frees before it allocates: what it frees is
     * at most what it holds, x̄_i and δ_i (the format's limit). */
    n.freed = std::min(std::max<int64_t>(-bwd, 0), n.saved + ob);
    n.param = param;
    n.fwd_ms = fwd_ms;
    n.bwd_ms = bwd_ms;
    return n;
}

/* Every stage of m measured, with its output's bytes.  A Hugging Face
 * config's decoder blocks (stages 1..L) are one module built L times: the
 * first two are measured, the second as a check of the first, and when
 * they agree byte for byte the rest take the second's numbers (copied[i]),
 * marked "measured_as" (docs/profile.md), so a 48-block model profiles in
 * about the time of a 6-block one.  The blocks' output shape is their
 * input's, so the head runs on the second block's output. */
struct ModelRun {
    std::vector<StageCost> cost;
    std::vector<int64_t> out;
    std::vector<bool> copied;
    int64_t input = 0;
};

ModelRun measure_model(Model &m, const Device &d, int warmup, int repeats, bool trace,
                       const std::function<void(int, int)> &progress)
{
    int n = (int)m.stages.size();
    ModelRun run;
    run.input = input_bytes(m);
    at::Tensor x = make_input(m, d);
    int first_copy = m.spec.hf && m.spec.hf->layers >= 3 ? 3 : n;
    for (int i = 0; i < n; i++) {
        progress(i + 1, n);
        if (i >= first_copy && i < n - 1) {
            run.cost.push_back(run.cost[2]);
            run.out.push_back(run.out[2]);
            run.copied.push_back(true);
            continue;
        }
        StageCost c = measure_stage(m, (size_t)i, x, warmup, repeats, d, trace);
        /* The output for the next stage, and a check of the inferred shape. */
        at::Tensor y;
        {
            c10::NoGradGuard ng;
            y = run_stage(m, (size_t)i, x);
        }
        Shape got(y.sizes().begin() + 1, y.sizes().end());
        if (y.size(0) != m.spec.batch || got != m.stages[i].out_shape)
            throw Failure("layers[" + std::to_string(i) + "] (" + m.stages[i].type +
                          "): the output shape " + shape_str(got) + " differs from the inferred " +
                          shape_str(m.stages[i].out_shape));
        int64_t ob = out_bytes(m, (size_t)i);
        if (y.numel() * (int64_t)y.element_size() != ob)
            throw Failure("layers[" + std::to_string(i) + "]: output bytes differ from the shape");
        x = y;
        run.cost.push_back(std::move(c));
        run.out.push_back(ob);
        run.copied.push_back(false);
        if (i == 2 && first_copy == 3) {
            /* The check: the second block's bytes must be the first's. */
            auto num = [&](int k) {
                const StageCost &s = run.cost[k];
                return numbers(run.out[k], s.saved, s.fwd_tmp, s.fwd_grad_tmp, s.bwd_tmp,
                               m.stages[k].param_bytes, 0, 0);
            };
            if (!(num(1) == num(2)))
                first_copy = n;
        }
    }
    return run;
}

/* The sequence model (docs/scheduling.md, "Sizes too large to run here"):
 * one allocation's bytes, measured z0 at s0 tokens and z1 at s1, at s.
 * Every tensor of a transformer stage is constant (the per-sample loss),
 * [batch, seq, ...] (linear) or [batch, heads, seq, seq] (the attention
 * scores: quadratic), so a * seq + c * seq^2 through the two is exact for
 * each; one that is neither (a fixed part and a linear one) is affine. */
int64_t at_seq(int64_t z0, int64_t z1, int64_t s0, int64_t s1, int64_t s)
{
    if (z0 == z1)
        return z0;
    long double S0 = s0, S1 = s1, S = s;
    long double c = ((long double)z1 / S1 - (long double)z0 / S0) / (S1 - S0);
    long double a = (long double)z0 / S0 - c * S0;
    long double r = c >= 0 && a >= 0
                        ? a * S + c * S * S
                        : (long double)z0 + (long double)(z1 - z0) * (S - S0) / (S1 - S0);
    if (r < 0)
        return 0;
    if (r > (long double)REMAT_MAX_BYTES)
        return REMAT_MAX_BYTES;
    return (int64_t)llroundl(r);
}

/* Times the same way, as non-decreasing in seq: a second time below the
 * first is noise (a stage timed alone on a busy CPU), taken as the first. */
double ms_at_seq(double t0, double t1, int64_t s0, int64_t s1, int64_t s)
{
    t1 = std::max(t0, t1);
    double c = (t1 / (double)s1 - t0 / (double)s0) / (double)(s1 - s0);
    double a = t0 / (double)s0 - c * (double)s0;
    double r = c >= 0 && a >= 0 ? a * (double)s + c * (double)s * (double)s
                                : t0 + (t1 - t0) * (double)(s - s0) / (double)(s1 - s0);
    return s >= s1 ? std::max(r, t1) : std::max(r, 0.0);
}

/* A phase's trace replayed at s: the peak above its start and what it
 * leaves live.  The two traces are one sequence of allocations and frees
 * (the same ops on other sizes), which is checked. */
struct Replay {
    int64_t peak = 0, net = 0;
};

Replay replay(const std::vector<int64_t> &t0, const std::vector<int64_t> &t1, int64_t s0,
              int64_t s1, int64_t s, const std::string &what)
{
    if (t0.size() != t1.size())
        throw Failure(what + ": " + std::to_string(t0.size()) + " allocations and frees at seq " +
                      std::to_string(s0) + ", " + std::to_string(t1.size()) + " at " +
                      std::to_string(s1) + ": not one sequence, so not scaled");
    Replay r;
    for (size_t k = 0; k < t0.size(); k++) {
        if ((t0[k] < 0) != (t1[k] < 0))
            throw Failure(what + ": allocation " + std::to_string(k) +
                          " is a free at one length only: not scaled");
        int64_t z = at_seq(std::llabs(t0[k]), std::llabs(t1[k]), s0, s1, s);
        r.net += t0[k] < 0 ? -z : z;
        r.peak = std::max(r.peak, r.net);
    }
    return r;
}

/* Stage i's numbers at s from its runs at s0 and s1. */
StageNumbers scale_stage(const ModelRun &a, const ModelRun &b, size_t i, int64_t param, int64_t s0,
                         int64_t s1, int64_t s, const std::string &name)
{
    const StageCost &c0 = a.cost[i], &c1 = b.cost[i];
    int64_t ob = at_seq(a.out[i], b.out[i], s0, s1, s);
    Replay none = replay(c0.t_none, c1.t_none, s0, s1, s, name + " forward");
    Replay all = replay(c0.t_all, c1.t_all, s0, s1, s, name + " forward with grad");
    int64_t bwd = std::numeric_limits<int64_t>::min();
    if (!c0.t_bwd.empty() || !c1.t_bwd.empty()) {
        Replay back = replay(c0.t_bwd, c1.t_bwd, s0, s1, s, name + " backward");
        bwd = back.peak - at_seq(c0.in_bytes, c1.in_bytes, s0, s1, s) - param;
    }
    return numbers(ob, all.net, none.peak - none.net, all.peak - all.net, bwd, param,
                   ms_at_seq(c0.fwd_ms, c1.fwd_ms, s0, s1, s),
                   ms_at_seq(c0.bwd_ms, c1.bwd_ms, s0, s1, s));
}

/* "measure_seq_lens": two lengths, each below seq_len; {0, 0} when absent. */
std::pair<int64_t, int64_t> read_seq_lens(const json_t *spec, const ModelSpec &ms)
{
    const json_t *v = json_object_get(spec, "measure_seq_lens");
    if (v == nullptr)
        return {0, 0};
    if (!ms.hf)
        throw Failure("measure_seq_lens is for hf_config jobs");
    int64_t s = ms.input_shape.at(0);
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_integer(json_array_get(v, 0)) ||
        !json_is_integer(json_array_get(v, 1)))
        throw Failure("measure_seq_lens is two sequence lengths");
    int64_t a = json_integer_value(json_array_get(v, 0)),
            b = json_integer_value(json_array_get(v, 1));
    if (a > b)
        std::swap(a, b);
    if (a < 1 || a == b || b > s)
        throw Failure("measure_seq_lens: two distinct lengths in 1..seq_len (" + std::to_string(s) +
                      ")");
    return {a, b};
}

} // namespace

json_t *profile(const json_t *spec, const Progress &progress)
{
    const Device &d = the_device();
    check_device_matches(spec, d);
    progress(0, 0, "building");
    ModelSpec ms = read_model_spec(spec);
    int warmup = (int)jint(spec, "warmup", 2, "warmup");
    int repeats = (int)jint(spec, "repeats", 5, "repeats");
    if (warmup < 0 || warmup > 100 || repeats < 1 || repeats > 1000)
        throw Failure("warmup must be in 0..100 and repeats in 1..1000");
    OptimSpec os = read_optim_spec(spec);
    auto sl = read_seq_lens(spec, ms);
    bool scaled = sl.first > 0;
    int64_t seq = scaled ? ms.input_shape.at(0) : 0;
    if (scaled && d.cuda)
        throw Failure("measure_seq_lens is measured on CPU (its allocations traced)");
    std::vector<StageNumbers> nums;
    std::vector<bool> copied;
    std::vector<std::string> names;
    int64_t in_b = 0;
    json_t *optim = nullptr;
    std::string model_name = ms.name, dtype_name = ms.dtype_name;
    int64_t batch = ms.batch;
    /* Measured at seq_len, or at the two lengths and scaled to it: a model
     * at each, built in turn (the one at seq_len never is). */
    std::vector<ModelRun> runs;
    int passes = scaled ? 2 : 1;
    for (int pass = 0; pass < passes; pass++) {
        ModelSpec one = ms;
        if (scaled) {
            one = ms;
            one.input_shape = {pass == 0 ? sl.first : sl.second};
        }
        if (pass > 0)
            progress(0, 0, "building");
        Model m = build_model(one);
        place(m, d);
        int n = (int)m.stages.size();
        runs.push_back(measure_model(m, d, warmup, repeats, scaled, [&](int i, int) {
            progress(pass * n + i, passes * n, "measuring");
        }));
        if (pass + 1 == passes) {
            names.clear();
            std::vector<int64_t> params;
            for (auto &st : m.stages) {
                names.push_back(st.name);
                params.push_back(st.param_bytes);
            }
            const ModelRun &r = runs.back();
            copied = r.copied;
            for (int i = 0; i < n; i++)
                nums.push_back(scaled ? scale_stage(runs[0], r, (size_t)i, params[i], sl.first,
                                                    sl.second, seq, names[i])
                                      : numbers(r.out[i], r.cost[i].saved, r.cost[i].fwd_tmp,
                                                r.cost[i].fwd_grad_tmp, r.cost[i].bwd_tmp,
                                                params[i], r.cost[i].fwd_ms, r.cost[i].bwd_ms));
            in_b = scaled ? at_seq(runs[0].input, r.input, sl.first, sl.second, seq) : r.input;
            /* The optimizer's step after the last backward: the
             * activations are gone, the weight gradients live. */
            if (os.name != "none")
                progress(n, n, "measuring");
            optim = measure_optimizer(m, os, d, warmup, repeats);
        }
    }
    json_t *stages = json_array();
    for (size_t i = 0; stages != nullptr && i < nums.size(); i++) {
        const StageNumbers &s = nums[i];
        json_t *st = json_pack(
            "{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f}", "name", names[i].c_str(),
            "out_bytes", (json_int_t)s.out, "saved_bytes", (json_int_t)s.saved, "fwd_tmp_bytes",
            (json_int_t)s.fwd_tmp, "fwd_grad_tmp_bytes", (json_int_t)s.fwd_grad_tmp,
            "bwd_tmp_bytes", (json_int_t)s.bwd_tmp, "bwd_freed_bytes", (json_int_t)s.freed,
            "param_bytes", (json_int_t)s.param, "fwd_ms", s.fwd_ms, "bwd_ms", s.bwd_ms);
        if (st != nullptr && copied[i])
            json_object_set_new(st, "measured_as", json_string(names[2].c_str()));
        if (st == nullptr || json_array_append_new(stages, st)) {
            json_decref(stages);
            stages = nullptr;
        }
    }
    if (stages == nullptr) {
        json_decref(optim);
        throw std::bad_alloc();
    }
    json_t *info = device_info_json(d);
    json_t *p = json_pack("{s:s, s:s, s:I, s:s, s:I, s:o}", "format", "remat.profile/v1", "model",
                          model_name.c_str(), "batch_size", (json_int_t)batch, "dtype",
                          dtype_name.c_str(), "input_bytes", (json_int_t)in_b, "stages", stages);
    json_object_update(p, info);
    json_decref(info);
    if (optim != nullptr)
        json_object_set_new(p, "optimizer", optim);
    if (scaled)
        json_object_set_new(p, "scaled_from",
                            json_pack("{s:I, s:[I, I]}", "seq_len", (json_int_t)seq,
                                      "measured_seq_lens", (json_int_t)sl.first,
                                      (json_int_t)sl.second));
    return p;
}

} // namespace rw
