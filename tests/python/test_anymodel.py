"""Any model, unchanged: remat finds the stages of torchvision's CNNs, a ViT,
a decoder with a ModuleList loop and keyword arguments, and a U-Net; a plan
of the built `remat plan` runs one training step of each with the plain
step's gradients (bit for bit on CPU) and a peak no higher than the plain
step's.  An nn.Sequential keeps its stages; a model fx cannot trace is
refused with the call that stops it."""
import os

import pytest
import torch
import torch.nn as nn

import remat
from remat._graph import stages_of
from remat._profile import _CpuMeter
from chains import CHAINS
from conftest import CLI
from models import MODELS, GPT, gpt_inputs

PROFILE = {"warmup": 0, "repeats": 1}


def _call(model, sample):
    if isinstance(sample, dict):
        return model(**sample)
    return model(*sample) if isinstance(sample, tuple) else model(sample)


def _step(model, params, sample, loss, seed=1):
    for p in params:
        p.grad = None
    torch.manual_seed(seed)
    loss(_call(model, sample)).backward()
    return [p.grad for p in params]


def _peak(model, params, sample, loss):
    """The most one step adds to what is live before it (its first run,
    with one-time allocations, not counted)."""
    _step(model, params, sample, loss)
    for p in params:
        p.grad = None
    torch.manual_seed(1)
    _, _, pk = _CpuMeter().measure(lambda: loss(_call(model, sample)).backward())
    return pk


@pytest.fixture(scope="module")
def planned(cli):
    """Per model: the model, its sample, its stages, its profile and its
    min-peak plan."""
    out = {}
    for name, (make, inp, loss) in MODELS.items():
        torch.manual_seed(0)
        model, sample = make(), inp()
        chain = remat.stages(model, sample)
        prof = remat.profile_local(chain, sample, model=name, **PROFILE)
        plan, err = cli(prof, "min-peak")
        assert plan is not None, (name, err)
        out[name] = (model, sample, loss, chain, prof, plan)
    return out


@pytest.mark.parametrize("name", list(MODELS))
def test_a_plan_trains_as_the_plain_model(planned, name):
    model, sample, loss, chain, prof, plan = planned[name]
    assert len(chain) > 1 and len(prof["stages"]) == len(chain)
    assert prof["stages_found_by"] == "torch.fx"
    params = list(model.parameters())
    want = [g.clone() for g in _step(model, params, sample, loss)]
    base = _peak(model, params, sample, loss)
    for engine in ("auto", "executor"):
        m = remat.apply(chain, plan, engine=engine)
        got = _step(m, params, sample, loss)
        assert all(g is not None for g in got), "%s %s: a weight got no gradient" % (name, engine)
        for k, (g, w) in enumerate(zip(got, want)):
            assert torch.equal(g, w), "%s %s: gradient %d differs by %g" % (
                name, engine, k, (g - w).abs().max().item())
        if engine == "auto":
            # A training step, as users run it: the optimizer steps.
            opt = torch.optim.SGD(params, lr=0.0)
            opt.step()
            pk = _peak(m, params, sample, loss)
            assert pk <= base, "%s: the plan's step peaks at %d, the plain step at %d" % (
                name, pk, base)
    # The output is the model's own, of its own type.
    with torch.no_grad():
        torch.manual_seed(3)
        a = _call(model.eval(), sample)
        torch.manual_seed(3)
        b = _call(remat.apply(chain, plan), sample)
        model.train()
    assert type(a) is type(b)


