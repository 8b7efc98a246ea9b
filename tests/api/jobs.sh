#!/bin/sh
# The job lifecycle with a scripted fake worker (curl) on a server with a
# short lease and 3 attempts: lease, heartbeat, complete; a lease that
# expires goes back to queued with the attempt counted, and the third
# expiry fails the job with "lease expired 3 times"; a retryable failure
# requeues, a final one fails with its reason; release does not count; a
# stale lease is refused (409) after expiry; Idempotency-Key replays, also
# to concurrent requests with one key (on two replicas, with
# REMAT_TEST_REPLICAS=2: tests/api/postgresql.sh).
#
# Every wait is derived from the lease (JOBS_LEASE_SECONDS, 4 by default)
# and polls for the state it waits for: on a loaded machine a fixed sleep
# either ends before the writer thread has expired the lease, or lets a
# heartbeat come too late.
. "$(dirname "$0")/lib.sh"
LEASE_S=${JOBS_LEASE_SECONDS:-4}
start_rematd --lease-seconds "$LEASE_S" --max-attempts 3
W='{"worker_id":"fake-1","kinds":["profile"],"devices":["cpu"]}'

status_of() { req GET "/v1/profiles/$1"; field status; }
lease() {
    post /v1/worker/lease "$W"
    JOB=$(field job_id)
    LEASE=$(field lease_id)
    ATTEMPT=$(field attempt)
}
now() { date +%s.%N; }
# since T0: seconds since T0 (a now() value).
since() { echo "$(now) $1" | awk '{printf "%.2f", $1 - $2}'; }
# until_status JOB STATUS: polls until the job has STATUS; a lease lapses
# within its length and the writer thread expires it within a second
# more, so the wait is bounded by the lease plus a margin for a loaded
# machine.
until_status() {
    limit=$((LEASE_S * 3 + 30))
    t0=$(now)
    while [ "$(status_of "$1")" != "$2" ]; do
        if [ "$(echo "$(since "$t0") $limit" | awk '{print ($1 > $2)}')" = 1 ]; then
            fail "job $1 not $2 after $limit s: $(head -c 300 "$BODY")"
            return 1
        fi
        sleep 0.2
    done
}

# Expiry: lease, let it lapse, the job is queued again with one attempt.
post /v1/profiles '{"model":"vgg11","device":"cpu"}' && expect 202 /v1/profiles
J1=$(field id)
lease
[ "$JOB" = "$J1" ] && [ "$ATTEMPT" = 1 ] && ok || fail "first lease: $JOB attempt $ATTEMPT"
# Heartbeats keep the lease alive past its length: one every quarter lease
# for one and a half leases.  Each heartbeat is timed from the answer to the
# previous one; a gap over the lease (a stalled machine, not rematd) is
# reported as such rather than as a lease that rematd let lapse.
hb_sleep=$(echo "$LEASE_S" | awk '{printf "%.2f", $1 / 4}')
t_start=$(now)
t_last=$t_start
while [ "$(echo "$(since "$t_start") $LEASE_S" | awk '{print ($1 < $2 * 1.5)}')" = 1 ]; do
    sleep "$hb_sleep"
    post "/v1/worker/jobs/$J1/heartbeat" "{\"lease_id\":\"$LEASE\",\"progress\":{\"stage\":1,\"stages\":10,\"phase\":\"measuring\"}}"
    gap=$(since "$t_last")
    t_last=$(now)
    if [ "$CODE" != 200 ] && [ "$(echo "$gap $LEASE_S" | awk '{print ($1 >= $2)}')" = 1 ]; then
        fail "the machine stalled $gap s between heartbeats, past the $LEASE_S s lease (JOBS_LEASE_SECONDS)"
        break
    fi
    expect 200 '/v1/worker/jobs/{id}/heartbeat' || break
done
[ "$(status_of "$J1")" = running ] && ok || fail "heartbeats did not keep the job running"
OLD=$LEASE
# No more heartbeats: the writer thread expires the lease (it looks once a
# second).
until_status "$J1" queued && ok
req GET "/v1/profiles/$J1" && expect 200 '/v1/profiles/{id}'
[ "$(field status)" = queued ] && [ "$(field attempts)" = 1 ] && ok ||
    fail "after expiry: status $(field status), attempts $(field attempts)"
post "/v1/worker/jobs/$J1/heartbeat" "{\"lease_id\":\"$OLD\"}" && problem "heartbeat after expiry" 409 lease-conflict
post "/v1/worker/jobs/$J1/complete" "{\"lease_id\":\"$OLD\",\"result\":$(job_profile 29 vgg11 1 fp32 cpu)}" &&
    problem "complete after expiry" 409 lease-conflict
