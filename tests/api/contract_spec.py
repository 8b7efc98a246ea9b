"""contract_spec.py - the static half of tests/api/contract.py: openapi.yaml
as tools read it, before any server runs (see contract.py's docstring,
"Static part"), and what both halves share: the spec loaded once, the
check() tally and the schema helpers.  Kept apart so that neither file
grows past what one reader takes in."""
import os
import re
import subprocess
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_schema  # noqa: E402

SRC = os.environ.get("top_srcdir") or os.path.join(os.path.dirname(__file__), "..", "..")
BUILD = os.environ.get("top_builddir") or SRC
SPEC = os.path.join(SRC, "openapi.yaml")
REMATD = os.environ.get("REMATD") or os.path.join(BUILD, "api", "rematd")
WORKER = os.path.join(BUILD, "worker", "remat-worker")
UNREACHABLE = os.path.join(SRC, "tests", "api", "contract-unreachable.txt")
CLIENT_TOKEN = "contract-client-token"
WORKER_TOKEN = "contract-worker-token"
METHODS = ["get", "put", "post", "delete", "patch"]

failures = []
checks = 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)
        print("FAIL " + what, flush=True)
    return cond


with open(SPEC, "rb") as f:
    SPEC_BYTES = f.read()
doc = yaml.safe_load(SPEC_BYTES)


def deref(node):
    return check_schema.deref(node, doc)


def validator(schema):
    return check_schema.validator(schema, doc)


def schema_errors(schema, value):
    return ["%s at /%s" % (e.message[:200], "/".join(str(p) for p in e.absolute_path))
            for e in list(validator(schema).iter_errors(value))[:3]]


# ---------------------------------------------------------------- static

# YAML 1.2 core schema: what a plain scalar resolves to there.
CORE = [
    ("null", re.compile(r"^(~|null|Null|NULL|)$")),
    ("bool", re.compile(r"^(true|True|TRUE|false|False|FALSE)$")),
    ("int", re.compile(r"^([-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")),
    ("float", re.compile(r"^([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?"
                         r"|[-+]?\.(inf|Inf|INF)|\.nan|\.NaN|\.NAN)$")),
]


def core_tag(value):
    for tag, rx in CORE:
        if rx.match(value):
            return tag
    return "str"


def static_yaml():
    resolver = yaml.resolver.Resolver()
    node = yaml.compose(SPEC_BYTES.decode())
    stack = [(node, False)]
    seen = 0
    while stack:
        n, in_flow = stack.pop()
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                stack += [(k, in_flow or n.flow_style), (v, in_flow or n.flow_style)]
        elif isinstance(n, yaml.SequenceNode):
            stack += [(v, in_flow or n.flow_style) for v in n.value]
        elif isinstance(n, yaml.ScalarNode) and n.style is None:
            seen += 1
            # YAML 1.1 has no ':' inside a plain scalar in a flow collection
            # ([cuda:0]); PyYAML reads it since 5.1, others refuse it.
            check(not (in_flow and ":" in n.value),
                  "line %d: plain scalar %r holds ':' inside a flow collection: quote it"
                  % (n.start_mark.line + 1, n.value))
            tag11 = resolver.resolve(yaml.ScalarNode, n.value, (True, False)).rsplit(":", 1)[1]
            tag12 = core_tag(n.value)
            same = tag11 == tag12
            if same and tag11 == "int":
                same = yaml.safe_load(n.value) == int(n.value, 0)
            check(same, "line %d: plain scalar %r is %s in YAML 1.1 but %s in YAML 1.2: quote it"
                  % (n.start_mark.line + 1, n.value, tag11, tag12))
    check(seen > 1000, "only %d plain scalars seen" % seen)


