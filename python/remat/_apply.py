"""remat.apply: run a plan's forward and backward in a training step.

Two engines run the same op list:

- "checkpoint": a single-level plan through torch.utils.checkpoint, one call
  per checkpointed segment (reentrant or not);
- "executor": any plan, nested min-time schedules included, op by op, as
  Rotor's executor does: a torch.autograd.Function whose forward runs the ops
  before the loss and whose backward runs the rest, each backward op one
  torch.autograd.backward call on one stage.

Both preserve the RNG state by default: a recomputed stage draws what its
first forward drew, so dropout gives the gradients of a plain step.
"""
import inspect
import sys

import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint as _torch_checkpoint

from ._exceptions import UsageError
from ._graph import Chain, module_chain
from ._plan import PlanError, check_schedule, checkpoints_of, schedule_of, segments_of


def default_reentrant():
    """remat's default mode for torch.utils.checkpoint: non-reentrant, the one
    whose peak the plan's prediction bounds.  Reentrant checkpointing holds
    the gradient of a segment's output until the segment's whole backward
    has run (torch.autograd.backward inside the checkpoint's backward keeps
    it as an argument), where the op-by-op memory model frees it after the
    segment's last stage: up to the largest checkpointed segment output above
    the prediction (measured: 12% on a small CNN, docs/python.md).  Only a
    PyTorch without the non-reentrant mode (before 1.11) gets reentrant."""
    return not _HAS_NON_REENTRANT


def _has_non_reentrant():
    try:
        return "use_reentrant" in inspect.signature(_torch_checkpoint).parameters
    except (TypeError, ValueError):
        return False


_HAS_NON_REENTRANT = _has_non_reentrant()


def blocks_of(blocks):
    """The chain's modules, in order, from an nn.Sequential or a list."""
    return list(module_chain(blocks).modules)


def _is_t(v):
    return isinstance(v, torch.Tensor)


def _leaves(vals, flags):
    """Fresh leaves for a forward with grad: each tensor detached, with grad
    where its flag says and it is floating point."""
    return tuple(v.detach().requires_grad_(bool(f) and v.is_floating_point()) if _is_t(v) else v
                 for v, f in zip(vals, flags))


def _detached(vals):
    return tuple(v.detach() if _is_t(v) else v for v in vals)


def _check_out(i, y):
    if not isinstance(y, tuple):
        raise PlanError("stage %d returned %s, not the tuple of its live values"
                        % (i, type(y).__name__))
    return y


class _RngStates:
    """CPU (and CUDA, when the tensors are there) RNG states, one per stage,
    taken before the stage's first forward of a step.  A state is a 5 KB
    tensor on CPU: one per stage was the executor's whole excess over the
    plan's prediction (76 KB on a 15-stage chain, 350 KB on mobilenet_v2's 69
    stages).  A stage whose state equals the one before (no random op ran
    between them) shares that tensor, so only stages after a dropout add
    one."""

    def __init__(self):
        self.states = {}
        self.last = (None, None)

    def _same(self, k, st):
        prev = self.last[k]
        if prev is not None and prev.shape == st.shape and torch.equal(prev, st):
            return prev
        return st

    def save(self, i, xs):
        x = next((v for v in xs if _is_t(v)), None)
        cuda = torch.cuda.get_rng_state(x.device) if x is not None and x.is_cuda else None
        cpu = self._same(0, torch.get_rng_state())
        if cuda is not None:
            cuda = self._same(1, cuda)
        self.last = (cpu, cuda)
        self.states[i] = (cpu, cuda, x.device if x is not None else None)

    def run(self, i, fn, xs):
        st = self.states.get(i)
        if st is None:
            return fn(*xs)
        cpu, cuda, dev = st
        devices = [dev] if cuda is not None else []
        with torch.random.fork_rng(devices=devices, enabled=True):
            torch.set_rng_state(cpu)
            if cuda is not None:
                torch.cuda.set_rng_state(cuda, dev)
            return fn(*xs)