# Two more expiries: failed with the reason.
lease
[ "$ATTEMPT" = 2 ] && ok || fail "second lease attempt $ATTEMPT"
until_status "$J1" queued && ok
lease
[ "$JOB" = "$J1" ] && [ "$ATTEMPT" = 3 ] && ok || fail "third lease: $JOB attempt $ATTEMPT"
until_status "$J1" failed && ok
post /v1/worker/lease "$W" && expect 204 /v1/worker/lease
req GET "/v1/profiles/$J1"
[ "$(field status)" = failed ] && [ "$(field error)" = "lease expired 3 times" ] && [ "$(field attempts)" = 3 ] &&
    ok || fail "after 3 expiries: $(head -c 400 "$BODY")"

# Retryable failure requeues (attempt counted); a final failure keeps its reason.
post /v1/profiles '{"model":"vgg16","device":"cpu"}'
J2=$(field id)
lease
post "/v1/worker/jobs/$J2/fail" "{\"lease_id\":\"$LEASE\",\"reason\":\"CUDA error: out of memory\",\"retryable\":true}" &&
    expect 200 '/v1/worker/jobs/{id}/fail'
req GET "/v1/profiles/$J2"
[ "$(field status)" = queued ] && [ "$(field attempts)" = 1 ] && ok || fail "retryable failure: $(cat "$BODY")"
lease
post "/v1/worker/jobs/$J2/release" "{\"lease_id\":\"$LEASE\"}" && expect 200 '/v1/worker/jobs/{id}/release'
req GET "/v1/profiles/$J2"
[ "$(field status)" = queued ] && [ "$(field attempts)" = 1 ] && ok || fail "release counted an attempt: $(cat "$BODY")"
post "/v1/worker/jobs/$J2/release" "{\"lease_id\":\"$LEASE\"}" && problem "release twice" 409 lease-conflict
lease
[ "$ATTEMPT" = 2 ] && ok || fail "attempt after release $ATTEMPT"
post "/v1/worker/jobs/$J2/fail" "{\"lease_id\":\"$LEASE\",\"reason\":\"model does not build: bad layer\",\"retryable\":false}" &&
    expect 200 '/v1/worker/jobs/{id}/fail'
req GET "/v1/profiles/$J2"
[ "$(field status)" = failed ] && [ "$(field error)" = "model does not build: bad layer" ] && ok ||
    fail "final failure: $(head -c 300 "$BODY")"
! grep -q '"problem"' "$BODY" && ok || fail "a failure other than an op refusal has a problem"
# The worker's refusal of an operator (worker/opcheck.cpp's form) is also a
# 422 problem naming the op, the method and the submodule.
post /v1/profiles '{"model":"vgg11","device":"cpu","batch_size":3}'
J5=$(field id)
lease
OPWHY="the model calls aten::from_file in method forward of submodule 'layers.3': it opens and maps a file (remat's operator allow-list refuses it: docs/security.md, Operators)"
post "/v1/worker/jobs/$J5/fail" "{\"lease_id\":\"$LEASE\",\"reason\":\"$OPWHY\",\"retryable\":false}" &&
    expect 200 '/v1/worker/jobs/{id}/fail'
req GET "/v1/profiles/$J5" && expect 200 '/v1/profiles/{id}'
[ "$JOB" = "$J5" ] && [ "$(field status)" = failed ] &&
    [ "$(field type)" = /problems/op-not-allowed ] && grep -q '"status":422' "$BODY" &&
    [ "$(field op)" = aten::from_file ] && [ "$(field method)" = forward ] &&
    [ "$(field submodule)" = layers.3 ] && [ "$(field detail)" = "$OPWHY" ] &&
    [ "$(field title)" = "Operator not allowed" ] && ok ||
    fail "an op refusal's problem: $(head -c 600 "$BODY")"
# The model's own method: submodule "".
post /v1/profiles '{"model":"vgg11","device":"cpu","batch_size":5}'
J6=$(field id)
lease
OPWHY="the model calls prim::fork in method forward of the model: it runs a task on another thread (torch.jit.fork) (remat's operator allow-list refuses it: docs/security.md, Operators)"
post "/v1/worker/jobs/$J6/fail" "{\"lease_id\":\"$LEASE\",\"reason\":\"$OPWHY\",\"retryable\":false}"
req GET "/v1/profiles/$J6"
[ "$(field op)" = prim::fork ] && [ "$(field method)" = forward ] &&
    grep -q '"submodule":""' "$BODY" && ok || fail "an op refusal in the root: $(head -c 600 "$BODY")"
# Retryable failures past max attempts fail the job with the last reason.
post /v1/profiles '{"model":"vgg19","device":"cpu"}'
J3=$(field id)
for i in 1 2 3; do
    lease
    post "/v1/worker/jobs/$J3/fail" "{\"lease_id\":\"$LEASE\",\"reason\":\"flaky $i\",\"retryable\":true}"
