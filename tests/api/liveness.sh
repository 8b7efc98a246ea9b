#!/bin/sh
# A long solve does not stall the server: planning runs on the planning
# threads (api/pool.c) whenever it can take long, not on the HTTP polling
# threads, so while the only planning thread spends seconds on a min-time
# table (slow_profile's 300 stages at 1,400 memory slots, lib.sh: about
# 11 s on a 2-core machine, cut here at --solve-timeout-ms 8000; the
# 1,000-stage chain this test had now plans in well under a second,
# docs/min-time.md), /healthz and GET of a
# stored plan still answer at once (each within 2 s here, far above their
# usual milliseconds and far below the solve), and a quick plan still gets
# its 201.  One polling thread, so that the test can tell: planned on the
# polling thread, as before, every probe would wait for the whole solve
# (with more polling threads, the connections already kept alive on the
# busy one would).  The probes start once the solve has (its memory is
# reserved), not after a fixed sleep.
. "$(dirname "$0")/lib.sh"
start_rematd --threads 1 --plan-threads 1 --solve-timeout-ms 8000
post /v1/plans "{\"algorithm\":\"sqrt\",\"profile\":$(profile 8)}" && expect 201 /v1/plans
STORED=$(field id)
slow_profile >"$T/big.json"
printf '{"algorithm":"min-peak","profile":%s}' "$(cat "$T/big.json")" >"$T/peak.json"
req POST /v1/plans -H 'Content-Type: application/json' --data-binary @"$T/peak.json" && expect 201
least=$(field peak_bytes)
printf '{"algorithm":"min-time","budget_bytes":%s,"mem_slots":1400,"profile":%s}' \
    $((least + least / 10)) "$(cat "$T/big.json")" >"$T/slow.json"
start=$(date +%s%N)
curl -s -o "$T/slow.out" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary @"$T/slow.json" "$BASE/v1/plans" >"$T/slow.code" &
slow=$!
until_true 30 solving && ok || fail "the long solve never started"
for k in 1 2 3 4 5; do
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$BASE/healthz") || code=timeout
    [ "$code" = 200 ] && ok || fail "healthz $k during the long solve: $code"
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$BASE/v1/plans/$STORED") || code=timeout
    [ "$code" = 200 ] && ok || fail "GET plan $k during the long solve: $code"
done
# Still solving? Then the probes above really ran beside it.
if solving; then ok; else
    echo "note: the long solve ended before the probes did; they prove less on this machine"
fi
post /v1/plans "{\"algorithm\":\"sqrt\",\"profile\":$(profile 8)}" && expect 201 /v1/plans
wait "$slow"
# A body over 64 KiB is read on a planning thread too (1000 stages): its
# 201, and the GET of it byte for byte; and a problem found there is sent.
printf '{"profile":%s}' "$(profile 1000)" >"$T/big1000.json"
req POST /v1/plans -H 'Content-Type: application/json' --data-binary @"$T/big1000.json" &&
    expect 201 /v1/plans
cp "$BODY" "$T/big1000.out"
req GET "/v1/plans/$(field id)"
cmp -s "$BODY" "$T/big1000.out" && ok || fail "GET of the 1000-stage plan differs from its 201"
sed 's/"out_bytes":4194304/"out_bytes":-1/' "$T/big1000.json" >"$T/bad1000.json"
req POST /v1/plans -H 'Content-Type: application/json' --data-binary @"$T/bad1000.json"
problem "negative size in a large body" 400 validation /profile/stages/2/out_bytes
# The long solve: planned, or cut at its deadline; never anything else.
case $(cat "$T/slow.code") in
201) ok ;;
422) grep -q solve-deadline "$T/slow.out" && ok || fail "the long solve: $(head -c 300 "$T/slow.out")" ;;
*) fail "the long solve: $(cat "$T/slow.code") $(head -c 300 "$T/slow.out")" ;;
esac
end=$(date +%s%N)
echo "long solve and probes: $(( (end - start) / 1000000 )) ms"
stop_rematd
finish
