"""Stages found, not given: any nn.Module torch.fx can trace, cut into a chain.

A chain is what remat plans over: n stages, stage i maps the values live
across cut i-1 to those live across cut i.  An nn.Sequential (or a list of
modules) is a chain as it is: module k is stage k+1 and one tensor crosses
each cut.  Any other module is traced with torch.fx; its graph is laid out
in topological order and every position between two nodes is a candidate
cut, whose live set is every value made before it and read after it (the
graph inputs still needed later included, parameters and buffers excluded:
they are live anyway).  Cuts are kept where that set is small (see
_choose_cuts), the nodes between two kept cuts are one stage, and each stage
runs as Python code generated from its own fx graph, taking the live set
and returning the next one.  A checkpoint keeps a whole live set: a
U-Net's skips, a decoder's mask and position ids, a residual stream.
"""
import torch
import torch.fx as fx
import torch.nn as nn

from ._exceptions import ChainError, UntraceableError, UsageError
from ._trace import (_bind, _block_lists, _block_of, _functionalize, _getattr_path, _grad_flags,
                     _prune, _record, _storage_key, _tensors_in, _trace, _unflatten, value_bytes)

# A cut whose live set is more than one differentiable tensor is kept when
# its bytes are at most ALPHA times the least of the cuts within WINDOW
# nodes either side (see _choose_cuts).
ALPHA = 1.5
WINDOW = 12


# ---- the chain -----------------------------------------------------------------

class _Stage:
    """One stage of a traced model: the code of its nodes, called with the
    model as `self` (so weights and buffers are always the model's own)."""

    def __init__(self, root, fn, name, params, block, nodes):
        self.root, self.fn, self.name, self.params = root, fn, name, params
        self.block = block
        self.nodes = nodes

    def __call__(self, *vals):
        return self.fn(self.root, *vals)

    def parameters(self):
        return list(self.params)


class _ModStage:
    """One module of an nn.Sequential as a stage: one tensor in, one out."""

    def __init__(self, mod, k):
        self.mod, self.k = mod, k

    def __call__(self, x):
        y = self.mod(x)
        if not isinstance(y, torch.Tensor):
            raise ChainError("module %d returned %s: a chain passes one tensor"
                             % (self.k, type(y).__name__))
        return (y,)

    def parameters(self):
        return list(self.mod.parameters())


class Chain:
    """A model as remat's chain of stages.

    `stages[i-1]` is stage i, called with the values live across cut i-1
    (a tuple) and returning those live across cut i; `grads[i]` says which
    of those can need a gradient; `names[i-1]` is stage i's name and
    `blocks[i-1]` its (ModuleList path, block index) when the stage is one
    block of a block list.  pack(*args, **kwargs) gives cut 0 from a call's
    arguments, unpack(values) the model's output from cut n."""

    def __init__(self, model, stages, names, grads, blocks=None, modules=None):
        self.model = model
        self.stages = stages
        self.names = names
        self.grads = grads
        self.blocks = blocks or [None] * len(stages)
        self.modules = modules          # the nn.Sequential's modules, for module chains
        self.traced = modules is None
        self.input_names = None
        self.sig = None
        self.out_spec = None
        self.cut_tensors = None

    def __len__(self):
        return len(self.stages)

    def pack(self, args, kwargs=None):
        kwargs = kwargs or {}
        if not self.traced:
            if len(args) != 1 or kwargs:
                raise ChainError("a chain of modules takes one tensor")
            return (args[0],)
        ba = self.sig.bind(*args, **kwargs)
        out = []
        for name in self.input_names:
            v = ba.arguments.get(name)
            if not isinstance(v, torch.Tensor):
                raise UsageError("argument %r: the model was traced with a tensor there" % name)
            out.append(v)
        return tuple(out)

    def unpack(self, vals):
        if not self.traced:
            return vals[0]
        return _unflatten(self.out_spec, iter(vals))

    def input_flags(self, xs):
        return [isinstance(t, torch.Tensor) and t.requires_grad for t in xs]

    def grad_flags(self, cut, vals):
        """Which of the values across `cut` (>= 1) get a leaf with grad."""
        if not self.traced:
            return [True] * len(vals)
        return self.grads[cut]

    def out_bytes(self, cut, vals, inputs=()):
        """Bytes across cut `cut` >= 1: every distinct storage there but the
        inputs' (those of `inputs`, cut 0's values) and the weights' and
        buffers' (all live the whole step)."""
        if not self.traced:
            return vals[0].numel() * vals[0].element_size()
        exclude = {_storage_key(t)[0] for t in _tensors_in(list(inputs))}
        exclude |= {_storage_key(t)[0] for t in self.model.parameters()}
        exclude |= {_storage_key(t)[0] for t in self.model.buffers()}
        return value_bytes(vals, exclude)

    def recomputed_stages(self, ops):
        """Stages (1-based) a schedule runs forward more than once."""
        seen = {}
        for op, i in ops:
            if op in ("F_none", "F_ck", "F_all"):
                seen[i] = seen.get(i, 0) + 1
        return sorted(i for i, c in seen.items() if c > 1)

    def describe(self, plan_or_ops):
        """What a plan recomputes, in the model's words: "recompute layers
        0-11 of model.layers; stages 1-2 (embed, drop)"."""
        from ._plan import schedule_of
        ops = plan_or_ops if isinstance(plan_or_ops, list) else schedule_of(plan_or_ops)
        rec = self.recomputed_stages(ops)
        if not rec:
            return "recompute nothing (store all)"
        by_list, others = {}, []
        for i in rec:
            b = self.blocks[i - 1]
            if b is None:
                others.append(i)
            else:
                by_list.setdefault(b[0], []).append(b[1])
        parts = []
        for path, idx in by_list.items():
            idx = sorted(set(idx))
            parts.append("%s %s of %s" % ("layer" if len(idx) == 1 else "layers",
                                          _ranges(idx), path))
        if others:
            parts.append("stages %s (%s)" % (_ranges(others),
                                             ", ".join(self.names[i - 1] for i in others[:6])
                                             + (", ..." if len(others) > 6 else "")))
        return "recompute " + "; ".join(parts)


