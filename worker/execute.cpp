/*
 * execute.cpp - a validation job: runs a plan's op list for real, beside
 * store-all, and reports the measured peak against the prediction
 * (docs/worker.md, "How a plan is run").
 *
 * The op list is libremat's: the plan's "schedule" read with
 * remat_op_parse (the names plans print), or, for a plan that gives only
 * checkpoints, remat_schedule_from_checkpoints.  Before any tensor is made,
 * remat_simulate replays it on the job's profile, so a malformed plan fails
 * the job with the op named instead of half running on the device.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <ATen/Context.h>
#include <ATen/ops/randn_like.h>
#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "remat.h"
#include "shim_private.h"

namespace rw
{

namespace
{

/* ------------------------------------------------------------------------
 * The op list, from libremat.
 */

struct ProfileFree {
    void operator()(struct remat_profile *p) const
    {
        remat_profile_free(p);
    }
};
using ProfilePtr = std::unique_ptr<struct remat_profile, ProfileFree>;

/* A remat_schedule that frees itself. */
struct Schedule {
    struct remat_schedule s;
    Schedule()
    {
        remat_schedule_init(&s);
    }
    ~Schedule()
    {
        remat_schedule_clear(&s);
    }
    Schedule(const Schedule &) = delete;
    Schedule &operator=(const Schedule &) = delete;
};

/* The error of a libremat call, as a job's reason. */
Failure remat_failure(const char *what, int rc, const struct remat_error &err)
{
    if (rc == REMAT_ENOMEM)
        return Failure(std::string(what) + ": out of memory (host)");
    return Failure(std::string(what) + ": " + err.message);
}

/* The profile the plan was made from (rematd sends the profile job's
 * result).  A local run has none: a profile of n stages with every size 0
 * then checks the op list's order, which is all the check needs. */
ProfilePtr job_profile(const json_t *spec, size_t n)
{
    struct remat_error err = {};
    const json_t *pj = json_object_get(spec, "profile");
    ProfilePtr p(pj != nullptr && !json_is_null(pj) ? remat_profile_from_json(pj, "/profile", &err)
                                                    : remat_profile_new(n, &err));
    if (p == nullptr)
        throw remat_failure("profile", err.code, err);
    if (p->n_stages != n)
        throw Failure("profile: " + std::to_string(p->n_stages) + " stages, but the model has " +
                      std::to_string(n));
    return p;
}

/* The plan's schedule, [{"op": "F_ck", "stage": 3}, ...] as plans print it,
 * into s; without one, the single-level schedule of its checkpoints. */
void plan_schedule(const json_t *plan, const struct remat_profile *p, Schedule &out)
{
    const json_t *sched = json_object_get(plan, "schedule");
    if (sched != nullptr && !json_is_null(sched)) {
        if (!json_is_array(sched) || json_array_size(sched) == 0)
            throw Failure("plan: schedule must be a non-empty list of ops");
        for (size_t k = 0; k < json_array_size(sched); k++) {
            const json_t *e = json_array_get(sched, k);
            std::string at = "plan: schedule[" + std::to_string(k) + "]";
            if (!json_is_object(e))
                throw Failure(at + " must be an object {\"op\", \"stage\"}");
            const char *name = json_string_value(json_object_get(e, "op"));
            enum remat_op_kind kind;
            if (remat_op_parse(name, &kind) != REMAT_OK) {
                std::string ops;
                for (int o = REMAT_OP_F_NONE; o <= REMAT_OP_B; o++)
                    ops += std::string(o > REMAT_OP_F_NONE ? ", " : "") + remat_op_name(o);
                throw Failure(at + ".op " +
                              (name != nullptr ? "\"" + std::string(name) + "\"" : "(missing)") +
                              " is not one of " + ops);
            }
            const json_t *stage = json_object_get(e, "stage");
            if (!json_is_integer(stage) || json_integer_value(stage) < 1 ||
                (size_t)json_integer_value(stage) > p->n_stages)
                throw Failure(at + ".stage must be a stage in 1.." + std::to_string(p->n_stages));
            int rc = remat_schedule_push(&out.s, kind, (uint32_t)json_integer_value(stage));
            if (rc != REMAT_OK)
                throw Failure("plan: schedule: " + std::string(remat_strerror(rc)));
        }
        return;
    }
    const json_t *cks = json_object_get(plan, "checkpoints");
    if (cks != nullptr && !json_is_array(cks))
        throw Failure("plan: give a schedule or a list of checkpoints");
    std::vector<size_t> ck;
    for (size_t k = 0; k < json_array_size(cks); k++) {
        const json_t *c = json_array_get(cks, k);
        if (!json_is_integer(c) || json_integer_value(c) < 1)
            throw Failure("plan: checkpoints[" + std::to_string(k) + "] is not a stage index");
        ck.push_back((size_t)json_integer_value(c));
    }
    struct remat_error err = {};
    int rc = remat_schedule_from_checkpoints(p, ck.data(), ck.size(), &out.s, &err);
    if (rc != REMAT_OK)
        throw remat_failure("plan", rc, err);
}

