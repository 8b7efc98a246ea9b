#!/usr/bin/env python3
"""remat on the models of tests/python/models.py, unchanged, with the usual
training step (`loss_fn(model(x)).backward()`), on CPU: the stages torch.fx
finds, and per plan the peak remat predicts against the peak measured, the
step time against the plain step's and the gradients against the plain
step's.

    /usr/bin/python3 bench/python-models.py [--markdown] [--models a,b] [--rounds R]

Plans, from the built `remat plan` ($REMAT_CLI, else build/cli/remat or
build/*/cli/remat): store-all (the plain model, no checkpointing), sqrt
(run through torch.utils.checkpoint, non-reentrant), min-peak, and min-time
at a budget halfway between min-peak's peak and store-all's.  Each plan runs
on both engines of remat.apply: "checkpoint" (torch.utils.checkpoint,
non-reentrant; single-level plans only) and "executor" (stage by stage, as
remat-worker validates).

A measured peak is counted as the memory model counts it: the weights, the
input and the most the step adds above what was live before it (the
PyTorch profiler's CPU memory events, tests/python/test_profile.py), the
step's first run (one-time allocations) not counted.  A step time is the
median of --rounds steps, plans and the plain step alternating.
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import time

top = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(top, "python"))
sys.path.insert(0, os.path.join(top, "tests", "python"))

import torch  # noqa: E402

import remat  # noqa: E402
from remat._profile import _CpuMeter  # noqa: E402
from models import MODELS  # noqa: E402


def cli_path():
    c = os.environ.get("REMAT_CLI")
    if c:
        return c
    for c in [os.path.join(top, "build", "cli", "remat")] + \
            sorted(glob.glob(os.path.join(top, "build", "*", "cli", "remat"))):
        if os.access(c, os.X_OK):
            return c
    raise SystemExit("no built remat program: set REMAT_CLI or build under build/")


def plan(cli, prof, algorithm, budget=None):
    args = [cli, "plan", "--algorithm", algorithm] + (["--budget", str(budget)] if budget else [])
    r = subprocess.run(args + ["-"], input=json.dumps(prof).encode(), capture_output=True)
    if r.returncode != 0:
        raise SystemExit("remat plan %s: %s" % (algorithm, r.stderr.decode()))
    return json.loads(r.stdout)


def call(model, sample):
    if isinstance(sample, dict):
        return model(**sample)
    return model(*sample) if isinstance(sample, tuple) else model(sample)


def step(model, params, sample, loss):
    for p in params:
        p.grad = None
    torch.manual_seed(1)
    loss(call(model, sample)).backward()
    return [p.grad for p in params]


def nbytes(t):
    return t.numel() * t.element_size()


def measured_peak(model, params, sample, loss, base):
    step(model, params, sample, loss)       # one-time allocations are not a step's
    for p in params:
        p.grad = None
    torch.manual_seed(1)
    _, _, pk = _CpuMeter().measure(lambda: loss(call(model, sample)).backward())
    return base + pk


def step_ms(fns, rounds):
    """Median step time of each fn, alternating them round by round."""
    ts = [[] for _ in fns]
    for _ in range(rounds):
        for k, f in enumerate(fns):
            t0 = time.perf_counter()
            f()
            ts[k].append((time.perf_counter() - t0) * 1e3)
    return [statistics.median(t) for t in ts]


def run_model(name, cli, rounds, with_loss=True):
    make, inp, loss = MODELS[name]
    torch.manual_seed(0)
    model, sample = make(), inp()
    params = list(model.parameters())
    t0 = time.perf_counter()
    chain = remat.stages(model, sample)
    found_s = time.perf_counter() - t0
    prof = remat.profile_local(chain, sample, model=name, warmup=1, repeats=1,
                               loss=loss if with_loss else None)
    n = len(chain)
    inputs = sample if isinstance(sample, tuple) else tuple(sample.values()) \
        if isinstance(sample, dict) else (sample,)
    base = sum(nbytes(p) for p in params) + sum(nbytes(t) for t in inputs
                                                 if isinstance(t, torch.Tensor))
    want = [g.clone() for g in step(model, params, sample, loss)]
    sa = plan(cli, prof, "store-all")
    mp = plan(cli, prof, "min-peak")
    half = (mp["peak_bytes"] + sa["peak_bytes"]) // 2
    plans = [("none (store-all)", sa), ("sqrt(n)", plan(cli, prof, "sqrt")),
             ("min-peak", mp), ("min-time halfway", plan(cli, prof, "min-time", half))]
    rows = []
    runs = []
    for label, p in plans:
        for engine in ("checkpoint", "executor"):
            if label.startswith("none"):
                m, engine = model, "plain"
            else:
                if engine == "checkpoint" and "checkpoints" not in p:
                    continue        # multi-level: the executor only
                try:
                    m = remat.apply(chain, p, engine=engine, use_reentrant=False)
                except remat.PlanError:
                    continue
            got = step(m, params, sample, loss)
            same = all(g is not None and torch.equal(g, w) for g, w in zip(got, want))
            pk = measured_peak(m, params, sample, loss, base)
            rows.append({"model": name, "stages": n, "plan": label, "engine": engine,
                         "predicted": p["peak_bytes"], "measured": pk,
                         "err": (pk - p["peak_bytes"]) / p["peak_bytes"],
                         "grads": "equal" if same else "DIFFER",
                         "checkpoints": len(p.get("checkpoints") or [])})
            runs.append(lambda m=m: step(m, params, sample, loss))
            if engine == "plain":
                break
    times = step_ms(runs, rounds)
    for r, t in zip(rows, times):
        r["ms"] = t
        r["ratio"] = t / times[0]
    for p in params:
        p.grad = None
    return rows, found_s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--markdown", action="store_true", help="a table for docs/python.md")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    cli = cli_path()
    allrows = []
    for name in a.models.split(","):
        rows, found_s = run_model(name, cli, a.rounds)
        allrows += rows
        if not a.markdown:
            for r in rows:
                print("%-13s %3d stages %-17s %-10s predicted %11d measured %11d (%+6.2f%%) "
                      "step x%.2f grads %s" % (r["model"], r["stages"], r["plan"], r["engine"],
                                               r["predicted"], r["measured"], 100 * r["err"],
                                               r["ratio"], r["grads"]), flush=True)
    if a.markdown:
        markdown(allrows, a.threads)


def markdown(rows, threads):
    """One row per model and plan: the prediction, and per engine the
    measured peak (its distance from the prediction), the step time over
    the plain step's and whether the gradients equal the plain step's."""
    print("| model | stages | plan | predicted peak | measured: checkpoint | executor "
          "| step time: checkpoint | executor | gradients |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    groups = {}
    for r in rows:
        groups.setdefault((r["model"], r["plan"]), []).append(r)
    for (model, plan), rs in groups.items():
        by = {r["engine"]: r for r in rs}
        ck = by.get("checkpoint") or by.get("plain")
        ex = by.get("executor")

        def peak(r):
            return "%s (%+.1f%%)" % (format(r["measured"], ","), 100 * r["err"]) if r else "–"

        def ratio(r):
            return "×%.2f" % r["ratio"] if r else "–"
        grads = "bitwise equal" if all(r["grads"] == "equal" for r in rs) else "DIFFER"
        print("| %s | %d | %s | %s | %s | %s | %s | %s | %s |" % (
            model, rs[0]["stages"], plan, format(rs[0]["predicted"], ","), peak(ck), peak(ex),
            ratio(ck), ratio(ex), grads))
    print()
    print("torch %s, CPU, %d thread(s), %s: `python3 bench/python-models.py --markdown`" % (
        torch.__version__, threads, time.strftime("%Y-%m-%d")))

if __name__ == "__main__":
    main()
