#!/usr/bin/env python3
"""The cost of remat.apply over a hand-written torch.utils.checkpoint with the
same segments, in one process, on CPU: one training step (forward, backward)
of a chain, alternating the two in rounds so that drift in a shared machine
hits both alike.  Prints the medians and their ratio.

    /usr/bin/python3 bench/python-apply.py [--rounds R] [--steps S] [--reentrant 0|1]

With --decoder N it times instead what remat does before a step for a model
that is not a chain: finding the stages of an N-block decoder (an
nn.ModuleList called in a loop with attention_mask and position_ids,
tests/python/models.py's GPT at width 16) with torch.fx, and planning it
with the built `remat plan` (min-peak and min-time; $REMAT_CLI, else
build/cli/remat), on a profile measured once beforehand (the profiling is
timed apart: it runs every stage).
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402

import remat  # noqa: E402
from remat._apply import default_reentrant  # noqa: E402


def chain(n, width):
    torch.manual_seed(0)
    mods = []
    for k in range(n):
        mods += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*mods)


def hand_written(seq, checkpoints, reentrant):
    """What a user writes: each segment but the last in a checkpoint call."""
    mods = list(seq)
    bounds = [0] + checkpoints + [len(mods)]
    segs = [nn.Sequential(*mods[a:b]) for a, b in zip(bounds, bounds[1:])]

    def forward(x):
        for s in segs[:-1]:
            x = checkpoint(s, x, use_reentrant=reentrant)
        return segs[-1](x)
    return forward


def decoder(n, repeats):
    import json
    import subprocess
    top = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    sys.path.insert(0, os.path.join(top, "tests", "python"))
    from models import GPT, gpt_inputs
    cli = os.environ.get("REMAT_CLI") or os.path.join(top, "build", "cli", "remat")
    torch.manual_seed(0)
    model = GPT(dim=16, heads=2, layers=n)
    sample = gpt_inputs()
    t0 = time.perf_counter()
    chain = remat.stages(model, sample)
    t_find = time.perf_counter() - t0
    t0 = time.perf_counter()
    prof = remat.profile_local(chain, sample, warmup=0, repeats=1)
    t_prof = time.perf_counter() - t0
    finds, plans = [t_find], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        remat.stages(model, sample)
        finds.append(time.perf_counter() - t0)
    text = json.dumps(prof).encode()
    for _ in range(repeats):
        t0 = time.perf_counter()
        for alg in (["min-peak"], ["min-time", "--budget",
                                   str(int(sum(s["param_bytes"] for s in prof["stages"]) * 2.2))]):
            r = subprocess.run([cli, "plan", "--algorithm"] + alg + ["-"], input=text,
                               capture_output=True)
            if r.returncode != 0 and alg[0] == "min-peak":
                raise SystemExit("remat plan: " + r.stderr.decode())
        plans.append(time.perf_counter() - t0)
    blocks = sum(b is not None for b in chain.blocks)
    print("torch %s, %d threads: %d-block decoder, %d stages (%d blocks), %d fx nodes"
          % (torch.__version__, torch.get_num_threads(), n, len(chain), blocks,
             sum(len(s.nodes) for s in chain.stages)))
    print("  stage discovery (trace, cuts, stage code): median %.3f s (first %.3f s)"
          % (statistics.median(finds), t_find))
    print("  planning (remat plan min-peak + min-time): median %.3f s" % statistics.median(plans))
    print("  discovery + planning: %.3f s" % (statistics.median(finds) + statistics.median(plans)))
    print("  profiling every stage once (profile_local, warmup 0, repeats 1): %.3f s" % t_prof)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--decoder", type=int, default=0,
                    help="time stage discovery and planning of an N-block decoder instead")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--stages", type=int, default=16)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--reentrant", type=int, default=int(default_reentrant()))
    a = ap.parse_args()
    if a.decoder:
        return decoder(a.decoder, a.rounds)
    seq = chain(a.stages // 2, a.width)
    n = len(seq)
    ck = list(range(4, n, 4))
    plan = {"algorithm": "uniform",
            "schedule": [{"op": o, "stage": i} for o, i in remat.single_level_schedule(ck, n)]}
    applied = remat.apply(seq, plan, use_reentrant=bool(a.reentrant))
    hand = hand_written(seq, ck, bool(a.reentrant))
    # The input needs grad for reentrant checkpoints in the hand-written
    # version (else the first segment's weights get none): both get one.
    x = torch.randn(a.batch, a.width, requires_grad=True)

    def step(f):
        y = f(x)
        y.sum().backward()

    times = {"remat.apply": [], "torch.utils.checkpoint": []}
    for f in (applied, hand):
        step(f)
    for _ in range(a.rounds):
        for name, f in (("remat.apply", applied), ("torch.utils.checkpoint", hand)):
            t0 = time.perf_counter()
            for _ in range(a.steps):
                step(f)
            times[name].append((time.perf_counter() - t0) / a.steps * 1e3)
    med = {k: statistics.median(v) for k, v in times.items()}
    print("torch %s, %d threads, %d modules, segments every 4, reentrant=%d, batch %d x %d"
          % (torch.__version__, torch.get_num_threads(), n, a.reentrant, a.batch, a.width))
    for k, v in med.items():
        print("  %-24s median step %.3f ms (rounds: %s)"
              % (k, v, ", ".join("%.2f" % t for t in times[k])))
    print("  ratio remat.apply / torch.utils.checkpoint: %.3f"
          % (med["remat.apply"] / med["torch.utils.checkpoint"]))


if __name__ == "__main__":
    main()
