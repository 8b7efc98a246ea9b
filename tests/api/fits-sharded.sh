#!/bin/sh
# POST /v1/fits for one rank of a data-parallel job (docs/scheduling.md,
# "Sharded jobs") end to end on a real rematd: per strategy the per-rank
# breakdown adds up to the peak the fit used and fits the usable memory,
# each term is the formula's, sharding more fits more, and every bad
# "parallel" or mixed-precision field is a 400 naming it.  Responses are
# checked against openapi.yaml.
. "$(dirname "$0")/lib.sh"
data=$top_srcdir/tests/data/fits
start_rematd

b4=$(cat "$data/b4.json")
b8=$(cat "$data/b8.json")
b16=$(cat "$data/b16.json")
ps="\"profiles\":[$b4,$b8,$b16]"

for st in ddp zero1 zero2 zero3 fsdp hsdp; do
    extra=
    [ $st = hsdp ] && extra=',"shard_group":2'
    post /v1/fits "{$ps,\"optimizer\":\"adam\",\"memory\":[200000000,\"t4\"],\"margin_bytes\":1000000,\"parallel\":{\"data\":4,\"strategy\":\"$st\"$extra},\"param_dtype\":\"bfloat16\",\"reduce_dtype\":\"float32\"}"
    expect 200 /v1/fits
    cp "$BODY" "$T/$st.json"
