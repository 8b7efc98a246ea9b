"""remat.checkpoint: profile the user's own chain, plan, apply, in one call."""
import json
import os
import re
import shutil
import subprocess

import torch
import torch.nn as nn

from ._apply import apply, blocks_of
from ._graph import stages_of
from ._profile import DTYPES, profile_local
from ._exceptions import CommandError, InfeasibleError, ProblemError, UsageError
from .client import Client


def _pair(v):
    """The int rematd's validation takes, or None when the two sides differ."""
    v = list(v) if isinstance(v, (tuple, list)) else [v, v]
    return v[0] if v[0] == v[1] else None


def layer_of(m):
    """The rematd layer (openapi.yaml's Layer) that builds the same module in
    remat-worker, or None when there is none."""
    t = type(m)
    if t is nn.Conv2d:
        if tuple(m.dilation) != (1, 1) or m.padding_mode != "zeros" or isinstance(m.padding, str):
            return None
        d = {"type": "conv2d", "out_channels": m.out_channels,
             "kernel_size": _pair(m.kernel_size), "stride": _pair(m.stride),
             "padding": _pair(m.padding), "groups": m.groups, "bias": m.bias is not None}
        return None if None in d.values() else d
    if t is nn.BatchNorm2d:
        ok = m.affine and m.track_running_stats and m.eps == 1e-5 and m.momentum == 0.1
        return {"type": "batchnorm2d"} if ok else None
    if t is nn.ReLU:
        return {"type": "relu"}
    if t is nn.Flatten:
        return {"type": "flatten"} if (m.start_dim, m.end_dim) == (1, -1) else None
    if t is nn.Dropout:
        return {"type": "dropout", "p": m.p}
    if t in (nn.MaxPool2d, nn.AvgPool2d):
        if t is nn.MaxPool2d and (_pair(m.dilation) != 1 or m.return_indices):
            return None
        if m.ceil_mode or (t is nn.AvgPool2d and (not m.count_include_pad or
                                                    m.divisor_override is not None)):
            return None
        d = {"type": "maxpool2d" if t is nn.MaxPool2d else "avgpool2d",
             "kernel_size": _pair(m.kernel_size),
             "stride": _pair(m.stride if m.stride is not None else m.kernel_size),
             "padding": _pair(m.padding)}
        return None if None in d.values() else d
    if t is nn.AdaptiveAvgPool2d:
        o = list(m.output_size) if isinstance(m.output_size, (tuple, list)) else \
            [m.output_size, m.output_size]
        return None if None in o else {"type": "adaptive_avgpool2d", "output_size": o}
    if t is nn.Linear:
        return {"type": "linear", "out_features": m.out_features, "bias": m.bias is not None}
    if t is nn.Sequential:
        inner = [layer_of(c) for c in m]
        return None if not inner or None in inner else {"type": "sequential", "layers": inner}
    return None


def layers_of(blocks):
    """The chain as a rematd layer list (one entry per stage), or None."""
    out = [layer_of(m) for m in blocks_of(blocks)]
    return None if None in out else out


def _device_name(x):
    return "cpu" if x.device.type == "cpu" else "cuda:%d" % (x.device.index or 0)


def _plan_with_cli(profile, algorithm, budget, cli):
    args = [cli, "plan", "--algorithm", algorithm]
    if budget is not None:
        args += ["--budget", str(budget)]
    r = subprocess.run(args + ["-"], input=json.dumps(profile).encode(), capture_output=True)
    err = r.stderr.decode(errors="replace").strip()
    least = re.search(r"least budget that fits is (\d+)", err)
    if r.returncode == 2 and least:
        # `remat plan` exits 2 when nothing fits (cli/cmd_plan.c): the same
        # InfeasibleError rematd's /problems/infeasible gives.
        raise InfeasibleError(422, {"type": "/problems/infeasible", "title": "infeasible",
                                    "detail": err, "min_budget_bytes": int(least.group(1))},
                              "remat", "plan")
    if r.returncode != 0:
        raise CommandError("remat plan: " + r.stderr.decode(errors="replace").strip())
    return json.loads(r.stdout)


