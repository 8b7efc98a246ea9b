#!/bin/sh
# Storage faults fail loudly, and queues have bounds (issue 13, items 5
# and 8): a removed data directory, a disk that refuses writes and a
# damaged database each make rematd say so (503, /readyz 503, the real
# SQLite error in the log, a refusal to start); the WAL is cut back after a
# burst; the job queue and the Idempotency-Key records are bounded.
. "$(dirname "$0")/lib.sh"

plans() { # n: posts n plans, stops at the first non-201; sets CODE
    k=0
    while [ "$k" -lt "$1" ]; do
        post /v1/plans "{\"profile\":$P,\"algorithm\":\"min-peak\"}"
        [ "$CODE" = 201 ] || return 0
        k=$((k + 1))
    done
}
P=$(profile 64)
# A small TorchScript-shaped archive: an upload's file fits any disk here,
# so only the store's write can fail.
model_zip() { # FILE: one per call (its digest, and so its id, differs)
    "$PYTHON" - "$1" <<'PY'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_STORED) as z:
    z.writestr("net/code/__torch__/net.py", "class Net(Module):\n  pass\n")
    z.writestr("net/data.pkl", b"\x80\x02}q\x00.")
    z.writestr("net/version", "3\n")
    z.writestr("net/data/0", os.urandom(1000))
PY
}
upload() { # FILE
    req POST /v1/models -H Content-Type:application/octet-stream --data-binary "@$1"
}

# ---- the data directory removed under a running rematd ----
start_rematd
plans 1 && expect 201
rm -rf "$T/data"
post /v1/plans "{\"profile\":$P}"
problem "plan after rm -rf" 503 unavailable
post /v1/profiles '{"model":"alexnet","device":"cpu"}'
problem "job after rm -rf" 503 unavailable
req GET /readyz
[ "$CODE" = 503 ] && ok || fail "/readyz after rm -rf: $CODE"
grep -q '"msg":"data directory lost"' "$T/rematd.log" && ok || fail "no log line for the lost directory"
kill -TERM "$PID"
wait "$PID" && fail "exit 0 after losing the data directory" || ok
PID=

# ---- the database file removed, its folder kept: a model's record ----
# The upload's file still lands in models/, but its record would go into
# the unlinked database and vanish at exit: refused like every write.
rm -rf "$T/data"
: >"$T/rematd.log"
start_rematd
model_zip "$T/m1.pt"
upload "$T/m1.pt" && expect 201
rm -f "$T/data/rematd.db"
model_zip "$T/m2.pt"
upload "$T/m2.pt"
problem "model upload with the database removed" 503 unavailable
req GET /readyz
[ "$CODE" = 503 ] && ok || fail "/readyz after the database was removed: $CODE"
req DELETE "/v1/models/$(sha256sum "$T/m1.pt" | cut -c1-32)"
problem "model delete with the database removed" 503 unavailable
grep -q '"msg":"data directory lost"' "$T/rematd.log" && ok || fail "no log line for the lost database"
stop_rematd_kill

# ---- a disk that refuses writes (RLIMIT_FSIZE: write(2) fails) ----
: >"$T/rematd.log"
rm -f "$T/port"
(
    trap '' XFSZ
    ulimit -S -f 1024 # 512 KiB in dash's 512-byte blocks (the soft limit, so it can be lifted)
    exec "$REMATD" --listen 127.0.0.1:0 --data-dir "$T/data" --port-file "$T/port"
) 2>>"$T/rematd.log" &
PID=$!
i=0
while [ ! -s "$T/port" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
PORT=$(cat "$T/port")
BASE="http://127.0.0.1:$PORT"
plans 400
problem "plan on a full disk" 503 unavailable
req GET /readyz
[ "$CODE" = 503 ] && ok || fail "/readyz with writes failing: $CODE"
# A small write may still fit (the WAL starts again from its beginning
# after a checkpoint, under the file size limit): then the job is accepted,
# and it must be stored for real. Otherwise it is refused.
post /v1/profiles '{"model":"alexnet","device":"cpu"}'
LATE_JOB=
case $CODE in
503) problem "a job with writes failing" 503 unavailable ;;
202) LATE_JOB=$(field id) ;;
*) fail "a job with writes failing: $CODE, want 503, or 202 and stored" ;;
esac
grep -q '"msg":"store write failed"' "$T/rematd.log" && ok || fail "no store write failed line"
grep -q 'cannot rollback\|cannot commit - no transaction' "$T/rematd.log" &&
    fail "the log hides the real error: $(grep -m1 'cannot' "$T/rematd.log")" || ok
grep '"msg":"store write failed"' "$T/rematd.log" | grep -q 'I/O\|full' && ok ||
    fail "not SQLite's error: $(grep -m1 'store write failed' "$T/rematd.log")"
