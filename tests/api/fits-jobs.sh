#!/bin/sh
# POST /v1/fits with a model spec instead of profiles (docs/scheduling.md,
# "A model spec"): when the profiles it needs are not cached it is a job
# (202 + Location) that queues them and answers once a worker has measured
# them; asked again, the cached profiles answer at once (200); "confirm":
# true queues a profile at a chosen batch outside the measured ones before
# answering; a failed profile fails the job; bad fields are 400s naming
# them.  A fake worker completes the profile jobs.
. "$(dirname "$0")/lib.sh"
start_rematd
W='{"worker_id":"fake-1","kinds":["profile"],"devices":["cpu"]}'

# Completes the next queued profile job of resnet18 (10 stages) with a
# profile at its batch.
work() {
    post /v1/worker/lease "$W" && expect 200 /v1/worker/lease
    job=$(field job_id)
    lease=$(field lease_id)
    b=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["spec"]["batch_size"])' "$BODY")
    post "/v1/worker/jobs/$job/complete" \
        "{\"lease_id\":\"$lease\",\"result\":$(job_profile 10 resnet18 "$b" fp32 cpu | sed 's/^{/{"optimizer":{"name":"adam","state_bytes":1048576,"step_tmp_bytes":65536,"step_ms":1.5},/')}" &&
        expect 200 '/v1/worker/jobs/{id}/complete'
}

SPEC='"model":"resnet18","device":"cpu","optimizer":"adam","batches":[4,16]'
post /v1/fits "{$SPEC,\"memory\":[400000000,\"t4\"]}"
expect 202 /v1/fits
FITS=$(field id)
[ "$(header Location)" = "/v1/fits/$FITS" ] && [ "$(field kind)" = fits ] &&
    [ "$(field status)" = queued ] && ok || fail "fits job: $(head -c 300 "$BODY")"
req GET "/v1/fits/$FITS" && expect 200 '/v1/fits/{id}'
"$PYTHON" - "$BODY" <<'PY' && ok || fail "queued fits job: $(head -c 400 "$BODY")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "queued" and d["progress"]["stage"] == 0 and d["progress"]["stages"] == 2, d
assert sorted(d["spec"]["profiles"]) == ["16", "4"], d["spec"]
PY
work
req GET "/v1/fits/$FITS" && expect 200 '/v1/fits/{id}'
[ "$(field status)" = queued ] && grep -q '"stage":1' "$BODY" && ok ||
    fail "one of two profiles done: $(head -c 300 "$BODY")"
work
req GET "/v1/fits/$FITS" && expect 200 '/v1/fits/{id}'
"$PYTHON" - "$BODY" <<'PY' && ok || fail "done fits job: $(head -c 600 "$BODY")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "done", d["status"]
r = d["result"]
assert sorted(r["measured_batches"]) == [4, 16] and len(r["profile_ids"]) == 2, r
assert r["optimizer"] == "adam" and len(r["answers"]) == 2
PY

# Asked again: the profiles are cached, the answer is synchronous.
post /v1/fits "{$SPEC,\"memory\":[400000000,\"t4\"]}"
expect 200 /v1/fits
grep -q '"profile_ids":\[' "$BODY" && grep -q '"answers":\[' "$BODY" && ok ||
    fail "cached model spec: $(head -c 300 "$BODY")"

# A model spec answers one rank of a sharded job the same way: the cached
# profiles, the measured optimizer's kind, per_rank and schedule.
post /v1/fits "{$SPEC,\"memory\":[\"t4\"],\"parallel\":{\"data\":4,\"strategy\":\"fsdp\"},\"param_dtype\":\"bf16\",\"global_batch\":256}"
expect 200 /v1/fits
"$PYTHON" - "$BODY" <<'PY' && ok || fail "sharded model spec: $(head -c 600 "$BODY")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["optimizer"] == "adam" and d["parallel"]["strategy"] == "fsdp", d["parallel"]
a = d["answers"][0]
assert a["per_rank"]["peak_bytes"] <= a["usable_bytes"] and a["largest"]["batch"] > 0, a["per_rank"]
assert a["schedule"]["requests"]["skypilot"] == "T4:4", a["schedule"]
PY

# confirm: the answer's batch (capped at max_batch 64, past the measured 16)
# gets a profile of its own before the job answers.
post /v1/fits "{$SPEC,\"memory\":[400000000],\"max_batch\":64,\"confirm\":true}"
expect 202 /v1/fits
FITS=$(field id)
req GET "/v1/fits/$FITS" && expect 200 '/v1/fits/{id}'
"$PYTHON" - "$BODY" <<'PY' && ok || fail "confirming: $(head -c 400 "$BODY")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "queued" and sorted(d["spec"]["profiles"], key=int) == ["4", "16", "64"], d
assert d["progress"]["stage"] == 2 and d["progress"]["stages"] == 3, d["progress"]
PY
work
req GET "/v1/fits/$FITS" && expect 200 '/v1/fits/{id}'
"$PYTHON" - "$BODY" <<'PY' && ok || fail "confirmed: $(head -c 600 "$BODY")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "done", d
r = d["result"]
assert sorted(r["measured_batches"]) == [4, 16, 64], r["measured_batches"]
a = r["answers"][0]
# b + 1 = 65 is past the measured batches still: the answer says so.
assert a["largest"]["batch"] == 64 and a["capped"] and a["extrapolated"], a
PY

# A profile that fails fails the job.
post /v1/fits "{\"model\":\"resnet18\",\"device\":\"cpu\",\"batches\":[2],\"memory\":[1000000]}"
expect 202 /v1/fits
FITS=$(field id)
post /v1/worker/lease "$W" && expect 200 /v1/worker/lease
post "/v1/worker/jobs/$(field job_id)/fail" "{\"lease_id\":\"$(field lease_id)\",\"reason\":\"device out of memory\",\"retryable\":false}"
expect 200 '/v1/worker/jobs/{id}/fail'
req GET "/v1/fits/$FITS" && expect 200 '/v1/fits/{id}'
[ "$(field status)" = failed ] && ok || fail "fits job of a failed profile: $(head -c 300 "$BODY")"

# Errors name the field.
post /v1/fits "{\"model\":\"resnet18\",\"device\":\"cpu\",\"memory\":[1000],\"batches\":[4,4]}"
problem "a batch twice" 400 validation /batches/1
post /v1/fits "{$SPEC,\"memory\":[1000],\"confirm\":\"yes\"}"
problem "confirm not a boolean" 400 validation /confirm
post /v1/fits "{\"model\":\"resnet18\",\"device\":\"cpu\",\"profile_ids\":[\"x\"],\"memory\":[1000]}"
problem "a model spec and profiles" 400 validation /profile_ids
post /v1/fits "{\"profiles\":[$(profile 4 | sed 's/^{/{"batch_size":4,/')],\"memory\":[1000],\"confirm\":true}"
problem "confirm without a model spec" 400 validation /confirm
post /v1/fits "{\"model\":\"resnet1\",\"device\":\"cpu\",\"memory\":[1000]}"
problem "unknown model" 400 validation /model
post /v1/fits "{\"model\":\"resnet18\",\"device\":\"cpu\",\"memory\":[1000],\"optimizer\":{\"name\":\"adam\",\"foreach\":true}}"
problem "foreach is not measured" 400 validation /optimizer/foreach
req GET "/v1/fits/0123456789abcdef0123456789abcdef"
problem "no such fits job" 404 not-found

schema_check "$T/manifest"
finish
