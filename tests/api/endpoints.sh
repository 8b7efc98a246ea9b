#!/bin/sh
# Every endpoint's happy path against a real rematd, each response checked
# against openapi.yaml's schema: plans (inline and by profile_id, exact
# figures for sqrt, the fields for min-peak), the timeline SVG, profile and
# validation jobs driven to done by a scripted worker, models, health,
# readiness, metrics, the embedded openapi.yaml, HEAD, request ids.
. "$(dirname "$0")/lib.sh"
start_rematd
P8=$(profile 8)

# GET /v1/plans/{id} answers a plan's 201 body byte for byte: the plan is
# stored as a compact record and rendered again by the same code.
same_on_get() { # what
    cp "$BODY" "$T/posted.json"
    _id=$(field id)
    req GET "/v1/plans/$_id" && expect 200 '/v1/plans/{id}'
    cmp -s "$BODY" "$T/posted.json" && ok || fail "GET /v1/plans/$_id differs from its 201 body ($1)"
}

req GET /healthz && expect 200 /healthz
req GET /readyz && expect 200 /readyz
req GET /v1/models && expect 200 /v1/models
grep -q '"name":"resnet50"' "$BODY" && grep -q '"name":"gpt"' "$BODY" && ok || fail "zoo lacks resnet50 or gpt"

# sqrt on a 4-stage profile: round(sqrt(4)) = 2 segments, checkpoint {2};
# the figures are the traced simulation's (docs/memory-model.md).
T1='{"format":"remat.profile/v1","input_bytes":4,"stages":[{"out_bytes":1},{"out_bytes":4},{"out_bytes":1},{"out_bytes":4}]}'
post /v1/plans "{\"algorithm\":\"sqrt\",\"profile\":$T1}" && expect 201 /v1/plans
[ "$(field checkpoints)" = "[2]" ] && ok || fail "sqrt checkpoints: $(field checkpoints)"
[ "$(field peak_bytes)" = 18 ] && ok || fail "sqrt peak_bytes: $(field peak_bytes)"
[ "$(field store_all_peak_bytes)" = 19 ] && ok || fail "store_all_peak_bytes: $(field store_all_peak_bytes)"
[ "$(field algorithm)" = sqrt ] && ok || fail "algorithm: $(field algorithm)"
SQRT_ID=$(field id)
[ "$(header Location)" = "/v1/plans/$SQRT_ID" ] && ok || fail "Location: $(header Location)"
cp "$BODY" "$T/sqrt.json"
req GET "/v1/plans/$SQRT_ID" && expect 200 '/v1/plans/{id}'
cmp -s "$BODY" "$T/sqrt.json" && ok || fail "GET /v1/plans/{id} differs from the 201 body"

# store-all has no checkpoints and its peak is store_all_peak_bytes.
post /v1/plans "{\"algorithm\":\"store-all\",\"profile\":$P8}" && expect 201 /v1/plans
[ "$(field checkpoints)" = "[]" ] && ok || fail "store-all checkpoints: $(field checkpoints)"
[ "$(field peak_bytes)" = "$(field store_all_peak_bytes)" ] && ok || fail "store-all peak"
same_on_get store-all
# uniform with K segments.
post /v1/plans "{\"algorithm\":\"uniform\",\"segments\":4,\"profile\":$P8}" && expect 201 /v1/plans
[ "$(field checkpoints)" = "[2, 4, 6]" ] && ok || fail "uniform K=4 checkpoints: $(field checkpoints)"
same_on_get uniform
# The default algorithm (min-peak): the same fields, a peak no worse than sqrt's.
post /v1/plans "{\"profile\":$P8}"
if [ "$CODE" = 501 ]; then
    problem "min-peak not there yet" 501 unsupported
else
    expect 201 /v1/plans
    MP_ID=$(field id)
    MP_PEAK=$(field peak_bytes)
    same_on_get min-peak
    post /v1/plans "{\"algorithm\":\"sqrt\",\"profile\":$P8}" && expect 201 /v1/plans
    [ "$MP_PEAK" -le "$(field peak_bytes)" ] && ok || fail "min-peak $MP_PEAK above sqrt $(field peak_bytes)"
