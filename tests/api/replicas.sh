#!/bin/sh
# Two rematd replicas on one PostgreSQL database (issue 16, items 2 and 4),
# run by tests/api/postgresql.sh: a plan posted to one is read from the
# other byte for byte; two replicas receiving one Idempotency-Key and body
# at once make one plan and one job; jobs are leased exactly once by
# workers asking both replicas at once; a model uploaded to one is served
# by the other; a replica killed with kill -9 mid-lease has its job put
# back by the other's expiry, counted once; PostgreSQL restarted under load
# gives 503 and /readyz 503 while away, loses nothing acknowledged, and the
# replicas recover by themselves; PostgreSQL stopped for longer than the
# lease expires the lease once when it is back.
. "$(dirname "$0")/lib.sh"
if [ -z "${REMAT_TEST_PG:-}" ] || [ "$REPLICAS" -lt 2 ]; then
    echo "skipped: needs REMAT_TEST_PG and REMAT_TEST_REPLICAS=2 (tests/api/postgresql.sh sets them)"
    exit 77
fi
[ -n "${PGT:-}" ] && . "$(dirname "$0")/pg_server.sh"
export REMAT_WORKER_TOKEN=wtok
AUTH="Authorization: Bearer wtok"
LEASE_S=3
# A long lease first, so that no lease runs out while the workers below
# take all the jobs on a loaded machine; the short one for the expiries.
start_rematd --lease-seconds 600 --max-attempts 5
P=$(profile 12)
sql() { psql -q -X -t -A -d "$STORE_URI" -c "$1"; }

# ---- a plan from one replica, read from the other ----
curl -s -o "$T/plan1" -H 'Content-Type: application/json' \
    --data-binary "{\"profile\":$P,\"algorithm\":\"sqrt\"}" "$BASE1/v1/plans"
ID=$(sed -n 's/.*"id":"\([0-9a-f]\{32\}\)".*/\1/p' "$T/plan1")
curl -s -o "$T/plan2" "$BASE2/v1/plans/$ID"
[ -n "$ID" ] && cmp -s "$T/plan1" "$T/plan2" && ok || fail "plan $ID differs on the second replica"

# ---- one Idempotency-Key on both replicas at once: one plan, one job ----
before=$(sql "SELECT count(*) FROM plans")
round=0
while [ $round -lt 10 ]; do
    round=$((round + 1))
    pids=
    for r in 1 2; do
        b=$(base_of $r)
        curl -s -o "$T/k$round.$r" -w '%{http_code}\n' -H 'Content-Type: application/json' \
            -H "Idempotency-Key: both-$round" --data-binary "{\"profile\":$P}" \
            "$b/v1/plans" >"$T/k$round.$r.code" &
        pids="$pids $!"
    done
    for p in $pids; do wait "$p"; done
done
codes=$(cat "$T"/k*.code | sort -u | tr '\n' ' ')
[ "$codes" = "201 " ] && ok || fail "one key on two replicas: statuses $codes"
same=0
round=0
while [ $round -lt 10 ]; do
    round=$((round + 1))
    cmp -s "$T/k$round.1" "$T/k$round.2" && same=$((same + 1))
done
[ $same = 10 ] && ok || fail "one key on two replicas: $((10 - same)) of 10 answers differ"
after=$(sql "SELECT count(*) FROM plans")
[ $((after - before)) = 10 ] && ok || fail "10 keys on two replicas made $((after - before)) plans"
# ---- many overlapping keys on both replicas at once ----
# Each replica's group commit takes many keyed plans in one transaction, in
# the order they came; the two replicas get the same keys in opposite
# orders, so their batches wait on each other's keys.  No client may see
# the database's answer to that (a deadlock, or a key taken between a
# replica's look and its insert): every request is a 201, the same bytes
# for one key whichever replica answered, and one plan per key.
before=$(sql "SELECT count(*) FROM plans")
"$PYTHON" - "$BASE1" "$BASE2" "$P" "$T/overlap" <<'PY'
import http.client, random, sys, threading, urllib.parse
bases, profile, out = sys.argv[1:3], sys.argv[3], sys.argv[4]
ROUNDS, KEYS = 12, 16
body = ('{"profile":%s}' % profile).encode()
answers, codes, lock = {}, {}, threading.Lock()
start = threading.Barrier(2 * KEYS)
def client(base, slot, orders):
    u = urllib.parse.urlsplit(base)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    for rnd in range(ROUNDS):
        k = "overlap-%d-%d" % (rnd, orders[rnd][slot])
        start.wait()
        c.request("POST", "/v1/plans", body, {"Content-Type": "application/json",
                                              "Idempotency-Key": k})
        r = c.getresponse()
        data = r.read()
        with lock:
            codes[r.status] = codes.get(r.status, 0) + 1
            answers.setdefault(k, set()).add(data)
    c.close()