class _Runner:
    """The op list of one step, with the values it keeps between ops.  A
    value is the tuple of tensors (and plain values) live across a cut."""

    def __init__(self, chain, ops, preserve_rng):
        self.chain = chain
        self.stages = chain.stages
        self.ops = ops
        self.n = len(self.stages)
        self.loss_at = next(k for k, (op, _) in enumerate(ops) if op == "loss")
        self.preserve_rng = preserve_rng
        # Only a stage the schedule runs forward again needs its RNG state.
        self.again = set(chain.recomputed_stages(ops))

    def _forward(self, op, i):
        x = self.vals[i - 1]
        stage = self.stages[i - 1]
        first = i not in self.seen
        if first:
            self.seen.add(i)
            if self.preserve_rng and i in self.again:
                self.rng.save(i, x)
        run = stage if first or not self.preserve_rng else \
            (lambda *t: self.rng.run(i, stage, t))
        if op == "F_all":
            flags = self.input_flags if i == 1 else self.chain.grad_flags(i - 1, x)
            leaf = _leaves(x, flags)
            with torch.enable_grad():
                y = _check_out(i, run(*leaf))
            self.graphs[i] = (leaf, y)
            self.vals[i] = _detached(y)
        else:
            with torch.no_grad():
                y = _check_out(i, run(*x))
            self.vals[i] = y
            if op == "F_ck":
                self.kept.add(i - 1)
            elif i - 1 not in self.kept and i - 1 > 0:
                # A plain input that is not a checkpoint dies after F_none.
                self.vals.pop(i - 1, None)

    def _backward(self, i):
        leaf, y = self.graphs.pop(i)
        d = self.delta.pop(i)
        ys, ds = [], []
        for t, g in zip(y, d):
            if _is_t(t) and t.requires_grad and g is not None:
                ys.append(t)
                ds.append(g)
        if ys:
            torch.autograd.backward(ys, ds)
        if i == self.n and self.release_outer:
            # δ_n came from autograd's call of _Exec.backward, whose argument
            # tuple holds it until the whole backward has run; the memory
            # model frees it with B(n).  Emptying the tensor frees its
            # buffer now (it is the executor's own: _Exec.backward made
            # sure no one else reads it).
            with torch.no_grad():
                for g in ds:
                    if g._base is not None:
                        g._base.set_()
                    g.set_()
        self.delta[i - 1] = tuple(t.grad if _is_t(t) and t.requires_grad else None
                                  for t in leaf)
        del leaf, y, ys, ds
        # x_i and its checkpoint status end with B(i); x_{i-1} is not read again.
        self.vals.pop(i, None)
        self.kept.discard(i)

    def forward(self, xs):
        self.vals = {0: _detached(xs)}
        self.input_flags = self.chain.input_flags(xs)
        self.graphs, self.kept, self.seen, self.delta = {}, {0}, set(), {}
        self.rng = _RngStates()
        for op, i in self.ops[:self.loss_at]:
            self._forward(op, i)
        return self.vals[self.n]

    def backward(self, gs, release=False):
        self.delta = {self.n: gs}
        self.release_outer = release
        try:
            with torch.enable_grad():
                for op, i in self.ops[self.loss_at + 1:]:
                    if op == "B":
                        self._backward(i)
                    else:
                        self._forward(op, i)
            return self.delta.get(0)
        finally:
            self.vals = self.graphs = self.delta = None
            self.rng = None


# References to an output gradient, counted in _only_autograd_holds, when
# nothing but autograd's call of _Exec.backward holds it: autograd's
# argument tuples (4, measured on Debian's torch 1.13 and Python 3.11), the
# generator's name for it, the function's argument and getrefcount's own.
# A torch that holds more only leaves the gradient held to the end, as
# before; tests/python/test_apply.py checks both ways on the torch it runs
# with: a gradient a hook keeps is left alone, one no one keeps is freed.
_AUTOGRAD_REFS = 7
# A view's base, counted the same way: g._base's temporary and getrefcount's.
_BASE_REFS = 2


def _only_autograd_holds(g):
    if sys.getrefcount(g) > _AUTOGRAD_REFS:
        return False
    # A view (a loss that flattens the output gets its gradient as a view
    # of the flat one): its base too must be held by no one in Python, and
    # no one but the view holds it in C++ either, since autograd passes the
    # view only.
    return g._base is None or sys.getrefcount(g._base) <= _BASE_REFS


class _Exec(torch.autograd.Function):
    @staticmethod
    def forward(ctx, runner, anchor, *xs):
        ctx.runner = runner
        ctx.n_in = len(xs)
        out = runner.forward(xs)
        ctx.out_tensor = [_is_t(v) for v in out]
        res = tuple(v.detach() if _is_t(v) else v for v in out)
        nd = [v for v in res if _is_t(v) and not v.is_floating_point()]
        if nd:
            ctx.mark_non_differentiable(*nd)
        return res

    @staticmethod
    def backward(ctx, *gs):
        gs = tuple(g.contiguous() if g is not None and is_t else None
                   for g, is_t in zip(gs, ctx.out_tensor))
        # The output's gradients may be freed after B(n) when nothing but
        # autograd's call holds them: a tensor the user keeps (retain_grad,
        # a hook) is referenced from elsewhere, and is left alone.
        release = all(g is None or _only_autograd_holds(g) for g in gs)
        d0 = ctx.runner.backward(gs, release)
        ctx.runner = None
        d0 = tuple(d0) if d0 is not None else (None,) * ctx.n_in
        return (None, None) + d0