fi
# min-time with a budget (or its documented problems while it is missing).
post /v1/plans "{\"algorithm\":\"min-time\",\"budget_bytes\":1000000000,\"profile\":$P8}"
case $CODE in
201) expect 201 /v1/plans && same_on_get min-time ;;
*) problem "min-time" "$CODE" "$( [ "$CODE" = 501 ] && echo unsupported || echo infeasible)" ;;
esac
# min-time at min-peak's peak: recomputation, nested segments where they pay.
post /v1/plans "{\"algorithm\":\"min-time\",\"budget_bytes\":$MP_PEAK,\"mem_slots\":2000,\"profile\":$P8}" &&
    expect 201 /v1/plans && same_on_get "min-time at $MP_PEAK"

# The timeline chart.
req GET "/v1/plans/$SQRT_ID/timeline.svg" && expect 200 '/v1/plans/{id}/timeline.svg'
[ "$CTYPE" = image/svg+xml ] && ok || fail "timeline content type $CTYPE"
# A 19-byte peak is drawn in bytes; the x axis names each op's stage and
# the phases are shaded (this plan recomputes stages 1 and 2).
grep -q '<svg' "$BODY" && grep -q 'store-all: peak 19 B<' "$BODY" && grep -q 'sqrt(n)' "$BODY" &&
    grep -q 'live memory (B)' "$BODY" && [ "$(grep -c '<polyline' "$BODY")" = 3 ] &&
    grep -q '>stage 4 B<' "$BODY" && grep -q '>loss <' "$BODY" &&
    grep -q 'fill="#f6dede"' "$BODY" && ok ||
    fail "timeline lacks the svg, the three lines, the legend, the byte axis or the stage axis"
if [ -n "${MP_ID:-}" ]; then
    req GET "/v1/plans/$MP_ID/timeline.svg" && expect 200 '/v1/plans/{id}/timeline.svg'
    cp "$BODY" "$T/timeline.svg"
    [ -n "${REMAT_KEEP_SVG:-}" ] && cp "$BODY" "$REMAT_KEEP_SVG"
fi

# A profile job: queued, leased by a scripted worker, progress, done.
post /v1/profiles '{"model":"resnet18","batch_size":8,"dtype":"fp32","device":"cpu"}' &&
    expect 202 /v1/profiles
PJ=$(field id)
[ "$(header Location)" = "/v1/profiles/$PJ" ] && ok || fail "profile Location"
[ "$(field status)" = queued ] && ok || fail "new job status $(field status)"
req GET "/v1/profiles/$PJ" && expect 200 '/v1/profiles/{id}'
post /v1/worker/lease '{"worker_id":"test-1","kinds":["profile"],"devices":["cpu"]}' &&
    expect 200 /v1/worker/lease
LEASE=$(field lease_id)
[ "$(field job_id)" = "$PJ" ] && ok || fail "leased $(field job_id), not $PJ"
[ "$(field attempt)" = 1 ] && ok || fail "attempt $(field attempt)"
grep -q '"input_shape":\[3,224,224\]' "$BODY" && ok || fail "spec lacks the default input_shape"
post "/v1/worker/jobs/$PJ/heartbeat" "{\"lease_id\":\"$LEASE\",\"progress\":{\"stage\":3,\"stages\":8,\"phase\":\"measuring\"}}" &&
    expect 200 '/v1/worker/jobs/{id}/heartbeat'
req GET "/v1/profiles/$PJ" && expect 200 '/v1/profiles/{id}'
[ "$(field status)" = running ] && grep -q '"progress":{"stage":3,"stages":8' "$BODY" && ok ||
    fail "running job progress: $(cat "$BODY")"
# The activity under its name and under "phase", its deprecated one: either
# may come, both if they agree; the progress kept carries both names.
grep -q '"progress":{"stage":3,"stages":8,"phase":"measuring","activity":"measuring"}' "$BODY" && ok ||
    fail "progress from a phase-only heartbeat: $(cat "$BODY")"
HB="/v1/worker/jobs/$PJ/heartbeat"
post "$HB" "{\"lease_id\":\"$LEASE\",\"progress\":{\"stage\":4,\"stages\":8,\"activity\":\"building\"}}" &&
    expect 200 '/v1/worker/jobs/{id}/heartbeat'
req GET "/v1/profiles/$PJ" && expect 200 '/v1/profiles/{id}'
grep -q '"progress":{"stage":4,"stages":8,"activity":"building","phase":"building"}' "$BODY" && ok ||
    fail "progress from an activity heartbeat: $(cat "$BODY")"
