"""contract.py - openapi.yaml against the real rematd, driven by the spec.

Static part (the document as tools read it):
- every plain scalar means the same to a YAML 1.1 reader (PyYAML, as
  Dredd's and older tools' parsers) as to a YAML 1.2 core-schema reader:
  yes/no/on/off, 1:30, 010, dates must be quoted, and so must a ':' inside
  a flow collection (`[cuda:0]`, which YAML 1.1 readers refuse);
- requests the schema takes at the edges of each field (bounds, enum
  values, longest strings and arrays) are not refused as invalid unless
  they break a rule written at the field (what JSON Schema cannot say);
- every schema object uses only JSON Schema 2020-12 / OpenAPI keywords (a
  flow mapping cut at a comma leaves a stray key), every path parameter and
  every request body has an example, every example is valid against its
  schema, every operation declares a 4xx.

Live part: a real rematd (with client and worker tokens, small limits) on
loopback, and where remat-worker is built a real CPU worker that finishes
a profile and a validation job (their done answers checked too).  Every operation of the spec is called from the spec's own
examples (path ids and lease ids filled from the resources made before, as
the spec's links say), the test itself speaking the worker protocol where
a job must be leased or finished; then every status an operation declares
is provoked: 400, 401, 404, 405 (a method the path lacks, Allow checked
against the spec), 409, 413, 415, 422, 501, 503 (a full connection pool:
only /healthz and /readyz are served on the health slot), 507 and the
alternative successes (200 for a reused profile, 204 for an empty queue).
What rematd answers on any route is provoked on every operation whether the
spec declares it or not (401 where a token is needed, 404 for an id that
is none, 400/413/415 for a body, 405, 503 on a full pool but for /healthz
and /readyz), so a route added without them fails.  Every answer is
validated against the spec (status declared, content type declared, body
valid).  The run fails when an operation of the spec is not
called, or a status it declares is never produced, unless contract-
unreachable.txt lists it with a reason: a new route or status in the spec
is picked up without a change here, and fails until it is covered.

What the server sends is declared: every header of an answer that rematd
sends (X-Request-Id, Location, Content-Location, Retry-After,
Idempotent-Replayed, Allow, WWW-Authenticate, X-Remat-Sha256) is declared
on that response, and every member of a JSON answer is named by its schema
(an object schema that names members and takes no others by
additionalProperties).  The framing answers that can meet any operation
(400, 408, 413 for a body even on a GET, 414, 431, 501, 503, 505) are
declared on every operation and provoked on each, as problem+json of their
type on a connection's first request (rematd's front door) and as
libmicrohttpd's own page on a later request of a kept-alive connection.

Every GET of a resource is also called with each id the run made (a plan,
profile jobs done, queued and failed, validation jobs, a deleted model),
so a route added to the spec later (a picture of a plan or a profile) is
covered, 2xx and 409 included, as soon as it is in the spec and the server.

The live rematd, the calls to it and the framing answers are
contract_server.py's; the spec's reading and the static checks
contract_spec.py's; the wire and the validation of answers
contract_wire.py's.

Usage: contract.py (top_srcdir, top_builddir from the environment)."""
import copy
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import zipfile


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import contract_server  # noqa: E402
import contract_spec  # noqa: E402
import contract_wire  # noqa: E402
from contract_server import (  # noqa: E402
    auth_for, call, example, framing, path_example, start_rematd, tmp)
from contract_spec import (  # noqa: E402
    CLIENT_TOKEN, METHODS, REMATD, SERVER_PROBLEMS, SPEC_BYTES, SRC, WORKER, WORKER_TOKEN, check,
    deref, doc, failures, operations, schema_errors, static_defaults, static_spec, static_yaml)
from contract_wire import (  # noqa: E402
    Answer, covered, coverage, known_ids, op_by_id, raw, undeclared)


# ---------------------------------------------------------------- live


