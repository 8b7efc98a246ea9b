#!/usr/bin/env python3
"""The whole training step, optimizer included, measured on CPU against the
prediction (docs/scheduling.md, "The optimizer"; docs/worker.md).

1. A profile job naming an optimizer measures its state and step on the
   device: adam keeps exactly two bytes of state per byte of weights,
   sgd-momentum one (the weights' sizes come from the profile's stages).
2. A validation job runs optimizer.step() after the plan's last backward;
   the whole step's measured peak is within 1% of the plan's peak_bytes,
   gradients equal store-all's, and the optimizer's own numbers (state,
   step transient, the step's peak) are reported measured beside predicted.
   The MLP's weights dwarf its activations, so there the step is the peak
   and the 1% bound holds the step's transient to account; the CNN's
   activations are its peak, so there the bound holds the state that stays
   live through the whole step.
3. "store_all": false runs the plan alone (no store-all fields).
4. Bad optimizer fields are 400s naming the field.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

lib.need(lib.REMATD, lib.WORKER)
run = lib.Run("remat-optim-e2e-")
check, http, wait_job = run.check, run.http, run.wait_job


def profile(spec):
    st, job = http("POST", "/v1/profiles", spec)
    if not check(st == 202, "POST /v1/profiles %s answers 202 (got %s %s)" % (
            spec.get("optimizer"), st, job if st != 202 else "")):
        return None, None
    job = wait_job("/v1/profiles/" + job["id"])
    if not check(job and job["status"] == "done", "profile job done (%s)" % (job or {}).get("reason")):
        return None, None
    return job["id"], job.get("profile") or job.get("result")


def validate(profile_id, body):
    body = dict(body, profile_id=profile_id, repeats=2)
    st, v = http("POST", "/v1/validations", body)
    if not check(st == 202, "POST /v1/validations answers 202 (%s %s)" % (st, v if st != 202 else "")):
        return None
    v = wait_job("/v1/validations/" + v["id"])
    if not check(v and v["status"] == "done", "validation done (%s)" % (v or {}).get("reason")):
        return None
    return v["result"]


MLP = {"layers": [{"type": "linear", "out_features": 768}, {"type": "relu"},
                  {"type": "linear", "out_features": 768}, {"type": "relu"},
                  {"type": "linear", "out_features": 768}, {"type": "relu"},
                  {"type": "linear", "out_features": 10}],
       "input_shape": [512], "batch_size": 4, "dtype": "fp32", "device": "cpu",
       "warmup": 1, "repeats": 2}
CNN = {"layers": [{"type": "conv2d", "out_channels": 16, "kernel_size": 3, "padding": 1},
                  {"type": "relu"},
                  {"type": "conv2d", "out_channels": 32, "kernel_size": 3, "padding": 1},
                  {"type": "relu"}, {"type": "maxpool2d", "kernel_size": 2},
                  {"type": "conv2d", "out_channels": 32, "kernel_size": 3, "padding": 1},
                  {"type": "relu"}, {"type": "flatten"}, {"type": "linear", "out_features": 10}],
       "input_shape": [3, 32, 32], "batch_size": 8, "dtype": "fp32", "device": "cpu",
       "warmup": 1, "repeats": 2}
STATE_PER_WEIGHT = {"adam": 2, "adamw": 2, "sgd-momentum": 1, "sgd": 0}

try:
    run.start_rematd()
    run.start_worker("w1")

    # 4. Bad fields first (no worker time).
    for bad, ptr in (({"optimizer": "lamb"}, "/optimizer"),
                     ({"optimizer": {"name": "adam", "foreach": True}}, "/optimizer/foreach"),
                     ({"optimizer": {"name": "adam", "lr": 1}}, "/optimizer/lr"),
                     ({"optimizer": {"name": "adam", "weight_decay": 1}}, "/optimizer/weight_decay")):
        st, pr = http("POST", "/v1/profiles", dict(MLP, **bad))
        check(st == 400 and (pr or {}).get("pointer") == ptr,
              "%s: 400 naming %s (got %s %s)" % (json.dumps(bad), ptr, st, (pr or {}).get("pointer")))

    cnn_pid = None
    cases = (("mlp", MLP, "adam", True), ("mlp", MLP, "sgd-momentum", False),
             ("mlp", MLP, {"name": "adamw", "weight_decay": True}, True),
             ("mlp", MLP, {"name": "adam", "weight_decay": True}, False),
             ("cnn", CNN, "adam", False))
    for model, spec, optim, step_is_peak in cases:
        name = optim if isinstance(optim, str) else optim["name"]
        pid, prof = profile(dict(spec, optimizer=optim))
        if pid is None:
            continue
        if model == "cnn":
            cnn_pid = pid
        o = prof.get("optimizer") or {}
        w = sum(s["param_bytes"] for s in prof["stages"])
        check(o.get("name") == name and o.get("state_bytes") == STATE_PER_WEIGHT[name] * w
              and o.get("step_ms", -1) >= 0,
              "%s %s: the profile measured %s bytes of state for %d bytes of weights (%s)" % (
                  model, json.dumps(optim), o.get("state_bytes"), w, json.dumps(o)))
        for alg in ("min-peak", "sqrt"):
            r = validate(pid, {"algorithm": alg})
            if r is None:
                continue
            ro = r.get("optimizer") or {}
            check(abs(r["relative_error"]) <= 0.01 and r.get("max_grad_diff", 1) == 0,
                  "%s %s %s: whole step predicted %d, measured %d (error %.5f), grad diff %s" % (
                      model, json.dumps(optim), alg, r["predicted_peak_bytes"],
                      r["measured_peak_bytes"], r["relative_error"], r.get("max_grad_diff")))
            check(ro.get("name") == name
                  and ro.get("measured_state_bytes") == ro.get("predicted_state_bytes")
                  and abs(ro.get("measured_step_peak_bytes", 0) - ro.get("predicted_step_peak_bytes", 1))
                  <= 0.01 * ro.get("predicted_step_peak_bytes", 1),
                  "%s %s %s: optimizer measured vs predicted %s" % (model, json.dumps(optim), alg,
                                                                    json.dumps(ro)))
            if step_is_peak:
                check(r["predicted_peak_bytes"] == ro.get("predicted_step_peak_bytes"),
                      "%s %s %s: the optimizer step is the predicted peak" % (model, json.dumps(optim), alg))

    # 3. The plan alone.
    pid = cnn_pid
    if pid is not None:
        r = validate(pid, {"algorithm": "min-peak", "store_all": False})
        if r is not None:
            check("store_all_measured_peak_bytes" not in r and "max_grad_diff" not in r
                  and abs(r["relative_error"]) <= 0.01,
                  "store_all false: the plan ran alone, error %.5f" % r["relative_error"])
        st, pr = http("POST", "/v1/validations", {"profile_id": pid, "algorithm": "min-peak",
                                                  "store_all": "no"})
        check(st == 400 and (pr or {}).get("pointer") == "/store_all",
              "store_all must be a boolean (got %s)" % st)
finally:
    status = run.finish()
sys.exit(status)
