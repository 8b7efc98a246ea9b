#!/bin/sh
# The load-and-fault test (not in make check; `make soak`, SOAK_SECONDS,
# default 600): rematd on loopback with one supervised CPU remat-worker,
# under mixed traffic for SOAK_SECONDS (tests/api/soak.py: plans, profile
# and validation jobs, idle and slowloris connections, the worker killed
# every SOAK_KILL_EVERY seconds, a disk-full episode).  Then rematd is
# killed with SIGKILL and restarted on its data directory, and:
# - every acknowledged write is there: each plan answered 201 reads back
#   byte for byte, each job answered 202 exists;
# - /healthz answered 200 within 5 s every half second throughout;
# - RSS and open descriptors are flat: their median over the last quarter
#   is within 25% + 8 MiB (RSS) and 10 descriptors of the median over the
#   second quarter (after warm-up, before the disk-full episode);
# - no answer outside the contract (soak.py lists any).
# The figures are printed, and kept in $SOAK_OUT when set.
. "$(dirname "$0")/lib.sh"
SECONDS_=${SOAK_SECONDS:-600}
KILL_EVERY=${SOAK_KILL_EVERY:-60}
W=${REMAT_WORKER:-$top_builddir/worker/remat-worker}
if [ ! -x "$W" ]; then
    echo "soak: no worker at $W (configure with libtorch and make worker/remat-worker)"
    exit 77
fi
OUT=$T/out
mkdir -p "$OUT"

# The log goes through a pipe: the disk-full episode limits the size of
# every file rematd writes (RLIMIT_FSIZE), and its log must go on.
mkfifo "$T/log.fifo"
cat "$T/log.fifo" >>"$T/rematd.log" &
logcat=$!
(
    trap '' XFSZ
    exec "$REMATD" --listen 127.0.0.1:0 --data-dir "$T/data" --port-file "$T/port" \
        --workers 1 --worker-path "$W" --lease-seconds 10 --max-attempts 5 \
        --request-timeout 10 2>"$T/log.fifo"
) &
PID=$!
until_true 60 test -s "$T/port" || {
    echo "rematd did not start:"
    cat "$T/rematd.log"
    exit 1
}
PORT=$(cat "$T/port")
BASE="http://127.0.0.1:$PORT"
echo "soak: ${SECONDS_} s, worker killed every ${KILL_EVERY} s, rematd pid $PID port $PORT"

"$PYTHON" "$top_srcdir/tests/api/soak.py" "$PORT" "$PID" "$SECONDS_" "$OUT" "$KILL_EVERY"
[ $? = 0 ] && ok || fail "answers outside the contract (errors in the summary above)"
kill -0 "$PID" 2>/dev/null && ok || fail "rematd died during the soak"

# Health answered throughout.
hf=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["healthz failures"])' "$OUT/summary.json")
[ "$hf" = 0 ] && ok || fail "/healthz failed $hf times"

# Flat memory and descriptors.
"$PYTHON" - "$OUT/samples.json" <<'PY' && ok || fail "RSS or descriptors grew"
import json, statistics, sys
s = json.load(open(sys.argv[1]))
n = len(s)
if n < 8:
    print("too few samples: %d" % n)
    sys.exit(1)
warm = s[n // 4:n // 2]
last = s[3 * n // 4:]
rss_w = statistics.median(x[1] for x in warm)
rss_l = statistics.median(x[1] for x in last)
fd_w = statistics.median(x[2] for x in warm)
fd_l = statistics.median(x[2] for x in last)
print("RSS: first %d KiB, second quarter median %d KiB, last quarter median %d KiB, max %d KiB"
      % (s[0][1], rss_w, rss_l, max(x[1] for x in s)))
print("descriptors: first %d, second quarter median %d, last quarter median %d, max %d"
      % (s[0][2], fd_w, fd_l, max(x[2] for x in s)))
sys.exit(0 if rss_l <= rss_w * 1.25 + 8192 and fd_l <= fd_w + 10 else 1)
PY

# Every acknowledged write survives a kill -9 and a restart.
kill -9 "$PID"
wait "$PID" 2>/dev/null
PID=
wait "$logcat" 2>/dev/null
start_rematd
"$PYTHON" "$top_srcdir/tests/api/soak.py" verify "$PORT" "$OUT" && ok ||
    fail "acknowledged writes lost after kill -9 and a restart"
req GET /metrics
grep '^remat_jobs{' "$BODY"
grep -c '"msg":"store write failed"' "$T/rematd.log" | sed 's/^/store write failures logged: /'
grep -c '"msg":"leases expired"' "$T/rematd.log" | sed 's/^/lease expiries logged: /'
[ -n "${SOAK_OUT:-}" ] && mkdir -p "$SOAK_OUT" && cp "$OUT/summary.json" "$OUT/samples.json" "$SOAK_OUT/"
stop_rematd
finish