post "$HB" "{\"lease_id\":\"$LEASE\",\"progress\":{\"stage\":5,\"stages\":8,\"activity\":\"measuring\",\"phase\":\"building\"}}"
problem "activity and phase differ" 400 validation /progress/phase
post "$HB" "{\"lease_id\":\"$LEASE\",\"progress\":{\"stage\":5,\"stages\":8,\"activity\":\"warming\"}}"
problem "unknown activity" 400 validation /progress/activity
post "$HB" "{\"lease_id\":\"$LEASE\",\"progress\":{\"stage\":5,\"stages\":8,\"activity\":\"measuring\",\"phase\":\"measuring\"}}" &&
    expect 200 '/v1/worker/jobs/{id}/heartbeat'
req GET "/v1/profiles/$PJ" && expect 200 '/v1/profiles/{id}'
grep -q '"progress":{"stage":5,"stages":8,"activity":"measuring","phase":"measuring"}' "$BODY" && ok ||
    fail "progress from a heartbeat with both names: $(cat "$BODY")"
post /v1/worker/lease '{"worker_id":"test-2","devices":["cpu"]}' && expect 204 /v1/worker/lease
post "/v1/worker/jobs/$PJ/complete" "{\"lease_id\":\"$LEASE\",\"result\":$(job_profile 10 resnet18 8 fp32 cpu)}" &&
    expect 200 '/v1/worker/jobs/{id}/complete'
req GET "/v1/profiles/$PJ" && expect 200 '/v1/profiles/{id}'
[ "$(field status)" = done ] && grep -q '"profile":{' "$BODY" && ok || fail "done profile job: $(head -c 300 "$BODY")"

# Plans from the measured profile; validations of them.
post /v1/plans "{\"algorithm\":\"sqrt\",\"profile_id\":\"$PJ\"}" && expect 201 /v1/plans
[ "$(field profile_id)" = "$PJ" ] && ok || fail "plan profile_id"
PLAN_BY_ID=$(field id)
same_on_get "by profile_id"
req GET "/v1/plans/$PLAN_BY_ID/timeline.svg" && expect 200 '/v1/plans/{id}/timeline.svg'
post /v1/validations "{\"profile_id\":\"$PJ\",\"plan_id\":\"$PLAN_BY_ID\"}" && expect 202 /v1/validations
VJ=$(field id)
[ "$(header Location)" = "/v1/validations/$VJ" ] && ok || fail "validation Location"
grep -q '"plan":{' "$BODY" && grep -q '"model_spec":{' "$BODY" && grep -q '"device":"cpu"' "$BODY" &&
    ok || fail "validation spec: $(head -c 300 "$BODY")"
post /v1/validations "{\"profile_id\":\"$PJ\",\"checkpoints\":[2,5]}" && expect 202 /v1/validations
grep -q '"checkpoints":\[2,5\]' "$BODY" && ok || fail "validation of explicit checkpoints"
post /v1/validations "{\"profile_id\":\"$PJ\",\"algorithm\":\"sqrt\",\"repeats\":2}" && expect 202 /v1/validations
req GET "/v1/validations/$VJ" && expect 200 '/v1/validations/{id}'
post /v1/worker/lease '{"worker_id":"test-1","kinds":["validation"],"devices":["cpu"]}' &&
    expect 200 /v1/worker/lease
[ "$(field job_id)" = "$VJ" ] && ok || fail "leased validation $(field job_id), not $VJ (oldest first)"
LEASE=$(field lease_id)
# The result must be this job's: its plan's predicted peak, its device.
PEAK=$(field peak_bytes)
MEASURED=$((PEAK + PEAK / 50))
REL=$(awk "BEGIN { printf \"%.17g\", ($PEAK - $MEASURED) / $MEASURED }")
post "/v1/worker/jobs/$VJ/complete" "{\"lease_id\":\"$LEASE\",\"result\":{\"measured_peak_bytes\":$MEASURED,\"predicted_peak_bytes\":$PEAK,\"relative_error\":$REL,\"step_ms\":5.5,\"device\":\"cpu\"}}" &&
    expect 200 '/v1/worker/jobs/{id}/complete'
