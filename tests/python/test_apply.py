"""remat.apply runs exactly the plan: the forwards each stage makes (with and
without grad) and their order equal the plan's schedule, and the parameter
gradients equal a plain step's bit for bit (dropout included), for
store-all, sqrt, uniform, min-peak and nested min-time plans on several
chains, through both engines and both torch.utils.checkpoint modes."""
import pytest
import torch

import remat
from remat._apply import default_reentrant
from remat._plan import checkpoints_of
from chains import CHAINS, counted, counted_run, forwards_of, grads_of

ENGINES = [("checkpoint", True), ("checkpoint", False), ("executor", None)]


from conftest import all_plans


def test_nested_plans_are_among_them(plans):
    nested = [label for _, label, p in all_plans(plans)
              if checkpoints_of(remat.schedule_of(p), max(o["stage"] for o in p["schedule"]))
              is None]
    assert nested, "no min-time plan was multi-level: the executor would go untested"


@pytest.mark.parametrize("engine,reentrant", ENGINES)
def test_forwards_and_gradients_equal_the_plan(plans, engine, reentrant):
    ran = 0
    for name, label, plan in all_plans(plans):
        ops = remat.schedule_of(plan)
        single = checkpoints_of(ops, max(i for _, i in ops)) is not None
        if engine == "checkpoint" and not single:
            with pytest.raises(remat.PlanError):
                remat.apply(CHAINS[name][0](), plan, engine="checkpoint")
            continue
        torch.manual_seed(5)
        x, want, seq, log = counted_run(name)
        model = remat.apply(seq, plan, engine=engine, use_reentrant=reentrant)
        got = grads_of(model, x)
        want_log = forwards_of(plan)
        if engine == "checkpoint" and not reentrant:
            # Non-reentrant checkpoints recompute a module only when its
            # backward reads a saved tensor: a recomputation may be skipped
            # (a flatten), never added; the forward pass is the plan's.
            n_fwd = sum(1 for o in plan["schedule"][:plan["schedule"].index(
                {"op": "loss", "stage": len(plan["schedule"]) and
                 max(o["stage"] for o in plan["schedule"])})]
                if o["op"] != "loss")
            assert log[:n_fwd] == want_log[:n_fwd], label
            it = iter(want_log[n_fwd:])
            assert all(any(e == w for w in it) for e in log[n_fwd:]), label
        else:
            assert log == want_log, label
        assert len(got) == len(want)
        for k, (g, w) in enumerate(zip(got, want)):
            assert torch.equal(g, w), "%s: gradient %d differs by %g" % (
                label, k, (g - w).abs().max().item())
        ran += 1
    assert ran >= 8


def test_input_gradient_and_output_equal_a_plain_step(plans):
    for name, label, plan in all_plans(plans):
        make, inp = CHAINS[name]
        torch.manual_seed(3)
        x0 = inp()
        if x0.dim() == 4:
            continue
        for engine in ("auto", "executor"):
            a = x0.clone().requires_grad_(True)
            b = x0.clone().requires_grad_(True)
            torch.manual_seed(9)
            ya = make()(a)
            ya.square().sum().backward()
            torch.manual_seed(9)
            yb = remat.apply(make(), plan, engine=engine)(b)
            yb.square().sum().backward()
            assert torch.equal(ya, yb), label
            assert torch.equal(a.grad, b.grad), label


def test_rng_not_preserved_changes_dropout_recomputation(plans):
    """The default matters: without it, a recomputed dropout draws anew."""
    name = "mlp"
    plan = next(p for _, label, p in all_plans(plans) if label == "mlp sqrt")
    make, inp = CHAINS[name]
    x = inp()
    want = grads_of(make(), x)
    got = grads_of(remat.apply(make(), plan, engine="executor", preserve_rng_state=False), x)
    assert any(not torch.equal(g, w) for g, w in zip(got, want))


def test_no_grad_forward_runs_plainly(plans):
    plan = plans["mlp"][1][1][1]
    log = []
    m = remat.apply(counted(CHAINS["mlp"][0](), log), plan)
    with torch.no_grad():
        m(CHAINS["mlp"][1]())
    assert log == [("F_nograd", k) for k in range(1, 10)]


def test_default_mode_is_non_reentrant():
    # Non-reentrant is the mode whose peak the prediction bounds
    # (test_profile.py); every PyTorch since 1.11 has it.
    assert default_reentrant() is False
    seq = CHAINS["mlp"][0]()
    assert remat.apply(seq, {"schedule": [{"op": "F_all", "stage": k} for k in range(1, 10)]
                             + [{"op": "loss", "stage": 9}]
                             + [{"op": "B", "stage": k} for k in range(9, 0, -1)]}
                       ).use_reentrant is False


def test_wrong_plans_are_refused(plans):
    plan = plans["mlp"][1][1][1]
    with pytest.raises(remat.PlanError, match="9 stages.*8 modules"):
        remat.apply(CHAINS["mlp"][0]()[:8], plan)
    bad = dict(plan, schedule=[o for o in plan["schedule"] if o["op"] != "loss"])
    with pytest.raises(remat.PlanError):
        remat.apply(CHAINS["mlp"][0](), bad)
    swapped = dict(plan, schedule=list(reversed(plan["schedule"])))
    with pytest.raises(remat.PlanError):
        remat.apply(CHAINS["mlp"][0](), swapped)
    with pytest.raises(TypeError):
        remat.apply(torch.nn.Linear(2, 2), plan)


def test_executor_frees_the_output_gradient_with_the_last_backward(monkeypatch):
    """The output's gradient, which autograd's call of the executor's
    backward holds to the end, is freed with B(n) as the memory model frees
    it (a loss that flattens the output passes it as a view), and left alone
    when a hook keeps it."""
    import torch.nn as nn
    import remat._apply as A
    from remat._profile import _CpuMeter
    torch.manual_seed(0)
    # The peak is in the first stages' backward, after B(n): wide there.
    seq = nn.Sequential(nn.Linear(64, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                        nn.Linear(1024, 256))
    x = torch.randn(4, 8, 64)
    ops = remat.single_level_schedule([4], len(seq))
    m = remat.apply(seq, {"schedule": [{"op": o, "stage": i} for o, i in ops]},
                    engine="executor")
    t = torch.arange(32) % 256

    def loss(y):
        # The output's gradient reaches the executor as a view of the flat one.
        return nn.functional.cross_entropy(y.flatten(0, 1), t)

    def peak():
        for p in seq.parameters():
            p.grad = None
        loss(m(x)).backward()
        for p in seq.parameters():
            p.grad = None
        return _CpuMeter().measure(lambda: loss(m(x)).backward())[2]
    freed = peak()
    monkeypatch.setattr(A, "_AUTOGRAD_REFS", 0)
    held = peak()
    monkeypatch.undo()
    assert held - freed >= 32 * 256 * 4, (held, freed)
    kept = []
    y = m(x)
    y.register_hook(lambda g: kept.append(g))
    (y * 2).sum().backward()
    assert kept and torch.equal(kept[0], torch.full_like(y, 2.0))
    y = m(x)
    y.retain_grad()
    (y * 3).sum().backward()
    assert torch.equal(y.grad, torch.full_like(y, 3.0))
