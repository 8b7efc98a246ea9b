#!/bin/sh
# Stored plans and Idempotency-Key records within their bytes and age
# (issue 24, item 6), on the store the run is given (SQLite here;
# PostgreSQL and two replicas under tests/api/postgresql.sh):
# - --max-store-bytes 65536: 160 plans of ~1 KB each, some with a key, go
#   past it; the oldest plan and the oldest key are deleted (GET 404, the
#   key answered as new), the newest plan and key are kept, and the
#   deletion is logged.
# - --plan-ttl 2: a plan is 404 once it is older than 2 s; one made after
#   it is still there.
. "$(dirname "$0")/lib.sh"
P=$(profile 12)

plan_get_is() { # ID STATUS
    req GET "/v1/plans/$1"
    [ "$CODE" = "$2" ]
}

start_rematd --max-store-bytes 65536 --plan-ttl 0
post /v1/plans "{\"profile\":$P,\"budget_bytes\":100000000}" -H 'Idempotency-Key: first' &&
    expect 201 /v1/plans
FIRST=$(field id)
i=1
while [ $i -lt 160 ]; do
    if [ $((i % 4)) = 0 ]; then
        post /v1/plans "{\"profile\":$P,\"budget_bytes\":$((100000000 + i))}" -H "Idempotency-Key: k$i"
    else
        post /v1/plans "{\"profile\":$P,\"budget_bytes\":$((100000000 + i))}"
    fi
    [ "$CODE" = 201 ] || fail "plan $i: $CODE $(head -c 200 "$BODY")"
    i=$((i + 1))
done
ok
post /v1/plans "{\"profile\":$P,\"budget_bytes\":99999999}" -H 'Idempotency-Key: last' &&
    expect 201 /v1/plans
LAST=$(field id)
# A pass runs within a minute (sooner after a burst): polled, not slept.
if until_true 90 plan_get_is "$FIRST" 404; then ok; else
    fail "the oldest plan is still there past --max-store-bytes: $CODE"
fi
problem "an evicted plan" 404 not-found
plan_get_is "$LAST" 200 && ok || fail "the newest plan was deleted: $CODE"
grep -q '"msg":"store bounds: oldest rows deleted"' "$T/rematd.log" && ok ||
    fail "the deletion was not logged"
# The oldest key is gone with its plan: the same request makes a new plan;
# the newest key still replays its plan.
post /v1/plans "{\"profile\":$P,\"budget_bytes\":100000000}" -H 'Idempotency-Key: first' &&
    expect 201 /v1/plans
[ "$(field id)" != "$FIRST" ] && [ -z "$(header Idempotent-Replayed)" ] && ok ||
    fail "an evicted key replayed: $(field id) $(header Idempotent-Replayed)"
post /v1/plans "{\"profile\":$P,\"budget_bytes\":99999999}" -H 'Idempotency-Key: last'
[ "$(field id)" = "$LAST" ] && [ "$(header Idempotent-Replayed)" = true ] && ok ||
    fail "the newest key did not replay: $CODE $(field id) $(header Idempotent-Replayed)"
# Fewer plans than were made are kept, and more than none.
KEPT=0
i=0
for id in $(grep -ho '"id":"[0-9a-f]\{32\}"' "$T"/r*.body | sort -u | cut -d'"' -f4); do
    req GET "/v1/plans/$id"
    [ "$CODE" = 200 ] && KEPT=$((KEPT + 1))
    i=$((i + 1))
done
[ "$KEPT" -gt 10 ] && [ "$KEPT" -lt "$i" ] && ok || fail "kept $KEPT of $i plans"
echo "kept $KEPT of $i plans under --max-store-bytes 65536"
stop_rematd

start_rematd --plan-ttl 2
post /v1/plans "{\"profile\":$P}" && expect 201 /v1/plans
OLD=$(field id)
plan_get_is "$OLD" 200 && ok || fail "a new plan is not there: $CODE"
sleep 1
post /v1/plans "{\"profile\":$P,\"budget_bytes\":100000001}" && expect 201 /v1/plans
if until_true 30 plan_get_is "$OLD" 404; then ok; else
    fail "a plan older than --plan-ttl 2 is still there: $CODE"
fi
stop_rematd
finish