def test_sequential_keeps_its_stages():
    """An nn.Sequential is the chain it was: one module a stage, names and
    sizes as before; traced all the same, a flat one cuts after every
    module, with the same out_bytes."""
    for name, (make, inp) in CHAINS.items():
        seq, x = make(), inp()
        ch = remat.stages(seq, x)
        assert not ch.traced and len(ch) == len(seq)
        assert ch.names == [n for n, _ in seq.named_children()]
        traced = remat.stages(seq, x, trace=True)
        assert traced.traced and len(traced) == len(seq), name
        for k, st in enumerate(traced.stages):
            assert [n.target for n in st.nodes] == [str(k)], (name, k)
        a = remat.profile_local(seq, x, **PROFILE)
        b = remat.profile_local(traced, x, **PROFILE)
        assert [s["out_bytes"] for s in a["stages"]] == [s["out_bytes"] for s in b["stages"]]
        assert [s["param_bytes"] for s in a["stages"]] == \
            [s["param_bytes"] for s in b["stages"]]
        assert "out_tensors" not in a["stages"][0] and b["stages"][0]["out_tensors"] == 1


def test_decoder_blocks_are_stages_with_their_constants_passed_through(planned):
    model, sample, loss, chain, prof, plan = planned["gpt"]
    blocks = [b for b in chain.blocks if b is not None]
    assert blocks == [("model.layers", k) for k in range(4)]
    first = chain.blocks.index(("model.layers", 0))
    for k in range(4):
        st = prof["stages"][first + k]
        assert st["name"] == "model.layers.%d" % k and st["block"] == "model.layers.%d" % k
        # The hidden stream and the mask every block reads cross each cut
        # between blocks (the last block hands on the stream alone).
        assert st["out_tensors"] == (2 if k < 3 else 1), st
    assert chain.describe([("F_ck", 1)] + [("F_none", i) for i in range(2, first + 3)] +
                          [("F_all", i) for i in range(first + 3, len(chain) + 1)] +
                          [("loss", len(chain))] +
                          [("B", i) for i in range(len(chain), first + 2, -1)] +
                          [("F_all", i) for i in range(1, first + 3)] +
                          [("B", i) for i in range(first + 2, 0, -1)]
                          ).startswith("recompute layers 0-1 of model.layers; stages 1-%d"
                                       % first)
    assert remat.apply(chain, plan).description.startswith("recompute")


def test_decoder_tuple_outputs_and_keywords():
    """return_dict=False: a tuple out; keyword arguments in, by the dict."""
    torch.manual_seed(0)
    model = GPT(layers=3)
    sample = dict(gpt_inputs(), return_dict=False)
    chain = remat.stages(model, sample)
    n = len(chain)
    ops = [("F_all", i) for i in range(1, n + 1)] + [("loss", n)] + \
        [("B", i) for i in range(n, 0, -1)]
    plan = {"schedule": [{"op": o, "stage": i} for o, i in ops]}
    m = remat.apply(chain, plan, engine="executor")
    torch.manual_seed(1)
    y = m(**sample)
    torch.manual_seed(1)
    want = model(**sample)
    assert isinstance(y, tuple) and len(y) == 2
    assert all(torch.equal(a, b) for a, b in zip(y, want))
    y[0].sum().backward()
    assert all(p.grad is not None for p in model.lm_head.parameters())
    # The traced call's other arguments were specialised: a tensor where
    # the trace had one is required.
    with pytest.raises(remat.UsageError):
        m(input_ids=sample["input_ids"], attention_mask=None,
          position_ids=sample["position_ids"], return_dict=False)


def test_unet_is_a_fine_chain(planned):
    model, sample, loss, chain, prof, plan = planned["unet"]
    # Finer than one stage per ring (3): cuts in the middle carry the skips.
    assert len(chain) > 3 * 3
    assert max(s["out_tensors"] for s in prof["stages"]) >= 3
    # A cut that keeps a skip keeps all of it: out_bytes counts every
    # tensor across the cut.
    e1 = 2 * 4 * 32 * 32 * 4
    assert all(s["out_bytes"] >= e1 for s in prof["stages"][5:-2])


