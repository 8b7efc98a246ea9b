#!/bin/sh
# Worker results checked against their job (issue 13, found 2): the
# audit's attacks are refused and leave the job running.
# - A CPU AlexNet batch-2 job completed with "device":"cuda:7" or
#   "batch_size":999, another model, dtype or stage count: 400 naming the
#   field; the job stays running and a right result is then accepted.
# - Validation results with measured_peak_bytes -5, predicted_peak_bytes
#   "x", another plan's prediction, an unknown member: 400.  So are step
#   times that are not the plan's prediction, an error that is not
#   (measured - predicted) / predicted, a median outside [min, max].
# - Only the lease holder completes or fails a job (409 otherwise).
# - A stored plan made for another profile cannot be validated (422).
. "$(dirname "$0")/lib.sh"
start_rematd
W='{"worker_id":"w","devices":["cpu"]}'
lease() {
    post /v1/worker/lease "$1"
    JOB=$(field job_id)
    LEASE=$(field lease_id)
}
complete() { # job lease result
    post "/v1/worker/jobs/$1/complete" "{\"lease_id\":\"$2\",\"result\":$3}"
}

post /v1/profiles '{"model":"alexnet","batch_size":2,"device":"cpu"}' && expect 202 /v1/profiles
PJ=$(field id)
lease "$W"
[ "$JOB" = "$PJ" ] && ok || fail "leased $JOB"
complete "$PJ" "$LEASE" "$(job_profile 21 alexnet 999 fp32 cuda:7)" &&
    problem "the audit's forged profile" 400 validation /result/batch_size
complete "$PJ" "$LEASE" "$(job_profile 21 alexnet 2 fp32 cuda:7)" &&
    problem "a CPU job measured on cuda:7" 400 validation /result/device
complete "$PJ" "$LEASE" "$(job_profile 21 alexnet 2 fp32 'NVIDIA H100')" &&
    problem "a CPU job measured on a GPU" 400 validation /result/device
complete "$PJ" "$LEASE" "$(job_profile 21 vgg11 2 fp32 cpu)" &&
    problem "another model" 400 validation /result/model
complete "$PJ" "$LEASE" "$(job_profile 21 alexnet 2 fp16 cpu)" &&
    problem "another dtype" 400 validation /result/dtype
complete "$PJ" "$LEASE" "$(job_profile 20 alexnet 2 fp32 cpu)" &&
    problem "a stage missing" 400 validation /result/stages
complete "$PJ" "$LEASE" "$(profile 21)" && problem "no metadata" 400 validation /result/model
req GET "/v1/profiles/$PJ"
[ "$(field status)" = running ] && ok || fail "a refused result changed the job: $(head -c 300 "$BODY")"
# Not the lease holder: 409 whatever the result, and no failing either.
complete "$PJ" ffffffffffffffffffffffffffffffff "$(job_profile 21 alexnet 2 fp32 cpu)" &&
    problem "complete without the lease" 409 lease-conflict
post "/v1/worker/jobs/$PJ/fail" '{"lease_id":"ffffffffffffffffffffffffffffffff","reason":"pwned"}' &&
    problem "fail without the lease" 409 lease-conflict
post "/v1/worker/jobs/$PJ/fail" "{\"lease_id\":\"$LEASE\",\"reason\":\"$(head -c 5000 /dev/zero | tr '\0' x)\"}" &&
    problem "an unbounded reason" 400 validation /reason
complete "$PJ" "$LEASE" "$(job_profile 21 alexnet 2 fp32 cpu)" && expect 200 '/v1/worker/jobs/{id}/complete'
req GET "/v1/profiles/$PJ"
[ "$(field status)" = done ] && ok || fail "the right result was not taken: $(head -c 300 "$BODY")"

# A cuda job: a GPU's name or its own index, not cpu, not another index.
post /v1/profiles '{"model":"resnet18","batch_size":4,"device":"cuda:1"}' && expect 202 /v1/profiles
CJ=$(field id)
lease '{"worker_id":"g","devices":["cuda:1"]}'
complete "$CJ" "$LEASE" "$(job_profile 10 resnet18 4 fp32 cpu)" &&
    problem "a cuda job measured on cpu" 400 validation /result/device