done
"$PYTHON" - "$T" "$data/b8.json" <<'PY' && ok || fail "sharded answers"
import json, sys
t = sys.argv[1]
prof = json.load(open(sys.argv[2]))
psi = sum(s.get("param_bytes", 0) for s in prof["stages"]) // 4
unit = max(s.get("param_bytes", 0) for s in prof["stages"]) // 4
ceil = lambda a, b: -(-a // b)
terms = ["weights", "gradients", "optimizer", "gathered", "buckets", "activations", "step_tmp"]
batch = {}
for st in ["ddp", "zero1", "zero2", "zero3", "fsdp", "hsdp"]:
    d = json.load(open("%s/%s.json" % (t, st)))
    par = d["parallel"]
    assert d["optimizer"] == "adam"
    assert par["strategy"] == st and par["data"] == 4 and par["params"] == psi, par
    # bf16 weights, fp32 gradients, Adam's two fp32 moments and an fp32 master.
    assert (par["param_bytes"], par["grad_bytes"], par["optim_bytes"]) == (2, 4, 12), par
    for a in d["answers"]:
        r = a["per_rank"]
        assert r["strategy"] == st
        assert sum(r[k] for k in terms) == r["peak_bytes"], r
        assert r["peak_bytes"] <= a["usable_bytes"], (r, a["usable_bytes"])
        l = a["largest"]
        assert l["batch"] > 0 and r["activations"] == l["peak_bytes"], (l, r)
        # batch + 1's activations do not fit beside the rest.
        rest = r["peak_bytes"] - r["activations"] - r["step_tmp"]
        assert rest + l["next_peak_bytes"] > a["usable_bytes"], (rest, l)
        g = {"ddp": 1, "zero1": 1, "zero2": 1, "zero3": 4, "fsdp": 4, "hsdp": 2}[st]
        o = {"ddp": 1, "zero1": 4, "zero2": 4, "zero3": 4, "fsdp": 4, "hsdp": 2}[st]
        gg = {"ddp": 1, "zero1": 1, "zero2": 4, "zero3": 4, "fsdp": 4, "hsdp": 2}[st]
        assert r["weights"] == 2 * ceil(psi, g), (st, r)
        assert r["gradients"] == 4 * ceil(psi, gg), (st, r)
        assert r["optimizer"] == 12 * ceil(psi, o), (st, r)
        want_gathered = 2 * 2 * unit + 4 * unit if g > 1 else 0
        assert r["gathered"] == want_gathered, (st, r, unit)
        want_buckets = {"ddp": 4 * psi, "zero1": 4 * psi,
                        "zero2": min(2 * (25 << 20), 4 * psi)}.get(st, 0)
        assert r["buckets"] == want_buckets, (st, r)
        if st == "hsdp":
            assert r["shard_group"] == 2
    batch[st] = d["answers"][0]["largest"]["batch"]
# More sharding leaves more room for the activations.
assert batch["ddp"] <= batch["zero1"] <= batch["zero2"], batch
assert batch["zero3"] == batch["fsdp"] and batch["hsdp"] <= batch["fsdp"], batch
assert batch["ddp"] < batch["fsdp"], batch
PY

# A memory that holds the weights and state of one rank but no activations:
# no batch, and the breakdown says what is held.
post /v1/fits "{$ps,\"optimizer\":\"adam\",\"memory\":[60000000],\"parallel\":{\"data\":2,\"strategy\":\"ddp\"},\"throughput\":false}"
expect 200 /v1/fits
"$PYTHON" - "$BODY" <<'PY' && ok || fail "nothing fits: $(head -c 600 "$BODY")"
import json, sys
d = json.load(open(sys.argv[1]))
a = d["answers"][0]
assert a["largest"]["batch"] == 0, a["largest"]
r = a["per_rank"]
assert r["activations"] == 0 and r["peak_bytes"] > a["usable_bytes"], r
PY

# Gradients as bucket views, fp32, no master copy asked: no bucket copy.
post /v1/fits "{$ps,\"optimizer\":\"sgd-momentum\",\"memory\":[\"t4\"],\"parallel\":{\"data\":8,\"strategy\":\"zero1\",\"gradient_as_bucket_view\":true},\"master_weights\":false,\"throughput\":false}"
expect 200 /v1/fits
"$PYTHON" - "$BODY" <<'PY' && ok || fail "bucket view: $(head -c 600 "$BODY")"
import json, sys
d = json.load(open(sys.argv[1]))
r = d["answers"][0]["per_rank"]
assert d["parallel"]["optim_bytes"] == 4 and d["optimizer"] == "sgd-momentum", d["parallel"]
assert r["buckets"] == 0 and r["weights"] == r["gradients"], r
assert r["optimizer"] == 4 * -(-d["parallel"]["params"] // 8), r
PY

# The scheduler's questions per GPU kind: a global batch of 512 over 8 ranks.
post /v1/fits "{$ps,\"optimizer\":\"adam\",\"memory\":[\"t4\",\"a100-80gb\"],\"parallel\":{\"data\":8,\"strategy\":\"zero3\"},\"param_dtype\":\"bf16\",\"global_batch\":512,\"throughput\":false}"
expect 200 /v1/fits
"$PYTHON" - "$BODY" <<'PY' && ok || fail "schedule: $(head -c 800 "$BODY")"
import json, math, sys
d = json.load(open(sys.argv[1]))
for a in d["answers"]:
    s, r = a["schedule"], a["per_rank"]
    assert s["global_batch"] == 512
    req = s["requests"]
    assert req["ranks"] == 8 and req["kubernetes"] == {"nvidia.com/gpu": 8}
    # The rank's peak at the micro-batch it runs, at most the largest's.
    peak = s.get("micro_peak_bytes", r["peak_bytes"])
    assert peak <= r["peak_bytes"], (s, r)
    need = peak + a["memory_bytes"] - a["usable_bytes"] + 2**30
    assert req["device_memory_bytes"] == need, (req, need)
    gib = -(-need // 2**30)
    assert req["dra_selector"] == \
        'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("%dGi")) >= 0' % gib
    assert req["skypilot_memory"] == "NVIDIA:%dGB+:8" % -(-need // 10**9), req
    b = a["largest"]["batch"]
    if b > 0:
        micro = min(b, 64)
        assert s["micro_batch"] == micro and s["accumulation_steps"] == -(-64 // micro), s
        assert s["samples_per_step"] >= 512 and s["least_data"] <= 8, s
        # 64 samples per rank is far below the largest batch: less memory.
        assert micro < b and s["micro_peak_bytes"] < r["peak_bytes"], (s, r)
t4, a100 = d["answers"]
assert t4["schedule"]["requests"]["skypilot"] == "T4:8"
assert a100["schedule"]["requests"]["skypilot"] == "A100-80GB:8"
PY

# 40 MB holds no batch on one rank (53 MB of weights, gradients and
# state); more ranks shard them until one fits: the least such, and one
# fewer does not.
post /v1/fits "{$ps,\"optimizer\":\"adam\",\"memory\":[40000000],\"parallel\":{\"data\":1,\"strategy\":\"zero3\"},\"param_dtype\":\"bf16\",\"global_batch\":512,\"throughput\":false}"
expect 200 /v1/fits
"$PYTHON" - "$BODY" <<'PY' && ok || fail "least data: $(head -c 800 "$BODY")"
import json, sys
small = json.load(open(sys.argv[1]))["answers"][0]
assert small["largest"]["batch"] == 0 and "micro_batch" not in small["schedule"]
least = small["schedule"]["least_data"]
assert least is not None and least > 1, small["schedule"]
assert "skypilot" not in small["schedule"]["requests"]
open(sys.argv[1] + ".least", "w").write(str(least))
PY
least=$(cat "$T"/*.least 2>/dev/null | head -1)
for n in $least $((least - 1)); do
    post /v1/fits "{$ps,\"optimizer\":\"adam\",\"memory\":[40000000],\"parallel\":{\"data\":$n,\"strategy\":\"zero3\"},\"param_dtype\":\"bf16\",\"throughput\":false}"
    expect 200 /v1/fits
    batch=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["answers"][0]["largest"]["batch"])' "$BODY")
    if [ "$n" = "$least" ]; then
        [ "$batch" -ge 1 ] && ok || fail "least_data $n: batch $batch"
    else
        [ "$batch" = 0 ] && ok || fail "least_data - 1 = $n: batch $batch"
    fi
done

# Errors name the field.
fit="\"profiles\":[$b4],\"memory\":[200000000]"
post /v1/fits "{$fit,\"parallel\":{\"strategy\":\"ddp\"}}"
problem "no data" 400 validation /parallel/data
post /v1/fits "{$fit,\"parallel\":{\"data\":0}}"
problem "zero ranks" 400 validation /parallel/data
post /v1/fits "{$fit,\"parallel\":{\"data\":4,\"strategy\":\"zero4\"}}"
problem "unknown strategy" 400 validation /parallel/strategy
post /v1/fits "{$fit,\"parallel\":{\"data\":4,\"strategy\":\"hsdp\"}}"
problem "hsdp without group" 400 validation /parallel/shard_group
post /v1/fits "{$fit,\"parallel\":{\"data\":4,\"strategy\":\"hsdp\",\"shard_group\":3}}"
problem "group not dividing" 400 validation /parallel/shard_group
post /v1/fits "{$fit,\"parallel\":{\"data\":4,\"shard_group\":2}}"
problem "group without hsdp" 400 validation /parallel/shard_group
post /v1/fits "{$fit,\"parallel\":{\"data\":4,\"bucket_cap_mb\":0}}"
problem "empty bucket" 400 validation /parallel/bucket_cap_mb
post /v1/fits "{$fit,\"parallel\":{\"data\":4,\"gradient_as_bucket_view\":1}}"
problem "bucket view" 400 validation /parallel/gradient_as_bucket_view
post /v1/fits "{$fit,\"parallel\":{\"data\":4,\"tensor\":2}}"
problem "unknown parallel member" 400 validation /parallel/tensor
post /v1/fits "{$fit,\"parallel\":4}"
problem "parallel not an object" 400 validation /parallel
post /v1/fits "{$fit,\"parallel\":{\"data\":4},\"param_dtype\":\"int8\"}"
problem "param dtype" 400 validation /param_dtype
post /v1/fits "{$fit,\"parallel\":{\"data\":4},\"reduce_dtype\":true}"
problem "reduce dtype" 400 validation /reduce_dtype
post /v1/fits "{$fit,\"parallel\":{\"data\":4},\"master_weights\":\"yes\"}"
problem "master weights" 400 validation /master_weights
post /v1/fits "{$fit,\"param_dtype\":\"bfloat16\"}"
problem "mixed precision without parallel" 400 validation /param_dtype
post /v1/fits "{$fit,\"global_batch\":64}"
problem "global batch without parallel" 400 validation /global_batch
post /v1/fits "{$fit,\"parallel\":{\"data\":4},\"global_batch\":0}"
problem "zero global batch" 400 validation /global_batch

schema_check "$T/manifest"
stop_rematd
finish