def test_vgg_inplace_relus_multi_level_plans(planned, cli):
    """VGG-11's ReLU(inplace=True): profiling and every plan run, nested
    min-time plans included, with the plain step's gradients; the user's
    modules keep inplace=True."""
    model, sample, loss, chain, prof, plan = planned["vgg11"]
    relus = [m for m in model.modules() if isinstance(m, nn.ReLU)]
    assert relus and all(m.inplace for m in relus)
    params = list(model.parameters())
    want = [g.clone() for g in _step(model, params, sample, loss)]
    sa, _ = cli(prof, "store-all")
    lo, hi = plan["peak_bytes"], sa["peak_bytes"]
    nested = 0
    # Budgets between the least peak and store-all's (the weights are most
    # of either).
    for frac in (0.02, 0.05, 0.1, 0.2, 0.35, 0.5):
        p, _ = cli(prof, "min-time", budget=int(lo + (hi - lo) * frac))
        if p is None:
            continue
        m = remat.apply(chain, p, engine="executor")
        nested += m.segments == [] and remat._plan.checkpoints_of(m.ops, len(chain)) is None
        got = _step(m, params, sample, loss)
        assert all(torch.equal(g, w) for g, w in zip(got, want)), frac
    assert nested >= 1, "no min-time plan was multi-level"
    assert all(m.inplace for m in relus)


def test_torchvision_vit_blocks_in_a_sequential():
    """torchvision's VisionTransformer: its shape unpacking (`n, c, h, w =
    x.shape`, which fx 1.13 cannot trace under Python 3.11 by itself) and
    its blocks, held in an nn.Sequential of named layers, one stage each;
    its own torch._assert checks stay in the stages."""
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=3,
                                                 num_heads=2, hidden_dim=16, mlp_dim=32,
                                                 num_classes=10)
    x = torch.randn(2, 3, 32, 32)
    chain = remat.stages(model, x)
    names = [nm for nm, b in zip(chain.names, chain.blocks) if b is not None]
    assert names == ["encoder.layers.encoder_layer_%d" % k for k in range(3)]
    n = len(chain)
    plan = {"schedule": [{"op": o, "stage": i} for o, i in
                         remat.single_level_schedule(list(range(2, n, 2)), n)]}
    params = list(model.parameters())
    loss = lambda y: y.square().mean()  # noqa: E731
    want = [g.clone() for g in _step(model, params, x, loss)]
    for engine in ("checkpoint", "executor"):
        got = _step(remat.apply(chain, plan, engine=engine), params, x, loss)
        assert all(g is not None and torch.equal(g, w) for g, w in zip(got, want)), engine
    with pytest.raises(AssertionError, match="Wrong image height"):
        remat.apply(chain, plan)(torch.randn(2, 3, 16, 16))


class InPlace(nn.Module):
    """In-place ops of every kind on what an earlier stage made: a method
    (add_), one with no pure form (copy_), a function (F.relu(inplace=True)),
    `+=`, a module with inplace=True; called with a tuple of positional
    arguments."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)
        self.act = nn.LeakyReLU(0.1, inplace=True)

    def forward(self, x, bias):
        h = self.a(x)
        h.add_(bias)
        h = self.b(h)
        h.copy_(h * 0.5)
        h = torch.nn.functional.relu(h, inplace=True)
        g = self.c(h)
        g += h
        return self.act(g), h


def test_in_place_ops_across_cuts():
    torch.manual_seed(0)
    model = InPlace()
    sample = (torch.randn(4, 8), torch.randn(8))
    chain = remat.stages(model, sample)
    assert len(chain) >= 3
    n = len(chain)
    params = list(model.parameters())
    loss = lambda y: y[0].square().sum() + y[1].sum()  # noqa: E731
    want = [g.clone() for g in _step(model, params, sample, loss)]
    for ck in ([1], [1, 2], list(range(1, n))):
        plan = {"schedule": [{"op": o, "stage": i} for o, i in
                             remat.single_level_schedule(ck, n)]}
        for engine in ("checkpoint", "executor"):
            m = remat.apply(chain, plan, engine=engine)
            torch.manual_seed(1)
            y = m(*sample)
            torch.manual_seed(1)
            with torch.no_grad():
                plain = model(*sample)
            assert all(torch.equal(a, b) for a, b in zip(y, plain)), (ck, engine)
            got = _step(m, params, sample, loss)
            assert all(torch.equal(g, w) for g, w in zip(got, want)), (ck, engine)
    prof = remat.profile_local(chain, sample, **PROFILE)
    assert len(prof["stages"]) == n and model.act.inplace


class KwargsModel(nn.Module):
    """Hugging Face's calling convention: optional tensors, flags and
    **kwargs in the signature, a dict out whose members depend on a flag,
    glue between the blocks (tanh outside them)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 8)
        self.layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(3))
        self.head = nn.Linear(8, 10)

    def forward(self, input_ids, attention_mask=None, use_cache=False,
                output_hidden_states=False, **kwargs):
        h = self.emb(input_ids)
        if attention_mask is not None:
            h = h * attention_mask[..., None]
        states = ()
        for layer in self.layers:
            if output_hidden_states:
                states = states + (h,)
            h = torch.tanh(layer(h))
        out = {"logits": self.head(h)}
        if output_hidden_states:
            out["hidden_states"] = states
        return out


