#!/bin/sh
# The pictures (issue 17): GET /v1/profiles/{id}/frontier.svg draws every
# frontier point with store-all, sqrt(n) and min-peak marked (min-peak
# named as the least peak of single-level plans, which the frontier's
# multi-level ones can beat), and a measured point per done validation of
# the profile; the timeline of a
# plan names its ops by stage, shades the phases and draws a validation's
# measured per-op timeline over the prediction.  Each picture is rendered
# with rsvg-convert and its PNG must be the right size and not blank
# (tests/png-check.py).  Bad input is problem+json naming what is wrong.
. "$(dirname "$0")/lib.sh"
REMAT=${REMAT:-$top_builddir/cli/remat}
start_rematd
render() { # svg-file name
    if ! command -v rsvg-convert >/dev/null 2>&1; then
        fail "rsvg-convert is missing (deploy/install-deps.sh installs librsvg2-bin)"
        return 1
    fi
    if ! rsvg-convert -o "$T/$2.png" "$1" 2>"$T/rsvg.err"; then
        fail "$2: rsvg-convert cannot render it: $(cat "$T/rsvg.err")"
        return 1
    fi
    if "$PYTHON" "$top_srcdir/tests/png-check.py" "$T/$2.png" 900 500 1 >"$T/png.out"; then
        ok
    else
        fail "$2: $(cat "$T/png.out")"
    fi
    [ -n "${REMAT_KEEP_PNG:-}" ] && cp "$T/$2.png" "$REMAT_KEEP_PNG.$2.png"
    return 0
}
svg_has() { # name string...
    n=$1
    shift
    for s in "$@"; do
        grep -qF -- "$s" "$BODY" && ok || fail "$n lacks '$s': $(head -c 300 "$BODY")"
    done
}

# A done profile job of ten stages s1..s10 (a scripted worker).
post /v1/profiles '{"model":"resnet18","batch_size":8,"dtype":"fp32","device":"cpu"}' &&
    expect 202 /v1/profiles
PJ=$(field id)
req GET "/v1/profiles/$PJ/frontier.svg"
problem "the frontier of a queued profile" 409 job-not-ready
post /v1/worker/lease '{"worker_id":"w","kinds":["profile"],"devices":["cpu"]}' && expect 200 /v1/worker/lease
LEASE=$(field lease_id)
job_profile 10 resnet18 8 fp32 cpu >"$T/profile.json"
post "/v1/worker/jobs/$PJ/complete" "{\"lease_id\":\"$LEASE\",\"result\":$(cat "$T/profile.json")}" &&
    expect 200 '/v1/worker/jobs/{id}/complete'

# The frontier before any validation: the three plans, in MiB.
req GET "/v1/profiles/$PJ/frontier.svg" && expect 200
[ "$CTYPE" = image/svg+xml ] && ok || fail "frontier content type $CTYPE"
svg_has frontier '<svg' '</svg>' 'store-all: ' 'sqrt(n): ' 'min-peak (single-level): ' \
    'min-peak: least peak of single-level plans' '(each stage recomputed at most once)' \
    'peak memory (MiB)' 'step time (ms): ' "resnet18, 10 stages"
