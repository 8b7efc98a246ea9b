"""Tracing any nn.Module into an fx graph remat can cut (see _graph).

torch.fx as Debian's torch 1.13 ships it fails on a few forwards Python 3.11
compiles differently (tuple unpacking, `*args/**kwargs`); _Tracer works
around both.  A traced graph is then made pure (in-place modules, functions
and `+=` run out of place, so a stage can run twice), pruned, and run once
on the sample to record every value's bytes and which values can need a
gradient.  Block lists (a ModuleList or Sequential of same-type blocks) are
found here too, so the cutter can give each block its own stage.
"""
import dataclasses
import dis
import inspect
import operator
import os
import sys
import traceback

import torch
import torch.fx as fx
import torch.nn as nn

from ._exceptions import UntraceableError, UsageError

# In-place operators Python's `x += y` traces to, and their pure forms.
_IOPS = {operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
         operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv,
         operator.imod: operator.mod, operator.ipow: operator.pow,
         operator.imatmul: operator.matmul, operator.iand: operator.and_,
         operator.ior: operator.or_, operator.ixor: operator.xor}




def _storage_key(t):
    """(address, bytes) of the storage behind t: views of one tensor share it."""
    s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return s.data_ptr(), s.nbytes()


def _tensors_in(v):
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (tuple, list)):
        return [t for x in v for t in _tensors_in(x)]
    if isinstance(v, dict):
        return [t for x in v.values() for t in _tensors_in(x)]
    return []


def value_bytes(vals, exclude=()):
    """Bytes of the distinct storages behind the tensors of vals, those in
    `exclude` (storage addresses: the inputs, the weights) left out."""
    seen = set(exclude)
    total = 0
    for t in _tensors_in(vals):
        ptr, nb = _storage_key(t)
        if ptr and ptr not in seen:
            seen.add(ptr)
            total += nb
    return total


# ---- outputs of any shape ----------------------------------------------------

def _flatten(obj):
    """Leaves (tensors or fx proxies) of a model's output, and how to rebuild
    it: tuples, lists, named tuples, dicts and their subclasses (OrderedDict,
    Hugging Face's ModelOutput), dataclasses; anything else is a constant."""
    leaves = []

    def go(o):
        if isinstance(o, (fx.Proxy, torch.Tensor)):
            leaves.append(o)
            return ("leaf",)
        if dataclasses.is_dataclass(o) and not isinstance(o, type):
            names = [f.name for f in dataclasses.fields(o)]
            return ("dataclass", type(o), names, [go(getattr(o, k)) for k in names])
        if isinstance(o, dict):
            keys = list(o.keys())
            return ("dict", type(o), keys, [go(o[k]) for k in keys])
        if isinstance(o, tuple) and hasattr(o, "_fields"):
            return ("namedtuple", type(o), None, [go(v) for v in o])
        if isinstance(o, (tuple, list)):
            return ("seq", type(o), None, [go(v) for v in o])
        return ("const", o)
    return leaves, go(obj)


def _unflatten(spec, it):
    kind = spec[0]
    if kind == "leaf":
        return next(it)
    if kind == "const":
        return spec[1]
    _, typ, keys, subs = spec
    vals = [_unflatten(s, it) for s in subs]
    if kind == "dataclass":
        try:
            return typ(**dict(zip(keys, vals)))
        except TypeError:
            o = object.__new__(typ)
            for k, v in zip(keys, vals):
                object.__setattr__(o, k, v)
            return o
    if kind == "dict":
        try:
            d = typ()
        except TypeError:
            d = {}
        for k, v in zip(keys, vals):
            d[k] = v
        return d
    if kind == "namedtuple":
        return typ(*vals)
    try:
        return typ(vals)
    except TypeError:
        return tuple(vals)


# ---- tracing -----------------------------------------------------------------

