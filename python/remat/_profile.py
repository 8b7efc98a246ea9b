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
import torch.nn as nn

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


def _same_storage(a, b):
    sa = a.untyped_storage() if hasattr(a, "untyped_storage") else a.storage()
    sb = b.untyped_storage() if hasattr(b, "untyped_storage") else b.storage()
    return sa.data_ptr() == sb.data_ptr()


def _run_stage(stage, xs, chain=None):
    """The stage's output tuple.  In a chain of modules, as remat-worker
    does, an output that is a view of its input gets its own buffer, as the
    memory model gives every stage output one.  A traced stage's outputs
    are what its code returns: values passed through are the same tensors."""
    ys = stage(*xs)
    if not isinstance(ys, tuple):
        raise ChainError("a stage returned %s: a chain passes one tensor" % type(ys).__name__)
    if chain is None or not chain.traced:
        y, x = ys[0], xs[0]
        if isinstance(y, torch.Tensor) and isinstance(x, torch.Tensor) and _same_storage(y, x):
            ys = (y.clone(),)
    return ys


def _clear_grads(params):
    for p in params:
        p.grad = None


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _is_t(v):
    return isinstance(v, torch.Tensor)


def _leaves(xs, flags):
    return tuple(v.detach().requires_grad_(bool(f) and v.is_floating_point()) if _is_t(v) else v
                 for v, f in zip(xs, flags))


def _grad_pairs(ys):
    """The outputs a backward starts from, each with a random δ."""
    ys = [y for y in ys if _is_t(y) and y.requires_grad]
    return ys, [torch.randn_like(y) for y in ys]


def _measure_stage(stage, params, xs, flags, warmup, repeats, meter, device, chain=None):
    leaf0 = _leaves(xs, flags)
    in_bytes = sum(_nbytes(t) for t in leaf0 if _is_t(t) and t.requires_grad)
    p_bytes = sum(_nbytes(p) for p in params)
    # fwd_tmp: the forward without grad's transient, fwd_grad_tmp: with
    # grad's, bwd_tmp: the backward's, signed (below zero when it frees saved
    # tensors before it has made all its gradients), as the worker measures.
    saved = fwd_tmp = fwd_grad_tmp = 0
    bwd_tmp = None
    tf, tb = [], []
    for r in range(warmup + repeats):
        keep = r >= warmup
        # Memory, with the meter.
        _clear_grads(params)
        with torch.no_grad():
            y, live, pk = meter.measure(lambda: _run_stage(stage, xs, chain))
        del y
        if keep:
            fwd_tmp = max(fwd_tmp, pk - live)
        leaf = _leaves(xs, flags)
        y, live, pk = meter.measure(lambda: _run_stage(stage, leaf, chain))
        if keep:
            saved = max(saved, live)
            fwd_grad_tmp = max(fwd_grad_tmp, pk - live)
        ys, dys = _grad_pairs(y)
        if ys:
            _, live, pk = meter.measure(lambda: torch.autograd.backward(ys, dys))
            if keep:
                b = pk - in_bytes - p_bytes
                bwd_tmp = b if bwd_tmp is None else max(bwd_tmp, b)
        del y, leaf, ys, dys
        # Times, without the meter's overhead.
        _clear_grads(params)
        leaf = _leaves(xs, flags)
        _sync(device)
        t0 = time.perf_counter()
        y = _run_stage(stage, leaf, chain)
        _sync(device)
        t1 = time.perf_counter()
        ys, dys = _grad_pairs(y)
        if ys:
            _sync(device)
            t2 = time.perf_counter()
            torch.autograd.backward(ys, dys)
            _sync(device)
            t3 = time.perf_counter()
            if keep:
                tb.append((t3 - t2) * 1e3)
        if keep:
            tf.append((t1 - t0) * 1e3)
        del y, leaf, ys, dys
    _clear_grads(params)
    fwd_ms, bwd_ms = statistics.median(tf), statistics.median(tb) if tb else 0.0
    if device.type == "cuda":
        fwd_ms, b2b = _time_back_to_back(stage, xs, flags, repeats, device)
        bwd_ms = b2b if tb else 0.0
    return {"saved": saved, "fwd_tmp": fwd_tmp, "fwd_grad_tmp": fwd_grad_tmp,
            "bwd_tmp": bwd_tmp or 0, "p_bytes": p_bytes, "fwd_ms": fwd_ms, "bwd_ms": bwd_ms}


