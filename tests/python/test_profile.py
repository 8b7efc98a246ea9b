"""remat.profile_local measures what remat-worker measures, and the peak of
an applied plan on CPU is the one the plan predicts."""
import json
import os
import subprocess
import tempfile

import pytest
import torch
import torch.nn as nn

import remat
from remat._one import layers_of
from remat._plan import checkpoints_of
from remat._profile import _CpuMeter
from conftest import WORKER


def model():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.ReLU(), nn.Dropout(0.2),
        nn.AvgPool2d(2), nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(128, 64), nn.ReLU(),
        nn.Linear(64, 10))


def test_profile_local_agrees_with_remat_worker():
    if not os.access(WORKER, os.X_OK):
        pytest.skip("worker/remat-worker is not built")
    seq = model()
    x = torch.randn(8, 3, 32, 32)
    spec = {"layers": layers_of(seq), "input_shape": [3, 32, 32], "batch_size": 8,
            "dtype": "fp32", "device": "cpu", "warmup": 1, "repeats": 3}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
    # One OpenMP thread on both sides: oneDNN's convolution backward takes
    # scratch space that depends on the thread count (22,464 bytes more on
    # the first convolution here with the worker's default).
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run([WORKER, "--profile-local", f.name], capture_output=True, env=env)
    os.unlink(f.name)
    assert r.returncode == 0, r.stderr.decode()
    w = json.loads(r.stdout)
    torch.set_num_threads(1)
    p = remat.profile_local(seq, x, warmup=1, repeats=3)
    assert p["input_bytes"] == w["input_bytes"]
    assert len(p["stages"]) == len(w["stages"])
    for k, (a, b) in enumerate(zip(w["stages"], p["stages"])):
        assert a["out_bytes"] == b["out_bytes"], k
        assert a["param_bytes"] == b["param_bytes"], k
        for f in ("saved_bytes", "fwd_tmp_bytes", "fwd_grad_tmp_bytes", "bwd_tmp_bytes",
                  "bwd_freed_bytes"):
            assert abs(a[f] - b[f]) <= 0.01 * max(a[f], b[f]), (k, f, a[f], b[f])
        assert b["fwd_ms"] > 0 and b["bwd_ms"] >= 0
    # The profile is one rematd and `remat plan` accept.
    assert p["format"] == "remat.profile/v1" and p["device"] == "cpu"


def _measured_peak(model_, x, w):
    def step():
        y = model_(x)
        y.backward(torch.randn_like(y))
    for q in model_.parameters():
        q.grad = None
    step()                      # one-time allocations are not a step's
    for q in model_.parameters():
        q.grad = None
    _, _, pk = _CpuMeter().measure(step)
    # As the memory model counts: W + x_0 + the most the step added.
    return w + x.numel() * x.element_size() + pk


def test_measured_peak_of_an_applied_plan_is_the_predicted(cli, capsys):
    torch.manual_seed(0)
    seq = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
        nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(),
        nn.Linear(128, 10))
    x = torch.randn(8, 3, 32, 32)
    prof = remat.profile_local(seq, x, warmup=1, repeats=2)
    w = sum(s["param_bytes"] for s in prof["stages"])
    sa, _ = cli(prof, "store-all")
    rows = []
    kinds = (("store-all", {}), ("sqrt", {}), ("min-peak", {}),
             ("uniform", {"segments": 3}), ("uniform", {"segments": 5}),
             ("min-time", {"budget": int(sa["peak_bytes"] * 0.7)}),
             ("min-time", {"budget": int(sa["peak_bytes"] * 0.85)}))
    singles = 0
    for alg, kw in kinds:
        plan, err = cli(prof, alg, **kw)
        assert plan is not None, err
        ops = remat.schedule_of(plan)
        ck = checkpoints_of(ops, len(seq))
        modes = [("executor", None)]
        if ck is not None:
            singles += 1
            modes += [("checkpoint", False), ("checkpoint", True)]
        for engine, reentrant in modes:
            m = remat.apply(seq, plan, engine=engine, use_reentrant=reentrant)
            got = _measured_peak(m, x, w)
            rel = (got - plan["peak_bytes"]) / got
            label = engine + ("" if reentrant is None else
                              " (reentrant)" if reentrant else " (non-reentrant)")
            rows.append((alg, label, plan["peak_bytes"], got, rel))
            if engine == "executor":
                # The executor runs the ops as remat-worker's validation does.
                assert abs(rel) <= 0.03, rows[-1]
            elif not reentrant:
                # Fused autograd through torch.utils.checkpoint frees earlier
                # than the op-by-op model: the prediction bounds it above.
                assert rel <= 0.03, rows[-1]
            else:
                # Reentrant checkpoints hold each segment's output gradient
                # through the segment's backward: up to the largest
                # checkpointed output more (remat.apply's default is
                # non-reentrant for this reason).
                held = max([prof["stages"][c - 1]["out_bytes"] for c in ck] or [0])
                assert (got - plan["peak_bytes"] - held) / got <= 0.03, rows[-1] + (held,)
    assert singles >= 5, "fewer single-level plans than the five that are"
    with capsys.disabled():
        for r in rows:
            print("\n  peak %-9s %-26s predicted %9d measured %9d (%+.2f%%)"
                  % (r[0], r[1], r[2], r[3], 100 * r[4]), end="")
        print()


