#!/bin/sh
# POST /v1/fits end to end on a real rematd: profiles at three batch sizes
# inline, memories as bytes and GPU names; the answer's plan fits and batch
# + 1 does not, the optimizer costs batch, and every bad field is a 400
# naming it.  Responses are checked against openapi.yaml.
. "$(dirname "$0")/lib.sh"
data=$top_srcdir/tests/data/fits
start_rematd

b4=$(cat "$data/b4.json")
b8=$(cat "$data/b8.json")
b16=$(cat "$data/b16.json")

post /v1/fits "{\"profiles\":[$b4,$b16,$b8],\"optimizer\":\"adam\",\"memory\":[200000000,\"t4\"],\"margin_bytes\":1000000}"
expect 200 /v1/fits
"$PYTHON" - "$BODY" <<'PY' && ok || fail "fits answer: $(head -c 600 "$BODY")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["measured_batches"] == [4, 16, 8], d["measured_batches"]
assert d["optimizer"] == "adam"
a = d["answers"]
assert [x["memory_bytes"] for x in a] == [200000000, 15360 * 2**20 - 2**30]
for x in a:
    assert x["usable_bytes"] == x["memory_bytes"] - 1000000
    l, s, t = x["largest"], x["store_all"], x["throughput"]
    assert l["peak_bytes"] <= x["usable_bytes"] < l["next_peak_bytes"], l
    assert s["batch"] <= l["batch"], (s, l)
    assert t["batch"] <= l["batch"] and t["peak_bytes"] <= x["usable_bytes"]
assert a[1]["largest"]["batch"] > a[1]["store_all"]["batch"]
assert d["fit_check"][0]["batch"] == 8
open(sys.argv[1] + ".batch", "w").write(str(a[0]["largest"]["batch"]))
PY

# The same question without the optimizer: more batch fits.
post /v1/fits "{\"profiles\":[$b4,$b8],\"memory\":[200000000],\"margin_bytes\":1000000,\"throughput\":false}"
expect 200 /v1/fits
"$PYTHON" - "$BODY" "$(cat "$T/r1.body.batch" 2>/dev/null || echo 0)" <<'PY' && ok || fail "no optimizer: $(head -c 400 "$BODY")"
import json, sys
d = json.load(open(sys.argv[1]))
x = d["answers"][0]
assert "throughput" not in x
assert d["optimizer"] == "none"
assert x["largest"]["batch"] > int(sys.argv[2]) > 0, (x["largest"], sys.argv[2])
PY

# Errors name the field.
post /v1/fits "{\"profiles\":[$b4],\"memory\":[]}"
problem "empty memory" 400 validation /memory
post /v1/fits "{\"profiles\":[$b4],\"memory\":[\"x100\"]}"
problem "unknown gpu" 400 validation /memory/0
post /v1/fits "{\"profiles\":[$b4],\"memory\":[1000],\"optimizer\":\"lamb\"}"
problem "unknown optimizer" 400 validation /optimizer
post /v1/fits "{\"profiles\":[$b4],\"memory\":[1000],\"optimizer\":{\"name\":\"adam\",\"state_elem_bytes\":3}}"
problem "state precision" 400 validation /optimizer/state_elem_bytes
post /v1/fits "{\"profiles\":[$b4,$b4],\"memory\":[1000]}"
problem "same batch twice" 400 validation /profiles/1/batch_size
# Profiles of two models, even with the same stages, are not one model's.
b8other=$(echo "$b8" | sed 's/"model": "fits-demo"/"model": "other-model"/')
post /v1/fits "{\"profiles\":[$b4,$b8other],\"memory\":[200000000]}"
problem "two models" 400 validation /profiles/1/model &&
    { grep -q "other-model" "$BODY" && grep -q "fits-demo" "$BODY" && ok ||
        fail "two models: the detail names neither: $(head -c 300 "$BODY")"; }
post /v1/fits "{\"profiles\":[$b4],\"profile_ids\":[\"x\"],\"memory\":[1000]}"
problem "both sources" 400 validation /profile_ids
post /v1/fits "{\"profiles\":[$b4],\"memory\":[1000],\"margin_fraction\":2}"
problem "margin" 400 validation /margin_fraction
post /v1/fits "{\"profiles\":[$b4],\"memory\":[1000],\"colour\":1}"
problem "unknown field" 400 validation /colour
post /v1/fits "{\"profiles\":[{\"input_bytes\":1,\"stages\":[{\"out_bytes\":-1}]}],\"memory\":[1000]}"
problem "bad profile" 400 validation /profiles/0/stages/0/out_bytes
post /v1/fits "{\"profile_ids\":[\"0192d3c4e5f6a7b8c9d0e1f2a3b4c5d6\"],\"memory\":[1000]}"
[ "$CODE" = 404 ] && ok || fail "unknown profile id: $CODE $(head -c 300 "$BODY")"
mem=$("$PYTHON" -c 'print(",".join(["1000"] * 65))')
post /v1/fits "{\"profiles\":[$b4],\"memory\":[$mem]}"
problem "too many memories" 400 limit-exceeded /memory

schema_check "$T/manifest"
stop_rematd
finish
