#!/bin/sh
# Malformed and hostile requests against a real rematd: each must get its
# exact status and problem type (and the JSON pointer of the field at fault
# where there is one), and the server must stay up and answer after all of
# them.  Then auth (REMAT_TOKEN, REMAT_WORKER_TOKEN), the server stage cap
# and the connection timeout on a second server.
. "$(dirname "$0")/lib.sh"
start_rematd
P4=$(profile 4)
HOSTILE=0
J='Content-Type: application/json'

post /v1/plans '{"profile":' && problem "truncated JSON" 400 invalid-json
post /v1/plans '{} trailing' && problem "trailing garbage" 400 invalid-json
post /v1/plans '[1,2]' && problem "an array, not an object" 400 invalid-json
post /v1/plans '' && problem "empty body" 400 invalid-json
post /v1/plans "{\"algorithm\":\"sqrt\",\"algorithm\":\"store-all\",\"profile\":$P4}" &&
    problem "duplicate keys" 400 invalid-json
post /v1/plans '{"profile":{"input_bytes":NaN}}' && problem "NaN" 400 invalid-json
post /v1/plans '{"profile":{"input_bytes":99999999999999999999999,"stages":[]}}' &&
    problem "integer over 64 bits" 400 invalid-json
printf '{"profile":"\377\376"}' >"$T/badutf8"
req POST /v1/plans -H "$J" --data-binary @"$T/badutf8" && problem "invalid UTF-8" 400 invalid-json
post /v1/plans "{\"algorithm\":5,\"profile\":$P4}" && problem "algorithm of the wrong type" 400 validation /algorithm
post /v1/plans "{\"algorithm\":\"magic\",\"profile\":$P4}" && problem "unknown algorithm" 400 validation /algorithm
post /v1/plans "{\"bogus\":1,\"profile\":$P4}" && problem "unknown field" 400 validation /bogus
post /v1/plans '{"profile":"resnet50"}' && problem "profile as a string" 400 validation /profile
post /v1/plans '{"algorithm":"sqrt"}' && problem "no profile" 400 validation /profile
post /v1/plans "{\"profile\":$P4,\"profile_id\":\"0123456789abcdef0123456789abcdef\"}" &&
    problem "profile and profile_id" 400 validation /profile_id
# Stage 17 (0-based, as JSON pointers are) with a negative size.
BAD=$(profile 20 | sed 's/"name":"s18","out_bytes":[0-9]*/"name":"s18","out_bytes":-5/')
post /v1/plans "{\"profile\":$BAD}" && problem "negative out_bytes" 400 validation /profile/stages/17/out_bytes
post /v1/plans '{"profile":{"input_bytes":1,"stages":[{"out_bytes":1e300}]}}' &&
    problem "huge real byte count" 400 validation /profile/stages/0/out_bytes
post /v1/plans '{"profile":{"input_bytes":1,"stages":[{"out_bytes":4611686018427387904}]}}' &&
    problem "byte count over 2^60" 400 limit-exceeded /profile/stages/0/out_bytes
post /v1/plans '{"profile":{"input_bytes":1,"stages":[{"out_bytes":"12"}]}}' &&
    problem "byte count as a string" 400 validation /profile/stages/0/out_bytes
post /v1/plans '{"profile":{"input_bytes":1,"stages":[{"out_bytes":8,"saved_bytes":4}]}}' &&
    problem "saved_bytes under out_bytes" 400 validation /profile/stages/0/saved_bytes
post /v1/plans '{"profile":{"input_bytes":1,"stages":[{"out_bytes":1,"fwd_ms":-1}]}}' &&
    problem "negative time" 400 validation /profile/stages/0/fwd_ms
# Huge finite times: one over 1e9 ms, and times that each fit a double but
# whose sum would not (they were a 500 "out of memory" and NaN coordinates).
post /v1/plans '{"profile":{"input_bytes":1,"stages":[{"out_bytes":1,"fwd_ms":1e308}]}}' &&
    problem "fwd_ms 1e308" 400 limit-exceeded /profile/stages/0/fwd_ms
post /v1/plans '{"algorithm":"min-time","budget_bytes":100,"profile":{"input_bytes":1,"stages":[{"out_bytes":1,"fwd_ms":1},{"out_bytes":1,"fwd_ms":1e300,"bwd_ms":1e300}]}}' &&
    problem "times that overflow when summed" 400 limit-exceeded /profile/stages/1/fwd_ms