def plan_for(blocks, sample_input, budget=None, algorithm=None, server=None, token=None,
             profile=None, via="auto", progress=None, timeout=600.0, client=None, loss=None):
    """(chain, profile, plan) for the model (remat.stages' chain): profiled by a worker through rematd
    (via="worker": the chain as a layer list), or in this process
    (via="local", profile_local), or given; planned by rematd, or by the
    `remat` program on PATH ($REMAT_CLI) without a server."""
    if algorithm is None:
        algorithm = "min-time" if budget is not None else "min-peak"
    if budget is not None and algorithm != "min-time":
        raise UsageError("a budget is min-time's: algorithm=%r takes none" % algorithm)
    chain = stages_of(blocks, sample_input)
    mods = chain.modules
    if server is not None and client is None:
        client = Client(server, token)
    if profile is None:
        # The worker measures no loss: with one, the chain is measured here.
        layers = layers_of(mods) if client is not None and via in ("auto", "worker") and \
            mods is not None and loss is None else None
        if via == "worker" and loss is not None:
            raise UsageError("via=\"worker\" with loss=: the worker measures no loss")
        if via == "worker" and layers is None:
            raise UsageError("via=\"worker\": a module of this chain has no rematd layer"
                             if mods is not None else "via=\"worker\": the worker measures an "
                             "nn.Sequential of rematd's layers; this model's stages are "
                             "measured here (via=\"local\")")
        if layers is not None:
            dt = DTYPES.get(sample_input.dtype)
            try:
                profile = client.profile(layers=layers, batch_size=int(sample_input.shape[0]),
                                         input_shape=list(sample_input.shape[1:]), dtype=dt,
                                         device=_device_name(sample_input), progress=progress,
                                         timeout=timeout)
            except ProblemError as e:
                # A layer rematd does not take as given: measure it here.
                if via == "worker" or e.status != 400:
                    raise
                layers = None
        if profile is None:
            profile = profile_local(chain, sample_input, loss=loss)
    try:
        if client is not None:
            kw = {"budget_bytes": budget} if budget is not None else {}
            if profile.get("id") and len(profile["id"]) == 32:
                plan = client.plan(profile_id=profile["id"], algorithm=algorithm, **kw)
            else:
                plan = client.plan(profile=profile, algorithm=algorithm, **kw)
        else:
            cli = os.environ.get("REMAT_CLI") or shutil.which("remat")
            if cli is None:
                raise CommandError("no server given and no `remat` program on PATH to plan with")
            plan = _plan_with_cli(profile, algorithm, budget, cli)
    except InfeasibleError as e:
        raise InfeasibleError(e.status, dict(e.problem, detail=(
            "no schedule fits %d bytes; the least budget that does is %s bytes"
            % (budget, e.min_budget_bytes))), e.method, e.url) from None
    return chain, profile, plan


def checkpoint(model, sample_input, budget=None, algorithm=None, server=None, token=None,
               via="auto", engine="auto", use_reentrant=None, preserve_rng_state=True,
               progress=None, timeout=600.0, loss=None):
    """Profiles `model` on `sample_input`, plans (min-peak, or min-time
    under `budget` bytes) and returns the model with the plan applied
    (remat.apply); the module's .plan, .profile and .description hold what
    was used and what it recomputes.  `model` is an nn.Sequential or a list
    of modules (a stage each), or any nn.Module torch.fx can trace, whose
    stages remat finds (remat.stages); `sample_input` is a tensor, a tuple
    of positional arguments or a dict of keyword arguments, and the
    returned module is called the same way.  A budget nothing fits raises
    InfeasibleError whose min_budget_bytes is the least that does.  `loss`,
    the step's loss of the model's output, has its own bytes measured and
    modelled (remat.profile_local); the chain is then measured here."""
    chain, profile, plan = plan_for(model, sample_input, budget=budget, algorithm=algorithm,
                             server=server, token=token, via=via, progress=progress,
                             timeout=timeout, loss=loss)
    out = apply(chain, plan, engine=engine, use_reentrant=use_reentrant,
                preserve_rng_state=preserve_rng_state)
    out.profile = profile
    return out


__all__ = ["checkpoint", "plan_for", "layers_of", "layer_of", "ProblemError"]
