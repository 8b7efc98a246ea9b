#!/bin/sh
# Operations: flags that are refused rather than bent, worker
# authentication beyond loopback, signals, one rematd per data directory,
# and supervised workers that die with rematd, hold only the worker token
# and are never doubled by an orphan.  Each check failed before its fix
# (issue 13, items 3, 5 and 7, and the flag audit).
. "$(dirname "$0")/lib.sh"

refused() { # want-in-stderr cmd...: exits 2 and says why
    want=$1
    shift
    if "$@" >"$T/out" 2>"$T/err"; then
        fail "accepted: $*"
    elif ! grep -q -- "$want" "$T/err"; then
        fail "$*: no '$want' in: $(cat "$T/err")"
    else
        ok
    fi
}

# ---- flags: out of range, or not what they say ----
for spec in 1.2.3:8080 127.0.0.1:99999 127.0.0.1:-1 127.0.0.1: 127.0.0.1:8x ::1:8080 \
    '[::1:8080' '[zz]:80' 127.0.0.1:+80; do
    refused "--listen" "$REMATD" --listen "$spec" --print-config
done
"$REMATD" --listen '[::1]:0' --print-config >/dev/null && ok || fail "[::1]:0 refused"
"$REMATD" --listen localhost:0 --print-config >/dev/null && ok || fail "localhost:0 refused"
# A token too long to keep was dropped: every route was then open.
long=$(head -c 300 /dev/zero | tr '\0' a)
REMAT_TOKEN=$long refused "REMAT_TOKEN" "$REMATD" --print-config
REMAT_WORKER_TOKEN="a b" refused "REMAT_WORKER_TOKEN" "$REMATD" --print-config
refused "--lease-seconds" "$REMATD" --lease-seconds 1 --print-config
refused "--max-connections" "$REMATD" --threads 16 --max-connections 8 --print-config
# A worker program named but missing: refused at start, not restarted
# forever nor replaced by another program.
refused "--worker-path /nonexistent" "$REMATD" --workers 1 --worker-path /nonexistent \
    --data-dir "$T/d0" --listen 127.0.0.1:0
for f in max-queued-plans max-queued-jobs max-idempotency-keys solve-timeout-ms \
    solve-memory-bytes drain-seconds wal-limit-bytes; do
    refused "--$f" "$REMATD" "--$f" 0 --print-config
    "$REMATD" --help | grep -q -- "--$f" && ok || fail "--help does not list --$f"
done

# ---- workers authenticated beyond loopback ----
refused "REMAT_WORKER_TOKEN" "$REMATD" --listen 0.0.0.0:0 --data-dir "$T/d1"
[ -e "$T/d1/rematd.db" ] && fail "refused, yet the store was created" || ok
fake_workers
# With supervised workers and no REMAT_WORKER_TOKEN, a token is made for
# them: they lease, an anonymous client does not, and neither REMAT_TOKEN
# reaches them.
rm -f "$T/port"
REMAT_TOKEN=ctok "$REMATD" --listen 0.0.0.0:0 --data-dir "$T/data" --port-file "$T/port" \
    --workers 1 --worker-path "$T/remat-worker" 2>>"$T/rematd.log" &
PID=$!
i=0
while [ ! -s "$T/port" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
PORT=$(cat "$T/port")
BASE="http://127.0.0.1:$PORT"
wait_for '^start' 1 && ok || fail "no worker started: $(cat "$T/rematd.log")"
grep -q "^start .* lease=204 client_token= socket=.*/workers/rematd.sock$" "$FAKE_WORKER_LOG" && ok ||
    fail "the supervised worker could not lease, or got REMAT_TOKEN: $(cat "$FAKE_WORKER_LOG")"
post /v1/worker/lease '{"worker_id":"x","devices":["cpu"]}'
[ "$CODE" = 401 ] && ok || fail "anonymous lease beyond loopback: $CODE"
post /v1/worker/lease '{"worker_id":"x","devices":["cpu"]}' -H 'Authorization: Bearer ctok'
[ "$CODE" = 401 ] && ok || fail "the clients' token leased a job: $CODE"

# ---- signals: logged, and rematd keeps serving ----
# Each signal's line is waited for (the main thread logs it when it next
# runs), then rematd must still be there.
for s in HUP USR1 USR2; do
    case $s in
    USR1) line='"msg":"status".*"jobs_queued"' ;;
    *) line="\"msg\":\"signal ignored\".*\"SIG$s\"" ;;
    esac
    kill -s "$s" "$PID"
    until_true 10 grep -q "$line" "$T/rematd.log" && ok || fail "SIG$s not logged"
    kill -0 "$PID" 2>/dev/null && ok || fail "SIG$s killed rematd"