post /v1/plans '{"profile":{"input_bytes":-1,"stages":[{"out_bytes":1}]}}' &&
    problem "negative input_bytes" 400 validation /profile/input_bytes
post /v1/plans '{"profile":{"input_bytes":1,"stages":[]}}' && problem "no stages" 400 validation /profile/stages
post /v1/plans '{"profile":{"format":"remat.profile/v9","input_bytes":1,"stages":[{"out_bytes":1}]}}' &&
    problem "unknown profile format" 400 validation /profile/format
# 1,000,001 stages (3 MB of {}): over libremat's cap and the server's.
"$PYTHON" -c 'import sys; sys.stdout.write("{\"profile\":{\"input_bytes\":1,\"stages\":[" + ",".join(["{}"] * 1000001) + "]}}")' >"$T/million"
req POST /v1/plans -H "$J" --data-binary @"$T/million" && problem "1,000,001 stages" 400 limit-exceeded /profile/stages
# Nesting: past rematd's depth limit, and past jansson's own (2048).
"$PYTHON" -c 'import sys; sys.stdout.write("{\"profile\":" + "[" * 100 + "]" * 100 + "}")' >"$T/deep100"
req POST /v1/plans -H "$J" --data-binary @"$T/deep100" && problem "nesting 100 deep" 400 json-too-deep
"$PYTHON" -c 'import sys; sys.stdout.write("{\"a\":" + "[" * 5000 + "]" * 5000 + "}")' >"$T/deep5000"
req POST /v1/plans -H "$J" --data-binary @"$T/deep5000" && problem "nesting 5000 deep" 400 json-too-deep
post /v1/plans "{\"algorithm\":\"uniform\",\"segments\":-1,\"profile\":$P4}" && problem "negative segments" 400 validation /segments
post /v1/plans "{\"algorithm\":\"min-time\",\"budget_bytes\":\"big\",\"profile\":$P4}" &&
    problem "budget as a string" 400 validation /budget_bytes
post /v1/plans "{\"model\":\"quantum\",\"profile\":$P4}" && problem "unknown model" 400 validation /model
post /v1/plans "{\"algorithm\":\"min-time\",\"budget_bytes\":1,\"profile\":$P4}"
if [ "$CODE" = 501 ]; then problem "min-time budget 1 (not there yet)" 501 unsupported
else problem "min-time budget 1" 422 infeasible && grep -q '"min_budget_bytes":[1-9]' "$BODY" && ok ||
    fail "infeasible without min_budget_bytes"; fi
post /v1/plans '{"profile_id":"../../etc/passwd"}' && problem "profile_id not an id" 400 validation /profile_id
post /v1/plans '{"profile_id":"0123456789abcdef0123456789abcdef"}' &&
    problem "unknown profile_id" 404 not-found /profile_id
post /v1/profiles '{"model":"resnet18","device":"cpu"}'
QUEUED=$(field id)
post /v1/plans "{\"profile_id\":\"$QUEUED\"}" && problem "profile job not done" 409 job-not-ready /profile_id
post /v1/validations "{\"profile_id\":\"$QUEUED\",\"algorithm\":\"sqrt\"}" &&
    problem "validation of a queued profile" 409 job-not-ready /profile_id

# Media type, size, method, route, ids.
req POST /v1/plans -H 'Content-Type: text/plain' --data-binary "{\"profile\":$P4}" &&
    problem "text/plain body" 415 unsupported-media-type
req POST /v1/plans --data-binary "{\"profile\":$P4}" && problem "form-encoded body" 415 unsupported-media-type
req POST /v1/plans -H 'Content-Type:' --data-binary "{\"profile\":$P4}" && problem "no content type" 415 unsupported-media-type
head -c 9437184 /dev/zero | tr '\0' ' ' >"$T/9mib"
req POST /v1/plans -H "$J" --data-binary @"$T/9mib" && problem "9 MiB body (Content-Length)" 413 body-too-large
req POST /v1/plans -H "$J" -H 'Transfer-Encoding: chunked' --data-binary @"$T/9mib" &&
    problem "9 MiB chunked body" 413 body-too-large