def _time_back_to_back(stage, xs, flags, repeats, device):
    """remat-worker's GPU times (docs/worker.md): `repeats` forwards with
    grad run back to back, then as many backwards on one retained graph
    (gradients cleared before each), each the mean.  Timed alone between
    synchronisations a stage waits for the host's kernel launches, which a
    step's ops do not.  Returns (fwd_ms, bwd_ms); bwd_ms is 0.0 when no
    output needs a gradient.  `stage` may be a module and `xs` one tensor
    (flags then one bool: whether it gets grad)."""
    if isinstance(stage, nn.Module):
        mod = stage
        stage = lambda *t: (mod(*t),)  # noqa: E731
        params = list(mod.parameters())
    else:
        params = stage.parameters()
    if _is_t(xs):
        xs, flags = (xs,), (flags,)
    leaf = _leaves(xs, flags)
    y = None
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(repeats):
        y = None  # never two graphs at once
        y = _run_stage(stage, leaf)
    _sync(device)
    fwd_ms = (time.perf_counter() - t0) * 1e3 / repeats
    ys, dys = _grad_pairs(y)
    if not ys:
        return fwd_ms, 0.0
    _sync(device)
    t0 = time.perf_counter()
    for r in range(repeats):
        _clear_grads(params)
        for t in leaf:
            if _is_t(t) and t.requires_grad:
                t.grad = None
        torch.autograd.backward(ys, dys, retain_graph=r + 1 < repeats)
    _sync(device)
    bwd_ms = (time.perf_counter() - t0) * 1e3 / repeats
    _clear_grads(params)
    return fwd_ms, bwd_ms


def _first_tensor(sample):
    if _is_t(sample):
        return sample
    vals = sample.values() if isinstance(sample, dict) else sample
    t = next((v for v in vals if _is_t(v)), None)
    if t is None:
        raise UsageError("the sample holds no tensor")
    return t


def _to(sample, device):
    if _is_t(sample):
        return sample.to(device)
    if isinstance(sample, dict):
        return {k: v.to(device) if _is_t(v) else v for k, v in sample.items()}
    return tuple(v.to(device) if _is_t(v) else v for v in sample)


def _loss_bytes(chain, stage, xs, loss, meter, repeats):
    """The loss's bytes, from the last stage's output as leaves, the largest
    over `repeats`: what its forward keeps for its backward (cross-entropy's
    log-softmax of the logits), and the most it adds above that, in its
    forward or its backward (the output's gradient and the backward's
    scratch)."""
    with torch.no_grad():
        y = _run_stage(stage, xs, chain)
    saved = tmp = 0
    for _ in range(repeats):
        outs = _leaves(y, [True] * len(y))
        out = chain.unpack(outs)
        with torch.enable_grad():
            l, live, pk = meter.measure(lambda: loss(out))
        if not (_is_t(l) and l.requires_grad):
            raise UsageError("loss: the loss of the model's output must be a tensor that "
                             "needs a gradient")
        _, _, bpk = meter.measure(lambda: l.backward())
        # The loss value itself is not what the memory model misses.
        s = live - _nbytes(l)
        saved = max(saved, s)
        tmp = max(tmp, pk - live, bpk + _nbytes(l))
        del l, out, outs
    return saved, tmp