class _Tracer(fx.Tracer):
    """torch.fx's tracer, noting on every node the module whose forward made
    it, and flattening the model's output into a tuple of leaves."""

    def __init__(self):
        super().__init__()
        self.stack = [""]
        self.out_spec = None
        self.failed_in = None

    def call_module(self, m, forward, args, kwargs):
        self.stack.append(self.path_of_module(m))
        try:
            return super().call_module(m, forward, args, kwargs)
        except Exception:
            # The innermost module the failure passed through names it.
            if self.failed_in is None:
                self.failed_in = self.stack[-1]
            raise
        finally:
            self.stack.pop()

    def create_node(self, *a, **k):
        n = super().create_node(*a, **k)
        n.meta["remat_path"] = self.stack[-1]
        return n

    def create_args_for_root(self, root_fn, is_module, concrete_args=None):
        """A placeholder for each tensor argument, the others passed as
        their values, by keyword.  fx's own way rewrites the code object of
        a forward with *args or **kwargs, which fails under Python 3.11
        with torch 1.13 ("code() argument 13 must be str"), and adds guards
        for the fixed values; the model is called here as a user calls it."""
        names, fixed = self.tensor_names, {k: v for k, v in (concrete_args or {}).items()
                                           if not k.startswith("*")}
        phs = {n: self.create_proxy("placeholder", n, (), {}) for n in names}
        root = self.root

        def flat(*_):
            kw = dict(fixed)
            kw.update(phs)
            leaves, self.out_spec = _flatten(root_fn(root, **kw))
            return tuple(leaves)
        return flat, [root]


def _unpacked(caller, proxy):
    """The proxies of `a, b = proxy` when the caller's current instruction
    unpacks, else None."""
    for inst in dis.get_instructions(caller.f_code):
        if inst.offset == caller.f_lasti:
            if inst.opname == "UNPACK_SEQUENCE":
                return (proxy[i] for i in range(inst.argval))
            return None
    return None


def _proxy_iter(self):
    """fx.Proxy.__iter__ while remat traces.  fx 1.13 finds the caller's
    UNPACK_SEQUENCE (`b, t, d = x.shape`, `q, k, v = t.split(d, 2)`) at
    instruction f_lasti // 2, which Python 3.11's inline caches move: the
    unpacking failed (IndexError or TraceError).  This finds the
    instruction by its offset."""
    frame = inspect.currentframe()
    caller = frame.f_back if frame is not None else None
    got = _unpacked(caller, self) if caller is not None else None
    if got is not None:
        return got
    return self.tracer.iter(self)


def _user_frame(tb):
    """The last frame of the traceback in the user's code (not torch's, not
    remat's): where the call that cannot be traced is."""
    torch_dir = os.path.dirname(torch.__file__) + os.sep
    here = os.path.dirname(os.path.abspath(__file__)) + os.sep
    best = None
    for fs in traceback.extract_tb(tb):
        if fs.filename.startswith(torch_dir) or fs.filename.startswith(here):
            continue
        best = fs
    return best


def _bind(model, sample):
    """The model's forward signature bound to the sample: (names of the
    tensor arguments, in order; concrete values of all the others)."""
    if isinstance(sample, torch.Tensor):
        args, kwargs = (sample,), {}
    elif isinstance(sample, tuple):
        args, kwargs = sample, {}
    elif isinstance(sample, dict):
        args, kwargs = (), dict(sample)
    else:
        raise UsageError("sample must be a tensor, a tuple of positional arguments or a dict "
                         "of keyword arguments, not %s" % type(sample).__name__)
    sig = inspect.signature(model.forward)
    try:
        ba = sig.bind(*args, **kwargs)
    except TypeError as e:
        raise UsageError("the sample does not fit %s.forward: %s" % (type(model).__name__, e)) \
            from None
    names, concrete = [], {}
    for name, p in sig.parameters.items():
        if p.kind == p.VAR_POSITIONAL:
            if ba.arguments.get(name):
                raise UsageError("%s.forward: *%s: give the sample's tensors by name"
                                 % (type(model).__name__, name))
            concrete["*" + name] = ()
        elif p.kind == p.VAR_KEYWORD:
            if ba.arguments.get(name):
                raise UsageError("%s.forward: **%s: the sample names arguments the signature "
                                 "does not" % (type(model).__name__, name))
            concrete["**" + name] = {}
        elif name in ba.arguments:
            v = ba.arguments[name]
            if isinstance(v, torch.Tensor):
                names.append(name)
            elif _tensors_in(v):
                raise UsageError("sample argument %r: tensors inside a %s; give each tensor as "
                                 "an argument of its own" % (name, type(v).__name__))
            else:
                concrete[name] = v
        else:
            concrete[name] = p.default
    return sig, names, concrete