done
req GET "/v1/profiles/$J3"
[ "$(field status)" = failed ] && [ "$(field error)" = "flaky 3" ] && ok || fail "retryable x3: $(head -c 300 "$BODY")"
# A completion is accepted once.
post /v1/profiles '{"model":"alexnet","device":"cpu"}'
J4=$(field id)
lease
post "/v1/worker/jobs/$J4/complete" "{\"lease_id\":\"$LEASE\",\"result\":$(job_profile 21 alexnet 1 fp32 cpu)}" && expect 200 '/v1/worker/jobs/{id}/complete'
post "/v1/worker/jobs/$J4/complete" "{\"lease_id\":\"$LEASE\",\"result\":$(job_profile 21 alexnet 1 fp32 cpu | sed 's/"s21"/"second"/')}" && problem "second completion" 409 lease-conflict
req GET "/v1/profiles/$J4"
[ "$(field status)" = done ] && grep -q '"name":"s21"' "$BODY" && ! grep -q '"name":"second"' "$BODY" && ok ||
    fail "the first completion must stand"

# Idempotency-Key: same key and body → the first answer, no second job.
BODY1='{"model":"resnet50","batch_size":16,"device":"cuda:0"}'
post /v1/profiles "$BODY1" -H 'Idempotency-Key: 7f9c-1' && expect 202 /v1/profiles
FIRST=$(field id)
cp "$BODY" "$T/first"
post /v1/profiles "$BODY1" -H 'Idempotency-Key: 7f9c-1' && expect 202 /v1/profiles
[ "$(field id)" = "$FIRST" ] && cmp -s "$BODY" "$T/first" && ok || fail "replay differs: $(cat "$BODY")"
[ "$(header Idempotent-Replayed)" = true ] && [ "$(header Location)" = "/v1/profiles/$FIRST" ] &&
    [ "$(header Retry-After)" = 2 ] && ok || fail "replay headers: $(tr -d '\r' <"$HDRS")"
post /v1/profiles '{"model":"resnet50","batch_size":17,"device":"cuda:0"}' -H 'Idempotency-Key: 7f9c-1' &&
    problem "same key, other body" 422 idempotency-key-reused
# The same key on another route is another key.
post /v1/plans "{\"algorithm\":\"sqrt\",\"profile\":$(profile 4)}" -H 'Idempotency-Key: 7f9c-1' && expect 201 /v1/plans
PLAN=$(field id)
post /v1/plans "{\"algorithm\":\"sqrt\",\"profile\":$(profile 4)}" -H 'Idempotency-Key: 7f9c-1' && expect 201 /v1/plans
[ "$(field id)" = "$PLAN" ] && ok || fail "plan replay made a new plan $(field id)"
# Concurrent duplicates with one key: one job.
pids=
for i in 1 2 3 4 5 6; do
    curl -s -o "$T/c$i" -H 'Content-Type: application/json' -H 'Idempotency-Key: burst' \
        --data-binary '{"model":"resnet101","device":"cpu"}' "$(base_of $i)/v1/profiles" &
    pids="$pids $!"
done
for p in $pids; do wait "$p"; done
ids=$(for i in 1 2 3 4 5 6; do sed -n 's/.*"id":"\([0-9a-f]*\)".*/\1/p' "$T/c$i"; done | sort -u | wc -l)
[ "$ids" = 1 ] && ok || fail "6 concurrent POSTs with one key made $ids jobs"
# And plans: each answer is the one plan's 201, whether the key was found
# before planning or only when the group commit came to record it.
pids=
for i in 1 2 3 4 5 6 7 8; do
    curl -s -o "$T/p$i" -w '%{http_code}\n' -H 'Content-Type: application/json' \
        -H 'Idempotency-Key: plan-burst' --data-binary "{\"profile\":$(profile 6)}" \
        "$(base_of $i)/v1/plans" >"$T/p$i.code" &
    pids="$pids $!"
done
for p in $pids; do wait "$p"; done
codes=$(cat "$T"/p?.code | sort -u | tr '\n' ' ')
bodies=$(for i in 1 2 3 4 5 6 7 8; do cksum <"$T/p$i"; done | sort -u | wc -l)
[ "$codes" = "201 " ] && [ "$bodies" = 1 ] && ok ||
    fail "8 concurrent plans with one key: statuses $codes, $bodies different bodies"
req GET /metrics
# J1, J2, J3, and the two op refusals J5 and J6.
grep -q 'remat_jobs{state="failed"} 5' "$BODY" && ok || fail "metrics: 5 failed jobs"
schema_check "$T/manifest"
stop_rematd
finish