def profile_local(blocks, sample_input, device=None, warmup=2, repeats=5, model="local",
                  names=None, loss=None):
    """Measures the model `blocks` (an nn.Sequential or a list of modules, one
    stage each; any other nn.Module, cut into stages by remat.stages; or
    those stages), already on `device`, on `sample_input` (a tensor, a tuple
    of positional arguments or a dict of keyword arguments; the first
    tensor's first dimension the batch), and returns a remat.profile/v1
    dict that rematd and `remat plan` accept.

    device: where to measure (default: the sample's device); the sample is
    moved there.  Parameters' gradients are left None.

    loss: the training step's loss of the model's output (a callable, as
    in `loss(model(x)).backward()`).  What its forward keeps for its
    backward is added to the last stage's saved_bytes and, since the
    loss's backward frees it before the last stage's backward makes its
    gradients, to its bwd_freed_bytes: the memory model then holds it from
    the last forward to the loss's backward, as the step does
    (`loss_saved_bytes` says how much).  The most the loss adds above
    that, in its forward or its backward (the output's gradient and the
    backward's scratch, `loss_tmp_bytes`), is charged to the last stage's
    fwd_grad_tmp_bytes: the memory model has no op for the loss's
    backward, and the last forward with grad is the op just before it."""
    from ._graph import Chain, stages_of
    if warmup < 0 or repeats < 1:
        raise UsageError("warmup must be >= 0 and repeats >= 1")
    first = _first_tensor(sample_input)
    device = torch.device(device) if device is not None else first.device
    sample = _to(sample_input, device)
    chain = blocks if isinstance(blocks, Chain) else stages_of(blocks, sample)
    if not len(chain):
        raise UsageError("the chain has no modules")
    xs = chain.pack(sample if isinstance(sample, tuple) else
                    (sample,) if _is_t(sample) else (), sample if isinstance(sample, dict)
                    else None)
    inputs = xs
    if names is None:
        names = chain.names
    meter = _CudaMeter(device) if device.type == "cuda" else _CpuMeter()
    owner = chain.model if chain.traced else None
    was_training = [m.training for m in (chain.modules or [owner])]
    stages = []
    flags = [False] * len(xs)
    for i, stage in enumerate(chain.stages):
        params = stage.parameters()
        c = _measure_stage(stage, params, xs, flags, warmup, repeats, meter, device, chain)
        with torch.no_grad():
            y = _run_stage(stage, xs, chain)
        ob = chain.out_bytes(i + 1, y, inputs)
        sb = max(c["saved"], ob)
        st = {"name": names[i][:250], "out_bytes": ob, "saved_bytes": sb,
              "fwd_tmp_bytes": max(c["fwd_tmp"], 0),
              "fwd_grad_tmp_bytes": max(c["fwd_grad_tmp"], 0),
              "bwd_tmp_bytes": max(c["bwd_tmp"], 0),
              "bwd_freed_bytes": min(max(-c["bwd_tmp"], 0), sb + ob),
              "param_bytes": c["p_bytes"],
              "fwd_ms": c["fwd_ms"], "bwd_ms": c["bwd_ms"]}
        if chain.traced:
            # What crosses the stage's end cut (docs/python.md): remat's
            # solvers read out_bytes alone; these say what it is made of.
            st["out_tensors"] = sum(1 for t in y if _is_t(t))
            if chain.blocks[i] is not None:
                st["block"] = chain.names[i]
        if loss is not None and i == len(chain) - 1:
            ls, lt = _loss_bytes(chain, stage, xs, loss, meter, repeats)
            ls, lt = max(ls, 0), max(lt, 0)
            st["loss_saved_bytes"], st["loss_tmp_bytes"] = ls, lt
            st["saved_bytes"] += ls
            st["bwd_freed_bytes"] = min(st["bwd_freed_bytes"] + ls, st["saved_bytes"] + ob)
            st["fwd_grad_tmp_bytes"] = max(st["fwd_grad_tmp_bytes"], lt)
        stages.append(st)
        xs = y
        flags = chain.grad_flags(i + 1, y)
    for m, t in zip(chain.modules or [owner], was_training):
        m.train(t)
    if device.type == "cuda":
        dev_name = torch.cuda.get_device_name(device)
        driver = "CUDA runtime %s" % torch.version.cuda
    else:
        dev_name = "cpu"
        driver = "cpu, %d threads" % torch.get_num_threads()
    # The model's dtype: its first floating input's (token ids are not it),
    # else its weights'.
    dtype = next((t.dtype for t in inputs if _is_t(t) and t.is_floating_point()), None) or \
        next((p.dtype for p in (owner or nn.ModuleList(chain.modules)).parameters()),
             first.dtype)
    out = {"format": "remat.profile/v1", "model": model,
           "batch_size": int(first.shape[0]) if first.dim() > 0 else 1,
           "dtype": DTYPES.get(dtype, str(dtype)),
           "input_bytes": sum(_nbytes(t) for t in inputs if _is_t(t)), "stages": stages,
           "device": dev_name, "driver": driver, "libtorch": torch.__version__,
           "measured_by": "remat.profile_local"}
    if chain.traced:
        out["stages_found_by"] = "torch.fx"
    return out