def _trace(model, names, concrete):
    tracer = _Tracer()
    tracer.tensor_names = names
    orig_iter = fx.Proxy.__iter__
    fx.Proxy.__iter__ = _proxy_iter
    try:
        graph = tracer.trace(model, concrete_args=concrete)
    except Exception as e:  # noqa: BLE001: fx raises many kinds; all mean the same here
        where = tracer.failed_in
        fs = _user_frame(sys.exc_info()[2])
        call = "%s:%d: %s" % (fs.filename, fs.lineno, (fs.line or "").strip()) if fs else ""
        raise UntraceableError(where or "", call, "%s: %s" % (type(e).__name__, e),
                               type(model).__name__) from e
    finally:
        fx.Proxy.__iter__ = orig_iter
    return graph, tracer.out_spec


def _not_inplace(mod, *args, **kwargs):
    """A module with inplace=True (nn.ReLU(inplace=True)) run out of place:
    a stage's input must stay as it was for the stage to be recomputed."""
    mod.inplace = False
    try:
        return mod(*args, **kwargs)
    finally:
        mod.inplace = True


_INPLACE_ARG = {}


def _inplace_arg(fn):
    """The position of a function's `inplace` parameter, or None."""
    try:
        return _INPLACE_ARG[fn]
    except (KeyError, TypeError):
        pass
    try:
        ps = list(inspect.signature(fn).parameters)
        k = ps.index("inplace") if "inplace" in ps else None
    except (TypeError, ValueError):
        k = None
    try:
        _INPLACE_ARG[fn] = k
    except TypeError:
        pass
    return k


def _functionalize(graph, model):
    """Every in-place op the graph has a pure form for becomes that form,
    and the reads of the tensor it changed that come after it read its
    result instead.  Returns the number rewritten."""
    order = {n: k for k, n in enumerate(graph.nodes)}
    count = 0
    for n in list(graph.nodes):
        mutated = None
        if n.op == "call_function":
            if n.target in _IOPS and n.args and isinstance(n.args[0], fx.Node):
                n.target = _IOPS[n.target]
                mutated = n.args[0]
            else:
                name = getattr(n.target, "__name__", "")
                k = _inplace_arg(n.target) if callable(n.target) else None
                if n.kwargs.get("inplace") is True:
                    n.kwargs = dict(n.kwargs, inplace=False)
                    mutated = n.args[0] if n.args else None
                elif k is not None and len(n.args) > k and n.args[k] is True:
                    n.args = n.args[:k] + (False,) + n.args[k + 1:]
                    mutated = n.args[0]
                elif name.endswith("_") and not name.startswith("_") and \
                        getattr(torch, name, None) is n.target and \
                        callable(getattr(torch, name[:-1], None)):
                    n.target = getattr(torch, name[:-1])
                    mutated = n.args[0] if n.args else None
        elif n.op == "call_method":
            t = n.target
            if t.endswith("_") and not t.startswith("_") and t != "requires_grad_" and \
                    hasattr(torch.Tensor, t[:-1]):
                n.target = t[:-1]
                mutated = n.args[0]
        elif n.op == "call_module":
            m = model.get_submodule(n.target)
            if getattr(m, "inplace", None) is True:
                with graph.inserting_before(n):
                    g = graph.get_attr(n.target)
                    g.meta = dict(n.meta)
                    new = graph.call_function(_not_inplace, (g,) + tuple(n.args), dict(n.kwargs))
                    new.meta = dict(n.meta)
                n.replace_all_uses_with(new)
                graph.erase_node(n)
                order[g] = order[new] = order[n]
                n = new
                mutated = n.args[1] if len(n.args) > 1 else None
        if isinstance(mutated, fx.Node):
            count += 1
            for u in list(mutated.users):
                if u is not n and order.get(u, -1) > order[n]:
                    u.replace_input_with(mutated, n)
    return count