req GET "/v1/validations/$VJ" && expect 200 '/v1/validations/{id}'
[ "$(field status)" = done ] && grep -q "\"result\":{\"measured_peak_bytes\":$MEASURED" "$BODY" && ok ||
    fail "done validation: $(head -c 300 "$BODY")"
# A job for any CUDA device is not handed to a CPU-only worker, but to cuda:1.
post /v1/profiles '{"model":"gpt","model_options":{"layers":4,"seq_len":128},"batch_size":2,"device":"cuda"}' &&
    expect 202 /v1/profiles
GJ=$(field id)
grep -q '"input_shape":\[128\]' "$BODY" && ok || fail "gpt input_shape from seq_len"
post /v1/worker/lease '{"worker_id":"cpu-only","kinds":["profile"],"devices":["cpu"]}' && expect 204 /v1/worker/lease
post /v1/worker/lease '{"worker_id":"gpu-1","devices":["cuda:1"]}' && expect 200 /v1/worker/lease
[ "$(field job_id)" = "$GJ" ] && ok || fail "cuda job not leased to cuda:1"
post "/v1/worker/jobs/$GJ/release" "{\"lease_id\":\"$(field lease_id)\"}" &&
    expect 200 '/v1/worker/jobs/{id}/release'
# A layer-list job.
post /v1/profiles '{"layers":[{"type":"conv2d","out_channels":16,"kernel_size":3,"padding":1},{"type":"relu"},{"type":"sequential","layers":[{"type":"flatten"},{"type":"linear","out_features":10}]}],"input_shape":[3,32,32],"batch_size":4,"device":"cpu"}' &&
    expect 202 /v1/profiles

# Operations.
req GET /metrics && expect 200 /metrics
for m in remat_http_requests_total remat_http_request_duration_seconds_bucket remat_jobs remat_plans_created_total \
    remat_plan_queue_depth remat_store_commits_total remat_store_committed_plans_total; do
    grep -q "^$m" "$BODY" && ok || fail "metrics lack $m"
done
grep -q 'remat_http_requests_total{route="plans_create",code="201"}' "$BODY" && ok || fail "metrics: plans_create 201"
grep -q 'remat_jobs{state="done"} 2' "$BODY" && ok || fail "metrics: jobs done"
grep -q 'remat_plans_created_total{algorithm="sqrt"} [1-9]' "$BODY" && ok || fail "metrics: plans by algorithm"
# Every plan so far was committed, in at least one commit and at most one each.
PLANS_OK=$(sed -n 's/^remat_http_requests_total{route="plans_create",code="201"} //p' "$BODY")
COMMITTED=$(sed -n 's/^remat_store_committed_plans_total //p' "$BODY")
COMMITS=$(sed -n 's/^remat_store_commits_total //p' "$BODY")
[ "$COMMITTED" = "$PLANS_OK" ] && [ "$COMMITS" -ge 1 ] && [ "$COMMITS" -le "$COMMITTED" ] && ok ||
    fail "metrics: $COMMITTED plans committed in $COMMITS commits, $PLANS_OK answered 201"
grep -q '^remat_plan_queue_depth 0$' "$BODY" && ok || fail "metrics: planning queue not empty at rest"
grep -q 'le="+Inf"' "$BODY" && ok || fail "histogram without +Inf"
req GET /openapi.yaml && expect 200 /openapi.yaml
cmp -s "$BODY" "$top_srcdir/openapi.yaml" && ok || fail "served openapi.yaml differs from the source"
req HEAD /healthz -I && [ "$CODE" = 200 ] && ok || fail "HEAD /healthz: $CODE"
req GET /healthz -H 'X-Request-Id: trace-42'
[ "$(header X-Request-Id)" = trace-42 ] && ok || fail "X-Request-Id not echoed"
grep -q '"request_id":"trace-42"' "$T/rematd.log" && ok || fail "request id not logged"
# One JSON log line per request.
"$PYTHON" -c 'import json,sys
lines = [json.loads(l) for l in open(sys.argv[1])]
reqs = [l for l in lines if l["msg"] == "request"]
assert all({"ts","level","route","status","dur_ms","request_id"} <= set(l) for l in reqs)
print(len(reqs))' "$T/rematd.log" >"$T/nlog" && [ "$(cat "$T/nlog")" -ge "$N" ] && ok ||
    fail "log lines are not one JSON object per request"

schema_check "$T/manifest"
stop_rematd
finish