# Every round, each key once to each replica, all at once: the replicas'
# batches hold the same keys in their own orders.
orders = [[random.sample(range(KEYS), KEYS) for _ in range(ROUNDS)] for _ in bases]
threads = [threading.Thread(target=client, args=(base, slot, orders[r]))
           for r, base in enumerate(bases) for slot in range(KEYS)]
for t in threads: t.start()
for t in threads: t.join()
differ = sum(1 for v in answers.values() if len(v) != 1)
with open(out, "w") as f:
    f.write("%s %d %d\n" % (",".join("%d:%d" % kv for kv in sorted(codes.items())),
                            len(answers), differ))
PY
read -r codes nkeys differ <"$T/overlap"
[ "$codes" = "201:384" ] && ok || fail "overlapping keys on two replicas: statuses $codes"
[ "$nkeys" = 192 ] && [ "$differ" = 0 ] && ok ||
    fail "overlapping keys: $differ of $nkeys keys answered differently"
after=$(sql "SELECT count(*) FROM plans")
[ $((after - before)) = 192 ] && ok || fail "192 overlapping keys made $((after - before)) plans"
pids=
for r in 1 2; do
    curl -s -o "$T/j.$r" -H 'Content-Type: application/json' -H 'Idempotency-Key: job-both' \
        --data-binary '{"model":"resnet101","device":"cpu"}' "$(base_of $r)/v1/profiles" &
    pids="$pids $!"
done
for p in $pids; do wait "$p"; done
[ "$(sql "SELECT count(*) FROM jobs WHERE kind = 'profile'")" = 1 ] && cmp -s "$T/j.1" "$T/j.2" &&
    ok || fail "one key for a job on two replicas: $(sql "SELECT count(*) FROM jobs") jobs"

# ---- leases: each job once, workers asking both replicas at once ----
sql "DELETE FROM jobs" >/dev/null
k=0
while [ $k -lt 12 ]; do
    k=$((k + 1))
    post /v1/profiles "{\"model\":\"alexnet\",\"batch_size\":$k,\"device\":\"cpu\"}" && expect 202
done
worker() { # N: leases until none is left, one job id a line
    n=$1
    b=$(base_of "$n")
    while :; do
        code=$(curl -s -o "$T/w$n.body" -w '%{http_code}' -H 'Content-Type: application/json' \
            -H "$AUTH" --data-binary "{\"worker_id\":\"w$n\",\"kinds\":[\"profile\"],\"devices\":[\"cpu\"]}" \
            "$b/v1/worker/lease")
        [ "$code" = 200 ] || break
        # The body ends with no newline, and so would sed's line.
        echo "$(sed -n 's/.*"job_id":"\([0-9a-f]*\)".*/\1/p' "$T/w$n.body")"
    done >"$T/leased.$n"
}
pids=
for n in 1 2 3 4; do
    worker $n &
    pids="$pids $!"
done
for p in $pids; do wait "$p"; done
total=$(cat "$T"/leased.* | wc -l)
uniq=$(cat "$T"/leased.* | sort -u | wc -l)
[ "$total" = 12 ] && [ "$uniq" = 12 ] && ok ||
    fail "4 workers on 2 replicas leased $total jobs, $uniq distinct, of 12"
[ "$(sql "SELECT count(*) FROM jobs WHERE status = 'running' AND attempts = 0")" = 12 ] && ok ||
    fail "leased jobs: $(sql "SELECT status, attempts, count(*) FROM jobs GROUP BY 1, 2")"

# ---- a model uploaded to one replica, served by the other ----
"$PYTHON" - "$T/m.pt" <<'PY'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_STORED) as z:
    z.writestr("net/code/__torch__/net.py", "class Net(Module):\n  pass\n")
    z.writestr("net/data.pkl", b"\x80\x02}q\x00.")
    z.writestr("net/version", "3\n")
    z.writestr("net/data/0", os.urandom(3 << 20))
