"""remat's layer_of (python/remat/_one.py) against the layer table
(src/rematx/layers.h): every layer it writes is one rematd takes and the
worker builds, by the rows of that table read here, and every type a request
may give is either written by layer_of or named below as having no PyTorch
module of its own.  openapi.yaml's Layer schemas and the profile request's
limits are held to the same table."""
import math
import os
import re

import pytest
import torch.nn as nn

from conftest import TOP_SRC
from remat._one import layer_of

HEADER = os.path.join(TOP_SRC, "src", "rematx", "layers.h")

# The request types that are remat-worker's own modules (worker/model.cpp),
# which no PyTorch module maps to.
WORKER_ONLY = {"residual_block", "transformer_block"}


def _macro(text, name):
    """The rows of one X-macro of the header."""
    m = re.search(r"#define %s\(X\)(.*?)\n\n" % name, text, re.S)
    assert m, "%s not in %s" % (name, HEADER)
    return [r.strip().rstrip("\\").strip() for r in m.group(1).split("\n") if "X(" in r]


def _value(s, defines):
    s = s.strip()
    if s == "REMATX_NO_DEFAULT":
        return None
    if s == "INT64_MAX":
        return 2 ** 63 - 1
    s = defines.get(s, s).strip()
    shift = re.fullmatch(r"\(1 << (\d+)\)", s)
    return float(1 << int(shift.group(1))) if shift else float(s)


def defines():
    """The header's REMATX_MAX_* limits, as numbers."""
    text = open(HEADER).read()
    raw = dict(re.findall(r"#define (REMATX_MAX_\w+) (.+)", text))
    return {k: int(_value(k, raw)) for k in raw}


def table():
    text = open(HEADER).read()
    defines = dict(re.findall(r"#define (REMATX_MAX_\w+) (.+)", text))
    types = {}
    for row in _macro(text, "REMATX_LAYER_TYPES"):
        t, origin = re.fullmatch(r"X\((\w+), (REQUEST|ZOO)\)", row).groups()
        types[t] = {"request": origin == "REQUEST", "args": {}}
    rows = _macro(text, "REMATX_LAYER_ARGS")
    for row in rows:
        m = re.fullmatch(r"X\((\w+), (\w+), (\w+), ([01]), ([^,]+), ([^,]+), ([^,]+), "
                         r"(NULL|\"[^\"]*\")\)", row)
        assert m, "a row the test cannot read: " + row
        t, arg, kind, req, dflt, lo, hi, choices = m.groups()
        types[t]["args"][arg] = {
            "kind": kind, "required": req == "1", "default": _value(dflt, defines),
            "min": _value(lo, defines), "max": _value(hi, defines),
            "choices": None if choices == "NULL" else choices.strip('"').split("|")}
    assert sum(len(t["args"]) for t in types.values()) == len(rows)
    return types


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def check(layer, types, where="layer"):
    """rematx_layer_check's rules for a request (zoo types refused)."""
    assert isinstance(layer, dict), where
    t = layer.get("type")
    assert t in types and types[t]["request"], "%s: type %r" % (where, t)
    args = types[t]["args"]
    for k, v in layer.items():
        if k == "type":
            continue
        if k == "name":
            assert isinstance(v, str) and len(v.encode()) < 256
            continue
        assert k in args, "%s: %s has no argument %s" % (where, t, k)
        a = args[k]
        if a["kind"] == "INT":
            assert _is_int(v) and a["min"] <= v <= a["max"], "%s.%s = %r" % (where, k, v)
        elif a["kind"] == "BOOL":
            assert isinstance(v, bool), "%s.%s = %r" % (where, k, v)
        elif a["kind"] == "NUMBER":
            assert isinstance(v, (int, float)) and not isinstance(v, bool)
            assert math.isfinite(v) and a["min"] <= v <= a["max"], "%s.%s = %r" % (where, k, v)
        elif a["kind"] == "CHOICE":
            assert v in a["choices"], "%s.%s = %r" % (where, k, v)
        elif a["kind"] == "SIZE2":
            assert isinstance(v, list) and len(v) == 2, "%s.%s = %r" % (where, k, v)
            assert all(_is_int(x) and a["min"] <= x <= a["max"] for x in v)
        elif a["kind"] == "LAYERS":
            assert isinstance(v, list) and 0 < len(v) <= 1000
            for i, inner in enumerate(v):
                check(inner, types, "%s.%s[%d]" % (where, k, i))
        else:
            raise AssertionError("a kind the test does not know: " + a["kind"])
    for k, a in args.items():
        assert not a["required"] or k in layer, "%s: %s needs %s" % (where, t, k)