# An unparseable Content-Length is refused by MHD itself (its own text).
req POST /v1/plans -H "$J" -H 'Content-Length: 99999999999999999999999'
case $CODE in 400 | 413) ok ;; *) fail "absurd Content-Length: $CODE" ;; esac
HOSTILE=$((HOSTILE + 1))
req DELETE /v1/plans && problem "DELETE /v1/plans" 405 method-not-allowed
[ "$(header Allow)" = POST ] && ok || fail "Allow on /v1/plans: $(header Allow)"
req PUT /healthz && problem "PUT /healthz" 405 method-not-allowed
[ "$(header Allow)" = "GET, HEAD" ] && ok || fail "Allow on /healthz: $(header Allow)"
req POST "/v1/plans/0123456789abcdef0123456789abcdef" -H "$J" -d '{}' && problem "POST to a plan" 405 method-not-allowed
req GET /v2/plans && problem "unknown route" 404 not-found
req GET /v1/plans && problem "GET the plan collection" 405 method-not-allowed
req GET /v1/plans/../../../etc/passwd --path-as-is && problem "path traversal" 404 not-found
req GET /v1/plans/..%2F..%2Fetc%2Fpasswd && problem "encoded path traversal" 404 not-found
req GET "/v1/plans/0123456789ABCDEF0123456789ABCDEF" && problem "upper-case id" 404 not-found
req GET "/v1/plans/0123456789abcdef0123456789abcdef0" && problem "33-character id" 404 not-found
req GET "/v1/plans/0123456789abcdef0123456789abcdef'%20OR%201=1" && problem "SQL in an id" 404 not-found
req GET "/v1/plans/0123456789abcdef0123456789abcdef" && problem "unknown plan" 404 not-found
req GET "/v1/profiles/0123456789abcdef0123456789abcdef" && problem "unknown profile job" 404 not-found
req GET "/v1/validations/$QUEUED" && problem "a profile job read as a validation" 404 not-found
req GET "/v1/plans/0123456789abcdef0123456789abcdef/timeline.svg/x" && problem "path under the svg" 404 not-found

# Idempotency-Key misuse.
post /v1/plans "{\"algorithm\":\"sqrt\",\"profile\":$P4}" -H 'Idempotency-Key: k-hostile'
post /v1/plans "{\"algorithm\":\"store-all\",\"profile\":$P4}" -H 'Idempotency-Key: k-hostile' &&
    problem "Idempotency-Key with another body" 422 idempotency-key-reused
LONG=$(printf 'k%.0s' $(seq 1 300))
post /v1/plans "{\"profile\":$P4}" -H "Idempotency-Key: $LONG" && problem "Idempotency-Key of 300 bytes" 400 invalid-idempotency-key

# Profile and validation jobs.
post /v1/profiles '{"model":"resnet9000","device":"cpu"}' && problem "unknown zoo model" 400 validation /model
post /v1/profiles '{"model":"resnet18","layers":[{"type":"relu"}]}' && problem "model and layers" 400 validation /layers
post /v1/profiles '{"layers":[{"type":"relu"},{"type":"warp_drive"}],"input_shape":[4]}' &&
    problem "unknown layer type" 400 validation /layers/1/type
post /v1/profiles '{"layers":[{"type":"conv2d","out_channels":-3}],"input_shape":[3,8,8]}' &&
    problem "negative channels" 400 validation /layers/0/out_channels
post /v1/profiles '{"model":"resnet18","batch_size":0}' && problem "batch_size 0" 400 validation /batch_size
post /v1/profiles '{"model":"resnet18","batch_size":1e9}' && problem "batch_size a real" 400 validation /batch_size
post /v1/profiles '{"model":"resnet18","device":"tpu:0"}' && problem "unknown device" 400 validation /device
post /v1/profiles '{"model":"resnet18","input_shape":[3,-224,224]}' && problem "negative shape" 400 validation /input_shape
post /v1/profiles '{"model":"resnet18","model_options":{"layers":2}}' && problem "model_options on a CNN" 400 validation /model_options
post /v1/profiles '{"model":"gpt","model_options":{"layers":10001}}' &&
    problem "more gpt layers than the zoo allows" 400 validation /model_options/layers
post /v1/profiles '{"model":"gpt","model_options":{"depth":3}}' &&
    problem "unknown gpt option" 400 validation /model_options/depth
post /v1/validations '{"algorithm":"sqrt"}' && problem "validation without profile" 400 validation /profile_id

# Worker routes.
post /v1/worker/lease '{"worker_id":"w"}' && problem "lease without devices" 400 validation /devices
post /v1/worker/lease '{"worker_id":"w","kinds":["mining"],"devices":["cpu"]}' && problem "unknown kind" 400 validation /kinds/0
post /v1/worker/lease '{"worker_id":"w","kinds":["profile"],"devices":["cpu"]}'
JOB=$(field job_id)
LEASE=$(field lease_id)
post "/v1/worker/jobs/$JOB/heartbeat" '{"lease_id":"ffffffffffffffffffffffffffffffff"}' &&
    problem "heartbeat with another lease" 409 lease-conflict