/* Refuses an op list that uses a value before it exists, makes one twice
 * or leaves work undone, naming the op (libremat's simulator decides).
 * Returns the step time the simulator predicts for it on p. */
double check_schedule(const struct remat_profile *p, const Schedule &s)
{
    struct remat_sim sim = {};
    struct remat_error err = {};
    int rc = remat_simulate(p, REMAT_MODEL_TRACED, &s.s, 0, &sim, &err);
    double ms = sim.total_ms;
    remat_sim_clear(&sim);
    if (rc != REMAT_OK)
        throw remat_failure("plan: the schedule cannot run", rc, err);
    return ms;
}

/* ------------------------------------------------------------------------
 * Running it.
 */

struct StepResult {
    int64_t peak_bytes = 0; /* as docs/memory-model.md counts: W + x_0 + what the step adds */
    double ms = 0;
    /* With an optimizer: the most live during its step (counted as
     * peak_bytes is), and that above what was live when it began. */
    int64_t optim_peak_bytes = 0, optim_tmp_bytes = 0;
    /* On cuda:N (-1 elsewhere), counted from the same base as peak_bytes:
     * the most the caching allocator held from the device during the
     * step (its segments, cached blocks included), and the most bytes the
     * live tensors asked for before its rounding (-1 without libtorch 2.1). */
    int64_t reserved_peak_bytes = -1, requested_peak_bytes = -1;
};

/* The optimizer of a validation: libtorch's, with its state made before
 * the first step is measured, and the bytes that state holds. */
struct StepOptim {
    Optim *opt = nullptr;
    int64_t state_bytes = 0;
};

/* The allocator's own peaks since the step's reset_peak (on cuda:N), from
 * the step's base.  With a timeline the peaks were reset after each op:
 * the reserved bytes then are the most the allocator held at the end of
 * the step, which is its most (a segment stays until empty_cache). */
void allocator_peaks(const Device &d, int64_t base, StepResult &r)
{
    int64_t rp = d.reserved_peak(), qp = d.requested_peak();
    r.reserved_peak_bytes = rp >= 0 ? rp + base : -1;
    r.requested_peak_bytes = qp >= 0 ? qp + base : -1;
}

/* One training step by the op list.  x[i] plain activations (no graph),
 * y[i] outputs with their graphs (x̄_i), leaf[i] the input leaf of stage
 * i's graph, dy[i] = δ_i.  Frees exactly what the memory model frees. */