def test_signature_with_kwargs_flags_and_optional_tensors():
    torch.manual_seed(0)
    model = KwargsModel()
    ids = torch.randint(0, 10, (2, 5))
    for sample, keys in (({"input_ids": ids}, ["logits"]),
                         ({"input_ids": ids, "attention_mask": torch.ones(2, 5),
                           "output_hidden_states": True}, ["logits", "hidden_states"]),
                         ((ids,), ["logits"])):
        chain = remat.stages(model, sample)
        assert [b for b in chain.blocks if b] == [("layers", k) for k in range(3)]
        n = len(chain)
        plan = {"schedule": [{"op": o, "stage": i} for o, i in
                             remat.single_level_schedule([2, 3], n)]}
        loss = lambda y: y["logits"].square().sum() + sum(  # noqa: E731
            t.sum() for t in y.get("hidden_states", ()))
        params = list(model.parameters())
        want = [g.clone() for g in _step(model, params, sample, loss)]
        y = _call(remat.apply(chain, plan), sample)
        assert list(y) == keys and (len(y.get("hidden_states", ())) in (0, 3))
        got = _step(remat.apply(chain, plan), params, sample, loss)
        assert all(g is not None and torch.equal(g, w) for g, w in zip(got, want))


def test_untraceable_model_names_the_call():
    class Gate(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            if x.sum() > 0:
                return self.lin(x)
            return x

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.pre = nn.Linear(4, 4)
            self.gate = Gate()

        def forward(self, x):
            return self.gate(self.pre(x))
    with pytest.raises(remat.UntraceableError) as e:
        remat.stages(Net(), torch.randn(2, 4))
    assert e.value.module == "gate"
    assert "if x.sum() > 0:" in e.value.call and __file__ in e.value.call
    assert isinstance(e.value, remat.RematError)


def test_checkpoint_takes_any_model_in_one_call(monkeypatch):
    """remat.checkpoint(model, sample) without a server: profiled here,
    planned by the `remat` program, applied; called as the model is."""
    if not os.access(CLI, os.X_OK):
        pytest.skip("cli/remat is not built")
    monkeypatch.setenv("REMAT_CLI", CLI)
    torch.manual_seed(0)
    model = GPT(layers=2)
    sample = gpt_inputs()
    m = remat.checkpoint(model, sample)
    assert m.plan["algorithm"] == "min-peak" and m.profile["stages_found_by"] == "torch.fx"
    params = list(model.parameters())
    loss = MODELS["gpt"][2]
    want = [g.clone() for g in _step(model, params, sample, loss)]
    got = _step(m, params, sample, loss)
    assert all(torch.equal(g, w) for g, w in zip(got, want))
    with pytest.raises(remat.InfeasibleError):
        remat.checkpoint(model, sample, budget=1000)


def test_traced_exports_name_blocks(planned, cli):
    """Stages found in a traced model are not modules: checkpoint_sequential
    is never available for them; per_module is, when every wrapped stage is
    a block, under the block's path."""
    model, sample, loss, chain, prof, plan = planned["gpt"]
    n = len(chain)
    every, _ = cli(prof, "uniform", segments=n)
    ex = remat.exports(every, chain)
    assert not ex["checkpoint_sequential"]["available"]
    assert not ex["per_module"]["available"]   # the embedding stages are no blocks
    first = chain.blocks.index(("model.layers", 0))

    def per_module(wrapped):
        """The schedule of wrapping the stages `wrapped` (1-based) one by one."""
        ops = [("F_ck" if i in wrapped else "F_all", i) for i in range(1, n + 1)]
        ops.append(("loss", n))
        for i in range(n, 0, -1):
            ops += ([("F_all", i)] if i in wrapped else []) + [("B", i)]
        return {"schedule": [{"op": o, "stage": i} for o, i in ops]}
    blocks = [first + 1, first + 2, first + 4]
    ex = remat.exports(per_module(blocks), chain)
    assert ex["per_module"]["available"] and ex["per_module"]["use_reentrant"] is False
    assert ex["per_module"]["names"] == ["model.layers.0", "model.layers.1", "model.layers.3"]
    ex = remat.exports(per_module([1] + blocks), chain)
    assert not ex["per_module"]["available"] and "block" in ex["per_module"]["reason"]


@pytest.mark.parametrize("name", ["gpt", "unet"])
def test_checkpoint_engine_in_both_modes(planned, name):
    """Tuples across cuts (a mask, the skips) through torch.utils.checkpoint,
    reentrant and not: every weight gets the plain step's gradient."""
    model, sample, loss, chain, prof, plan = planned[name]
    n = len(chain)
    ops = remat.single_level_schedule(list(range(2, n, 3)), n)
    uniform = {"schedule": [{"op": o, "stage": i} for o, i in ops]}
    params = list(model.parameters())
    want = [g.clone() for g in _step(model, params, sample, loss)]
    for reentrant in (True, False):
        m = remat.apply(chain, uniform, engine="checkpoint", use_reentrant=reentrant)
        got = _step(m, params, sample, loss)
        assert all(g is not None and torch.equal(g, w) for g, w in zip(got, want)), reentrant


def test_a_hundred_block_decoder_is_a_hundred_block_stages():
    """A 100-block decoder: one stage per block (bench/python-apply.py
    --decoder 100 reports the time)."""
    torch.manual_seed(0)
    model = GPT(dim=16, heads=2, layers=100)
    chain = stages_of(model, gpt_inputs())
    assert sum(b is not None for b in chain.blocks) == 100


def test_any_model_planned_by_rematd(server):
    """A traced model's profile, with its out_tensors and block members,
    planned by a real rematd (which ignores the members it does not know),
    and the plan applied: a budget between min-peak's and store-all's."""
    torch.manual_seed(0)
    model = GPT(layers=3)
    sample = gpt_inputs()
    c = remat.Client(server.url)
    m = remat.checkpoint(model, sample, server=server.url, progress=False)
    assert m.profile["stages_found_by"] == "torch.fx" and m.plan["exports"]
    assert any(s.get("block") == "model.layers.2" for s in m.profile["stages"])
    sa = c.plan(profile=m.profile, algorithm="store-all")
    budget = (m.plan["peak_bytes"] + sa["peak_bytes"]) // 2
    m2 = remat.checkpoint(model, sample, server=server.url, budget=budget, progress=False)
    assert m2.plan["algorithm"] == "min-time" and m2.plan["peak_bytes"] <= budget
    params = list(model.parameters())
    loss = MODELS["gpt"][2]
    want = [g.clone() for g in _step(model, params, sample, loss)]
    got = _step(m2, params, sample, loss)
    assert all(torch.equal(g, w) for g, w in zip(got, want))