post "/v1/worker/jobs/$JOB/heartbeat" "{\"lease_id\":\"$LEASE\",\"progress\":{\"stage\":9,\"stages\":3}}" &&
    problem "progress past the end" 400 validation /progress/stages
post "/v1/worker/jobs/$JOB/complete" "{\"lease_id\":\"$LEASE\",\"result\":{\"input_bytes\":1,\"stages\":[{\"out_bytes\":-1}]}}" &&
    problem "a profile result with a negative size" 400 validation /result/stages/0/out_bytes
post "/v1/worker/jobs/0123456789abcdef0123456789abcdef/fail" "{\"lease_id\":\"$LEASE\",\"reason\":\"x\"}" &&
    problem "fail an unknown job" 404 not-found
post "/v1/worker/jobs/$JOB/fail" "{\"lease_id\":\"$LEASE\"}" && problem "fail without a reason" 400 validation /reason
post "/v1/worker/jobs/$JOB/release" '{"lease_id":"nope"}' && problem "release with a malformed lease id" 400 validation /lease_id

# A header block over MHD's memory limit: MHD itself answers 431 (its own
# text, not problem+json).
BIG=$(head -c 70000 /dev/zero | tr '\0' a)
req GET /healthz -H "X-Big: $BIG"
case $CODE in 431 | 413 | 400) ok ;; *) fail "70 kB header: $CODE" ;; esac
HOSTILE=$((HOSTILE + 1))

# Still alive and answering after all that.
req GET /healthz && expect 200
post /v1/plans "{\"algorithm\":\"sqrt\",\"profile\":$P4}" && expect 201
schema_check "$T/problems"
stop_rematd

# Auth, a lower stage cap and a short connection timeout on a second server.
REMAT_TOKEN=client-secret REMAT_WORKER_TOKEN=worker-secret start_rematd --max-stages 10 --connection-timeout 1
post /v1/plans "{\"algorithm\":\"sqrt\",\"profile\":$P4}" && problem "no token" 401 unauthorized
[ -n "$(header WWW-Authenticate)" ] && ok || fail "401 without WWW-Authenticate"
post /v1/plans "{\"algorithm\":\"sqrt\",\"profile\":$P4}" -H 'Authorization: Bearer client-secreT' &&
    problem "wrong token" 401 unauthorized
post /v1/plans "{\"algorithm\":\"sqrt\",\"profile\":$P4}" -H 'Authorization: Basic Y2xpZW50LXNlY3JldA==' &&
    problem "basic auth" 401 unauthorized
req GET /v1/models -H 'Authorization: Bearer worker-secret' && problem "worker token on a client route" 401 unauthorized
post /v1/worker/lease '{"worker_id":"w","devices":["cpu"]}' -H 'Authorization: Bearer client-secret' &&
    problem "client token on a worker route" 401 unauthorized
post /v1/worker/lease '{"worker_id":"w","devices":["cpu"]}' -H 'Authorization: Bearer worker-secret' && expect 204
post /v1/plans "{\"algorithm\":\"sqrt\",\"profile\":$(profile 11)}" -H 'Authorization: Bearer client-secret' &&
    problem "11 stages over --max-stages 10" 400 limit-exceeded /profile/stages
post /v1/plans "{\"algorithm\":\"sqrt\",\"profile\":$P4}" -H 'Authorization: Bearer client-secret' && expect 201
req GET /healthz && expect 200
req GET /metrics && expect 200
# A client that sends half a request and stalls is dropped after the timeout.
"$PYTHON" - "$PORT" <<'PY' && ok || fail "a stalled connection was not closed by --connection-timeout"
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"POST /v1/plans HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n")
# --connection-timeout 1: closed after about a second; without it the
# request deadline (30 s) would be the first to act.  10 s of margin for a
# loaded machine.
s.settimeout(15)
t = time.time()
try:
    data = s.recv(100)
except socket.timeout:
    sys.exit(1)
sys.exit(0 if time.time() - t < 10 else 1)
PY
HOSTILE=$((HOSTILE + 1))
stop_rematd
echo "$HOSTILE hostile or malformed requests answered as expected"
[ "$HOSTILE" -ge 30 ] || fail "fewer than 30 hostile requests"
finish
