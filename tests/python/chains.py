"""Small chains for the tests, each module counting its forwards."""
import os
import sys

import torch
import torch.nn as nn


class Counted(nn.Module):
    """Wraps a module; appends (stage, grad enabled) to log at each forward."""

    def __init__(self, inner, stage, log):
        super().__init__()
        self.inner = inner
        self.stage = stage
        self.log = log

    def forward(self, x):
        grad = torch.is_grad_enabled() and not _in_nonreentrant_first_forward()
        self.log.append(("F_all" if grad else "F_nograd", self.stage))
        return self.inner(x)


def _in_nonreentrant_first_forward():
    """Non-reentrant torch.utils.checkpoint runs a segment's first forward
    with grad enabled and drops what it saves (saved-tensor hooks): that is
    a forward without grad in the plan's terms.  It is recognised by
    checkpoint.py's frames on the stack, without those of a recomputation
    (which runs from the unpack hook in the backward)."""
    f = sys._getframe(2)
    inside = False
    while f is not None:
        if f.f_code.co_filename.endswith(os.path.join("utils", "checkpoint.py")):
            if f.f_code.co_name in ("unpack", "unpack_hook", "recompute_fn", "backward"):
                return False
            if "without_reentrant" in f.f_code.co_name or f.f_code.co_name == "checkpoint":
                inside = True
        f = f.f_back
    return inside


def mlp(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Dropout(0.3), nn.Linear(64, 64),
                         nn.Tanh(), nn.Dropout(0.2), nn.Linear(64, 64), nn.GELU(),
                         nn.Linear(64, 16))


def convnet(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.Dropout(0.25),
                         nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(64, 10))


def deep(seed=0, n=16):
    torch.manual_seed(seed)
    mods = []
    for k in range(n):
        mods += [nn.Linear(24, 24)] if k % 3 != 2 else [nn.Dropout(0.1)]
    mods[-1] = nn.Linear(24, 24)
    return nn.Sequential(*mods)


CHAINS = {
    "mlp": (mlp, lambda: torch.randn(8, 32)),
    "convnet": (convnet, lambda: torch.randn(4, 3, 16, 16)),
    "deep": (deep, lambda: torch.randn(6, 24)),
}


def counted(seq, log):
    return nn.Sequential(*[Counted(m, k + 1, log) for k, m in enumerate(seq)])


def counted_run(name):
    """The chain CHAINS[name] set up for a check against a plan: an input,
    the gradients of a plain step on it, and another copy of the chain whose
    forwards go into log.  Returns (x, want, seq, log)."""
    make, inp = CHAINS[name]
    x = inp()
    want = grads_of(make(), x)
    log = []
    return x, want, counted(make(), log), log


def forwards_of(plan):
    """The plan's forward ops as the counters log them."""
    return [("F_all" if o["op"] == "F_all" else "F_nograd", o["stage"])
            for o in plan["schedule"] if o["op"] in ("F_none", "F_ck", "F_all")]


def grads_of(model, x, seed=1):
    """Parameter gradients of one step: a fixed RNG, the sum of squares as loss."""
    for p in model.parameters():
        p.grad = None
    torch.manual_seed(seed)
    model(x).square().sum().backward()
    return [p.grad.clone() for p in model.parameters()]
