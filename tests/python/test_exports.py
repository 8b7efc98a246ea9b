"""Every export of a plan, checked by running the knob: when an export says
it expresses the plan, running that knob makes exactly the plan's forwards
(with and without grad, in order) and the gradients of a plain step."""
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
    """checkpoint_wrapper's shape: the module, run under a checkpoint."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        # Reentrant: non-reentrant mode recomputes a module only when its
        # backward unpacks a saved tensor, so a module that saves none (a
        # flatten) is never recomputed: fewer forwards than the plan's.
        return checkpoint(self.m, x, use_reentrant=True)


def test_checkpoint_sequential_runs_the_plan(plans):
    ran = 0
    for name, label, plan in all_plans(plans):
        ex = plan["exports"]["checkpoint_sequential"]
        if not ex["available"]:
            continue
        x, want, seq, log = counted_run(name)
        # checkpoint_sequential's first segment needs an input with grad in
        # reentrant mode (1.13's only mode for it): a leaf gives it one.
        leaf = x.clone().requires_grad_(True)
        for p in seq.parameters():
            p.grad = None
        torch.manual_seed(1)
        run_checkpoint_sequential(seq, plan, leaf).square().sum().backward()
        assert log == forwards_of(plan), label
        for g, w in zip([p.grad for p in seq.parameters()], want):
            assert torch.equal(g, w), label
        ran += 1
    assert ran >= 4   # store-all, sqrt and uniform plans of each chain


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
        wrapped = _wrap_each(seq, check_fn(seq, plan))
        # Reentrant checkpoints need an input with grad (else the first
        # segment's weights get none).
        x = x.clone().requires_grad_(True)
        got = grads_of(wrapped, x)
        assert log == forwards_of(plan), label
        assert all(torch.equal(g, w) for g, w in zip(got, want)), label
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
            got = grads_of(meg_model, x)
            assert log == forwards_of(plan), label
            assert all(torch.equal(g, w) for g, w in zip(got, want)), label
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
