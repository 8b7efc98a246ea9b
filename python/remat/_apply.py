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

import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint as _torch_checkpoint

from ._exceptions import ChainError, UsageError
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
    if isinstance(blocks, nn.Sequential):
        return list(blocks)
    if isinstance(blocks, (list, tuple, nn.ModuleList)):
        mods = list(blocks)
        for k, m in enumerate(mods):
            if not isinstance(m, nn.Module):
                raise ChainError("blocks[%d] is a %s, not an nn.Module" % (k, type(m).__name__))
        return mods
    raise ChainError("blocks must be an nn.Sequential or a list of modules, not %s"
                    % type(blocks).__name__)


class _RngStates:
    """CPU (and CUDA, when the tensors are there) RNG states, one per stage,
    taken before the stage's first forward of a step."""

    def __init__(self):
        self.states = {}

    def save(self, i, x):
        cuda = torch.cuda.get_rng_state(x.device) if x.is_cuda else None
        self.states[i] = (torch.get_rng_state(), cuda, x.device)

    def run(self, i, fn, x):
        st = self.states.get(i)
        if st is None:
            return fn(x)
        cpu, cuda, dev = st
        devices = [dev] if cuda is not None else []
        with torch.random.fork_rng(devices=devices, enabled=True):
            torch.set_rng_state(cpu)
            if cuda is not None:
                torch.cuda.set_rng_state(cuda, dev)
            return fn(x)


class _Runner:
    """The op list of one step, with the values it keeps between ops."""

    def __init__(self, mods, ops, preserve_rng):
        self.mods = mods
        self.ops = ops
        self.n = len(mods)
        self.loss_at = next(k for k, (op, _) in enumerate(ops) if op == "loss")
        self.preserve_rng = preserve_rng

    def _forward(self, op, i):
        x = self.vals[i - 1]
        mod = self.mods[i - 1]
        first = i not in self.seen
        if first:
            self.seen.add(i)
            if self.preserve_rng:
                self.rng.save(i, x)
        run = mod if first or not self.preserve_rng else (lambda t: self.rng.run(i, mod, t))
        if op == "F_all":
            leaf = x.detach()
            if i > 1 or self.input_grad:
                leaf.requires_grad_(True)
            with torch.enable_grad():
                y = run(leaf)
            if not isinstance(y, torch.Tensor):
                raise PlanError("stage %d returned %s: a chain passes one tensor"
                                % (i, type(y).__name__))
            self.graphs[i] = (leaf, y)
            self.vals[i] = y.detach()
        else:
            with torch.no_grad():
                y = run(x)
            if not isinstance(y, torch.Tensor):
                raise PlanError("stage %d returned %s: a chain passes one tensor"
                                % (i, type(y).__name__))
            self.vals[i] = y
            if op == "F_ck":
                self.kept.add(i - 1)
            elif i - 1 not in self.kept and i - 1 > 0:
                # A plain input that is not a checkpoint dies after F_none.
                self.vals.pop(i - 1, None)

    def _backward(self, i):
        leaf, y = self.graphs.pop(i)
        d = self.delta.pop(i)
        torch.autograd.backward(y, d)
        self.delta[i - 1] = leaf.grad if leaf.requires_grad else None
        del leaf, y
        # x_i and its checkpoint status end with B(i); x_{i-1} is not read again.
        self.vals.pop(i, None)
        self.kept.discard(i)

    def forward(self, x):
        self.vals = {0: x.detach()}
        self.input_grad = x.requires_grad
        self.graphs, self.kept, self.seen, self.delta = {}, {0}, set(), {}
        self.rng = _RngStates()
        for op, i in self.ops[:self.loss_at]:
            self._forward(op, i)
        return self.vals[self.n]

    def backward(self, g):
        self.delta = {self.n: g}
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


class _Exec(torch.autograd.Function):
    @staticmethod
    def forward(ctx, runner, x, anchor):
        ctx.runner = runner
        return runner.forward(x).detach()

    @staticmethod
    def backward(ctx, g):
        d0 = ctx.runner.backward(g.contiguous() if g is not None else g)
        ctx.runner = None
        return None, d0, None


class Applied(nn.Module):
    """The chain with a plan applied.  `blocks` holds the modules (the same
    objects, so parameters and optimizers are shared); `engine` says which
    engine runs; `segments` lists, for the checkpoint engine, the module
    ranges [start, end) and whether each is checkpointed."""

    def __init__(self, mods, plan, ops, engine, use_reentrant, preserve_rng_state):
        super().__init__()
        self.blocks = nn.ModuleList(mods)
        self.plan = plan
        self.ops = ops
        self.engine = engine
        self.use_reentrant = use_reentrant
        self.preserve_rng_state = preserve_rng_state
        n = len(mods)
        ck = checkpoints_of(ops, n)
        self.segments = []
        if engine == "checkpoint":
            segs = segments_of(ck, n)
            # All but the last segment run without grad in the forward.
            self.segments = [(a, b, k < len(segs) - 1) for k, (a, b) in enumerate(segs)]
        # A tensor that requires grad, so that every checkpointed segment (and
        # the executor) is in the graph even when the input is not.
        self.register_buffer("_anchor", torch.zeros(()), persistent=False)

    def _run(self, a, b, x):
        for m in list(self.blocks)[a:b]:
            x = m(x)
        return x

    def forward(self, x):
        if not torch.is_grad_enabled():
            return self._run(0, len(self.blocks), x)
        anchor = self._anchor.detach().requires_grad_(True)
        if self.engine == "executor":
            runner = _Runner(list(self.blocks), self.ops, self.preserve_rng_state)
            return _Exec.apply(runner, x, anchor)
        kw = {"preserve_rng_state": self.preserve_rng_state}
        if _HAS_NON_REENTRANT:
            kw["use_reentrant"] = self.use_reentrant
        for a, b, ck in self.segments:
            if not ck:
                x = self._run(a, b, x)
                continue
            x = _torch_checkpoint(_Segment(self, a, b), x, anchor, **kw)
        return x

    def extra_repr(self):
        return "engine=%s, stages=%d, algorithm=%s" % (
            self.engine, len(self.blocks), self.plan.get("algorithm", "?"))


class _Segment:
    def __init__(self, owner, a, b):
        self.owner, self.a, self.b = owner, a, b

    def __call__(self, x, anchor):
        return self.owner._run(self.a, self.b, x)


def apply(blocks, plan, engine="auto", use_reentrant=None, preserve_rng_state=True):
    """Returns a module whose forward and backward run exactly `plan` over the
    chain `blocks` (an nn.Sequential or a list of modules, module k being
    stage k+1 of the plan).

    engine: "checkpoint" (single-level plans, torch.utils.checkpoint),
    "executor" (any plan, op by op) or "auto" (checkpoint when the plan is
    single-level, else executor).  use_reentrant: torch.utils.checkpoint's
    mode (None: non-reentrant, whose peak the prediction bounds; reentrant
    can exceed it by the largest checkpointed segment's output gradient).
    preserve_rng_state: recomputations draw what the first forward drew."""
    mods = blocks_of(blocks)
    if not isinstance(plan, dict):
        plan = getattr(plan, "json", plan)
    ops = schedule_of(plan)
    n = len(mods)
    top = max(i for _, i in ops)
    if top != n:
        raise PlanError("the plan is for %d stages, the chain has %d modules" % (top, n))
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
    return Applied(mods, plan, ops, engine, bool(use_reentrant), bool(preserve_rng_state))