PY
code=$(curl -s -o "$T/up" -w '%{http_code}' -H 'Content-Type: application/octet-stream' \
    --data-binary "@$T/m.pt" "$BASE1/v1/models")
MID=$(sed -n 's/.*"id":"\([0-9a-f]\{32\}\)".*/\1/p' "$T/up")
[ "$code" = 201 ] && ok || fail "model upload: $code $(head -c 300 "$T/up")"
code=$(curl -s -o "$T/got.pt" -w '%{http_code}' -H "$AUTH" "$BASE2/v1/worker/models/$MID")
[ "$code" = 200 ] && cmp -s "$T/m.pt" "$T/got.pt" && ok ||
    fail "the model from the other replica: $code, $(wc -c <"$T/got.pt") bytes"
curl -s -o /dev/null -w '%{http_code}' "$BASE2/v1/models/$MID" | grep -q 200 && ok ||
    fail "model record not on the other replica"

# ---- a replica killed with kill -9 mid-lease ----
stop_rematd
start_rematd --lease-seconds $LEASE_S --max-attempts 5
sql "DELETE FROM jobs" >/dev/null
curl -s -o "$T/jk" -H 'Content-Type: application/json' \
    --data-binary '{"model":"vgg11","device":"cpu"}' "$BASE1/v1/profiles"
JK=$(sed -n 's/.*"id":"\([0-9a-f]\{32\}\)".*/\1/p' "$T/jk")
code=$(curl -s -o "$T/lk" -w '%{http_code}' -H 'Content-Type: application/json' -H "$AUTH" \
    --data-binary '{"worker_id":"doomed","kinds":["profile"],"devices":["cpu"]}' "$BASE2/v1/worker/lease")
[ "$code" = 200 ] && ok || fail "lease on the second replica: $code"
kill -9 "$PID2"
wait "$PID2" 2>/dev/null
PID2=
# The first replica's expiry puts it back once the lease has run out:
# polled, up to the lease and a few seconds of housekeeping.
i=0
st=
while [ $i -lt $((LEASE_S * 10 + 100)) ]; do
    st=$(curl -s "$BASE1/v1/profiles/$JK" | sed -n 's/.*"status":"\([a-z]*\)".*/\1/p')
    [ "$st" = queued ] && break
    sleep 0.1
    i=$((i + 1))
done
[ "$st" = queued ] && ok || fail "job of the killed replica is $st, not queued again"
[ "$(sql "SELECT attempts || ' ' || expiries FROM jobs WHERE id = '$JK'")" = "1 1" ] && ok ||
    fail "expiry counted: $(sql "SELECT attempts, expiries FROM jobs WHERE id = '$JK'")"
stop_rematd