complete "$CJ" "$LEASE" "$(job_profile 10 resnet18 4 fp32 cuda:0)" &&
    problem "cuda:1 measured on cuda:0" 400 validation /result/device
complete "$CJ" "$LEASE" "$(job_profile 10 resnet18 4 fp32 'NVIDIA H100 80GB HBM3')" &&
    expect 200 '/v1/worker/jobs/{id}/complete'

# Validation results: well-formed and this job's.
post /v1/plans "{\"algorithm\":\"sqrt\",\"profile_id\":\"$PJ\"}" && expect 201 /v1/plans
PLAN=$(field id)
post /v1/validations "{\"profile_id\":\"$PJ\",\"plan_id\":\"$PLAN\"}" && expect 202 /v1/validations
VJ=$(field id)
lease '{"worker_id":"w","kinds":["validation"],"devices":["cpu"]}'
[ "$JOB" = "$VJ" ] && ok || fail "leased $JOB, not the validation"
PEAK=$(field peak_bytes)
TOTAL=$(field total_ms)
good() { printf '{"measured_peak_bytes":%s,"predicted_peak_bytes":%s,"step_ms":1.5,"device":"cpu"%s}' "$1" "$2" "${3:-}"; }
complete "$VJ" "$LEASE" "$(good -5 "$PEAK")" && problem "measured_peak_bytes -5" 400 validation /result/measured_peak_bytes
complete "$VJ" "$LEASE" "$(good 100 '"x"')" && problem "predicted_peak_bytes \"x\"" 400 validation /result/predicted_peak_bytes
complete "$VJ" "$LEASE" "$(good 100 $((PEAK + 1)))" && problem "another plan's prediction" 400 validation /result/predicted_peak_bytes
complete "$VJ" "$LEASE" "$(good 100 "$PEAK" ',"step_ms":-1')" && problem "a duplicate member" 400 invalid-json
complete "$VJ" "$LEASE" "$(good 100 "$PEAK" ',"html":"<script>"')" && problem "an unknown member" 400 validation /result/html
complete "$VJ" "$LEASE" "$(good 100 "$PEAK" ',"relative_error":0.5')" && problem "a relative error of other peaks" 400 validation /result/relative_error
complete "$VJ" "$LEASE" "$(good 100 "$PEAK" ',"model":"vgg11"')" && problem "another model" 400 validation /result/model
complete "$VJ" "$LEASE" '{"predicted_peak_bytes":1,"device":"cpu"}' && problem "no measurement" 400 validation /result/measured_peak_bytes
complete "$VJ" "$LEASE" "$(good 100 "$PEAK" ',"timeline":[]')" && problem "a timeline not asked for" 400 validation /result/timeline
complete "$VJ" "$LEASE" "$(good 100 "$PEAK" ',"measured_reserved_bytes":-1')" &&
    problem "reserved bytes -1" 400 validation /result/measured_reserved_bytes
complete "$VJ" "$LEASE" "$(good 100 "$PEAK" ',"measured_requested_bytes":"x"')" &&
    problem "requested bytes \"x\"" 400 validation /result/measured_requested_bytes
# Step times: the prediction is the plan's total_ms, the error
# (step_ms - predicted) / predicted, the median within the spread.
[ -n "$TOTAL" ] && awk -v t="$TOTAL" 'BEGIN { exit !(t > 0) }' && ok || fail "the plan has no total_ms: $TOTAL"
TERR=$(awk -v t="$TOTAL" 'BEGIN { printf "%.17g", (1.5 - t) / t }')
complete "$VJ" "$LEASE" "$(good 100 "$PEAK" ",\"predicted_step_ms\":$(awk -v t="$TOTAL" 'BEGIN { print t * 2 }')")" &&
    problem "another plan's step time" 400 validation /result/predicted_step_ms
complete "$VJ" "$LEASE" "$(good 100 "$PEAK" ',"predicted_step_ms":-1')" &&
    problem "a negative predicted step time" 400 validation /result/predicted_step_ms