def _ranges(xs):
    out = []
    start = prev = xs[0]
    for x in xs[1:] + [None]:
        if x is not None and x == prev + 1:
            prev = x
            continue
        out.append(str(start) if start == prev else "%d-%d" % (start, prev))
        if x is not None:
            start = prev = x
    return ", ".join(out)


def module_chain(blocks):
    """The chain of an nn.Sequential or a list of modules, as remat has
    always taken it: module k is stage k+1."""
    if isinstance(blocks, nn.Sequential):
        mods = list(blocks)
        names = [n for n, _ in blocks.named_children()]
    elif isinstance(blocks, (list, tuple, nn.ModuleList)):
        mods = list(blocks)
        for k, m in enumerate(mods):
            if not isinstance(m, nn.Module):
                raise ChainError("blocks[%d] is a %s, not an nn.Module" % (k, type(m).__name__))
        names = [type(m).__name__.lower() + str(k) for k, m in enumerate(mods)]
    else:
        raise ChainError("blocks must be an nn.Sequential or a list of modules, not %s"
                         % type(blocks).__name__)
    stages = [_ModStage(m, k) for k, m in enumerate(mods)]
    return Chain(blocks, stages, names, [None] * (len(mods) + 1), modules=mods)


def stages_of(model, sample, trace=None):
    """The chain remat plans over for `model` called on `sample` (a tensor,
    a tuple of positional arguments or a dict of keyword arguments).  An
    nn.Sequential or a list of modules is taken as it is (trace=True traces
    it all the same); any other nn.Module is traced with torch.fx and cut
    where few bytes cross (UntraceableError naming the call fx cannot
    trace)."""
    if isinstance(model, Chain):
        return model
    if trace is None:
        trace = not isinstance(model, (nn.Sequential, list, tuple, nn.ModuleList))
    if not trace:
        return module_chain(model)
    if not isinstance(model, nn.Module):
        raise ChainError("a model is an nn.Module, not %s" % type(model).__name__)
    sig, names, concrete = _bind(model, sample)
    graph, out_spec = _trace(model, names, concrete)
    _functionalize(graph, model)
    _prune(graph)
    ba = sig.bind(*(sample if isinstance(sample, tuple) else
                    (sample,) if isinstance(sample, torch.Tensor) else ()),
                  **(sample if isinstance(sample, dict) else {}))
    inputs = [ba.arguments[n] for n in names]
    with torch.no_grad():
        info = _record(model, graph, dict(zip(names, inputs)))
    flags = _grad_flags(graph, model, {n: t.requires_grad for n, t in zip(names, inputs)})
    exclude = {_storage_key(p)[0] for p in model.parameters()} | \
        {_storage_key(b)[0] for b in model.buffers()} | {_storage_key(t)[0] for t in inputs}
    chain = _cut(model, graph, info, flags, exclude, names)
    chain.sig, chain.input_names, chain.out_spec = sig, names, out_spec
    return chain


