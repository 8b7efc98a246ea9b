#!/usr/bin/env python3
"""One FSDP rank's memory on a GPU against remat_shard_memory (run by
tests/worker/gpu-sharded.sh; PyTorch 2.x with CUDA, one rank per GPU).

Each rank builds eight Linear(4096, 4096) blocks in fp32, wraps each block
in FSDP (FULL_SHARD, or HYBRID_SHARD with --shard-group ranks per group;
use_orig_params=False, so each block is one flat parameter padded to a
multiple of the group), takes Adam, and runs two steps.  Measured per rank
(torch.cuda's allocator, which sees every CUDA tensor):

  states: torch.cuda.memory_allocated() after the second step, less the
      input: the sharded weights, gradients and Adam state;
  gathered: the peak during the step less the states and less the
      activations, the activations measured as the peak of the same
      forward and backward on one unsharded block stack with no optimizer
      (its peak less its weights and gradients).
The model: weights + gradients + optimizer (K = 8, fp32, no master copy)
against states within 3%; gathered is reported beside the model's 2pU + gU
(prefetch and the allocator's caching make it the loosest term).
"""
import argparse
import ctypes
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WIDTH, BLOCKS, BATCH = 4096, 8, 8


class Spec(ctypes.Structure):
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


def blocks():
    return torch.nn.Sequential(*[torch.nn.Linear(WIDTH, WIDTH) for _ in range(BLOCKS)])


def rank_main(rank, world, strategy, group, out):
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import ShardingStrategy
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    dev = torch.device("cuda", rank)
    torch.manual_seed(0)
    # The activations of the same stack, unsharded, without an optimizer.
    ref = blocks().to(dev)
    x = torch.randn(BATCH, WIDTH, device=dev)
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    ref(x).square().mean().backward()
    wbytes = sum(p.numel() * 4 for p in ref.parameters())
    act = torch.cuda.max_memory_allocated() - base - wbytes  # the gradients are live at the end
    del ref
    torch.cuda.empty_cache()
    kw = {}
    if strategy == "hsdp":
        kw["sharding_strategy"] = ShardingStrategy.HYBRID_SHARD
        from torch.distributed.device_mesh import init_device_mesh
        kw["device_mesh"] = init_device_mesh("cuda", (world // group, group))
    else:
        kw["sharding_strategy"] = ShardingStrategy.FULL_SHARD
    model = blocks()
    params = sum(p.numel() for p in model.parameters())
    unit = max(sum(p.numel() for p in b.parameters()) for b in model)
    model = torch.nn.Sequential(*[FSDP(b, device_id=dev, **kw) for b in model])
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    for _ in range(2):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        start = torch.cuda.memory_allocated()
        model(x).square().mean().backward()
        opt.step()
        torch.cuda.synchronize()
    states = torch.cuda.memory_allocated() - x.numel() * 4
    peak = torch.cuda.max_memory_allocated() - x.numel() * 4
    rec = {"rank": rank, "params": params, "unit": unit, "states": states, "peak": peak,
           "start": start, "activations": act}
    with open("%s.%d" % (out, rank), "w") as f:
        json.dump(rec, f)
    dist.destroy_process_group()


def model(lib, strategy, world, group, params, unit):
    s = Spec()
    lib.remat_shard_spec_init(ctypes.byref(s))
    k = ctypes.c_int(0)
    assert lib.remat_shard_parse(strategy.encode(), ctypes.byref(k)) == 0
    s.strategy, s.data, s.shard_group = k.value, world, group
    s.params, s.largest_unit = params, unit
    s.param_bytes, s.grad_bytes, s.optim_bytes = 4, 4, 8
    b, err = Breakdown(), Error()
    assert lib.remat_shard_memory(ctypes.byref(s), ctypes.byref(b), ctypes.byref(err)) == 0, \
        err.message
    return b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--strategy", choices=["fsdp", "hsdp"], default="fsdp")
    ap.add_argument("--shard-group", type=int, default=0)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    lib = ctypes.CDLL(a.lib)
    group = a.shard_group or a.ranks
    mp.spawn(rank_main, args=(a.ranks, a.strategy, group, a.out), nprocs=a.ranks)
    rows, worst = [], 0.0
    for r in range(a.ranks):
        rec = json.load(open("%s.%d" % (a.out, r)))
        b = model(lib, a.strategy, a.ranks, group, rec["params"], rec["unit"])
        want = b.weights + b.gradients + b.optimizer
        err = abs(rec["states"] - want) / want
        worst = max(worst, err)
        gathered = rec["peak"] - rec["states"] - rec["activations"]
        rows.append(dict(rec, model_states=want, rel_err=err, gathered_measured=gathered,
                         model_gathered=b.gathered))
        print("rank %d: states %d, model %d (%.3f%%); gathered %d, model %d" % (
            r, rec["states"], want, 100 * err, gathered, b.gathered))
    with open(a.out, "w") as f:
        json.dump({"strategy": a.strategy, "ranks": a.ranks, "shard_group": group,
                   "rows": rows, "worst": worst}, f, indent=1)
    print("worst relative error (states): %.3f%%" % (100 * worst))
    return 0 if worst <= 0.03 else 1


if __name__ == "__main__":
    sys.exit(main())