complete "$VJ" "$LEASE" "$(good 100 "$PEAK" ",\"predicted_step_ms\":$TOTAL,\"step_time_error\":0.25")" &&
    problem "a step time error of other times" 400 validation /result/step_time_error
complete "$VJ" "$LEASE" "$(good 100 "$PEAK" ",\"predicted_step_ms\":$TOTAL,\"step_time_error\":\"x\"")" &&
    problem "a step time error \"x\"" 400 validation /result/step_time_error
complete "$VJ" "$LEASE" "$(good 100 "$PEAK" ",\"step_time_error\":$TERR")" &&
    problem "a step time error without its prediction" 400 validation /result/step_time_error
complete "$VJ" "$LEASE" "$(good 100 "$PEAK" ',"step_ms_min":1.6,"step_ms_max":2')" &&
    problem "a median below the fastest step" 400 validation /result/step_ms
complete "$VJ" "$LEASE" "$(good 100 "$PEAK" ',"step_ms_min":1')" &&
    problem "a fastest step without the slowest" 400 validation /result/step_ms_min
complete "$VJ" "$LEASE" "$(good 100 "$PEAK" ",\"model\":\"alexnet\",\"batch_size\":2,\"dtype\":\"fp32\",\"step_ms_min\":1,\"step_ms_max\":2.5,\"predicted_step_ms\":$TOTAL,\"step_time_error\":$TERR,\"measured_reserved_bytes\":4194304,\"measured_requested_bytes\":96,\"cold_peak_bytes\":100")" &&
    expect 200 '/v1/worker/jobs/{id}/complete'
req GET "/v1/validations/$VJ" && expect 200 '/v1/validations/{id}'
[ "$(field status)" = done ] && [ "$(field measured_peak_bytes)" = 100 ] && ok || fail "validation: $(head -c 300 "$BODY")"
[ "$(field predicted_step_ms)" = "$TOTAL" ] && [ "$(field step_ms_max)" = 2.5 ] &&
    [ "$(field measured_reserved_bytes)" = 4194304 ] && ok ||
    fail "the step times were not kept: $(head -c 600 "$BODY")"

# A plan given and solver options beside it: which one was meant?
post /v1/validations "{\"profile_id\":\"$PJ\",\"plan_id\":\"$PLAN\",\"algorithm\":\"min-peak\"}" &&
    problem "plan_id with an algorithm" 400 validation /algorithm
post /v1/validations "{\"profile_id\":\"$PJ\",\"checkpoints\":[3],\"segments\":4}" &&
    problem "checkpoints with segments" 400 validation /segments

# A stored plan of another profile (the cuda job's, or an inline one) is
# not validated against this profile.
post /v1/plans "{\"algorithm\":\"sqrt\",\"profile_id\":\"$CJ\"}" && expect 201 /v1/plans
OTHER=$(field id)
post /v1/validations "{\"profile_id\":\"$PJ\",\"plan_id\":\"$OTHER\"}" &&
    problem "a plan of another profile job" 422 plan-profile-mismatch /plan_id
post /v1/plans "{\"algorithm\":\"sqrt\",\"profile\":$(profile 21 | sed 's/"input_bytes":1048576/"input_bytes":1048577/')}" && expect 201 /v1/plans
INLINE=$(field id)
post /v1/validations "{\"profile_id\":\"$PJ\",\"plan_id\":\"$INLINE\"}" &&
    problem "a plan of another profile" 422 plan-profile-mismatch /plan_id
# The same sizes and times given inline: the plan fits.
req GET "/v1/profiles/$PJ"
SAME=$("$PYTHON" -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["profile"]))' "$BODY")
post /v1/plans "{\"algorithm\":\"sqrt\",\"profile\":$SAME}" && expect 201 /v1/plans
post /v1/validations "{\"profile_id\":\"$PJ\",\"plan_id\":\"$(field id)\"}" && expect 202 /v1/validations
schema_check "$T/manifest"
stop_rematd
finish