def _cut(model, graph, info, flags, exclude, input_names):
    nodes = [n for n in graph.nodes if n.op != "output"]
    out_node = next(n for n in graph.nodes if n.op == "output")
    N = len(nodes)
    idx = {n: k for k, n in enumerate(nodes)}
    last = {}
    for n in nodes:
        last[n] = max([N if u.op == "output" else idx[u] for u in n.users] or [idx[n]])
    compute = [n.op not in ("placeholder", "get_attr") for n in nodes]
    # One sweep: the live set after each node, its bytes (distinct storages,
    # the inputs' and weights' left out), its differentiable tensors, and
    # whether it holds a value that is not a plain tensor but holds some
    # (a tuple of tensors: no cut may carry one).
    live = {}
    refs = {}
    state = {"bytes": 0, "diff": 0, "bad": 0}
    cost, diff, bad = [0] * N, [0] * N, [0] * N
    ends = {}
    for n in nodes:
        ends.setdefault(last[n], []).append(n)

    def add(n):
        inf = info.get(n)
        if n.op == "get_attr" or inf is None:
            return False
        live[n] = True
        for ptr, nb in inf["storages"]:
            if not ptr or ptr in exclude:
                continue
            refs[ptr] = refs.get(ptr, 0) + 1
            if refs[ptr] == 1:
                state["bytes"] += nb
        if inf["tensor"] and inf["float"] and flags[n]:
            state["diff"] += 1
        if inf["has_tensors"] and not inf["tensor"]:
            state["bad"] += 1
        return True

    def drop(n):
        if live.pop(n, None) is None:
            return
        inf = info[n]
        for ptr, nb in inf["storages"]:
            if not ptr or ptr in exclude:
                continue
            refs[ptr] -= 1
            if refs[ptr] == 0:
                del refs[ptr]
                state["bytes"] -= nb
        if inf["tensor"] and inf["float"] and flags[n]:
            state["diff"] -= 1
        if inf["has_tensors"] and not inf["tensor"]:
            state["bad"] -= 1

    for p, n in enumerate(nodes):
        if last[n] > p:
            add(n)
        for d in ends.get(p, ()):
            if d is not n:
                drop(d)
        cost[p], diff[p], bad[p] = state["bytes"], state["diff"], state["bad"]
    # A cut follows a compute node and has one after it (not only get_attr
    # nodes), and carries no container of tensors.
    later = [False] * N
    seen = False
    for p in range(N - 1, -1, -1):
        later[p] = seen
        seen = seen or compute[p]
    # and follows a node that made a tensor (not a shape or a size).
    # A cut after a node that made no differentiable tensor (a mask, a
    # position table) frees nothing of the step's own: it is not kept,
    # unless nothing in the model needs a gradient.
    any_grad = any(flags[n] and info.get(n, {}).get("float") for n in nodes)
    basic = [bad[p] == 0 and compute[p] and later[p] for p in range(N)]
    valid = [basic[p] and bool(info.get(nodes[p], {}).get("tensor")) and
             (flags[nodes[p]] or not any_grad) for p in range(N)]
    chosen = _choose_cuts(nodes, cost, diff, valid, basic, model)
    return _build(model, nodes, idx, last, chosen, out_node, flags, info, input_names)