class Applied(nn.Module):
    """The model with a plan applied.  For an nn.Sequential, `blocks` holds
    the modules (the same objects, so parameters and optimizers are shared);
    for a traced model, `model` is the model itself and `chain` its stages.
    `engine` says which engine runs; `segments` lists, for the checkpoint
    engine, the stage ranges [start, end) and whether each is checkpointed;
    `description` says what the plan recomputes in the model's words."""

    def __init__(self, chain, plan, ops, engine, use_reentrant, preserve_rng_state):
        super().__init__()
        self.chain = chain
        if chain.traced:
            self.model = chain.model
        else:
            self.blocks = nn.ModuleList(chain.modules)
        self.plan = plan
        self.ops = ops
        self.engine = engine
        self.use_reentrant = use_reentrant
        self.preserve_rng_state = preserve_rng_state
        n = len(chain)
        ck = checkpoints_of(ops, n)
        self.segments = []
        if engine == "checkpoint":
            segs = segments_of(ck, n)
            # All but the last segment run without grad in the forward.
            self.segments = [(a, b, k < len(segs) - 1) for k, (a, b) in enumerate(segs)]
        self.description = chain.describe(ops)
        # A tensor that requires grad, so that every checkpointed segment (and
        # the executor) is in the graph even when the input is not.
        self.register_buffer("_anchor", torch.zeros(()), persistent=False)

    def _run(self, a, b, vals):
        for st in self.chain.stages[a:b]:
            vals = st(*vals)
        return vals

    def forward(self, *args, **kwargs):
        if not torch.is_grad_enabled():
            if self.chain.traced:
                return self.model(*args, **kwargs)
            return self.chain.unpack(self._run(0, len(self.chain), self.chain.pack(args, kwargs)))
        xs = self.chain.pack(args, kwargs)
        anchor = self._anchor.detach().requires_grad_(True)
        if self.engine == "executor":
            runner = _Runner(self.chain, self.ops, self.preserve_rng_state)
            return self.chain.unpack(_Exec.apply(runner, anchor, *xs))
        kw = {"preserve_rng_state": self.preserve_rng_state}
        if _HAS_NON_REENTRANT:
            kw["use_reentrant"] = self.use_reentrant
        vals = tuple(xs)
        for a, b, ck in self.segments:
            if not ck:
                vals = self._run(a, b, vals)
                continue
            vals = _torch_checkpoint(_Segment(self, a, b), anchor, *vals, **kw)
            if not isinstance(vals, tuple):
                vals = (vals,)
        return self.chain.unpack(vals)

    def extra_repr(self):
        return "engine=%s, stages=%d, algorithm=%s" % (
            self.engine, len(self.chain), self.plan.get("algorithm", "?"))


class _Segment:
    def __init__(self, owner, a, b):
        self.owner, self.a, self.b = owner, a, b

    def __call__(self, anchor, *vals):
        return self.owner._run(self.a, self.b, vals)


def apply(blocks, plan, engine="auto", use_reentrant=None, preserve_rng_state=True):
    """Returns a module whose forward and backward run exactly `plan` over the
    chain `blocks`: an nn.Sequential or a list of modules (module k is stage
    k+1 of the plan), or the stages remat.stages(model, sample) found in any
    other model (called then as the model is, with its output).

    engine: "checkpoint" (single-level plans, torch.utils.checkpoint),
    "executor" (any plan, op by op) or "auto" (checkpoint when the plan is
    single-level, else executor).  use_reentrant: torch.utils.checkpoint's
    mode (None: non-reentrant, whose peak the prediction bounds; reentrant
    can exceed it by the largest checkpointed segment's output gradient).
    preserve_rng_state: recomputations draw what the first forward drew."""
    chain = blocks if isinstance(blocks, Chain) else module_chain(blocks)
    if not isinstance(plan, dict):
        plan = getattr(plan, "json", plan)
    ops = schedule_of(plan)
    n = len(chain)
    top = max(i for _, i in ops)
    if top != n:
        raise PlanError("the plan is for %d stages, the chain has %d %s"
                        % (top, n, "stages" if chain.traced else "modules"))
    check_schedule(ops, n)
    single = checkpoints_of(ops, n) is not None
    if engine == "auto":
        engine = "checkpoint" if single else "executor"
    if engine == "checkpoint" and not single:
        raise PlanError("engine \"checkpoint\" runs single-level plans; this one is "
                        "multi-level (use the executor)")
    if engine not in ("checkpoint", "executor"):
        raise UsageError("engine must be \"auto\", \"checkpoint\" or \"executor\"")
    if use_reentrant is None:
        use_reentrant = default_reentrant()
    if not use_reentrant and not _HAS_NON_REENTRANT:
        raise UsageError("this PyTorch (%s) has no non-reentrant torch.utils.checkpoint"
                         % torch.__version__)
    return Applied(chain, plan, ops, engine, bool(use_reentrant), bool(preserve_rng_state))