def test_back_to_back_times_leave_no_gradient_and_no_graph():
    """The GPU's timer (remat-worker's, docs/worker.md) runs here on CPU: a
    forward and a backward time for a stage with weights, 0 for the
    backward of one whose output needs no gradient, every gradient left
    None, with one repeat as with several (the graph is retained for all
    backwards but the last)."""
    from remat._profile import _time_back_to_back
    torch.manual_seed(0)
    lin = nn.Linear(64, 64)
    x = torch.randn(8, 64)
    f, b = _time_back_to_back(lin, x, True, 4, torch.device("cpu"))
    assert f > 0 and b > 0, (f, b)
    assert all(p.grad is None for p in lin.parameters())
    # First stage, an input without grad and a module without weights.
    f, b = _time_back_to_back(nn.ReLU(), x, False, 3, torch.device("cpu"))
    assert f > 0 and b == 0.0, (f, b)
    # One repeat: the only backward is the last, which frees the graph.
    f, b = _time_back_to_back(lin, x, True, 1, torch.device("cpu"))
    assert f > 0 and b > 0


def test_the_loss_is_modelled_when_given(cli, monkeypatch):
    """With the usual step, `loss(model(x)).backward()`, a cross-entropy
    over wide logits keeps their log-softmax and makes their gradient and
    scratch: with loss= the profile holds them and the executor's measured
    peak is the prediction; without, the prediction misses them."""
    torch.manual_seed(0)
    seq = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                        nn.Linear(64, 512))
    x = torch.randn(1024, 16)
    t = torch.arange(1024) % 512
    loss = lambda y: nn.functional.cross_entropy(y, t)  # noqa: E731
    w = sum(p.numel() * p.element_size() for p in seq.parameters())
    base = w + x.numel() * x.element_size()

    def measured(m):
        for q in seq.parameters():
            q.grad = None
        loss(m(x)).backward()
        for q in seq.parameters():
            q.grad = None
        return base + _CpuMeter().measure(lambda: loss(m(x)).backward())[2]
    errs = {}
    for with_loss in (False, True):
        prof = remat.profile_local(seq, x, warmup=1, repeats=2, loss=loss if with_loss else None)
        last = prof["stages"][-1]
        if with_loss:
            # log_softmax of the 1024x512 logits.
            assert last["loss_saved_bytes"] >= 1024 * 512 * 4, last
            assert last["loss_tmp_bytes"] >= 1024 * 512 * 4, last
        else:
            assert "loss_saved_bytes" not in last
        for alg in ("store-all", "min-peak"):
            plan, err = cli(prof, alg)
            assert plan is not None, err
            got = measured(remat.apply(seq, plan, engine="executor"))
            errs[(with_loss, alg)] = (got - plan["peak_bytes"]) / plan["peak_bytes"]
    for alg in ("store-all", "min-peak"):
        assert abs(errs[(True, alg)]) <= 0.02, errs
        assert errs[(False, alg)] > 0.2, errs
    # remat.checkpoint takes it too (planned by the built `remat plan`).
    from conftest import CLI
    monkeypatch.setenv("REMAT_CLI", CLI)
    m = remat.checkpoint(seq, x, loss=loss)
    assert m.profile["stages"][-1]["loss_saved_bytes"] >= 1024 * 512 * 4
    # Through torch.utils.checkpoint (the default engine here) fused autograd
    # frees earlier: the prediction bounds the step above.
    assert m.engine == "checkpoint" and measured(m) <= 1.02 * m.plan["peak_bytes"]
