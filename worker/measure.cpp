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
            c10::NoGradGuard ng;
            at::Tensor y = run_stage(m, i, x);
            d.sync();
            int64_t f = d.peak() - d.current();
            if (keep)
                c.fwd_tmp = std::max(c.fwd_tmp, f);
        }
        /* F_all: what stays live is x̄_i; the transient is above that. */
        at::Tensor leaf = input_grad ? x.detach().requires_grad_(true) : x;
        d.sync();
        int64_t before = d.current();
        d.reset_peak();
        timer.start();
        at::Tensor y = run_stage(m, i, leaf);
        double ms = timer.stop_ms();
        int64_t after = d.current();
        int64_t pk = d.peak();
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
    if (c.bwd_tmp == std::numeric_limits<int64_t>::min())
        c.bwd_tmp = 0; /* no backward ran (nothing needs a gradient) */
    c.fwd_ms = median(tf);
    c.bwd_ms = median(tb);
    if (d.cuda)
        time_back_to_back(m, i, x, input_grad, repeats, d, c);
    return c;
}

} // namespace

json_t *profile(const json_t *spec, const Progress &progress)
{
    const Device &d = the_device();
    check_device_matches(spec, d);
    progress(0, 0, "building");
    Model m = build_model(read_model_spec(spec));
    int n = (int)m.stages.size();
    int warmup = (int)jint(spec, "warmup", 2, "warmup");
    int repeats = (int)jint(spec, "repeats", 5, "repeats");
    if (warmup < 0 || warmup > 100 || repeats < 1 || repeats > 1000)
        throw Failure("warmup must be in 0..100 and repeats in 1..1000");
    OptimSpec os = read_optim_spec(spec);
    place(m, d);
    at::Tensor x = make_input(m, d);
    json_t *stages = json_array();
    /* A Hugging Face config's decoder blocks (stages 1..L) are one module
     * built L times: the first two are measured, the second as a check of
     * the first, and when they agree byte for byte the rest take the
     * second's numbers, marked "measured_as" (docs/profile.md), so a
     * 48-block model profiles in about the time of a 6-block one.  The
     * blocks' output shape is their input's, so the head runs on the
     * second block's output. */
    int first_copy = m.spec.hf && m.spec.hf->layers >= 3 ? 3 : n;
    try {
        for (int i = 0; i < n; i++) {
            progress(i + 1, n, "measuring");
            if (i >= first_copy && i < n - 1) {
                json_t *st = json_deep_copy(json_array_get(stages, 2));
                if (st == nullptr)
                    throw std::bad_alloc();
                if (json_object_set_new(st, "name", json_string(m.stages[i].name.c_str())) ||
                    json_object_set_new(st, "measured_as", json_string(m.stages[2].name.c_str()))) {
                    json_decref(st);
                    throw std::bad_alloc();
                }
                if (json_array_append_new(stages, st))
                    throw std::bad_alloc();
                continue;
            }
            StageCost c = measure_stage(m, (size_t)i, x, warmup, repeats, d);
            /* The output for the next stage, and a check of the inferred shape. */
            at::Tensor y;
            {
                c10::NoGradGuard ng;
                y = run_stage(m, (size_t)i, x);
            }
            Shape got(y.sizes().begin() + 1, y.sizes().end());
            if (y.size(0) != m.spec.batch || got != m.stages[i].out_shape)
                throw Failure("layers[" + std::to_string(i) + "] (" + m.stages[i].type +
                              "): the output shape " + shape_str(got) +
                              " differs from the inferred " + shape_str(m.stages[i].out_shape));
            int64_t ob = out_bytes(m, (size_t)i);
            if (y.numel() * (int64_t)y.element_size() != ob)
                throw Failure("layers[" + std::to_string(i) +
                              "]: output bytes differ from the shape");
            x = y;
            int64_t sb = std::max(c.saved, ob);
            /* A backward below zero frees before it allocates: what it frees
             * is at most what it holds, x̄_i and δ_i (the format's limit). */
            int64_t freed = std::min(std::max<int64_t>(-c.bwd_tmp, 0), sb + ob);
            json_array_append_new(
                stages,
                json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f}", "name",
                          m.stages[i].name.c_str(), "out_bytes", (json_int_t)ob, "saved_bytes",
                          (json_int_t)sb, "fwd_tmp_bytes",
                          (json_int_t)std::max<int64_t>(c.fwd_tmp, 0), "fwd_grad_tmp_bytes",
                          (json_int_t)std::max<int64_t>(c.fwd_grad_tmp, 0), "bwd_tmp_bytes",
                          (json_int_t)std::max<int64_t>(c.bwd_tmp, 0), "bwd_freed_bytes",
                          (json_int_t)freed, "param_bytes", (json_int_t)m.stages[i].param_bytes,
                          "fwd_ms", c.fwd_ms, "bwd_ms", c.bwd_ms));
            if (i == 2 && first_copy == 3) {
                /* The check: the second block's bytes must be the first's. */
                static const char *const keys[] = {
                    "out_bytes",     "saved_bytes",     "fwd_tmp_bytes", "fwd_grad_tmp_bytes",
                    "bwd_tmp_bytes", "bwd_freed_bytes", "param_bytes"};
                json_t *a = json_array_get(stages, 1), *b = json_array_get(stages, 2);
                for (const char *k : keys)
                    if (!json_equal(json_object_get(a, k), json_object_get(b, k)))
                        first_copy = n;
            }
        }
    } catch (...) {
        json_decref(stages);
        throw;
    }
    /* The optimizer's step after the last backward: the activations are
     * gone, the weight gradients live. */
    x = at::Tensor();
    json_t *optim = nullptr;
    try {
        /* Said again only when there is an optimizer step to measure. */
        if (os.name != "none")
            progress(n, n, "measuring");
        optim = measure_optimizer(m, os, d, warmup, repeats);
    } catch (...) {
        json_decref(stages);
        throw;
    }
    json_t *info = device_info_json(d);
    json_t *p = json_pack("{s:s, s:s, s:I, s:s, s:I, s:o}", "format", "remat.profile/v1", "model",
                          m.spec.name.c_str(), "batch_size", (json_int_t)m.spec.batch, "dtype",
                          m.spec.dtype_name.c_str(), "input_bytes", (json_int_t)input_bytes(m),
                          "stages", stages);
    json_object_update(p, info);
    json_decref(info);
    if (optim != nullptr)
        json_object_set_new(p, "optimizer", optim);
    return p;
}

} // namespace rw