def _prune(graph):
    """Drops every node nothing reads that only computes a value: not a
    module call, not the model's own torch._assert checks, not an in-place
    method fx could not make pure."""
    changed = True
    while changed:
        changed = False
        for n in reversed(list(graph.nodes)):
            if n.users or n.op not in ("call_function", "call_method", "get_attr"):
                continue
            if n.op == "call_function" and (n.target is torch._assert or
                                            "assert" in getattr(n.target, "__name__", "")):
                continue
            if n.op == "call_method" and n.target.endswith("_"):
                continue
            graph.erase_node(n)
            changed = True


def _record(model, graph, inputs):
    """Runs the graph once, without grad, noting each node's value: its
    storages, whether it is a plain tensor, whether it holds tensors.  A
    value is dropped after its last reader, as the model's own forward drops
    it, so two values that share a storage address are both live only when
    they share the storage."""
    nodes = list(graph.nodes)
    last = {}
    for k, n in enumerate(nodes):
        for a in n.all_input_nodes:
            last[a] = k
    dies = {}
    for a, k in last.items():
        dies.setdefault(k, []).append(a)
    env, info = {}, {}
    for k, n in enumerate(nodes):
        if n.op == "output":
            break
        args = fx.node.map_arg(n.args, env.__getitem__)
        kwargs = fx.node.map_arg(n.kwargs, env.__getitem__)
        if n.op == "placeholder":
            v = inputs[n.target] if n.target in inputs else (n.args[0] if n.args else None)
        elif n.op == "get_attr":
            v = _getattr_path(model, n.target)
        elif n.op == "call_function":
            v = n.target(*args, **kwargs)
        elif n.op == "call_method":
            v = getattr(args[0], n.target)(*args[1:], **kwargs)
        else:
            v = model.get_submodule(n.target)(*args, **kwargs)
        env[n] = v
        ts = _tensors_in(v)
        info[n] = {"tensor": isinstance(v, torch.Tensor),
                   "float": isinstance(v, torch.Tensor) and v.is_floating_point(),
                   "has_tensors": bool(ts),
                   "storages": [_storage_key(t) for t in ts]}
        for a in dies.get(k, ()):
            env.pop(a, None)
    return info


def _grad_flags(graph, model, sample_grad):
    """Whether each node's value can need a gradient: it depends on a
    weight that requires grad or on an input that does (detach ends it)."""
    flags = {}
    for n in graph.nodes:
        if n.op == "placeholder":
            f = sample_grad.get(n.target, False)
        elif n.op == "get_attr":
            try:
                a = _getattr_path(model, n.target)
            except AttributeError:
                a = None
            f = isinstance(a, torch.Tensor) and a.requires_grad or \
                isinstance(a, nn.Module) and any(p.requires_grad for p in a.parameters())
        elif n.op == "call_method" and n.target == "detach":
            f = False
        else:
            f = any(flags.get(a, False) for a in n.all_input_nodes)
            if n.op == "call_module":
                f = f or any(p.requires_grad for p in model.get_submodule(n.target).parameters())
        flags[n] = bool(f)
    return flags


def _getattr_path(obj, path):
    for a in path.split("."):
        obj = getattr(obj, a)
    return obj


# ---- block lists ---------------------------------------------------------------

def _block_lists(model):
    """Block lists: an nn.ModuleList, or an nn.Sequential (torchvision's
    ViT and ResNet stages hold their blocks in one), of at least two
    children of one type.  (path, {child name: index})."""
    out = []
    for path, m in model.named_modules():
        if not path or not isinstance(m, (nn.ModuleList, nn.Sequential)):
            continue
        kids = list(m.named_children())
        if len(kids) >= 2 and len({type(c) for _, c in kids}) == 1:
            out.append((path, {name: k for k, (name, _) in enumerate(kids)}))
    return out


def _block_of(node_path, lists):
    for path, index in lists:
        if node_path.startswith(path + "."):
            head = node_path[len(path) + 1:].split(".", 1)[0]
            if head in index:
                return path, index[head]
    return None
