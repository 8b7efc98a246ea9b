"""Every export of a plan, checked by running the knob: when an export says
it expresses the plan, running that knob, on an input that needs no
gradient, makes the plan's forwards (with and without grad, in order) and
gives every weight the gradient of a plain step; where this torch cannot
run it so, the export says it is not available and why."""
import pytest
import torch
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

import remat
from remat._exports import check_fn, compute_exports, run_checkpoint_sequential
from chains import CHAINS, counted, counted_run, forwards_of, grads_of
from conftest import all_plans

KNOBS = ("checkpoint_sequential", "per_module", "megatron", "deepspeed", "torch_compile")


def test_c_and_python_exports_agree(plans):
    for name, label, plan in all_plans(plans):
        prof = plans[name][0]
        assert set(plan["exports"]) == set(KNOBS), label
        synthetic = "synthetic" in label
        mine = compute_exports(plan, None if synthetic else prof["input_bytes"],
                               None if synthetic else
                               sum(s["param_bytes"] for s in prof["stages"]))
        for k in KNOBS:
            if k == "torch_compile" and synthetic:
                continue
            want = plan["exports"][k]
            assert mine[k].keys() == want.keys(), (label, k)
            for f, v in want.items():
                assert mine[k][f] == pytest.approx(v) if isinstance(v, float) else \
                    mine[k][f] == v, (label, k, f)
            assert want["available"] or want["reason"], (label, k)


def _step(model, x, seed=1):
    for p in model.parameters():
        p.grad = None
    torch.manual_seed(seed)
    model(x).square().sum().backward()


class _Wrapped(torch.nn.Module):
    """checkpoint_wrapper's shape: the module, run under a checkpoint, in the
    mode the export gives (non-reentrant: with a reentrant checkpoint and an
    input that needs no gradient, the module's weights would get none)."""

    def __init__(self, m, use_reentrant=False):
        super().__init__()
        self.m = m
        self.use_reentrant = use_reentrant

    def forward(self, x):
        return checkpoint(self.m, x, use_reentrant=self.use_reentrant)


def _same_forwards(log, plan, label):
    """The forwards the counters logged are the plan's: those before the
    loss exactly; afterwards, non-reentrant checkpoints recompute a module
    only when its backward reads a saved tensor, so the log is the plan's
    recomputations with some skipped (a flatten), never added."""
    want = forwards_of(plan)
    ops = [o for o in plan["schedule"]]
    n_fwd = sum(1 for o in ops[:ops.index(next(o for o in ops if o["op"] == "loss"))])
    assert log[:n_fwd] == want[:n_fwd], label
    it = iter(want[n_fwd:])
    assert all(any(e == w for w in it) for e in log[n_fwd:]), label


def _grads_equal(seq, want, label):
    got = [p.grad for p in seq.parameters()]
    assert all(g is not None for g in got), "%s: a weight got no gradient" % label
    for k, (g, w) in enumerate(zip(got, want)):
        assert torch.equal(g, w), "%s: gradient %d" % (label, k)


def test_checkpoint_sequential_trains_or_says_why_not(plans):
    """With an input that needs no gradient: where torch's
    checkpoint_sequential takes use_reentrant, the export says False and
    running it gives every weight the plain step's gradient; where it does
    not (torch 1.13), the export is not available, and the reason it gives
    is true: torch's reentrant checkpoint_sequential leaves the first
    segment's weights without a gradient."""
    ran = 0
    for name, label, plan in all_plans(plans):
        if not plan["exports"]["checkpoint_sequential"]["available"]:
            continue
        ex = remat.exports(plan)["checkpoint_sequential"]
        x, want, seq, log = counted_run(name)
        assert not x.requires_grad
        for p in seq.parameters():
            p.grad = None
        if not ex["available"]:
            assert "reentrant" in ex["reason"], label
            with pytest.raises(remat.PlanError):
                run_checkpoint_sequential(seq, plan, x)
            if ex["segments"] < 2:
                continue
            torch.manual_seed(1)
            with pytest.warns(UserWarning):
                y = checkpoint_sequential(seq, ex["segments"], x)
            y.square().sum().backward()
            assert any(p.grad is None for p in seq.parameters()), label
        else:
            assert ex["use_reentrant"] is False
            torch.manual_seed(1)
            run_checkpoint_sequential(seq, plan, x).square().sum().backward()
            _same_forwards(log, plan, label)
            _grads_equal(seq, want, label)
        ran += 1
    assert ran >= 4   # sqrt and uniform plans of each chain


