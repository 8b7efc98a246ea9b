#!/bin/sh
# `remat fits` end to end on three profiles of one model (batches 4, 8, 16,
# linear in the batch): the answer's plan fits, batch + 1 does not, the
# store-all batch is below, GPU names work, the fit check is exact on linear
# data, and bad input exits 2 naming the field.
set -u
remat=${top_builddir:-.}/cli/remat
data=${top_srcdir:-.}/tests/data/fits
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
die() { echo "FAIL: $*"; fail=1; }
py=python3
command -v $py >/dev/null 2>&1 || { echo "no python3"; exit 77; }

"$remat" fits --memory 200000000 --memory t4 --optimizer adam "$data/b4.json" "$data/b16.json" \
    "$data/b8.json" >"$tmp/out" 2>"$tmp/err" || die "fits exited $?: $(cat "$tmp/err")"
$py - "$tmp/out" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
a = d["answers"]
assert len(a) == 2, a
assert a[0]["memory_bytes"] == 200000000
assert a[1]["memory_bytes"] == 15360 * 2**20 - 2**30, a[1]["memory_bytes"]
for x in a:
    l, s, t = x["largest"], x["store_all"], x["throughput"]
    assert l["batch"] >= 1 and l["peak_bytes"] <= x["usable_bytes"] < l["next_peak_bytes"], l
    assert l["next_batch"] == l["batch"] + 1
    assert s["batch"] <= l["batch"] and s["peak_bytes"] <= x["usable_bytes"] < s["next_peak_bytes"], s
    assert 1 <= t["batch"] <= l["batch"] and t["peak_bytes"] <= x["usable_bytes"], t
    assert abs(t["samples_per_s"] - t["batch"] * 1000 / t["step_ms"]) < 1e-6 * t["samples_per_s"]
    assert l["plan"]["peak_bytes"] == l["peak_bytes"]
    assert x["extrapolated"] is True  # batches above 16 are outside the measured range
# checkpointing buys batch on the T4
assert a[1]["largest"]["batch"] > a[1]["store_all"]["batch"], a[1]
fc = d["fit_check"]
assert len(fc) == 1 and fc[0]["batch"] == 8, fc
assert all(v < 1e-9 for v in fc[0]["rel_err"].values()), fc
PY

# The optimizer costs batch: adam's state is 2x the weights.
"$remat" fits --memory 200000000 --no-throughput "$data/b4.json" "$data/b8.json" >"$tmp/none" ||
    die "fits without optimizer"
$py - "$tmp/out" "$tmp/none" <<'PY' || fail=1
import json, sys
adam = json.load(open(sys.argv[1]))["answers"][0]
none = json.load(open(sys.argv[2]))["answers"][0]
assert "throughput" not in none
assert none["largest"]["batch"] >= adam["largest"]["batch"], (none, adam)
PY

expect_bad() { # what, grep pattern, args...
    what=$1; pat=$2; shift 2
    "$remat" fits "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ $rc -eq 2 ] || die "$what: exit $rc, want 2"
    grep -q -- "$pat" "$tmp/err" || die "$what: stderr lacks '$pat': $(cat "$tmp/err")"
}
# One rank of a data-parallel job: the breakdown adds up to a peak that
# fits, and sharding more fits more.
for st in ddp zero3; do
    "$remat" fits --memory 200000000 --optimizer adam --parallel 4 --strategy $st \
        --param-dtype bf16 --reduce-dtype float32 --no-throughput --format json \
        "$data/b4.json" "$data/b8.json" >"$tmp/$st" 2>"$tmp/err" ||
        die "fits --parallel ($st) exited $?: $(cat "$tmp/err")"
done
$py - "$tmp/ddp" "$tmp/zero3" <<'PY' || fail=1
import json, sys
ddp, z3 = (json.load(open(f))["answers"][0] for f in sys.argv[1:])
for a in (ddp, z3):
    r = a["per_rank"]
    terms = ["weights", "gradients", "optimizer", "gathered", "buckets", "activations", "step_tmp"]
    assert sum(r[k] for k in terms) == r["peak_bytes"] <= a["usable_bytes"], r
    assert r["activations"] == a["largest"]["peak_bytes"] and a["largest"]["batch"] > 0, a
assert ddp["per_rank"]["strategy"] == "ddp" and z3["per_rank"]["gathered"] > 0
assert ddp["per_rank"]["weights"] == 4 * z3["per_rank"]["weights"], (ddp, z3)
assert z3["largest"]["batch"] > ddp["largest"]["batch"], (ddp["largest"], z3["largest"])
PY
# --global-batch: the schedule per memory, the same as POST /v1/fits's.
"$remat" fits --memory a100-80gb --memory 40000000 --optimizer adam --parallel 8 --strategy zero3 \
    --param-dtype bf16 --global-batch 512 --no-throughput --format json "$data/b4.json" \
    "$data/b8.json" >"$tmp/sch" 2>"$tmp/err" || die "fits --global-batch exited $?: $(cat "$tmp/err")"
$py - "$tmp/sch" <<'PY' || fail=1
import json, sys
big, small = json.load(open(sys.argv[1]))["answers"]
s = big["schedule"]
assert s["micro_batch"] == 64 and s["accumulation_steps"] == 1 and s["least_data"] == 1, s
assert s["requests"]["skypilot"] == "A100-80GB:8" and s["requests"]["kubernetes"] == {"nvidia.com/gpu": 8}
s = small["schedule"]
assert "skypilot" not in s["requests"] and s["least_data"] > 1, s
if small["largest"]["batch"] > 0:
    assert s["micro_batch"] * 8 * s["accumulation_steps"] >= 512, s
PY
expect_bad "global batch without parallel" "need --parallel" --memory 1000 --global-batch 8 "$data/b4.json"
expect_bad "strategy without parallel" "need --parallel" --memory 1000 --strategy fsdp "$data/b4.json"
expect_bad "bad strategy" "--strategy" --memory 1000 --parallel 4 --strategy zero4 "$data/b4.json"
expect_bad "bad dtype" "--param-dtype" --memory 1000 --parallel 4 --param-dtype int8 "$data/b4.json"
expect_bad "bad group" "/parallel/shard_group" --memory 1000 --parallel 4 --strategy hsdp \
    --shard-group 3 "$data/b4.json"
expect_bad "no memory" "needs --memory" "$data/b4.json"
expect_bad "unknown gpu" "neither bytes nor a GPU name" --memory x100 "$data/b4.json"
expect_bad "unknown optimizer" "--optimizer" --memory 1000 --optimizer lamb "$data/b4.json"
expect_bad "same batch twice" "/profiles/1/batch_size" --memory 1000 "$data/b4.json" "$data/b4.json"
exit $fail