def _choose_cuts(nodes, cost, diff, valid, basic, model):
    """The kept cuts (node positions a cut follows).

    - In a block list (a ModuleList of blocks of one type called in turn),
      one cut between consecutive blocks, before the first and after the
      last, each the cheapest position there, and none inside a block:
      each block is one stage, its constant inputs passed through.
    - Elsewhere, a cut where at most one differentiable tensor crosses (the
      main stream, with constants such as masks beside it), or where the
      bytes crossing are at most ALPHA times the least within WINDOW nodes
      (the middle of a U-Net, where every cut carries the skips).  Inside a
      residual block the identity crosses beside the branch: twice the
      block's boundary, so those cuts are not kept."""
    N = len(nodes)
    lists = _block_lists(model)
    owner = [_block_of(n.meta.get("remat_path", ""), lists) for n in nodes]
    spans = {}
    for p, b in enumerate(owner):
        if b is not None:
            s = spans.setdefault(b, [p, p])
            s[1] = p
    # A block list counts only when its blocks run in order, one after the
    # other, each in one contiguous run of nodes.
    blocked = [None] * N
    forced = set()
    taken = []
    for path, index in lists:
        # A list inside a block of a list already taken (the blocks of a
        # block) is that block's business: the outer blocks are the stages.
        if any(path.startswith(t + ".") for t in taken):
            continue
        bs = [(path, k) for k in range(len(index)) if (path, k) in spans]
        if len(bs) < 2:
            continue
        ok = all(spans[bs[j]][1] < spans[bs[j + 1]][0] for j in range(len(bs) - 1)) and \
            all(owner[p] in (None, b) or owner[p][0] != path
                for b in bs for p in range(spans[b][0], spans[b][1] + 1))
        if not ok:
            continue
        taken.append(path)
        for b in bs:
            for p in range(spans[b][0], spans[b][1]):
                blocked[p] = b
        # Between blocks, the cheapest cut (any that carries no container of
        # tensors: the mask a block reads may be the last thing made before
        # it); before the first block the last such cut, after the last
        # block the first.
        first, end = spans[bs[0]][0], spans[bs[-1]][1]
        before = [p for p in range(first) if basic[p]]
        after = [p for p in range(end, N) if basic[p]]
        if before:
            forced.add(before[-1])
        if after:
            forced.add(after[0])
        for j in range(len(bs) - 1):
            a, b = spans[bs[j]][1], spans[bs[j + 1]][0] - 1
            cand = [p for p in range(a, b + 1) if basic[p]]
            if cand:
                best = min(cand, key=lambda p: (cost[p], -p))
                forced.add(best)
                for p in range(a, b + 1):
                    if p != best:
                        blocked[p] = blocked[p] or (path, -1)
        lo = before[-1] if before else 0
        hi = after[0] if after else N - 1
        for p in range(lo + 1, hi):
            if p not in forced:
                blocked[p] = blocked[p] or (path, -1)
    chosen = []
    for p in range(N):
        if p in forced:
            chosen.append(p)
            continue
        if not valid[p] or blocked[p] is not None:
            continue
        if diff[p] <= 1:
            chosen.append(p)
            continue
        lo, hi = max(0, p - WINDOW), min(N, p + WINDOW + 1)
        ref = min(cost[q] for q in range(lo, hi) if valid[q])
        if cost[p] <= ALPHA * ref:
            chosen.append(p)
    return chosen


def _build(model, nodes, idx, last, chosen, out_node, flags, info, input_names):
    """Stages between the chosen cuts, each compiled from its own graph."""
    N = len(nodes)
    outputs = list(out_node.args[0])
    bounds = [-1] + [p for p in chosen if p < N - 1] + [N - 1]
    placeholders = [n for n in nodes if n.op == "placeholder" and n.target in input_names]
    placeholders.sort(key=lambda n: input_names.index(n.target))
    lists = _block_lists(model)
    stages, names, grads, blocks = [], [], [[flags[n] for n in placeholders]], []
    owner_params = {}
    compiled = {}
    tensors = []
    prev_live = placeholders
    for s in range(len(bounds) - 1):
        a, b = bounds[s] + 1, bounds[s + 1]
        body = [n for n in nodes[a:b + 1] if n.op not in ("placeholder", "get_attr")]
        if s == len(bounds) - 2:
            out_live = outputs
        else:
            out_live = [v for v in nodes[:b + 1] if last[v] > b and v.op != "get_attr"]
        # A stage is a block's when every node it has of any block is that
        # block's (the glue between blocks, `h = out[0]`, goes with one).
        bl = {_block_of(n.meta.get("remat_path", ""), lists) for n in body} - {None}
        block = next(iter(bl)) if len(bl) == 1 else None
        child = next(c for c, k in dict(lists)[block[0]].items() if k == block[1]) \
            if block else None
        root, fn = model, None
        if block is not None:
            # A block's code reads its weights through the block: the blocks
            # of a list then share one compiled function.
            prefix = "%s.%s" % (block[0], child)
            key = _block_key(prev_live, body, out_live, prefix)
            if key is not None:
                root = model.get_submodule(prefix)
                fn = compiled.get(key)
                if fn is None:
                    fn = compiled[key] = _compile(prev_live, body, out_live, prefix)
        if fn is None:
            fn = _compile(prev_live, body, out_live)
        params = []
        for n in body:
            for m in _used_params(model, n):
                if id(m) not in owner_params:
                    owner_params[id(m)] = s
                    params.append(m)
        paths = [n.meta.get("remat_path", "") for n in body if n.meta.get("remat_path")]
        name = "%s.%s" % (block[0], child) if block else _name_of(paths, body)
        stages.append(_Stage(root, fn, name, params, block, body))
        names.append(name)
        blocks.append(block)
        grads.append([bool(flags.get(v)) and bool(info.get(v, {}).get("float"))
                      if isinstance(v, fx.Node) else False for v in out_live])
        tensors.append(sum(1 for v in out_live if isinstance(v, fx.Node) and
                           info.get(v, {}).get("tensor")))
        prev_live = out_live
    chain = Chain(model, stages, names, grads, blocks)
    chain.cut_tensors = tensors
    return chain