StepResult run_ops(Model &m, const Schedule &sched, const at::Tensor &x0, const Device &d,
                   const Progress &progress, const StepOptim &so, json_t *timeline = nullptr)
{
    size_t n = m.stages.size();
    std::vector<at::Tensor> x(n + 1), y(n + 1), leaf(n + 1), dy(n + 1);
    std::vector<bool> kept(n + 1, false);
    int64_t W = 0;
    for (const auto &st : m.stages)
        W += st.param_bytes;
    clear_grads(m);
    x[0] = x0;
    auto input_of = [&](size_t i) -> at::Tensor {
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
    /* With a timeline, each op's wall time between the synchronisations
     * around it: where a step's time goes, op by op. */
    auto op_began = std::chrono::steady_clock::now();
    /* What is live now counts as the weights, the input and the
     * optimizer's state, whatever else the process holds. */
    int64_t base = W + x0.numel() * (int64_t)x0.element_size() + so.state_bytes - start,
            timeline_peak = 0;
    for (size_t k = 0; k < sched.s.n_ops; k++) {
        const struct remat_op &op = sched.s.ops[k];
        size_t i = op.stage;
        if ((k & 15) == 0)
            progress((int)i, (int)n, "validating");
        switch (op.kind) {
        case REMAT_OP_F_NONE:
        case REMAT_OP_F_CK: {
            at::Tensor in = input_of(i);
            {
                c10::NoGradGuard ng;
                x[i] = run_stage(m, i - 1, in);
            }
            in = at::Tensor();
            if (op.kind == REMAT_OP_F_CK)
                kept[i - 1] = true;
            else if (i >= 2 && x[i - 1].defined() && !kept[i - 1])
                x[i - 1] = at::Tensor();
            break;
        }
        case REMAT_OP_F_ALL: {
            at::Tensor in = input_of(i);
            leaf[i] = i >= 2 && in.is_floating_point() ? in.detach().requires_grad_(true) : in;
            y[i] = run_stage(m, i - 1, leaf[i]);
            break;
        }
        case REMAT_OP_LOSS: {
            if (!y[n].defined())
                throw Failure("plan: the loss needs x̄_n");
            at::manual_seed(777);
            dy[n] = at::randn_like(y[n]);
            break;
        }
        case REMAT_OP_B: {
            if (!y[i].defined() || !dy[i].defined())
                throw Failure("plan: B(" + std::to_string(i) + ") needs x̄_i and δ_i");
            if (y[i].requires_grad())
                backward(m, i - 1, y[i], dy[i]);
            if (i >= 2)
                dy[i - 1] = leaf[i].defined() ? leaf[i].grad() : at::Tensor();
            leaf[i] = at::Tensor();
            y[i] = at::Tensor();
            dy[i] = at::Tensor();
            if (i >= 2 && !y[i - 1].defined()) {
                x[i - 1] = at::Tensor();
                kept[i - 1] = false;
            }
            if (i >= 2 && !dy[i - 1].defined()) {
                std::vector<int64_t> s = {m.spec.batch};
                s.insert(s.end(), m.stages[i - 2].out_shape.begin(),
                         m.stages[i - 2].out_shape.end());
                dy[i - 1] = at::zeros(s, at::TensorOptions().dtype(m.spec.dtype).device(d.dev));
            }
            break;
        }
        default:
            throw Failure("plan: op " + std::to_string(k) + " has no kind");
        }
        if (timeline != nullptr) {
            /* The peak during this op and the live bytes after it, counted
             * as the simulator's timeline counts them. */
            d.sync();
            auto op_ended = std::chrono::steady_clock::now();
            int64_t pk = d.peak() + base;
            timeline_peak = std::max(timeline_peak, pk);
            json_t *e = json_pack(
                "{s:s, s:I, s:I, s:I, s:f}", "op", remat_op_name(op.kind), "stage", (json_int_t)i,
                "peak_bytes", (json_int_t)pk, "after_bytes", (json_int_t)(d.current() + base), "ms",
                std::chrono::duration<double, std::milli>(op_ended - op_began).count());
            if (d.reserved_peak() >= 0)
                json_object_set_new(e, "reserved_peak_bytes",
                                    json_integer((json_int_t)(d.reserved_peak() + base)));
            json_array_append_new(timeline, e);
            d.reset_peak();
            op_began = std::chrono::steady_clock::now();
        }
    }
    StepResult r;
    if (so.opt != nullptr && so.opt->active()) {
        /* optimizer.step() after the last backward: the activations are
         * freed, every weight gradient is live. */
        d.sync();
        int64_t ops_peak = d.peak() + base;
        int64_t before = d.current();
        d.reset_peak();
        so.opt->step();
        d.sync();
        r.optim_peak_bytes = d.peak() + base;
        r.optim_tmp_bytes = d.peak() - before;
        timeline_peak = std::max(timeline_peak, r.optim_peak_bytes);
        r.ms = timer.stop_ms();
        r.peak_bytes = timeline != nullptr ? timeline_peak : std::max(ops_peak, r.optim_peak_bytes);
        allocator_peaks(d, base, r);
        return r;
    }
    r.ms = timer.stop_ms();
    d.sync();
    r.peak_bytes = timeline != nullptr ? timeline_peak : d.peak() + base;
    allocator_peaks(d, base, r);
    return r;
}

} // namespace