# A tiny Llama's config.json (docs/models.md, "From a Hugging Face config").
HF_TINY = {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
           "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 1000}

def zoo_profile(n, batch, spec, scale=1):
    """A profile of n stages with the metadata of a leased profile job,
    the stages those of the Complete example repeated (bytes times scale)."""
    ex = example("completeJob")["result"]
    stages = []
    for i in range(n):
        s = dict(ex["stages"][i % len(ex["stages"])])
        s["name"] = "s%d" % i
        for k in ("out_bytes", "saved_bytes"):
            s[k] = s[k] * scale
        stages.append(s)
    p = dict(ex, stages=stages, batch_size=batch, model=spec.get("model", ex["model"]),
             dtype=spec["dtype"], device=spec["device"])
    p["input_bytes"] = ex["input_bytes"] * scale
    return p


def lease(body, what):
    a = call("leaseJob", body=body, what=what)
    check(a.status == 200, "lease %s: want 200, got %r" % (what, a))
    return a.json() or {}


def finish_profile(lz, scale=1):
    """Completes a leased zoo profile job: first with the Complete example's
    three stages (400 names the count the job's model has), then with that
    many."""
    spec = lz["spec"]
    ids = {"id": lz["job_id"]}
    body = example("completeJob")
    body["lease_id"] = lz["lease_id"]
    body["result"] = zoo_profile(3, spec["batch_size"], spec, scale)
    a = call("completeJob", ids, body, what="a profile of the wrong stage count", expect=400)
    m = re.search(r"the job's model has (\d+) stages", (a.json() or {}).get("detail", ""))
    if not check(m is not None, "complete: 400 does not name the stage count: %r" % a):
        return
    body["result"] = zoo_profile(int(m.group(1)), spec["batch_size"], spec, scale)
    call("completeJob", ids, body, what="the profile", expect=200)


def run_worker(what):
    """A real CPU remat-worker takes one job (--once) and exits."""
    env = dict(os.environ, REMAT_WORKER_TOKEN=WORKER_TOKEN)
    env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":detect_leaks=0"
    log = open(os.path.join(tmp, "worker.log"), "a")
    w = subprocess.Popen([WORKER, "--server", "http://127.0.0.1:%d" % contract_wire.port, "--device", "cpu",
                          "--id", "contract-real", "--once"], stdout=log, stderr=log, env=env)
    try:
        check(w.wait(timeout=600) == 0, "the real worker's exit status (%s)" % what)
    except subprocess.TimeoutExpired:
        w.kill()
        w.wait()
        check(False, "the real worker did not finish %s in 600 s" % what)


def real_worker(ex_id):
    """Where remat-worker is built (libtorch), a real CPU worker finishes a
    profile job and a validation job of a small layer list, and the done
    jobs (a measured profile, a measured validation) are checked against
    the spec."""
    if not os.access(WORKER, os.X_OK):
        print("note: %s is not built: no real worker run" % WORKER)
        return
    body = {"layers": [{"type": "linear", "out_features": 16}, {"type": "relu"},
                       {"type": "linear", "out_features": 4}],
            "input_shape": [8], "batch_size": 4, "device": "cpu", "warmup": 0, "repeats": 1,
            "reuse": False}
    job = call("createProfileJob", body=body, what="for the real worker", expect=202).json() or {}
    run_worker("a profile job")
    a = call("getProfileJob", {"id": job.get("id", ex_id)}, what="done by the real worker",
             expect=200)
    j = a.json() or {}
    if not check(j.get("status") == "done" and "profile" in j,
                 "the real worker's profile job: %r" % a):
        return
    v = call("createValidationJob", body={"profile_id": job["id"], "algorithm": "min-peak",
                                          "repeats": 1},
             what="for the real worker", expect=202).json() or {}
    run_worker("a validation job")
    a = call("getValidationJob", {"id": v.get("id", ex_id)}, what="done by the real worker",
             expect=200)
    check((a.json() or {}).get("status") == "done" and "result" in (a.json() or {}),
          "the real worker's validation job: %r" % a)


def candidates(schema, depth=0):
    """Values at the edges of what a schema takes: its bounds, each enum
    value, the shortest and longest strings and arrays."""
    s = deref(schema) if isinstance(schema, dict) else schema
    if not isinstance(s, dict):
        return []
    out = []
    for sub in s.get("allOf", []):
        out += candidates(sub, depth)
    if "const" in s:
        out.append(s["const"])
    out += s.get("enum", [])
    types = s.get("type") if isinstance(s.get("type"), list) else [s.get("type")]
    if "integer" in types or "number" in types:
        lo, hi = s.get("minimum", -5), s.get("maximum", 1 << 62)
        out += [lo, lo + 1, hi - 1, hi]
        if "number" in types:
            out += [lo + 0.5, 1e30]
    if "string" in types and "enum" not in s:
        out += ["a" * max(1, s.get("minLength", 1)), "x" * s.get("maxLength", 300),
                "\u00e9" * s.get("maxLength", 300)]
    if "boolean" in types:
        out += [True, False]
    if "null" in types:
        out.append(None)
    if "array" in types and depth < 2:
        first = (candidates(s.get("items", {}), depth + 1) or [1])
        out += [first[:1] * s.get("minItems", 0), first[:1] * min(s.get("maxItems", 3), 70)]
        out += [[v] for v in first[:6]]
    if "object" in types and depth < 2:
        out.append({})
    return out


def documented(body):
    """The rules openapi.yaml writes at the field because JSON Schema cannot
    hold them: limits in bytes of UTF-8 where the schema counts characters,
    a profile's byte counts at most 2^60 in total, saved_bytes at least
    out_bytes, bwd_freed_bytes at most saved_bytes + out_bytes, fits'
    margins leaving something of each memory.  A body breaking one may be refused although the schema
    takes it."""
    text = json.dumps(body)
    if "\\u" in text:
        return "a limit in bytes of UTF-8"
    def profiles(v):
        if isinstance(v, dict):
            if "stages" in v and isinstance(v["stages"], list) and "input_bytes" in v:
                yield v
            for x in v.values():
                yield from profiles(x)
        elif isinstance(v, list):
            for x in v:
                yield from profiles(x)
    margin, fraction = body.get("margin_bytes", 0), body.get("margin_fraction", 0)
    for mem in body.get("memory", []) if isinstance(body.get("memory"), list) else []:
        if isinstance(mem, int) and not isinstance(mem, bool) and \
                mem - int(mem * fraction) - margin <= 0:
            return "margins that leave nothing of a memory"
    for p in profiles(body):
        total = p.get("input_bytes", 0)
        for st in p["stages"]:
            out = st.get("out_bytes", 0)
            saved = st.get("saved_bytes", out)
            if saved < out:
                return "saved_bytes below out_bytes"
            if st.get("bwd_freed_bytes", 0) > saved + out:
                return "bwd_freed_bytes above saved_bytes + out_bytes"
            fwd = st.get("fwd_tmp_bytes", 0)
            total += out + saved + max(fwd, st.get("fwd_grad_tmp_bytes", fwd)) + \
                st.get("bwd_tmp_bytes", 0) + 2 * st.get("param_bytes", 0)
        opt = p.get("optimizer") or {}
        total += opt.get("state_bytes", 0) + opt.get("step_tmp_bytes", 0)
        if total > 1 << 60:
            return "byte counts over 2^60 in total"
        if total > 1 << 58 and body.get("algorithm", "min-peak") == "min-peak":
            return "byte counts over 2^58 in total, for min-peak"
    return None


def boundaries(ex_id):
    """Requests the schema takes, at the edges of each field (of the body,
    of a profile's stage and top level, of each layer type, of gpt's
    options, of fits), must not be refused as invalid (400) unless they
    break a rule documented at the field."""
    s = doc["components"]["schemas"]
    bodies = []
    for op_id in ("createPlan", "createProfileJob", "fits", "createValidationJob", "leaseJob",
                  "heartbeatJob", "completeJob", "failJob", "releaseJob"):
        path, m, op = op_by_id[op_id]
        ex = example(op_id)
        for prop, ps in deref(op["requestBody"]["content"]["application/json"]["schema"])[
                "properties"].items():
            for v in candidates(ps):
                bodies.append((op_id, dict(copy.deepcopy(ex), **{prop: v})))
    plan = example("createPlan")
    for prop, ps in s["Stage"]["properties"].items():
        for v in candidates(ps):
            b = copy.deepcopy(plan)
            b["profile"]["stages"][0][prop] = v
            bodies.append(("createPlan", b))
    for prop, ps in s["Profile"]["properties"].items():
        for v in candidates(ps) if prop != "stages" else []:
            b = copy.deepcopy(plan)
            b["profile"][prop] = v
            bodies.append(("createPlan", b))
    for ref in s["Layer"]["oneOf"]:
        ls = deref(ref)
        for prop, ps in ls["properties"].items():
            for v in candidates(ps):
                bodies.append(("createProfileJob", {
                    "layers": [{"type": ls["properties"]["type"]["const"], prop: v}],
                    "input_shape": [3, 8, 8], "device": "cpu", "reuse": False}))
    for prop, ps in deref(s["ProfileRequest"]["properties"]["model_options"])["properties"].items():
        for v in candidates(ps):
            bodies.append(("createProfileJob", {"model": "gpt", "model_options": {prop: v},
                                                "device": "cpu", "reuse": False}))
    fx = dict(example("fits"), profiles=[dict(plan["profile"], batch_size=8)])
    del fx["profile_ids"]
    for prop, ps in s["FitsRequest"]["properties"].items():
        for v in candidates(ps) if prop not in ("profiles", "profile_ids") else []:
            bodies.append(("fits", dict(copy.deepcopy(fx), **{prop: v})))
    sent = 0
    for op_id, body in bodies:
        path, m, op = op_by_id[op_id]
        if schema_errors(op["requestBody"]["content"]["application/json"]["schema"], body) or \
                documented(body):
            continue
        sent += 1
        a = call(op_id, {"id": ex_id}, body, what="at a field's edge")
        check(a.status != 400, "%s: the schema takes %s, the server refuses it: %s"
              % (op_id, json.dumps(body)[:300], a.body[:300]))
    check(sent > 200, "only %d requests at the fields' edges" % sent)


def live():
    ex_id = path_example()
    # A fresh rematd: small limits, so that 413 and 507 are cheap to reach;
    # few connections, so that the pool can be filled for the 503s.
    model_bytes = len(example("uploadModel", "application/octet-stream"))
    start_rematd("--max-body-bytes", "65536", "--max-model-bytes", "65536",
                 "--max-models-bytes", str(model_bytes + 4000), "--max-connections", "4",
                 "--health-connections", "1", "--max-connections-per-ip", "0",
                 "--request-timeout", "120", "--lease-seconds", "600")

    # ---- operations: health, readiness, metrics, the document itself
    call("healthz", expect=200)
    call("readyz", expect=200)
    a = call("metrics", expect=200)
    # The families /metrics has are the ones the spec and the docs name.
    families = set(re.findall(r"^# TYPE (\S+)", a.body.decode(), re.M))
    described = set(re.findall(r"remat_[a-z_]+", op_by_id["metrics"][2]["responses"]["200"]
                               ["description"]))
    with open(os.path.join(SRC, "docs", "api.md")) as f:
        row = [l for l in f if l.startswith("| `GET /metrics` |")]
    in_docs = set(re.findall(r"remat_[a-z_]+", row[0] if row else ""))
    check(len(families) > 5 and families == described,
          "/metrics has %s, the spec names %s" % (sorted(families), sorted(described)))
    check(families == in_docs,
          "/metrics has %s, docs/api.md names %s" % (sorted(families), sorted(in_docs)))
    a = call("openapi", expect=200)
    check(a.body == SPEC_BYTES, "GET /openapi.yaml is not this openapi.yaml")
    call("listModels", expect=200)

    # ---- plans from the example
    plan_key = "contract-plan-1"
    a = call("createPlan", body=example("createPlan"), expect=201,
             headers={"Idempotency-Key": plan_key})
    plan = a.json() or {}
    check(a.header("location") == "/v1/plans/%s" % plan.get("id"), "createPlan Location")
    other = example("createPlan")
    other["algorithm"] = "sqrt"
    call("createPlan", body=other, what="the key again, another body", expect=422,
         headers={"Idempotency-Key": plan_key})
    a = call("createPlan", body=example("createPlan"), what="the key again, the same body",
             expect=201, headers={"Idempotency-Key": plan_key})
    check(a.header("idempotent-replayed") == "true" and (a.json() or {}).get("id") == plan.get("id"),
          "a replayed plan: %r %r" % (a.header("idempotent-replayed"), a))
    call("createPlan", body=example("createPlan"), headers={"Idempotency-Key": "has space"},
         what="Idempotency-Key outside the pattern", expect=400)
    call("getPlan", {"id": plan.get("id", ex_id)}, expect=200)
    a = call("getPlanTimeline", {"id": plan.get("id", ex_id)}, expect=200)
    check(a.body.startswith(b"<svg") or b"<svg" in a.body[:200], "timeline is not SVG")
    inf = example("createPlan")
    inf.update(algorithm="min-time", budget_bytes=1)
    call("createPlan", body=inf, what="min-time under budget 1 (infeasible)", expect=422)
    # A nested min-time schedule asked in the sum model (defined on
    # checkpoint sets only): 501.
    p8 = {"format": "remat.profile/v1", "input_bytes": 1048576, "stages": [
        {"name": "s%d" % i, "out_bytes": (i % 3 + 1) * 4194304,
         "saved_bytes": (i % 3 + 1) * 8388608, "fwd_tmp_bytes": 1048576,
         "bwd_tmp_bytes": 2097152, "param_bytes": (i % 4) * 65536, "fwd_ms": i % 3 + 0.5,
         "bwd_ms": i % 4 + 1.25} for i in range(1, 9)]}
    a = call("createPlan", body={"profile": p8}, what="min-peak of 8 stages", expect=201)
    mp = (a.json() or {}).get("peak_bytes", 1)
    call("createPlan", body={"algorithm": "min-time", "budget_bytes": mp, "mem_slots": 2000,
                             "model": "sum", "profile": p8},
         what="nested min-time in the sum model", expect=501)

    # ---- the rules the schema now holds, each refused by the server too
    # What JSON Schema cannot compare (documented at the field): the schema
    # takes it, the server refuses it.
    documented = [
        ("createPlan", {"profile": {"input_bytes": 4, "stages": [
            {"out_bytes": 8, "saved_bytes": 4}]}}, "saved_bytes below out_bytes",
         "/profile/stages/0/saved_bytes"),
        ("createPlan", {"profile": {"input_bytes": 4, "stages": [
            {"out_bytes": 1 << 60}, {"out_bytes": 1 << 60}]}}, "bytes over 2^60 in total",
         "/profile/stages"),
    ]
    # min-peak's own bound, 2^58 (Bytes and Algorithm say so): sqrt takes
    # the same profile.
    big = {"input_bytes": 1 << 59, "stages": [{"out_bytes": 1}, {"out_bytes": 2}]}
    a = call("createPlan", body={"profile": big}, what="min-peak over 2^58", expect=400)
    check((a.json() or {}).get("type") == "/problems/limit-exceeded",
          "min-peak over 2^58: %r" % a)
    call("createPlan", body={"algorithm": "sqrt", "profile": big}, what="sqrt over 2^58",
         expect=201)
    for op_id, body, what, pointer in documented:
        a = call(op_id, None, body, what=what, expect=400)
        check((a.json() or {}).get("pointer") == pointer,
              "%s %s: pointer %r, not %s" % (op_id, what, (a.json() or {}).get("pointer"), pointer))
    refusals = [
        ("createPlan", dict(example("createPlan"), profile_id=ex_id), "profile and profile_id"),
        ("createPlan", {"algorithm": "sqrt"}, "neither profile nor profile_id"),
        ("createPlan", dict(example("createPlan"), algorithm="uniform"), "uniform without segments"),
        ("createProfileJob", {"layers": [{"type": "relu", "layers": [{"type": "relu"}]}],
                              "input_shape": [4]}, "nested layers on relu"),
        ("createProfileJob", {"model": "resnet50", "model_options": {"layers": 2}},
         "model_options with resnet50"),
        ("createProfileJob", {"model": "resnet50", "layers": [{"type": "relu"}],
                              "input_shape": [4]}, "model and layers"),
        ("createProfileJob", {"layers": [{"type": "relu"}]}, "layers without input_shape"),
        ("createProfileJob", {"model": "gpt", "model_options": {"d_model": 1, "x": 1}},
         "an unknown gpt option"),
        ("createValidationJob", {"profile_id": ex_id, "plan_id": ex_id, "checkpoints": [1]},
         "plan_id and checkpoints"),
        ("createValidationJob", {"profile_id": ex_id, "checkpoints": [1], "algorithm": "sqrt"},
         "checkpoints and algorithm"),
        ("completeJob", {"lease_id": ex_id, "result": {"x": 1 << 64}}, "an integer beyond int64"),
        # fits with a model spec: the rules of POST /v1/profiles
        ("fits", {"model": "nosuch", "memory": [1 << 30]}, "a model not in the zoo"),
        ("fits", {"model": "alexnet", "layers": [{"type": "relu"}], "input_shape": [4],
                  "memory": [1 << 30]}, "model and layers"),
        ("fits", {"profile_ids": [ex_id], "model": "alexnet", "memory": [1 << 30]},
         "profile_ids and a model"),
        ("fits", {"layers": [{"type": "relu"}], "memory": [1 << 30]},
         "layers without input_shape"),
        ("fits", {"model": "alexnet", "input": {"shape": [4]}, "memory": [1 << 30]},
         "input without model_id"),
        ("fits", {"model": "alexnet", "stages": ["a"], "memory": [1 << 30]},
         "stages without model_id"),
        ("fits", {"model": "alexnet", "input_shape": [1, 2, 3, 4, 5], "memory": [1 << 30]},
         "input_shape of 5 dimensions"),
        ("fits", {"model": "alexnet", "input_shape": [0], "memory": [1 << 30]},
         "input_shape of 0"),
        ("fits", {"model": "alexnet", "model_options": {"layers": 2}, "memory": [1 << 30]},
         "model_options with alexnet"),
        ("fits", {"model": "gpt", "model_options": {"depth": 2}, "memory": [1 << 30]},
         "an unknown gpt option"),
        ("fits", {"model": "alexnet", "optimizer": {"name": "adam", "param_elem_bytes": 2},
                  "memory": [1 << 30]}, "a model spec with an optimizer it cannot measure"),
        ("fits", {"model": "alexnet", "optimizer": {"name": "adam", "foreach": True},
                  "memory": [1 << 30]}, "a model spec with foreach"),
        # a Hugging Face config: seq_len with it and only with it
        ("createProfileJob", {"hf_config": HF_TINY}, "hf_config without seq_len"),
        ("createProfileJob", {"model": "gpt", "seq_len": 8}, "seq_len without hf_config"),
        ("createProfileJob", {"hf_config": HF_TINY, "seq_len": 8, "input_shape": [8]},
         "hf_config with input_shape"),
        ("fits", {"hf_config": HF_TINY, "memory": [1 << 30]}, "hf_config without seq_len"),
        ("fits", {"profile_ids": [ex_id], "seq_len": 8, "memory": [1 << 30]},
         "seq_len without a model spec"),
    ]
    # An architecture remat does not build: 422 naming it, before queueing.
    a = call("createProfileJob", body={"hf_config": {"architectures": ["MixtralForCausalLM"]},
                                       "seq_len": 8},
             what="an architecture remat does not build", expect=422)
    check((a.json() or {}).get("pointer") == "/hf_config/architectures/0",
          "an unbuilt architecture: pointer %r" % (a.json() or {}).get("pointer"))
    # The pointer of a member named by the request is a JSON pointer (RFC
    # 6901): '/' and '~' in its key escaped.
    for op_id, body, pointer in [
            ("createPlan", dict(example("createPlan"), **{"a/b~c": 1}), "/a~1b~0c"),
            ("createProfileJob", {"layers": [{"type": "relu", "a/b": 1}], "input_shape": [4]},
             "/layers/0/a~1b"),
            ("createProfileJob", {"model": "gpt", "model_options": {"~x": 1}},
             "/model_options/~0x")]:
        a = call(op_id, None, body, what="a key with / or ~", expect=400)
        check((a.json() or {}).get("pointer") == pointer, "%s: pointer %r, not %s"
              % (op_id, (a.json() or {}).get("pointer"), pointer))
    for op_id, body, what in refusals:
        path, m, op = op_by_id[op_id]
        schema = op["requestBody"]["content"]["application/json"]["schema"]
        check(schema_errors(schema, body), "%s: the schema takes %s" % (op_id, what))
        ids = {"id": ex_id} if "{id}" in path else None
        call(op_id, ids, body, what=what, expect=400)

    # ---- models
    tiny = example("uploadModel", "application/octet-stream")
    a = call("uploadModel", body=tiny, ctype="application/octet-stream", expect=201)
    model = a.json() or {}
    mid = model.get("id", ex_id)
    boundary = "contractboundary7d0f"
    form = (("--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"m.pt\"\r\n"
             "Content-Type: application/octet-stream\r\n\r\n" % boundary).encode() + tiny +
            ("\r\n--%s--\r\n" % boundary).encode())
    call("uploadModel", body=form, ctype="multipart/form-data; boundary=" + boundary,
         what="the same bytes as a form", expect=200)
    call("uploadModel", body=b"not a zip at all" * 8, ctype="application/octet-stream",
         what="not a zip", expect=400)
    notts = os.path.join(tmp, "notts.zip")
    with zipfile.ZipFile(notts, "w") as z:
        z.writestr("net/weights.bin", b"\0" * 64)
    with open(notts, "rb") as f:
        call("uploadModel", body=f.read(), ctype="application/octet-stream",
             what="a zip not in TorchScript's layout", expect=422)
    # Another archive in the layout (the example's entries under another
    # folder): past --max-models-bytes.
    other = os.path.join(tmp, "other.pt")
    with zipfile.ZipFile(os.path.join(SRC, "docs", "examples", "tiny-model.pt")) as zin, \
            zipfile.ZipFile(other, "w") as zout:
        for info in zin.infolist():
            zout.writestr("other/" + info.filename.split("/", 1)[1], zin.read(info))
    with open(other, "rb") as f:
        call("uploadModel", body=f.read(), ctype="application/octet-stream",
             what="past --max-models-bytes", expect=507)
    call("uploadModel", body=b"", ctype="application/octet-stream", content_length=70000,
         what="Content-Length over --max-model-bytes", expect=413)
    call("getModel", {"id": mid}, expect=200)
    a = call("fetchModel", {"id": mid}, expect=200)
    check(a.body == tiny, "the worker's fetch is not the uploaded bytes")
    call("listModels", expect=200, what="with an upload")

    # A queued job on the model: DELETE is 409; failed by its worker, 204.
    mjob = call("createProfileJob", body={"model_id": mid, "input": {"shape": [8]},
                                          "device": "cpu"}, what="a job on the model",
                expect=202).json() or {}
    call("deleteModel", {"id": mid}, what="while a job uses it", expect=409)
    call("createProfileJob", body={"model_id": ex_id, "input": {"shape": [8]}},
         what="no such model", expect=404)
    lz = lease({"worker_id": "contract-cpu", "kinds": ["profile"], "devices": ["cpu"]},
               "the model's job")
    check(lz.get("job_id") == mjob.get("id"), "leased %r, not the model's job" % lz.get("job_id"))
    ids = {"id": lz.get("job_id", ex_id)}
    body = example("releaseJob")
    body["lease_id"] = lz.get("lease_id", ex_id)
    call("releaseJob", ids, body, expect=200)
    call("releaseJob", ids, body, what="a lease given back already", expect=409)
    lz = lease({"worker_id": "contract-cpu", "kinds": ["profile"], "devices": ["cpu"]},
               "the model's job again")
    ids = {"id": lz.get("job_id", ex_id)}
    body = example("failJob")
    body["lease_id"] = lz.get("lease_id", ex_id)
    call("failJob", ids, body, expect=200)
    call("failJob", ids, body, what="a lease that ended", expect=409)
    call("deleteModel", {"id": mid}, expect=204)
    call("getModel", {"id": mid}, what="deleted", expect=404)

    real_worker(ex_id)

    # ---- profile jobs from the example, finished through the worker routes
    key = "contract-profile-1"
    a = call("createProfileJob", body=example("createProfileJob"), expect=202,
             headers={"Idempotency-Key": key})
    job_a = a.json() or {}
    other = example("createProfileJob")
    other["batch_size"] = 64
    call("createProfileJob", body=other, headers={"Idempotency-Key": key},
         what="the key again, another body", expect=422)
    call("getProfileJob", {"id": job_a.get("id", ex_id)}, expect=200, what="queued")
    lz = lease(example("leaseJob"), "the example's job")
    check(lz.get("job_id") == job_a.get("id"), "leased %r, not the example's job" % lz)
    ids = {"id": lz.get("job_id", ex_id)}
    hb = example("heartbeatJob")
    hb["lease_id"] = lz.get("lease_id", ex_id)
    call("heartbeatJob", ids, hb, expect=200)
    call("heartbeatJob", ids, dict(hb, lease_id=ex_id), what="another lease", expect=409)
    call("heartbeatJob", ids, {"progress": {"stage": 1}}, what="no lease_id", expect=400)
    call("heartbeatJob", {"id": ex_id}, hb, what="no such job", expect=404)
    finish_profile(lz)
    call("completeJob", ids, {"lease_id": lz.get("lease_id", ex_id),
                              "result": zoo_profile(3, 32, lz.get("spec", {}))},
         what="after the job is done", expect=409)
    a = call("getProfileJob", {"id": job_a.get("id", ex_id)}, expect=200, what="done")
    check((a.json() or {}).get("status") == "done", "the example's job is not done: %r" % a)
    a = call("createProfileJob", body=example("createProfileJob"), what="reused", expect=200)
    check((a.json() or {}).get("cached") is True, "a reused profile without cached: %r" % a)
    # A second batch for fits.
    a = call("createProfileJob", body=other, what="batch 64", expect=202)
    job_b = a.json() or {}
    lz = lease(example("leaseJob"), "batch 64")
    finish_profile(lz, scale=2)
    # One left queued (nobody leases cpu alexnet): 409 where a done one is needed.
    job_q = call("createProfileJob", body={"model": "alexnet", "device": "cpu"},
                 what="left queued", expect=202).json() or {}
    qid = job_q.get("id", ex_id)

    # ---- plans, fits and validations on the done profiles
    pid_a, pid_b = job_a.get("id", ex_id), job_b.get("id", ex_id)
    a = call("createPlan", body={"algorithm": "sqrt", "profile_id": pid_a}, what="by profile_id",
             expect=201)
    plan_a = (a.json() or {}).get("id", ex_id)
    call("createPlan", body={"profile_id": qid}, what="a queued profile job", expect=409)
    call("createPlan", body={"profile_id": ex_id}, what="no such profile job", expect=404)
    fx = example("fits")
    fx["profile_ids"] = [pid_a, pid_b]
    call("fits", body=fx, expect=200)
    call("fits", body=dict(fx, profile_ids=[pid_a, qid]), what="a queued profile job",
         expect=409)
    call("fits", body=dict(fx, profile_ids=[ex_id]), what="no such profile job", expect=404)
    # A model spec whose profiles are not measured: a fits job (202 +
    # Location) that queued them, shown queued by GET /v1/fits/{id}.  Its
    # profile job stays queued: no cpu profile job is leased after this.
    fits_body = {"model": "vgg11", "device": "cpu", "batches": [3], "memory": [1 << 30]}
    a = call("fits", body=fits_body, what="a model spec, nothing cached", expect=202,
             headers={"Idempotency-Key": "contract-fits-1"})
    fid = (a.json() or {}).get("id", ex_id)
    a = call("fits", body=fits_body, what="the key again", expect=202,
             headers={"Idempotency-Key": "contract-fits-1"})
    check(a.header("idempotent-replayed") == "true" and (a.json() or {}).get("id") == fid,
          "fits replayed: %r %r" % (a.header("idempotent-replayed"), a))
    call("fits", body=dict(fits_body, batches=[5]), what="the key again, another body",
         expect=422, headers={"Idempotency-Key": "contract-fits-1"})
    check(a.header("location") == "/v1/fits/%s" % fid, "fits job Location: %r" % a.header("location"))
    call("getFitsJob", {"id": fid}, what="a fits job waiting for its profile", expect=200)
    call("getProfileFrontier", {"id": pid_a}, path_suffix="?mem_slots=0", what="mem_slots 0",
         expect=400)
    vx = example("createValidationJob")
    vx["profile_id"] = pid_a
    a = call("createValidationJob", body=vx, expect=202)
    call("getValidationJob", {"id": (a.json() or {}).get("id", ex_id)}, expect=200)
    call("createValidationJob", body={"profile_id": pid_a, "plan_id": plan_a},
         what="a plan of this profile", expect=202)
    call("createValidationJob", body={"profile_id": pid_b, "plan_id": plan_a},
         what="a plan of another profile", expect=422)
    call("createValidationJob", body=dict(vx, profile_id=qid), what="a queued profile job",
         expect=409)
    a = call("createPlan", body={"profile_id": pid_a}, what="min-peak by profile_id", expect=201)
    call("createValidationJob", body={"profile_id": pid_a, "algorithm": "min-time",
                                      "budget_bytes": (a.json() or {}).get("peak_bytes", 1),
                                      "model": "sum"},
         what="a nested min-time plan in the sum model", expect=501)
    call("createValidationJob", body=dict(vx, profile_id=ex_id), what="no such profile job",
         expect=404)
    call("leaseJob", body={"worker_id": "contract-idle", "kinds": ["profile"],
                           "devices": ["cuda:0"]}, what="nothing queued for it", expect=204)

    # ---- every GET of a resource with every id made so far (plans, done,
    # queued and failed profile jobs, validation jobs, a deleted model): a
    # route added to the spec later, e.g. another picture of a plan or a
    # profile, is answered 2xx for the ids it serves and its own problems
    # (404, 409 for a job not done) for the others, each checked.
    for op_id, (path, m, op) in sorted(op_by_id.items()):
        if m == "get" and "{id}" in path:
            for rid in known_ids:
                call(op_id, {"id": rid}, what="the id " + rid)

    # Every problem type the docs list: the server's table, all of it.
    with open(os.path.join(SRC, "docs", "api.md")) as f:
        docs = f.read()
    for slug in SERVER_PROBLEMS:
        check("`/problems/%s`" % slug in docs, "docs/api.md does not list /problems/%s" % slug)

    # ---- what rematd answers on any route, provoked on each whether the
    # spec declares it or not (an undeclared one fails): 401 where the
    # spec asks for a token, 404 for an id that is none, 400, 415 and 413
    # for a body, 405 for a method the path lacks; 503 below.
    for op_id, (path, m, op) in sorted(op_by_id.items()):
        ids = {"id": ex_id}
        has_body = "requestBody" in op
        body = None
        ctype = None
        if has_body:
            cts = op["requestBody"]["content"]
            if "application/json" in cts:
                body = example(op_id)
            else:
                body, ctype = tiny, "application/octet-stream"
        if auth_for(op):
            call(op_id, ids, body, ctype, token=None, what="no token", expect=401)
            call(op_id, ids, body, ctype, token="wrong", what="a wrong token", expect=401)
        if "{id}" in path:
            call(op_id, ids, body, ctype, what="the example id (none such)", expect=404)
            call(op_id, {"id": "NOT-AN-ID"}, body, ctype, what="not an id", expect=404)
        if has_body and "application/json" in op["requestBody"]["content"]:
            call(op_id, ids, b"{\"unterminated\": ", "application/json", what="invalid JSON",
                 expect=400)
        if has_body:
            call(op_id, ids, b"hello", "text/plain", what="text/plain", expect=415)
            call(op_id, ids, b"", ctype or "application/json", content_length=1 << 20,
                 what="a body over the limit", expect=413)
        item = doc["paths"][path]
        for wrong in METHODS:
            if wrong not in item:
                break
        a = call(op_id, ids, method=wrong, what="method " + wrong.upper(), expect=405)
        allow = sorted(x.strip() for x in (a.header("allow") or "").split(","))
        want = sorted([x.upper() for x in METHODS if x in item] +
                      (["HEAD"] if "get" in item else []))
        check(allow == want, "%s: Allow %r, the spec's methods %r" % (path, allow, want))

    boundaries(ex_id)

    # ---- 503: a full pool, where only /healthz and /readyz are served
    idle = []
    for _ in range(4):
        idle.append(socket.create_connection(("127.0.0.1", contract_wire.port), timeout=30))
    deadline = time.time() + 30
    full = False
    while time.time() < deadline and not full:
        try:
            full = raw("GET", "/v1/models", headers={
                "Authorization": "Bearer " + CLIENT_TOKEN}).status == 503
        except OSError:
            pass
        if not full:
            time.sleep(0.1)
    check(full, "the pool of 4 connections did not fill")
    for op_id, (path, m, op) in sorted(op_by_id.items()):
        if op_id in ("healthz", "readyz"):
            continue
        body, ctype = None, None
        if "requestBody" in op:
            if "application/json" in op["requestBody"]["content"]:
                body = example(op_id)
            else:
                body, ctype = tiny, "application/octet-stream"
        a = Answer(0, {}, b"no answer")
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                a = call(op_id, {"id": mid}, body, ctype, what="a full pool")
                break
            except OSError:
                time.sleep(0.1)  # the health slot is still closing
        check(a.status == 503 and a.header("retry-after"),
              "%s under a full pool: want 503 with Retry-After, got %r" % (op_id, a))
    for s in idle:
        s.close()
    # The store gone: /readyz is 503 (and rematd exits non-zero at the end).
    shutil.rmtree(os.path.join(tmp, "data"))
    deadline = time.time() + 30
    while True:
        try:
            a = call("readyz", what="the data directory removed")
            if a.status == 503 or time.time() > deadline:
                break
        except OSError:
            pass
        time.sleep(0.1)
    check(a.status == 503, "readyz without its data directory: %r" % a)
    contract_server.proc.send_signal(signal.SIGTERM)
    contract_server.proc.wait(timeout=60)
    framing(ex_id)


def main():
    if not os.access(REMATD, os.X_OK):
        print("SKIP: %s is not built" % REMATD)
        return 77
    try:
        static_yaml()
        static_spec()
        static_defaults()
        live()
        coverage()
    finally:
        proc = contract_server.proc
        if proc and proc.poll() is None:
            proc.kill()
            proc.wait()
        if failures and os.environ.get("KEEP"):
            print("kept " + tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    n = sum(len(s) for s in covered.values())
    print("%d operations, %d (operation, status) pairs produced; %d checks, %d failed"
          % (len(covered), n, contract_spec.checks, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