def _wrap_each(seq, chosen):
    """What apply_activation_checkpointing(check_fn=...) does: each chosen
    module in its own checkpoint."""
    mods = []
    for m in seq:
        if chosen(m):
            mods.append(_Wrapped(m))
        else:
            mods.append(m)
    return torch.nn.Sequential(*mods)


def test_per_module_and_megatron_block_run_the_plan(plans):
    per = meg = 0
    for name, label, plan in all_plans(plans):
        ex = plan["exports"]
        if not ex["per_module"]["available"]:
            assert not ex["megatron"]["available"], label
            continue
        x, want, seq, log = counted_run(name)
        ex = remat.exports(plan)
        assert ex["per_module"]["use_reentrant"] is False, label
        assert ex["per_module"]["checkpoint_impl"] == "NO_REENTRANT", label
        # The input needs no gradient, as a training step's batch does not.
        assert not x.requires_grad
        wrapped = _wrap_each(seq, check_fn(seq, plan))
        grads_of(wrapped, x)
        _same_forwards(log, plan, label)
        _grads_equal(seq, want, label)
        per += bool(ex["per_module"]["modules"])
        if ex["megatron"]["available"]:
            args = ex["megatron"]["args"]
            n_layers = int(args[args.index("--recompute-num-layers") + 1]) if args else 0
            assert args == [] or args[:4] == ["--recompute-granularity", "full",
                                              "--recompute-method", "block"]
            # Megatron's block method: the first N layers each checkpointed.
            log.clear()
            seq = counted(CHAINS[name][0](), log)
            mods = list(seq)
            meg_model = _wrap_each(seq, lambda m: m in mods[:n_layers])
            grads_of(meg_model, x)
            _same_forwards(log, plan, label)
            _grads_equal(seq, want, label)
            meg += 1
    names = remat.exports({"schedule": [{"op": o, "stage": i} for o, i in
                                        remat.single_level_schedule([1, 2], 4)]},
                          ["a", "b", "c", "d"])
    assert names["per_module"]["names"] == ["a", "b"]
    assert names["megatron"]["args"][-1] == "2"
    assert per >= 1 and meg >= 1, (per, meg)


def test_deepspeed_count_is_the_checkpoint_calls(plans):
    for name, label, plan in all_plans(plans):
        ex = plan["exports"]["deepspeed"]
        if not ex["available"]:
            continue
        applied = remat.apply(CHAINS[name][0](), plan, engine="checkpoint")
        assert ex["number_checkpoints"] == sum(ck for _, _, ck in applied.segments), label


def test_torch_compile_ratio(plans):
    for name, label, plan in all_plans(plans):
        if "synthetic" in label:
            continue
        prof = plans[name][0]
        ex = plan["exports"]["torch_compile"]
        base = prof["input_bytes"] + sum(s["param_bytes"] for s in prof["stages"])
        assert ex["available"] and ex["approximate"], label
        assert ex["activation_bytes"] == plan["peak_bytes"] - base
        assert ex["activation_memory_budget"] == pytest.approx(
            (plan["peak_bytes"] - base) / (plan["store_all_peak_bytes"] - base))
        if plan["algorithm"] == "store-all":
            assert ex["activation_memory_budget"] == 1.0