KEYWORDS = {
    "$ref", "$schema", "$id", "$defs", "$comment", "$anchor", "$dynamicRef", "$dynamicAnchor",
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum",
    "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems",
    "uniqueItems", "maxContains", "minContains", "maxProperties", "minProperties", "required",
    "dependentRequired", "format", "title", "description", "default", "deprecated", "readOnly",
    "writeOnly", "examples", "example", "contentEncoding", "contentMediaType", "contentSchema",
    "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "prefixItems",
    "items", "contains", "properties", "patternProperties", "additionalProperties",
    "propertyNames", "unevaluatedItems", "unevaluatedProperties", "discriminator", "xml",
    "externalDocs",
}
SUB_ONE = ("not", "if", "then", "else", "items", "contains", "additionalProperties",
           "propertyNames", "unevaluatedItems", "unevaluatedProperties", "contentSchema")
SUB_LIST = ("allOf", "anyOf", "oneOf", "prefixItems")
SUB_MAP = ("properties", "patternProperties", "dependentSchemas", "$defs")


def walk_schema(s, where):
    if isinstance(s, bool):
        return
    if not check(isinstance(s, dict), "%s: a schema is an object or a boolean" % where):
        return
    for k in s:
        check(k in KEYWORDS or k.startswith("x-"), "%s: %r is not a schema keyword" % (where, k))
    for k in SUB_ONE:
        if k in s:
            walk_schema(s[k], where + "/" + k)
    for k in SUB_LIST:
        for i, sub in enumerate(s.get(k, [])):
            walk_schema(sub, "%s/%s/%d" % (where, k, i))
    for k in SUB_MAP:
        for name, sub in s.get(k, {}).items():
            walk_schema(sub, "%s/%s/%s" % (where, k, name))


def operations():
    for path, item in doc["paths"].items():
        for m in METHODS:
            if m in item:
                yield path, m, item[m]


def op_params(path, op):
    return [deref(p) for p in doc["paths"][path].get("parameters", []) + op.get("parameters", [])]


# The answers that can meet any operation: the framing of the request, a
# body over the limits (a GET's too), the bodies held together.
ANY_OPERATION = ("400", "408", "413", "414", "431", "500", "501", "503", "505")
# Headers rematd sends; each must be declared on the response it is on.
SENT_HEADERS = ("x-request-id", "location", "content-location", "retry-after",
                "idempotent-replayed", "allow", "www-authenticate", "x-remat-sha256")


def server_problems():
    """The problem types and titles rematd answers (api/http/problems.c's table)."""
    with open(os.path.join(SRC, "api", "http", "problems.c")) as f:
        text = f.read()
    table = text.split("problem_titles[] = {", 1)[1].split("};", 1)[0]
    return dict(re.findall(r'\{"([a-z-]+)", "([^"]*)"\}', table))


SERVER_PROBLEMS = server_problems()


def worker_result_fields():
    """The members rematd takes in a validation's result, and which it
    needs (api/worker_check.c's table)."""
    with open(os.path.join(SRC, "api", "worker_check.c")) as f:
        text = f.read()
    table = text.split("validation_fields[] = {", 1)[1].split("};", 1)[0]
    rows = re.findall(r'\{"([a-z_]+)", F_[A-Z]+, ([01])\}', table)
    return {k for k, _ in rows}, {k for k, req in rows if req == "1"}