json_t *validate(const json_t *spec, const Progress &progress)
{
    const Device &d = the_device();
    const json_t *model_spec = json_object_get(spec, "model_spec");
    const json_t *plan = json_object_get(spec, "plan");
    if (!json_is_object(model_spec) || !json_is_object(plan))
        throw Failure("a validation spec needs model_spec and plan objects");
    check_device_matches(spec, d);
    int repeats = (int)jint(spec, "repeats", 3, "repeats");
    if (repeats < 1 || repeats > 100)
        throw Failure("repeats must be in 1..100");
    int warmup = (int)jint(spec, "warmup", 1, "warmup");
    if (warmup < 0 || warmup > 100)
        throw Failure("warmup must be in 0..100");
    progress(0, 0, "building");
    /* The plan and store-all as op lists, checked before any tensor exists. */
    ModelSpec ms = read_model_spec(model_spec);
    ProfilePtr profile = job_profile(spec, ms.n_stages());
    Schedule ops, store_all;
    plan_schedule(plan, profile.get(), ops);
    double simulated_ms = check_schedule(profile.get(), ops);
    struct remat_error err = {};
    int rc = remat_schedule_from_checkpoints(profile.get(), nullptr, 0, &store_all.s, &err);
    if (rc != REMAT_OK)
        throw remat_failure("store-all", rc, err);
    const json_t *pk = json_object_get(plan, "peak_bytes");
    int64_t predicted = json_is_integer(pk) ? (int64_t)json_integer_value(pk) : -1;
    /* The step time the user was told: the plan's total_ms (fwd_ms and
     * bwd_ms of the profile summed over the op list); the simulator's on
     * the job's profile when the plan gives none. */
    const json_t *tm = json_object_get(plan, "total_ms");
    double predicted_ms = simulated_ms;
    if (json_is_number(tm) && std::isfinite(json_number_value(tm)) && json_number_value(tm) >= 0)
        predicted_ms = json_number_value(tm);

    /* The optimizer the profile was measured with (the profile job's
     * spec): its step runs after the last backward of every run, at lr 0,
     * so that every run starts from the same weights and the plan's
     * gradients compare with store-all's; the step's work and memory are
     * those of any other lr. */
    OptimSpec os = read_optim_spec(model_spec);
    /* Without store-all (spec "store_all": false) only the plan runs: what
     * a memory limit sized for the plan needs. */
    bool with_store_all = !json_is_false(json_object_get(spec, "store_all"));

    Model m = build_model(ms);
    place(m, d);
    at::Tensor x0 = make_input(m, d);
    Optim opt(m, os, 0.0);
    StepOptim so;
    so.opt = &opt;
    so.state_bytes = opt.make_state(d);
    /* Warm-ups of each, so that one-time allocations (oneDNN's caches,
     * cuDNN's autotuning, the cuBLAS workspace) are not charged to a step. */
    for (int r = 0; r < warmup; r++) {
        if (with_store_all)
            run_ops(m, store_all, x0, d, progress, so);
        run_ops(m, ops, x0, d, progress, so);
        clear_grads(m);
    }
    std::vector<double> t_sa, t_plan;
    int64_t peak_sa = 0, peak_plan = 0, optim_peak = 0, optim_tmp = 0, requested_plan = -1;
    double max_diff = 0;
    for (int r = 0; r < repeats; r++) {
        std::vector<at::Tensor> ref;
        if (with_store_all) {
            StepResult a = run_ops(m, store_all, x0, d, progress, so);
            ref = grads(m);
            peak_sa = std::max(peak_sa, a.peak_bytes);
            t_sa.push_back(a.ms);
        }
        StepResult b = run_ops(m, ops, x0, d, progress, so);
        if (with_store_all) {
            std::vector<at::Tensor> got = grads(m);
            for (size_t k = 0; k < ref.size(); k++) {
                if (ref[k].defined() != got[k].defined())
                    throw Failure("the plan left a parameter gradient missing");
                if (ref[k].defined())
                    max_diff = std::max(max_diff, ref[k]
                                                      .to(at::kDouble)
                                                      .sub(got[k].to(at::kDouble))
                                                      .abs()
                                                      .max()
                                                      .item<double>());
            }
        }
        clear_grads(m);
        peak_plan = std::max(peak_plan, b.peak_bytes);
        requested_plan = std::max(requested_plan, b.requested_peak_bytes);
        optim_peak = std::max(optim_peak, b.optim_peak_bytes);
        optim_tmp = std::max(optim_tmp, b.optim_tmp_bytes);
        t_plan.push_back(b.ms);
    }
    json_t *timeline = nullptr;
    if (json_is_true(json_object_get(spec, "timeline"))) {
        /* One more step of the plan, synchronised after every op: what each
         * op really peaked at, to set beside the simulator's timeline. */
        timeline = json_array();
        run_ops(m, ops, x0, d, progress, so, timeline);
        clear_grads(m);
    }
    /* On a GPU, what the plan takes from the device: one more step of the
     * plan alone, after the cache is emptied (else store-all's cached
     * segments would serve it), and the most the caching allocator held
     * in it, its rounding, splits and cached blocks included
     * (docs/accuracy.md, "What the device sees"). */
    int64_t reserved_plan = -1, cold_peak = -1;
    if (d.cuda) {
        d.sync();
        d.release_cache();
        StepResult c = run_ops(m, ops, x0, d, progress, so);
        clear_grads(m);
        reserved_plan = c.reserved_peak_bytes;
        cold_peak = c.peak_bytes;
    }
    json_t *info = device_info_json(d);
    double step_ms = median(t_plan);
    json_t *res = json_pack(
        "{s:I, s:I, s:f, s:f, s:o, s:s, s:I, s:s, s:I}", "measured_peak_bytes",
        (json_int_t)peak_plan, "predicted_peak_bytes", (json_int_t)predicted, "relative_error",
        predicted > 0 ? (double)(predicted - peak_plan) / (double)peak_plan : 0.0, "step_ms",
        step_ms, "device", json_deep_copy(json_object_get(info, "device")), "model",
        m.spec.name.c_str(), "batch_size", (json_int_t)m.spec.batch, "dtype",
        m.spec.dtype_name.c_str(), "n_ops", (json_int_t)ops.s.n_ops);
    if (with_store_all) {
        json_object_set_new(res, "store_all_step_ms", json_real(median(t_sa)));
        json_object_set_new(res, "store_all_measured_peak_bytes", json_integer(peak_sa));
        json_object_set_new(res, "max_grad_diff", json_real(max_diff));
    }
    /* Step time against the prediction, and the spread over the repeats
     * (how far one step's time can be trusted on this device). */
    json_object_set_new(res, "predicted_step_ms", json_real(predicted_ms));
    if (predicted_ms > 0)
        json_object_set_new(res, "step_time_error",
                            json_real((step_ms - predicted_ms) / predicted_ms));
    json_object_set_new(res, "step_ms_min",
                        json_real(*std::min_element(t_plan.begin(), t_plan.end())));
    json_object_set_new(res, "step_ms_max",
                        json_real(*std::max_element(t_plan.begin(), t_plan.end())));
    if (opt.active()) {
        /* Measured against what the profile the plan was made from says. */
        const struct remat_optimizer &po = profile->optimizer;
        json_object_set_new(res, "optimizer",
                            json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "name",
                                      os.name.c_str(), "measured_state_bytes",
                                      (json_int_t)so.state_bytes, "predicted_state_bytes",
                                      (json_int_t)po.state_bytes, "measured_step_tmp_bytes",
                                      (json_int_t)optim_tmp, "predicted_step_tmp_bytes",
                                      (json_int_t)po.step_tmp_bytes, "measured_step_peak_bytes",
                                      (json_int_t)optim_peak, "predicted_step_peak_bytes",
                                      (json_int_t)remat_optim_step_peak_bytes(profile.get())));
    }
    if (reserved_plan >= 0) {
        json_object_set_new(res, "measured_reserved_bytes", json_integer(reserved_plan));
        json_object_set_new(res, "cold_peak_bytes", json_integer(cold_peak));
    }
    if (requested_plan >= 0)
        json_object_set_new(res, "measured_requested_bytes", json_integer(requested_plan));
    if (timeline != nullptr)
        json_object_set_new(res, "timeline", timeline);
    json_object_set(res, "driver", json_object_get(info, "driver"));
    json_object_set(res, "libtorch", json_object_get(info, "libtorch"));
    json_decref(info);
    return res;
}

} // namespace rw
