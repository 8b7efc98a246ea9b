"""remat.profile_local: a remat.profile/v1 measured in the user's process.

Every field has remat-worker's meaning (docs/worker.md, "How a stage is
measured"), measured the same way, stage by stage: a forward without grad
(F_none), a forward with grad from a fresh leaf (F_all), a backward with a
random δ (B), after warm-ups, byte fields the largest over the repeats and
times the median (on a GPU, the mean of back-to-back runs, as remat-worker
times them there).

Live bytes and their peak come from the CUDA caching allocator's statistics
on a GPU, and on CPU from the PyTorch profiler's memory events (every CPU
allocation and free, in order, with its size: the same allocations
remat-worker's counting allocator sees).
"""
import statistics
import time

import torch

from ._apply import blocks_of
from ._exceptions import ChainError, UsageError

DTYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16",
          torch.int64: "int64", torch.float64: "fp64"}


def _nbytes(t):
    return t.numel() * t.element_size()


class _CudaMeter:
    def __init__(self, device):
        self.device = device

    def measure(self, fn):
        torch.cuda.synchronize(self.device)
        base = torch.cuda.memory_allocated(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        r = fn()
        torch.cuda.synchronize(self.device)
        return r, torch.cuda.memory_allocated(self.device) - base, \
            torch.cuda.max_memory_allocated(self.device) - base


class _CpuMeter:
    """Replays the profiler's CPU memory events: the sum is what the window
    left live, the largest prefix sum its peak above the start."""

    def measure(self, fn):
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            r = fn()
        total = peak = 0
        for nb in self._deltas(prof):
            total += nb
            peak = max(peak, total)
        return r, total, peak

    @staticmethod
    def _deltas(prof):
        kr = getattr(prof.profiler, "kineto_results", None)
        if kr is not None:
            evs = [e for e in kr.events() if e.name() == "[memory]" and
                   str(e.device_type()).endswith("CPU")]
            evs = sorted(enumerate(evs), key=lambda ke: (ke[1].start_us(), ke[0]))
            return [e.nbytes() for _, e in evs]
        # Without Kineto's raw events: the legacy list, where the allocations
        # within an operator are netted into it (a lower bound on peaks).
        evs = sorted(prof.events(), key=lambda e: e.time_range.start)
        return [e.cpu_memory_usage for e in evs if e.cpu_memory_usage]


def _run_stage(mod, x):
    y = mod(x)
    if not isinstance(y, torch.Tensor):
        raise ChainError("a stage returned %s: a chain passes one tensor" % type(y).__name__)
    # As remat-worker does: an output that is a view of its input gets its
    # own buffer, as the memory model gives every stage output one.
    if y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr() \
            if hasattr(y, "untyped_storage") else y.storage().data_ptr() == x.storage().data_ptr():
        y = y.clone()
    return y


def _clear_grads(mod):
    for p in mod.parameters():
        p.grad = None


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _measure_stage(mod, i, x, warmup, repeats, meter, device):
    input_grad = i > 0 and x.is_floating_point()
    in_bytes = _nbytes(x) if input_grad else 0
    p_bytes = sum(_nbytes(p) for p in mod.parameters())
    # fwd_tmp: the forward without grad's transient, fwd_grad_tmp: with
    # grad's, bwd_tmp: the backward's, signed (below zero when it frees saved
    # tensors before it has made all its gradients), as the worker measures.
    saved = fwd_tmp = fwd_grad_tmp = 0
    bwd_tmp = None
    tf, tb = [], []
    for r in range(warmup + repeats):
        keep = r >= warmup
        # Memory, with the meter.
        _clear_grads(mod)
        with torch.no_grad():
            y, live, pk = meter.measure(lambda: _run_stage(mod, x))
        del y
        if keep:
            fwd_tmp = max(fwd_tmp, pk - live)
        leaf = x.detach().requires_grad_(True) if input_grad else x
        y, live, pk = meter.measure(lambda: _run_stage(mod, leaf))
        if keep:
            saved = max(saved, live)
            fwd_grad_tmp = max(fwd_grad_tmp, pk - live)
        if y.requires_grad:
            dy = torch.randn_like(y)
            _, live, pk = meter.measure(lambda: torch.autograd.backward(y, dy))
            if keep:
                b = pk - in_bytes - p_bytes
                bwd_tmp = b if bwd_tmp is None else max(bwd_tmp, b)
        del y, leaf
        # Times, without the meter's overhead.
        _clear_grads(mod)
        leaf = x.detach().requires_grad_(True) if input_grad else x
        _sync(device)
        t0 = time.perf_counter()
        y = _run_stage(mod, leaf)
        _sync(device)
        t1 = time.perf_counter()
        if y.requires_grad:
            dy = torch.randn_like(y)
            _sync(device)
            t2 = time.perf_counter()
            torch.autograd.backward(y, dy)
            _sync(device)
            t3 = time.perf_counter()
            if keep:
                tb.append((t3 - t2) * 1e3)
        if keep:
            tf.append((t1 - t0) * 1e3)
        del y, leaf
    _clear_grads(mod)
    fwd_ms, bwd_ms = statistics.median(tf), statistics.median(tb) if tb else 0.0
    if device.type == "cuda":
        fwd_ms, b2b = _time_back_to_back(mod, x, input_grad, repeats, device)
        bwd_ms = b2b if tb else 0.0
    return {"saved": saved, "fwd_tmp": fwd_tmp, "fwd_grad_tmp": fwd_grad_tmp,
            "bwd_tmp": bwd_tmp or 0, "p_bytes": p_bytes, "fwd_ms": fwd_ms, "bwd_ms": bwd_ms}


def _time_back_to_back(mod, x, input_grad, repeats, device):
    """remat-worker's GPU times (docs/worker.md): `repeats` forwards with
    grad run back to back, then as many backwards on one retained graph
    (gradients cleared before each), each the mean.  Timed alone between
    synchronisations a stage waits for the host's kernel launches, which a
    step's ops do not.  Returns (fwd_ms, bwd_ms); bwd_ms is 0.0 when the
    output needs no gradient."""
    leaf = x.detach().requires_grad_(True) if input_grad else x
    y = None
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(repeats):
        y = None  # never two graphs at once
        y = _run_stage(mod, leaf)
    _sync(device)
    fwd_ms = (time.perf_counter() - t0) * 1e3 / repeats
    if not y.requires_grad:
        return fwd_ms, 0.0
    dy = torch.randn_like(y)
    _sync(device)
    t0 = time.perf_counter()
    for r in range(repeats):
        _clear_grads(mod)
        if leaf.requires_grad:
            leaf.grad = None
        torch.autograd.backward(y, dy, retain_graph=r + 1 < repeats)
    _sync(device)
    bwd_ms = (time.perf_counter() - t0) * 1e3 / repeats
    _clear_grads(mod)
    return fwd_ms, bwd_ms


def profile_local(blocks, sample_input, device=None, warmup=2, repeats=5, model="local",
                  names=None):
    """Measures the chain `blocks` (an nn.Sequential or a list of modules,
    already on `device`) on `sample_input` (its first dimension the batch)
    and returns a remat.profile/v1 dict that rematd and `remat plan` accept.

    device: where to measure (default: the input's device); the input is
    moved there.  Parameters' gradients are left None."""
    mods = blocks_of(blocks)
    if not mods:
        raise UsageError("the chain has no modules")
    if warmup < 0 or repeats < 1:
        raise UsageError("warmup must be >= 0 and repeats >= 1")
    device = torch.device(device) if device is not None else sample_input.device
    x = sample_input.to(device)
    if names is None:
        if isinstance(blocks, torch.nn.Sequential):
            names = [n for n, _ in blocks.named_children()]
        else:
            names = [type(m).__name__.lower() + str(k) for k, m in enumerate(mods)]
    meter = _CudaMeter(device) if device.type == "cuda" else _CpuMeter()
    was_training = [m.training for m in mods]
    stages = []
    for i, mod in enumerate(mods):
        c = _measure_stage(mod, i, x, warmup, repeats, meter, device)
        with torch.no_grad():
            y = _run_stage(mod, x)
        ob = _nbytes(y)
        sb = max(c["saved"], ob)
        stages.append({"name": names[i], "out_bytes": ob, "saved_bytes": sb,
                       "fwd_tmp_bytes": max(c["fwd_tmp"], 0),
                       "fwd_grad_tmp_bytes": max(c["fwd_grad_tmp"], 0),
                       "bwd_tmp_bytes": max(c["bwd_tmp"], 0),
                       "bwd_freed_bytes": min(max(-c["bwd_tmp"], 0), sb + ob),
                       "param_bytes": c["p_bytes"],
                       "fwd_ms": c["fwd_ms"], "bwd_ms": c["bwd_ms"]})
        x = y
    for m, t in zip(mods, was_training):
        m.train(t)
    if device.type == "cuda":
        dev_name = torch.cuda.get_device_name(device)
        driver = "CUDA runtime %s" % torch.version.cuda
    else:
        dev_name = "cpu"
        driver = "cpu, %d threads" % torch.get_num_threads()
    return {"format": "remat.profile/v1", "model": model,
            "batch_size": int(sample_input.shape[0]) if sample_input.dim() > 0 else 1,
            "dtype": DTYPES.get(sample_input.dtype, str(sample_input.dtype)),
            "input_bytes": _nbytes(sample_input), "stages": stages, "device": dev_name,
            "driver": driver, "libtorch": torch.__version__, "measured_by": "remat.profile_local"}