MODULES = [
    nn.Conv2d(3, 8, 3),
    nn.Conv2d(8, 16, 5, stride=2, padding=2, groups=8, bias=False),
    nn.BatchNorm2d(8),
    nn.ReLU(),
    nn.ReLU(inplace=True),
    nn.Flatten(),
    nn.Dropout(0.1),
    nn.Dropout(),
    nn.MaxPool2d(2),
    nn.MaxPool2d(3, stride=2, padding=1),
    nn.AvgPool2d(2, stride=1),
    nn.AdaptiveAvgPool2d(1),
    nn.AdaptiveAvgPool2d((7, 5)),
    nn.Linear(16, 4),
    nn.Linear(16, 4, bias=False),
    nn.Sequential(nn.Conv2d(3, 4, 1), nn.Sequential(nn.ReLU(), nn.Flatten())),
]


def test_the_header_reads():
    types = table()
    assert types["conv2d"]["args"]["out_channels"]["required"]
    assert types["conv2d"]["args"]["out_channels"]["max"] == 1 << 20
    assert types["residual_block"]["args"]["variant"]["choices"] == ["basic", "bottleneck"]
    assert not types["layernorm"]["request"]


def test_layer_of_writes_what_the_table_takes():
    types = table()
    written = set()
    for m in MODULES:
        d = layer_of(m)
        assert d is not None, m
        check(d, types, repr(m))
        stack = [d]
        while stack:
            x = stack.pop()
            written.add(x["type"])
            stack += x.get("layers", [])
    # A request type layer_of never writes is a decision to make here: a
    # module of PyTorch's that is the same layer (its case in layer_of and
    # a module above), or one of the worker's own.
    request = {t for t, v in types.items() if v["request"]}
    assert request - written == WORKER_ONLY
    assert written <= request


def test_what_the_worker_has_no_layer_for():
    # Modules layer_of must leave to a local profile, so that a profile job
    # never builds something other than the user's module.
    for m in [nn.Conv2d(3, 8, 3, dilation=2), nn.Conv2d(3, 8, (3, 5)), nn.GELU(),
              nn.BatchNorm2d(8, eps=1e-3), nn.MaxPool2d(2, ceil_mode=True),
              nn.Sequential(nn.ReLU(), nn.GELU()), nn.Sequential()]:
        assert layer_of(m) is None, m


def test_openapi_says_what_the_table_says():
    yaml = pytest.importorskip("yaml")
    with open(os.path.join(TOP_SRC, "openapi.yaml")) as f:
        schemas = yaml.safe_load(f)["components"]["schemas"]

    def resolve(s):
        while "$ref" in s:
            s = schemas[s["$ref"].rsplit("/", 1)[1]]
        return s

    types, limits = table(), defines()
    seen = set()
    for ref in schemas["Layer"]["oneOf"]:
        s = resolve(ref)
        t = s["properties"]["type"]["const"]
        seen.add(t)
        args = types[t]["args"]
        props = {k: resolve(v) for k, v in s["properties"].items() if k not in ("type", "name")}
        assert set(props) == set(args), t
        assert set(s["required"]) == {"type"} | {k for k, a in args.items() if a["required"]}, t
        for k, a in args.items():
            p, where = props[k], "%s.%s" % (t, k)
            if a["kind"] in ("INT", "NUMBER"):
                assert p["type"] == ("integer" if a["kind"] == "INT" else "number"), where
                assert (p["minimum"], p["maximum"]) == (a["min"], a["max"]), where
            elif a["kind"] == "BOOL":
                assert p["type"] == "boolean", where
            elif a["kind"] == "CHOICE":
                assert p["enum"] == a["choices"], where
            elif a["kind"] == "SIZE2":
                assert (p["type"], p["minItems"], p["maxItems"]) == ("array", 2, 2), where
                assert (p["items"]["minimum"], p["items"]["maximum"]) == (a["min"], a["max"])
            elif a["kind"] == "LAYERS":
                assert (p["type"], p["minItems"]) == ("array", 1), where
                assert p["maxItems"] == limits["REMATX_MAX_NESTED_LAYERS"], where
    assert seen == {t for t, v in types.items() if v["request"]}
    req = schemas["ProfileRequest"]["properties"]
    assert req["batch_size"]["maximum"] == limits["REMATX_MAX_BATCH"]
    assert req["input_shape"]["items"]["maximum"] == limits["REMATX_MAX_DIM"]