def _name_of(paths, body):
    if not paths:
        if not body:
            return "stage"
        return body[0].name if len(body) == 1 else "%s..%s" % (body[0].name, body[-1].name)
    first, lastp = paths[0], paths[-1]
    name = first if first == lastp else "%s..%s" % (first, lastp)
    return name[:250]


def _used_params(model, n):
    if n.op == "call_module":
        return list(model.get_submodule(n.target).parameters())
    out = []
    for a in n.all_input_nodes:
        if a.op == "get_attr":
            v = _getattr_path(model, a.target)
            if isinstance(v, nn.Parameter):
                out.append(v)
            elif isinstance(v, nn.Module):
                out.extend(v.parameters())
    return out


def _relative(target, prefix):
    return target[len(prefix) + 1:] if target.startswith(prefix + ".") else None


def _block_key(inputs, body, outputs, prefix):
    """What a block's stage computes, with its weights named from the block
    (`attn.qkv`, not `model.layers.3.attn.qkv`) and its values by position:
    equal keys, equal code.  None when the stage reads a module or weight
    outside the block."""
    local = {v: ("in", k) for k, v in enumerate(inputs)}

    def sig(a):
        if isinstance(a, fx.Node):
            if a in local:
                return local[a]
            if a.op == "get_attr":
                r = _relative(a.target, prefix)
                if r is None:
                    raise KeyError(a.target)
                return ("attr", r)
            raise KeyError(a.name)
        if isinstance(a, (tuple, list)):
            return (type(a).__name__,) + tuple(sig(x) for x in a)
        if isinstance(a, dict):
            return ("dict",) + tuple((k, sig(v)) for k, v in a.items())
        if isinstance(a, slice):
            return ("slice", sig(a.start), sig(a.stop), sig(a.step))
        try:
            hash(a)
            return ("c", type(a).__name__, a)
        except TypeError:
            return ("r", repr(a))
    try:
        key = []
        for j, n in enumerate(body):
            if n.op in ("call_module", "get_attr"):
                target = _relative(n.target, prefix)
                if target is None:
                    return None
            else:
                target = n.target
            key.append((n.op, target, sig(n.args), sig(n.kwargs)))
            local[n] = ("b", j)
        key.append(tuple(sig(o) for o in outputs))
    except KeyError:
        return None
    return (len(inputs),) + tuple(key)


def _compile(inputs, body, outputs, prefix=None):
    """Python code for one stage: its inputs as arguments, its nodes (the
    weights fetched from the model at each call, or from the block `prefix`
    names, called then with the block as `self`), its outputs as a tuple."""
    g = fx.Graph()
    env = {}
    for k, v in enumerate(inputs):
        env[v] = g.placeholder(v.name)

    def rebase(new):
        if prefix is not None and new.op in ("get_attr", "call_module"):
            new.target = _relative(new.target, prefix)
        return new

    def arg(a):
        if a not in env:
            if a.op != "get_attr":
                raise AssertionError("node %s is not live into its stage" % a.name)
            env[a] = rebase(g.node_copy(a))
        return env[a]
    ins = set(inputs)
    for n in body:
        for a in n.all_input_nodes:
            arg(a)
        if n.op == "call_method" and n.target.endswith("_") and n.args and \
                n.args[0] in ins and n.target != "requires_grad_":
            # An in-place op with no pure form (copy_, fill_, zero_) on the
            # stage's input: it changes a clone, so that the input stays what
            # a recomputation of this stage needs.
            env[n.args[0]] = g.call_method("clone", (env[n.args[0]],))
            ins.discard(n.args[0])
        env[n] = rebase(g.node_copy(n, arg))
    g.output(tuple(arg(o) if isinstance(o, fx.Node) else o for o in outputs))
    code = g.python_code(root_module="self")
    glb = dict(code.globals)
    exec(compile(code.src, "<remat stage>", "exec"), glb)  # noqa: S102: fx's own codegen
    return glb["forward"]
