#!/usr/bin/python3
"""Per-rank memory of DDP and ZeRO-1 measured on CPU over gloo, against
remat's model of it (docs/scheduling.md, "Sharded jobs").

    /usr/bin/python3 tests/python/sharded_gloo.py [--ranks 2 4] [--json]

Each rank builds the same model (eight Linear(1024, 1024) blocks, fp32),
wraps it in DistributedDataParallel (default bucket_cap_mb=25,
gradient_as_bucket_view=False), takes Adam (DDP) or ZeroRedundancyOptimizer
over Adam (ZeRO-1), and runs one training step.  What is measured, per rank:

  weights, gradients, optimizer: the bytes of the distinct storages of the
      parameters, of their .grad and of the local optimizer's state;
  buckets: the net bytes the CPU allocator gained inside DDP's constructor
      (torch.profiler with profile_memory: every c10 CPU allocation and
      free, here those under a record_function around the constructor);
  live: the allocator's net bytes after the step, counted from before the
      model was built (everything the job holds between steps).

The model's figures are libremat's remat_shard_memory (through ctypes,
from build/d unless --lib says) for the same job: Ψ the parameters, K = 8
(Adam's two fp32 moments; fp32 training keeps no master copy), no
activations and no step transient (those come from a profile and a plan
and are checked elsewhere: tests/api/fits*.sh, the simulator's tests), so
"live" is compared with the model's peak, the sum of the other terms.
Exits 1 when a measured figure is off the model's by more than 3%.
"""
import argparse
import ctypes
import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile, record_function

WIDTH, BLOCKS, BATCH = 1024, 8, 16


def storage_bytes(tensors):
    seen, total = set(), 0
    for t in tensors:
        if t is None or not torch.is_tensor(t):
            continue
        s = t.storage()
        key = s.data_ptr()
        if key in seen or s.size() == 0:
            continue
        seen.add(key)
        total += s.size() * s.element_size()
    return total


def net_bytes(prof):
    # Self memory of every op: allocations count where they happen, frees
    # ("[memory]" events and ops that free) negative.
    return sum(e.self_cpu_memory_usage for e in prof.events())


def rank_main(rank, world, strategy, init_file, out):
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=world)
    torch.manual_seed(0)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as whole:
        model = torch.nn.Sequential(*[torch.nn.Linear(WIDTH, WIDTH) for _ in range(BLOCKS)])
        with record_function("remat.ddp_ctor"):
            ddp = DDP(model)
        if strategy == "ddp":
            opt = torch.optim.Adam(ddp.parameters(), lr=1e-3)
            local = opt
        else:
            opt = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.Adam,
                                          lr=1e-3)
            local = opt.optim
        x = torch.randn(BATCH, WIDTH)
        ddp(x).square().mean().backward()
        opt.step()
        del x
    params = list(model.parameters())
    state = [t for st in local.state.values() for t in st.values()]
    rec = {
        "rank": rank,
        "weights": storage_bytes(params),
        "gradients": storage_bytes(p.grad for p in params),
        "optimizer": storage_bytes(state),
        "buckets": sum(e.cpu_memory_usage for e in whole.events() if e.name == "remat.ddp_ctor"),
        "live": net_bytes(whole),
        "params": sum(p.numel() for p in params),
    }
    with open(out + ".%d" % rank, "w") as f:
        json.dump(rec, f)
    dist.destroy_process_group()


class Spec(ctypes.Structure):
    """struct remat_shard_spec (src/remat.h)."""
    _fields_ = [("strategy", ctypes.c_int), ("data", ctypes.c_int64),
                ("shard_group", ctypes.c_int64), ("params", ctypes.c_int64),
                ("largest_unit", ctypes.c_int64), ("param_bytes", ctypes.c_int),
                ("grad_bytes", ctypes.c_int), ("optim_bytes", ctypes.c_int64),
                ("bucket_bytes", ctypes.c_int64), ("bucket_view", ctypes.c_int),
                ("activations", ctypes.c_int64), ("step_tmp", ctypes.c_int64),
                ("step_tmp_per_tensor", ctypes.c_int)]


class Breakdown(ctypes.Structure):
    _fields_ = [(k, ctypes.c_int64) for k in ("weights", "gradients", "optimizer", "gathered",
                                              "buckets", "activations", "step_tmp", "peak")]


class Error(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("pointer", ctypes.c_char * 128),
                ("message", ctypes.c_char * 256)]


def model(lib, strategy, world, params):
    """libremat's per-rank bytes (remat_shard_memory) for this job: fp32
    weights and gradients, Adam's two fp32 moments (K = 8, no master copy
    in fp32 training), DDP's default buckets."""
    s = Spec()
    lib.remat_shard_spec_init(ctypes.byref(s))
    k = ctypes.c_int(0)
    assert lib.remat_shard_parse(strategy.encode(), ctypes.byref(k)) == 0
    s.strategy, s.data, s.params = k.value, world, params
    s.param_bytes, s.grad_bytes, s.optim_bytes = 4, 4, 8
    b, err = Breakdown(), Error()
    rc = lib.remat_shard_memory(ctypes.byref(s), ctypes.byref(b), ctypes.byref(err))
    assert rc == 0, err.message
    return {"weights": b.weights, "gradients": b.gradients, "optimizer": b.optimizer,
            "buckets": b.buckets, "live": b.peak}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--lib", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "..", "..", "build", "d", "src", ".libs",
                                                  "libremat.so"),
                    help="the libremat.so whose model is checked (default: build/d's)")
    a = ap.parse_args()
    lib = ctypes.CDLL(a.lib)
    worst, rows = 0.0, []
    for world in a.ranks:
        for strategy in ("ddp", "zero1"):
            with tempfile.TemporaryDirectory() as d:
                init, out = os.path.join(d, "init"), os.path.join(d, "out")
                mp.spawn(rank_main, args=(world, strategy, init, out), nprocs=world)
                recs = [json.load(open(out + ".%d" % r)) for r in range(world)]
            for rec in recs:
                m = model(lib, strategy, world, rec["params"])
                for term in ("weights", "gradients", "optimizer", "buckets", "live"):
                    err = abs(rec[term] - m[term]) / m[term]
                    worst = max(worst, err)
                    rows.append({"strategy": strategy, "ranks": world, "rank": rec["rank"],
                                 "term": term, "measured": rec[term], "model": m[term],
                                 "rel_err": round(err, 5)})
    if a.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
    else:
        print("%-6s %5s %4s %-10s %12s %12s %8s" % ("strat", "ranks", "rank", "term", "measured",
                                                    "model", "err"))
        for r in rows:
            print("%-6s %5d %4d %-10s %12d %12d %7.3f%%" % (
                r["strategy"], r["ranks"], r["rank"], r["term"], r["measured"], r["model"],
                100 * r["rel_err"]))
    print("worst relative error: %.3f%%" % (100 * worst))
    return 0 if worst <= 0.03 else 1


if __name__ == "__main__":
    sys.exit(main())