def static_spec():
    enum = doc["components"]["schemas"]["Problem"]["properties"]["type"]["enum"]
    check(len(SERVER_PROBLEMS) > 20, "api/http/problems.c's problem table not found")
    check(sorted(enum) == sorted("/problems/" + k for k in SERVER_PROBLEMS),
          "Problem.type's enum %s is not the server's table %s"
          % (sorted(set(enum) ^ set("/problems/" + k for k in SERVER_PROBLEMS)), ""))
    for name, s in doc["components"]["schemas"].items():
        walk_schema(s, "#/components/schemas/" + name)
    # A validation's result as rematd takes it from the worker: the spec
    # names the same members and needs the same ones, so that a result
    # checked without a worker built (no libtorch) is still checked.
    taken, needed = worker_result_fields()
    vr = doc["components"]["schemas"]["ValidationResult"]
    check(len(taken) > 10 and set(vr["properties"]) == taken,
          "ValidationResult's members differ from api/worker_check.c's: %s"
          % sorted(set(vr["properties"]) ^ taken))
    check(set(vr.get("required", [])) == needed,
          "ValidationResult requires %s, api/worker_check.c %s"
          % (sorted(vr.get("required", [])), sorted(needed)))
    for name, p in doc["components"]["parameters"].items():
        walk_schema(p["schema"], "#/components/parameters/%s/schema" % name)
    for name, r in doc["components"]["responses"].items():
        for ct, media in r.get("content", {}).items():
            walk_schema(media["schema"], "#/components/responses/%s/%s" % (name, ct))
    check("example" not in doc["components"]["parameters"]["IdempotencyKey"] and
          "examples" not in doc["components"]["parameters"]["IdempotencyKey"],
          "IdempotencyKey has an example: example-driven tools would send one key again")
    for path, m, op in operations():
        where = "%s %s" % (m.upper(), path)
        check(any(s.startswith("4") for s in op["responses"]), where + ": no 4xx declared")
        for status in ANY_OPERATION:
            check(status in op["responses"], "%s: status %s, which any operation can answer, "
                  "not declared" % (where, status))
        if op.get("security", doc.get("security")):
            check({} in op.get("security", doc.get("security")),
                  "%s: security does not say the token is optional (rematd without a token "
                  "asks none)" % where)
        body = op.get("requestBody", {}).get("content", {})
        if "application/json" in body:
            check("application/*+json" in body,
                  "%s: takes application/*+json but does not declare it" % where)
        for p in op_params(path, op):
            walk_schema(p["schema"], where + " parameter " + p["name"])
            if p["in"] == "path":
                check("example" in p or "examples" in p,
                      "%s: path parameter %s has no example" % (where, p["name"]))
            if "example" in p:
                errs = schema_errors(p["schema"], p["example"])
                check(not errs, "%s: example of %s: %s" % (where, p["name"], errs))
        for status, resp in op["responses"].items():
            for ct, media in deref(resp).get("content", {}).items():
                walk_schema(media["schema"], "%s %s %s" % (where, status, ct))
        body = op.get("requestBody")
        if body is None:
            continue
        for ct, media in body["content"].items():
            walk_schema(media["schema"], "%s request %s" % (where, ct))
            exs = [media["example"]] if "example" in media else []
            exs += [e["value"] for e in media.get("examples", {}).values() if "value" in e]
            files = [e["externalValue"] for e in media.get("examples", {}).values()
                     if "externalValue" in e]
            check(exs or files, "%s: request body %s has no example" % (where, ct))
            for ex in exs:
                errs = schema_errors(media["schema"], ex)
                check(not errs, "%s: request example (%s) invalid: %s" % (where, ct, errs))
            for fn in files:
                check(os.path.isfile(os.path.join(SRC, fn)),
                      "%s: externalValue %s is not a file in the tree" % (where, fn))


def static_defaults():
    """--max-stages' default as rematd --help gives it is the one the spec
    and docs/api.md give."""
    out = subprocess.run([REMATD, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True).stdout
    m = re.search(r"--max-stages .*\n.*default (\d+)", out)
    if not check(m is not None, "rematd --help gives no default of --max-stages"):
        return
    want = m.group(1)
    text = SPEC_BYTES.decode()
    said = re.findall(r"--max-stages[^(]*\((\d+) by default", text)
    check(said and all(x == want for x in said),
          "openapi.yaml gives --max-stages' default as %s, rematd --help %s" % (said, want))
    with open(os.path.join(SRC, "docs", "api.md")) as f:
        docs = f.read()
    row = re.search(r"^\| `--max-stages` \| `REMAT_MAX_STAGES` \| (\d+) \|", docs, re.M)
    check(row is not None and row.group(1) == want,
          "docs/api.md gives --max-stages' default as %s, rematd --help %s"
          % (row and row.group(1), want))
