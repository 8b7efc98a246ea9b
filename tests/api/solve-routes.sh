#!/bin/sh
# Every solve rematd runs has the bounds of POST /v1/plans (solve-limits.sh),
# not only that route's: POST /v1/validations with an algorithm and GET
# /v1/plans/{id}/timeline.svg solve too.  Before, they called the solver
# directly: a min-time validation of 1,000 stages ran for tens of seconds
# on a polling thread (stalling the connections it held, health included),
# a table over --solve-memory-bytes was built anyway, and a client that
# hung up still got its solve.
# - validation: 422 solve-deadline, 422 solve-memory, the solve stopped when
#   its client hangs up, and /healthz answers while it runs (one polling
#   thread: the solve is on a planning thread).
# - timeline: its sqrt(n) line is solved under --solve-memory-bytes too.
. "$(dirname "$0")/lib.sh"

# A profile job of 300 layers, completed by hand as a worker would, with
# slow_profile's stages (lib.sh): min-time on them at 1,400 slots solves for
# seconds (a 1,000-stage chain of repeats, as this test had, now solves in
# well under one, docs/min-time.md).
layers=$(i=0; while [ $i -lt 300 ]; do [ $i -gt 0 ] && printf ','; printf '{"type":"relu"}'; i=$((i + 1)); done)
printf '{"layers":[%s],"input_shape":[4],"batch_size":1,"device":"cpu"}' "$layers" >"$T/job.json"
slow_profile | sed 's/^{/{"model":"layers","batch_size":1,"dtype":"fp32","device":"cpu",/' >"$T/result.json"

start_rematd --threads 1 --solve-timeout-ms 400 --solve-memory-bytes 524288000 --drain-seconds 1
req POST /v1/profiles -H 'Content-Type: application/json' --data-binary @"$T/job.json" && expect 202
PJ=$(field id)
post /v1/worker/lease '{"worker_id":"w","devices":["cpu"]}' && expect 200
LEASE=$(field lease_id)
printf '{"lease_id":"%s","result":%s}' "$LEASE" "$(cat "$T/result.json")" >"$T/complete.json"
req POST "/v1/worker/jobs/$PJ/complete" -H 'Content-Type: application/json' \
    --data-binary @"$T/complete.json" && expect 200
post /v1/plans "{\"profile_id\":\"$PJ\",\"algorithm\":\"min-peak\"}" && expect 201
least=$(field peak_bytes)
budget=$((least + least / 10))
SLOW="{\"profile_id\":\"$PJ\",\"algorithm\":\"min-time\",\"budget_bytes\":$budget,\"mem_slots\":1400}"

# ---- validation: the deadline ----
t0=$(date +%s)
post /v1/validations "$SLOW"
t1=$(date +%s)
problem "a min-time validation past its deadline" 422 solve-deadline
[ $((t1 - t0)) -le 5 ] && ok || fail "the deadline answer took $((t1 - t0)) s"
req GET /metrics
grep -q '^remat_jobs{state="queued"} 0$' "$BODY" && ok || fail "a validation job was queued anyway"

# ---- validation: memory, checked before solving ----
post /v1/validations "{\"profile_id\":\"$PJ\",\"algorithm\":\"min-time\",\"budget_bytes\":$budget,\"mem_slots\":100000}"
problem "a validation table over --solve-memory-bytes" 422 solve-memory

# ---- a quick validation solve still queues its job ----
post /v1/validations "{\"profile_id\":\"$PJ\",\"algorithm\":\"sqrt\"}" && expect 202 /v1/validations
stop_rematd

# ---- validation: the polling thread is free, and a client that hangs up
# stops the solve ----
start_rematd --threads 1 --solve-timeout-ms 60000 --drain-seconds 1
# The sqrt validation above is the one job queued.
curl -s -o /dev/null --max-time 30 -H 'Content-Type: application/json' --data "$SLOW" \
    "$BASE/v1/validations" &
held=$!
# In flight beside the /metrics request that asks: the validation has
# arrived; half a second more and its solve (tens of seconds) is running.
i=0
until curl -s "$BASE/metrics" | grep -q '^remat_in_flight_requests \([2-9]\|[1-9][0-9]\)$' ||
    [ $i -ge 100 ]; do
    sleep 0.1
    i=$((i + 1))
done
sleep 0.5
t0=$(date +%s)
req GET /healthz --max-time 10
t1=$(date +%s)
expect 200 && [ $((t1 - t0)) -le 2 ] && ok ||
    fail "/healthz took $((t1 - t0)) s during a validation solve (one polling thread)"
kill "$held" 2>/dev/null
wait "$held" 2>/dev/null
i=0
until grep -q '"msg":"solve canceled: the client went away"' "$T/rematd.log" || [ $i -ge 100 ]; do
    sleep 0.1
    i=$((i + 1))
done
grep -q '"msg":"solve canceled: the client went away"' "$T/rematd.log" && ok ||
    fail "the validation solve ran on after its client hung up"
req GET /metrics
grep -q '^remat_jobs{state="queued"} 1$' "$BODY" && ok ||
    fail "the canceled validation queued a job: $(grep '^remat_jobs{state="queued"}' "$BODY")"

# ---- timeline: the sqrt(n) line is solved under the memory bound ----
profile 2100 >"$T/p2100.json"
printf '{"algorithm":"store-all","profile":%s}' "$(cat "$T/p2100.json")" >"$T/plan2100.json"
req POST /v1/plans -H 'Content-Type: application/json' --data-binary @"$T/plan2100.json" && expect 201
PLAN=$(field id)
req GET "/v1/plans/$PLAN/timeline.svg" && expect 200
stop_rematd
# 2,100 stages take over 1 MiB by remat_solve_memory_bound (512 bytes a stage).
start_rematd --solve-memory-bytes 1048576
req GET "/v1/plans/$PLAN/timeline.svg"
problem "a timeline whose solve is over --solve-memory-bytes" 422 solve-memory
req GET /healthz && expect 200
stop_rematd
finish
