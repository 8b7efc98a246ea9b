#!/bin/sh
# Durability: rematd is killed with SIGKILL in the middle of a storm of
# plan requests from four concurrent clients; after a restart on the same
# data directory, every plan that was acknowledged (201) is readable with
# exactly the body that was answered, and every acknowledged job is still
# there in its state (queued stays queued, the leased one is running).
# Then the same storm ends with SIGTERM: exit 0, nothing acknowledged lost.
. "$(dirname "$0")/lib.sh"
start_rematd
P=$(profile 12)
printf '{"algorithm":"sqrt","profile":%s}' "$P" >"$T/plan.json"

# Jobs first: five queued, one of them leased.
: >"$T/jobs"
for m in alexnet vgg11 resnet18 resnet50 gpt; do
    post /v1/profiles "{\"model\":\"$m\",\"device\":\"cpu\"}" && expect 202
    field id >>"$T/jobs"
done
post /v1/worker/lease '{"worker_id":"w","kinds":["profile"],"devices":["cpu"]}' && expect 200
LEASED=$(field job_id)

# client K: posts plans until the server goes away, recording each
# acknowledged plan (id and body).
client() {
    k=$1
    i=0
    while [ $i -lt 400 ]; do
        i=$((i + 1))
        code=$(curl -s -o "$T/c$k.$i" -w '%{http_code}' -H 'Content-Type: application/json' \
            --data-binary @"$T/plan.json" "$BASE/v1/plans") || break
        [ "$code" = 201 ] || break
        id=$(sed -n 's/.*"id":"\([0-9a-f]\{32\}\)".*/\1/p' "$T/c$k.$i")
        echo "$id $T/c$k.$i" >>"$T/ack.$k"
    done
}

storm() { # signal
    : >"$T/ack.1"; : >"$T/ack.2"; : >"$T/ack.3"; : >"$T/ack.4"
    client 1 & c1=$!
    client 2 & c2=$!
    client 3 & c3=$!
    client 4 & c4=$!
    # Let some plans through, then kill in mid-flight.
    n=0
    while [ "$(cat "$T"/ack.* | wc -l)" -lt 40 ] && [ $n -lt 200 ]; do sleep 0.05; n=$((n + 1)); done
    kill "-$1" "$PID"
    wait "$PID"
    RC=$?
    PID=
    wait $c1 $c2 $c3 $c4
    cat "$T"/ack.* >"$T/acked"
}

check_acked() { # label
    total=$(wc -l <"$T/acked")
    [ "$total" -ge 40 ] && ok || fail "$1: only $total plans acknowledged before the kill"
    bad=0
    while read -r id file; do
        code=$(curl -s -o "$T/got" -w '%{http_code}' "$BASE/v1/plans/$id")
        if [ "$code" != 200 ] || ! cmp -s "$T/got" "$file"; then
            bad=$((bad + 1))
            [ $bad -le 3 ] && echo "  lost or changed: $id ($code)"
        fi
    done <"$T/acked"
    [ $bad = 0 ] && ok || fail "$1: $bad of $total acknowledged plans lost"
    echo "$1: $total acknowledged plans, $bad lost"
}

storm KILL
[ "$RC" = 137 ] && ok || fail "rematd was not killed by SIGKILL (status $RC)"
start_rematd
check_acked "kill -9"
while read -r id; do
    req GET "/v1/profiles/$id" && expect 200
    want=queued
    [ "$id" = "$LEASED" ] && want=running
    [ "$(field status)" = "$want" ] && ok || fail "job $id is $(field status) after kill -9, not $want"
done <"$T/jobs"

storm TERM
[ "$RC" = 0 ] && ok || fail "rematd exited $RC on SIGTERM under load, not 0"
start_rematd
check_acked "SIGTERM"
req GET /readyz && expect 200
stop_rematd
finish
