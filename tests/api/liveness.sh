#!/bin/sh
# A long solve does not stall the server: planning runs on the planning
# threads (api/pool.c), not on the HTTP polling threads, so while the only
# planning thread spends a second or more on a min-time table (200 stages,
# 2000 memory slots),
# /healthz and GET of a stored plan still answer at once (each within 0.5 s
# here, far above their usual milliseconds and below the solve),
# and a quick plan queued behind the long one still gets its 201.  One
# polling thread, so that the test can tell: planned on the polling thread,
# as before, every probe would wait for the whole solve (with more polling
# threads, the connections already kept alive on the busy one would).
. "$(dirname "$0")/lib.sh"
start_rematd --threads 1 --plan-threads 1
post /v1/plans "{\"algorithm\":\"sqrt\",\"profile\":$(profile 8)}" && expect 201 /v1/plans
STORED=$(field id)
profile 200 >"$T/big.json"
printf '{"algorithm":"min-time","budget_bytes":200000000,"mem_slots":2000,"profile":%s}' \
    "$(cat "$T/big.json")" >"$T/slow.json"
start=$(date +%s%N)
curl -s -o "$T/slow.out" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary @"$T/slow.json" "$BASE/v1/plans" >"$T/slow.code" &
slow=$!
sleep 0.3
for k in 1 2 3 4 5; do
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 0.5 "$BASE/healthz") || code=timeout
    [ "$code" = 200 ] && ok || fail "healthz $k during the long solve: $code"
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 0.5 "$BASE/v1/plans/$STORED") || code=timeout
    [ "$code" = 200 ] && ok || fail "GET plan $k during the long solve: $code"
done
# Still solving? Then the probes above really ran beside it.
if kill -0 "$slow" 2>/dev/null; then ok; else
    echo "note: the long solve ended before the probes did; they prove less on this machine"
fi
post /v1/plans "{\"algorithm\":\"sqrt\",\"profile\":$(profile 8)}" && expect 201 /v1/plans
wait "$slow"
[ "$(cat "$T/slow.code")" = 201 ] && ok || fail "the long solve: $(cat "$T/slow.code") $(head -c 300 "$T/slow.out")"
end=$(date +%s%N)
echo "long solve and probes: $(( (end - start) / 1000000 )) ms"
stop_rematd
finish