# ---- PostgreSQL restarted under load ----
if [ -n "${PGT:-}" ]; then
    start_rematd --lease-seconds $LEASE_S --max-attempts 5
    printf '{"algorithm":"sqrt","profile":%s}' "$P" >"$T/plan.json"
    : >"$T/acked"
    client() { # K: posts plans for a while, both replicas, recording 201s
        k=$1
        i=0
        while [ $i -lt 300 ]; do
            i=$((i + 1))
            b=$(base_of $((k + i)))
            code=$(curl -s -m 20 -o "$T/c$k.$i" -w '%{http_code}' -H 'Content-Type: application/json' \
                --data-binary @"$T/plan.json" "$b/v1/plans")
            if [ "$code" = 201 ]; then
                echo "$(sed -n 's/.*"id":"\([0-9a-f]\{32\}\)".*/\1/p' "$T/c$k.$i") $T/c$k.$i" >>"$T/ack.$k"
            else
                echo "$code" >>"$T/other.$k"
            fi
            [ -f "$T/stop" ] && break
        done
    }
    client 1 & c1=$!
    client 2 & c2=$!
    n=0
    while [ "$(cat "$T"/ack.* 2>/dev/null | wc -l)" -lt 20 ] && [ $n -lt 400 ]; do sleep 0.05; n=$((n + 1)); done
    pg_halt
    # While it is away: 503 for a plan, /readyz 503, on both replicas.
    code=$(curl -s -o "$T/away" -w '%{http_code}' -H 'Content-Type: application/json' \
        --data-binary @"$T/plan.json" "$BASE1/v1/plans")
    [ "$code" = 503 ] && ok || fail "plan with PostgreSQL away: $code"
    for b in "$BASE1" "$BASE2"; do
        i=0
        while [ $i -lt 50 ]; do
            code=$(curl -s -o /dev/null -w '%{http_code}' "$b/readyz")
            [ "$code" = 503 ] && break
            sleep 0.1
            i=$((i + 1))
        done
        [ "$code" = 503 ] && ok || fail "/readyz with PostgreSQL away: $code ($b)"
    done
    pg_run
    # Back by themselves: /readyz 200 on both, with no restart of rematd.
    for b in "$BASE1" "$BASE2"; do
        i=0
        while [ $i -lt 150 ]; do
            code=$(curl -s -o /dev/null -w '%{http_code}' "$b/readyz")
            [ "$code" = 200 ] && break
            sleep 0.1
            i=$((i + 1))
        done
        [ "$code" = 200 ] && ok || fail "/readyz after PostgreSQL came back: $code ($b)"
    done
    touch "$T/stop"
    wait $c1 $c2
    rm -f "$T/stop"
    cat "$T"/ack.* >"$T/acked"
    total=$(wc -l <"$T/acked")
    bad=0
    while read -r id file; do
        code=$(curl -s -o "$T/got" -w '%{http_code}' "$(base_of $bad)/v1/plans/$id")
        if [ "$code" != 200 ] || ! cmp -s "$T/got" "$file"; then
            bad=$((bad + 1))
        fi
    done <"$T/acked"
    [ "$total" -ge 20 ] && [ $bad = 0 ] && ok ||
        fail "PostgreSQL restart: $bad of $total acknowledged plans lost"
    echo "PostgreSQL restart under load: $total plans acknowledged, $bad lost," \
        "$(cat "$T"/other.* 2>/dev/null | grep -c 503) answered 503"
    code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
        --data-binary @"$T/plan.json" "$BASE2/v1/plans")
    [ "$code" = 201 ] && ok || fail "plan after PostgreSQL came back: $code"

    # ---- PostgreSQL stopped for longer than the lease ----
    sql "DELETE FROM jobs" >/dev/null
    curl -s -o "$T/jp" -H 'Content-Type: application/json' \
        --data-binary '{"model":"vgg16","device":"cpu"}' "$BASE1/v1/profiles"
    JP=$(sed -n 's/.*"id":"\([0-9a-f]\{32\}\)".*/\1/p' "$T/jp")
    curl -s -o "$T/lp" -H 'Content-Type: application/json' -H "$AUTH" \
        --data-binary '{"worker_id":"cut-off","kinds":["profile"],"devices":["cpu"]}' "$BASE2/v1/worker/lease"
    LP=$(sed -n 's/.*"lease_id":"\([0-9a-f]*\)".*/\1/p' "$T/lp")
    pg_halt
    # The worker's heartbeat cannot be recorded: 503, not a lease it keeps.
    code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' -H "$AUTH" \
        --data-binary "{\"lease_id\":\"$LP\"}" "$BASE1/v1/worker/jobs/$JP/heartbeat")
    [ "$code" = 503 ] && ok || fail "heartbeat with PostgreSQL away: $code"
    sleep $((LEASE_S + 1))
    pg_run
    i=0
    st=
    while [ $i -lt 150 ]; do
        st=$(curl -s "$BASE2/v1/profiles/$JP" | sed -n 's/.*"status":"\([a-z]*\)".*/\1/p')
        [ "$st" = queued ] && break
        sleep 0.1
        i=$((i + 1))
    done
    [ "$st" = queued ] && ok || fail "lease past its end while PostgreSQL was away: $st"
    [ "$(sql "SELECT attempts || ' ' || expiries FROM jobs WHERE id = '$JP'")" = "1 1" ] && ok ||
        fail "expiry after the outage: $(sql "SELECT attempts, expiries FROM jobs WHERE id = '$JP'")"
    code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' -H "$AUTH" \
        --data-binary "{\"lease_id\":\"$LP\"}" "$BASE1/v1/worker/jobs/$JP/heartbeat")
    [ "$code" = 409 ] && ok || fail "the cut-off worker's lease after the outage: $code, not 409"
    stop_rematd
fi
finish