done
req GET /healthz && expect 200

# ---- one rematd per data directory ----
"$REMATD" --listen 127.0.0.1:0 --data-dir "$T/data" 2>"$T/second.log" &
stops_refusing $! "a second rematd on the same data directory" "$T/second.log" \
    "in use by another rematd (pid $PID)"

# ---- a supervised worker dies with rematd, even with kill -9 ----
wpid=$(awk '/^start/ {print $2}' "$FAKE_WORKER_LOG" | tail -1)
kill -9 "$PID"
wait "$PID" 2>/dev/null
PID=
i=0
while kill -0 "$wpid" 2>/dev/null && [ $i -lt 40 ]; do sleep 0.05; i=$((i + 1)); done
kill -0 "$wpid" 2>/dev/null && fail "worker $wpid outlived a kill -9 of rematd" || ok
kill -9 "$wpid" 2>/dev/null

# ---- an orphan holding a device slot is found and not doubled ----
# The orphan: a process holding slot 0's lock, as a worker of a rematd
# that died without taking it along would (flock(1) keeps the lock).
mkdir -p "$T/data/workers"
: >"$FAKE_WORKER_LOG"
flock "$T/data/workers/slot-0.lock" sleep 60 &
orphan=$!
i=0
while [ $i -lt 50 ] && ! [ -e "/proc/$orphan" ]; do sleep 0.05; i=$((i + 1)); done
sleep 0.2
# flock(1) forks sleep: the lock holder is the sleep, whose pid the lock
# file names.
holder=$(pgrep -P "$orphan" sleep || echo "$orphan")
echo "$holder" >"$T/data/workers/slot-0.lock"
REMAT_WORKER_TOKEN=wtok start_rematd --workers 1 --worker-path "$T/remat-worker"
wait_for '^start' 1 && ok || fail "the slot was not started after the orphan"
grep -q '"msg":"orphan worker holds a device slot".*"pid":'"$holder" "$T/rematd.log" && ok ||
    fail "the orphan was not logged: $(grep orphan "$T/rematd.log")"
kill -0 "$holder" 2>/dev/null && fail "the orphan $holder still runs beside the new worker" || ok
[ "$(grep -c '^start' "$FAKE_WORKER_LOG")" = 1 ] && ok || fail "slot 0 doubled"
stop_rematd
wait "$orphan" 2>/dev/null

# ---- supervised workers reach rematd where it listens ----
# (They were always sent to 127.0.0.1, where nothing listened when rematd
# was on [::1] or on one outside address.)
if grep -q '^00000000000000000000000000000001' /proc/net/if_inet6 2>/dev/null; then
    : >"$FAKE_WORKER_LOG"
    start_rematd --listen '[::1]:0' --workers 1 --worker-path "$T/remat-worker"
    wait_for '^start' 1 && ok || fail "no worker on [::1]"
    grep -q "^start .* http://\[::1\]:$PORT lease=204" "$FAKE_WORKER_LOG" && ok ||
        fail "the worker of a rematd on [::1] did not reach it: $(cat "$FAKE_WORKER_LOG")"
    stop_rematd
fi

# ---- a port file that cannot be written stops rematd ----
"$REMATD" --listen 127.0.0.1:0 --data-dir "$T/d2" --port-file "$T/no/such/dir/port" \
    2>"$T/pf.log" &
stops_refusing $! "a port file that cannot be written" "$T/pf.log" \
    '"msg":"cannot write the port file"'

# ---- the real worker exits when its parent pipe closes ----
# (PR_SET_PDEATHSIG covers rematd's death too; the pipe is the second
# line, and the one that does not depend on which thread forked.)
W=$top_builddir/worker/remat-worker
if [ -x "$W" ]; then
    mkfifo "$T/parent"
    REMAT_PARENT_FD=3 "$W" --server http://127.0.0.1:9 --device cpu 3<"$T/parent" \
        2>"$T/worker.log" &
    wp=$!
    exec 4>"$T/parent"
    sleep 2
    kill -0 "$wp" 2>/dev/null && ok || fail "the worker did not run: $(cat "$T/worker.log")"
    exec 4>&-
    i=0
    while kill -0 "$wp" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    if kill -0 "$wp" 2>/dev/null; then
        fail "the worker outlived its parent pipe"
        kill -9 "$wp"
    else
        ok
        grep -q "parent pipe closed" "$T/worker.log" && ok || fail "worker: $(cat "$T/worker.log")"
    fi
    wait "$wp" 2>/dev/null
fi

finish
