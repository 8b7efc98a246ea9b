"""A plan said in the knobs PyTorch users already have, and those knobs run.

remat.exports(plan) returns the plan's "exports" object (rematd and `remat
plan` print it; src/exports.c) or, for a plan printed before exports
existed, the same object computed here from the schedule.  Each knob is
{"available": True, ...} only when setting it runs exactly the plan's op
list, else {"available": False, "reason": ...}.
"""
from ._exceptions import PlanError
from ._plan import checkpoints_of, schedule_of

NOT_CHAIN = "the schedule is not one forward per stage before the loss"


def _forward_kinds(ops, n):
    if len(ops) < n + 1 or ops[n] != ("loss", n):
        return None
    fk = {}
    for i in range(1, n + 1):
        op, st = ops[i - 1]
        if st != i or op in ("loss", "B"):
            return None
        fk[i] = op
    return fk


def _per_module(ops, n, fk):
    if any(k == "F_none" for k in fk.values()):
        return False
    want = [op for op in ops[:n + 1]]
    for i in range(n, 0, -1):
        if fk[i] == "F_ck":
            want.append(("F_all", i))
        want.append(("B", i))
    return want == list(ops)


def _absent(reason):
    return {"available": False, "reason": reason}


def compute_exports(plan, input_bytes=None, param_bytes=None):
    """The exports of a plan, from its schedule (and, for torch_compile, the
    plan's peaks and the profile's input and total weight bytes)."""
    ops = schedule_of(plan)
    n = max(i for _, i in ops)
    fk = _forward_kinds(ops, n)
    ck = checkpoints_of(ops, n) if fk else None
    per = bool(fk) and _per_module(ops, n, fk)
    out = {}
    if ck is not None and n // (len(ck) + 1) >= 1 and \
            ck == [(n // (len(ck) + 1)) * (j + 1) for j in range(len(ck))]:
        out["checkpoint_sequential"] = {"available": True, "segments": len(ck) + 1}
    else:
        out["checkpoint_sequential"] = _absent(
            NOT_CHAIN if not fk else
            "a multi-level schedule: checkpoint_sequential is single-level" if ck is None else
            "the checkpoints are not every n // K modules, where checkpoint_sequential puts them")
    wrapped = [i - 1 for i in range(1, n + 1) if fk and fk[i] == "F_ck"]
    if per:
        out["per_module"] = {"available": True, "modules": wrapped}
    else:
        out["per_module"] = _absent(NOT_CHAIN if not fk else
                                    "a recomputed segment spans several modules: wrapping "
                                    "modules one by one recomputes each alone")
    if per and wrapped == list(range(len(wrapped))) and len(wrapped) < n:
        args = [] if not wrapped else ["--recompute-granularity", "full", "--recompute-method",
                                       "block", "--recompute-num-layers", str(len(wrapped))]
        out["megatron"] = {"available": True, "args": args}
    else:
        out["megatron"] = _absent(NOT_CHAIN if not fk else
                                  "not the first N layers each recomputed alone (block); uniform "
                                  "also recomputes the last chunk, which this plan does not")
    if ck is not None:
        out["deepspeed"] = {"available": True, "number_checkpoints": len(ck)}
    else:
        out["deepspeed"] = _absent(NOT_CHAIN if not fk else "a multi-level schedule: DeepSpeed's "
                                   "checkpointing is single-level")
    if input_bytes is not None and param_bytes is not None and "peak_bytes" in plan:
        base = input_bytes + param_bytes
        a, b = plan["peak_bytes"] - base, plan["store_all_peak_bytes"] - base
        if b > 0 and a >= 0:
            out["torch_compile"] = {"available": True, "approximate": True,
                                    "activation_memory_budget": a / b, "activation_bytes": a,
                                    "store_all_activation_bytes": b}
        else:
            out["torch_compile"] = _absent("store-all keeps no activations above the weights")
    return out


def _takes_use_reentrant(fn):
    import inspect
    try:
        return "use_reentrant" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _local_torch(ex):
    """The knobs as this process's torch runs them.  Every export must train:
    with an input that needs no gradient, a reentrant checkpoint gives its
    segment's weights none (torch 1.13: "None of the inputs have
    requires_grad=True"), so each knob says use_reentrant: false, and
    checkpoint_sequential, which takes no mode before torch 2.0, is not
    available there."""
    try:
        import torch
        from torch.utils.checkpoint import checkpoint, checkpoint_sequential
    except ImportError:
        return ex
    cs = ex.get("checkpoint_sequential", {})
    if cs.get("available"):
        if _takes_use_reentrant(checkpoint_sequential):
            cs["use_reentrant"] = False
        else:
            ex["checkpoint_sequential"] = {
                "available": False, "segments": cs.get("segments"),
                "reason": "torch %s's checkpoint_sequential is reentrant only: with an input that "
                          "needs no gradient its first segment's weights get none; "
                          "remat.apply runs the same segments non-reentrant" % torch.__version__}
    pm = ex.get("per_module", {})
    if pm.get("available"):
        if _takes_use_reentrant(checkpoint):
            pm["use_reentrant"] = False
            pm["checkpoint_impl"] = "NO_REENTRANT"
        else:
            ex["per_module"] = {"available": False, "modules": pm.get("modules"),
                                "reason": "torch %s has no non-reentrant checkpoint"
                                          % torch.__version__}
    return ex


def exports(plan, names=None):
    """The plan's exports (the plan's own, else computed from its schedule),
    as this process's torch runs them (every knob non-reentrant, or not
    available where torch has no such mode: see _local_torch).  With names
    (the chain's module names, an nn.Sequential, or the stages remat.stages
    found), per_module also lists "names": what apply_activation_
    checkpointing's check_fn or a per-layer flag selects.  Stages found in
    a traced model are not modules: per_module is available there only when
    every wrapped stage is one block of a block list (its name the block's
    path, model.layers.3), checkpoint_sequential never."""
    from ._graph import Chain
    if not isinstance(plan, dict):
        plan = getattr(plan, "json", plan)
    ex = plan.get("exports")
    ex = {k: dict(v) for k, v in ex.items()} if isinstance(ex, dict) else compute_exports(plan)
    chain = names if isinstance(names, Chain) else None
    if chain is not None:
        names = None if chain.traced else chain.names
        if chain.traced:
            ex["checkpoint_sequential"] = _absent(
                "the stages were found in a traced graph: they are not modules of an "
                "nn.Sequential")
            pm = ex.get("per_module", {})
            if pm.get("available"):
                bl = [chain.blocks[k] for k in pm["modules"]]
                if None in bl:
                    ex["per_module"] = _absent("a wrapped stage is not one block of a block list")
                else:
                    names = [None] * len(chain)
                    for k in pm["modules"]:
                        names[k] = chain.names[k]
    if names is not None and not isinstance(names, (list, tuple)):
        names = [nm for nm, _ in names.named_children()]
    ex = _local_torch(ex)
    pm = ex.get("per_module", {})
    if names is not None and pm.get("available"):
        pm["names"] = [names[k] for k in pm["modules"]]
    return ex


def check_fn(blocks, plan):
    """A check_fn for torch.distributed.algorithms._checkpoint.checkpoint_wrapper
    .apply_activation_checkpointing: true for exactly the modules the plan
    wraps one by one.  PlanError when the plan is not of that shape."""
    from ._apply import blocks_of
    pm = exports(plan)["per_module"]
    if not pm.get("available"):
        raise PlanError("per_module: " + pm.get("reason", "not available"))
    mods = blocks_of(blocks)
    chosen = {id(mods[k]) for k in pm["modules"]}
    return lambda m: id(m) in chosen


def run_checkpoint_sequential(blocks, plan, x, **kw):
    """torch.utils.checkpoint.checkpoint_sequential with the plan's segments,
    non-reentrant (PlanError when the plan is not what it runs, or this
    torch's checkpoint_sequential has no non-reentrant mode)."""
    from torch.utils.checkpoint import checkpoint_sequential
    cs = exports(plan)["checkpoint_sequential"]
    if not cs.get("available"):
        raise PlanError("checkpoint_sequential: " + cs.get("reason", "not available"))
    from ._apply import blocks_of
    kw.setdefault("use_reentrant", cs["use_reentrant"])
    return checkpoint_sequential(blocks_of(blocks), cs["segments"], x, **kw)