# A model's record goes the same way: 503, and SQLite's error in the log.
# As for the job above, the small write may fit once a checkpoint has let
# the WAL start again (1 run in 3 on a loaded machine): then it is
# accepted, and must be stored for real.
model_zip "$T/m3.pt"
upload "$T/m3.pt"
LATE_MODEL=
case $CODE in
503)
    problem "model upload on a full disk" 503 unavailable
    grep '"msg":"store write failed"' "$T/rematd.log" | grep '"op":"[A-Z]* model"' |
        grep -q 'I/O\|full' && ok || fail "a model's failed write not logged with SQLite's error"
    ;;
201) LATE_MODEL=$(field id) ;;
*) fail "model upload on a full disk: $CODE, want 503, or 201 and stored" ;;
esac
# Space again: ready within a few seconds without a request to try.
if command -v prlimit >/dev/null 2>&1; then
    prlimit --pid "$PID" --fsize=unlimited:unlimited
    # The writer probes in each quiet second: polled, with room for a
    # loaded machine.
    ready() { req GET /readyz; [ "$CODE" = 200 ]; }
    until_true 30 ready && ok || fail "/readyz stayed $CODE once writes worked again"
    plans 1 && expect 201
fi
stop_rematd_kill
if [ -n "$LATE_JOB$LATE_MODEL" ]; then
    start_rematd
    if [ -n "$LATE_JOB" ]; then
        req GET "/v1/profiles/$LATE_JOB"
        [ "$CODE" = 200 ] && ok || fail "a job accepted (202) with writes failing is lost: $CODE"
    fi
    if [ -n "$LATE_MODEL" ]; then
        req GET "/v1/models/$LATE_MODEL"
        [ "$CODE" = 200 ] && ok || fail "a model accepted (201) with writes failing is lost: $CODE"
    fi
    stop_rematd_kill
fi

# ---- a database damaged mid-file does not start ----
rm -rf "$T/data"
: >"$T/rematd.log"
start_rematd
plans 40
stop_rematd
size=$(wc -c <"$T/data/rematd.db")
[ "$size" -gt 65536 ] && ok || fail "database too small to damage: $size"
head -c 16384 /dev/urandom | dd of="$T/data/rematd.db" bs=16384 seek=2 conv=notrunc 2>/dev/null
"$REMATD" --listen 127.0.0.1:0 --data-dir "$T/data" 2>"$T/damaged.log" &
# quick_check reads the whole file: polled, with room for a loaded machine.
stops_refusing $! "a damaged database" "$T/damaged.log" 'damaged (PRAGMA quick_check'


# ---- the WAL is cut back after a burst ----
rm -rf "$T/data"
start_rematd --wal-limit-bytes 1048576
j=0
while [ $j -lt 8 ]; do
    (
        k=0
        while [ $k -lt 40 ]; do
            curl -s -o /dev/null -H 'Content-Type: application/json' \
                --data-binary "{\"profile\":$P,\"algorithm\":\"min-peak\"}" "$BASE/v1/plans"
            k=$((k + 1))
        done
    ) &
    j=$((j + 1))
done
wait_children=$(jobs -p | grep -v "^$PID$")
for c in $wait_children; do wait "$c"; done
# Cut back in a quiet second of the writer: polled.
wal_small() {
    w=$(wc -c <"$T/data/rematd.db-wal" 2>/dev/null || echo 0)
    [ "$w" -le 1048576 ]
}
until_true 30 wal_small
[ "$w" -le 1048576 ] && ok || fail "WAL still $w bytes after the burst (limit 1 MiB)"
stop_rematd

# ---- bounded queues ----
rm -rf "$T/data"
start_rematd --max-queued-jobs 3 --max-idempotency-keys 2
for m in alexnet vgg11 vgg16; do
    post /v1/profiles "{\"model\":\"$m\",\"device\":\"cpu\"}" && expect 202
done
post /v1/profiles '{"model":"vgg19","device":"cpu"}'
problem "job past --max-queued-jobs" 503 queue-full
[ -n "$(header Retry-After)" ] && ok || fail "queue full without Retry-After"
post /v1/plans "{\"profile\":$P}" -H 'Idempotency-Key: k1' && expect 201
post /v1/plans "{\"profile\":$P}" -H 'Idempotency-Key: k2' && expect 201
post /v1/plans "{\"profile\":$P}" -H 'Idempotency-Key: k3'
problem "a key past --max-idempotency-keys" 503 queue-full
[ -n "$(header Retry-After)" ] && ok || fail "keys full without Retry-After"
post /v1/plans "{\"profile\":$P}" -H 'Idempotency-Key: k1'
[ "$CODE" = 201 ] && [ "$(header Idempotent-Replayed)" = true ] && ok ||
    fail "a known key is not replayed when the records are full: $CODE"
post /v1/plans "{\"profile\":$P}" && expect 201
stop_rematd

finish