grep -q 'measured:' "$BODY" && fail "a measured point before any validation" || ok
# The same frontier as the CLI's: every point drawn.
"$REMAT" frontier --format json "$T/profile.json" >"$T/f.json"
npts=$("$PYTHON" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["points"]))' "$T/f.json")
[ "$(grep -c '<circle [^>]*r="3" fill="#444"' "$BODY")" = $((npts + 1)) ] && ok ||
    fail "frontier: $(grep -c '<circle' "$BODY") dots for $npts points (and the legend's)"
svg_has frontier "frontier: $npts plans"
cp "$BODY" "$T/frontier0.svg"
render "$T/frontier0.svg" frontier0

# A plan of it, validated with a measured timeline: the worker measures
# 5% above the prediction at every op.
post /v1/plans "{\"algorithm\":\"sqrt\",\"profile_id\":\"$PJ\"}" && expect 201 /v1/plans
PLAN=$(field id)
CKS=$(field checkpoints | tr -d '[] ')
post /v1/validations "{\"profile_id\":\"$PJ\",\"plan_id\":\"$PLAN\",\"timeline\":\"yes\"}"
problem "timeline not a boolean" 400 validation /timeline
post /v1/validations "{\"profile_id\":\"$PJ\",\"plan_id\":\"$PLAN\",\"timeline\":true}" &&
    expect 202 /v1/validations
VJ=$(field id)
post /v1/worker/lease '{"worker_id":"w","kinds":["validation"],"devices":["cpu"]}' && expect 200 /v1/worker/lease
LEASE=$(field lease_id)
[ "$(field job_id)" = "$VJ" ] && ok || fail "leased $(field job_id), not $VJ"
PEAK=$(field peak_bytes)
"$REMAT" simulate --checkpoints "$CKS" --timeline "$T/profile.json" >"$T/sim.json"
"$PYTHON" - "$BODY" "$T/sim.json" "$T/bad1.json" "$T/bad2.json" >"$T/result.json" <<'PY'
import json, sys
spec = json.load(open(sys.argv[1]))["spec"]
sim = json.load(open(sys.argv[2]))
ops = spec["plan"]["schedule"]
assert len(ops) == len(sim["timeline"]), (len(ops), len(sim["timeline"]))
# Each op's wall time (ms) and, as a GPU worker sends it, the allocator's
# reserved bytes: optional members of an entry.
tl = [{"op": o["op"], "stage": o["stage"], "peak_bytes": int(b * 1.08),
       "after_bytes": int(b * 1.05), "ms": 0.25} for o, b in zip(ops, sim["timeline"])]
tl[0]["reserved_peak_bytes"] = tl[0]["peak_bytes"] + 2097152
peak = max(t["peak_bytes"] for t in tl)
r = {"measured_peak_bytes": peak, "predicted_peak_bytes": spec["plan"]["peak_bytes"],
     "step_ms": spec["plan"]["total_ms"] * 1.1, "device": "cpu", "timeline": tl}
print(json.dumps(r))
# Refused: a negative time, a member no worker sends.
tl[1]["ms"] = -1
with open(sys.argv[3], "w") as f:
    json.dump(r, f)
tl[1]["ms"] = 0.25
tl[2]["gpu_temp"] = 70
with open(sys.argv[4], "w") as f:
    json.dump(r, f)
PY
post "/v1/worker/jobs/$VJ/complete" "{\"lease_id\":\"$LEASE\",\"result\":$(cat "$T/bad1.json")}" &&
    problem "a timeline op of -1 ms" 400 validation /result/timeline/1
post "/v1/worker/jobs/$VJ/complete" "{\"lease_id\":\"$LEASE\",\"result\":$(cat "$T/bad2.json")}" &&
    problem "a timeline entry with an unknown member" 400 validation /result/timeline/2
post "/v1/worker/jobs/$VJ/complete" "{\"lease_id\":\"$LEASE\",\"result\":$(cat "$T/result.json")}" &&
    expect 200 '/v1/worker/jobs/{id}/complete'
V8=$(printf %.8s "$VJ")

# The timeline: the prediction, store-all, sqrt(n) and the measurement,
# the ops named by stage, the phases shaded.
req GET "/v1/plans/$PLAN/timeline.svg" && expect 200
[ "$(grep -c '<polyline' "$BODY")" = 4 ] && ok || fail "timeline: not four lines"
svg_has timeline "measured (validation $V8): peak" '>s3 F<' '>s3 B<' '>loss <' \
    'fill="#eaf2fb"' 'fill="#fdf1e3"' 'fill="#f6dede"' '>recompute<' 'live memory (MiB)'
cp "$BODY" "$T/timeline.svg"
render "$T/timeline.svg" timeline
# A min-peak plan's line says what min-peak is the least of.
post /v1/plans "{\"algorithm\":\"min-peak\",\"profile_id\":\"$PJ\"}" && expect 201 /v1/plans
req GET "/v1/plans/$(field id)/timeline.svg" && expect 200
svg_has timeline 'min-peak (single-level): peak' 'sqrt(n): peak' 'store-all: peak'

# The frontier now has the measured point, labelled by the validation.
req GET "/v1/profiles/$PJ/frontier.svg" && expect 200
svg_has frontier 'measured: 1 validation run' ">$V8<"
cp "$BODY" "$T/frontier1.svg"
render "$T/frontier1.svg" frontier1
# A second validation, of checkpoints and without a step time: two points.
post /v1/validations "{\"profile_id\":\"$PJ\",\"checkpoints\":[5]}" && expect 202 /v1/validations
VJ2=$(field id)
post /v1/worker/lease '{"worker_id":"w","kinds":["validation"],"devices":["cpu"]}' && expect 200 /v1/worker/lease
LEASE=$(field lease_id)
P2=$(field peak_bytes)
post "/v1/worker/jobs/$VJ2/complete" \
    "{\"lease_id\":\"$LEASE\",\"result\":{\"measured_peak_bytes\":$((P2 - 4096)),\"predicted_peak_bytes\":$P2,\"device\":\"cpu\"}}" &&
    expect 200 '/v1/worker/jobs/{id}/complete'
req GET "/v1/profiles/$PJ/frontier.svg" && expect 200
svg_has frontier 'measured: 2 validation runs' ">$V8<" ">$(printf %.8s "$VJ2")<"
# Another profile's frontier shows neither.
post /v1/profiles '{"model":"resnet18","batch_size":4,"dtype":"fp32","device":"cpu","reuse":false}' &&
    expect 202 /v1/profiles
PJ2=$(field id)
post /v1/worker/lease '{"worker_id":"w","kinds":["profile"],"devices":["cpu"]}' && expect 200 /v1/worker/lease
LEASE=$(field lease_id)
post "/v1/worker/jobs/$PJ2/complete" "{\"lease_id\":\"$LEASE\",\"result\":$(job_profile 10 resnet18 4 fp32 cpu)}" &&
    expect 200 '/v1/worker/jobs/{id}/complete'
req GET "/v1/profiles/$PJ2/frontier.svg" && expect 200
grep -q 'measured:' "$BODY" && fail "another profile's validations drawn" || ok

# Bad input.
req GET "/v1/profiles/$PJ/frontier.svg?mem_slots=0"
problem "mem_slots 0" 400 validation
req GET "/v1/profiles/$PJ/frontier.svg?mem_slots=100001"
problem "mem_slots over the limit" 400 validation
req GET "/v1/profiles/$PJ/frontier.svg?mem_slots=12x"
problem "mem_slots not a number" 400 validation
req GET "/v1/profiles/$PJ/frontier.svg?mem_slots=400" && expect 200
req GET "/v1/profiles/0123456789abcdef0123456789abcdef/frontier.svg"
problem "no such profile" 404 not-found
req GET "/v1/profiles/XYZ/frontier.svg"
problem "not an id" 404 not-found
req GET "/v1/profiles/$VJ/frontier.svg"
problem "a validation's id" 404 not-found
req POST "/v1/profiles/$PJ/frontier.svg"
problem "POST" 405 method-not-allowed
schema_check "$T/manifest"
stop_rematd

# The solver's memory is bounded as a plan's is: a frontier table over
# --solve-memory-bytes is refused before it is filled.
start_rematd --solve-memory-bytes 1048576
req GET "/v1/profiles/$PJ/frontier.svg?mem_slots=100000"
problem "a frontier over --solve-memory-bytes" 422 solve-memory
stop_rematd
finish
