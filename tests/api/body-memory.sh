#!/bin/sh
# Request bodies held in memory are bounded in total (--max-bodies-bytes),
# not only one by one (--max-body-bytes): without it --max-queued-plans or
# --max-connections times the body limit is gigabytes (1,024 x 8 MiB).
# - Bodies announced by Content-Length count from their headers: two slow
#   clients announcing 1,000,000 bytes each hold 2,000,000 of 2 MiB, and a
#   third body that does not fit is 503 queue-full with Retry-After at
#   once, naming the flag; health still answers.
# - A chunked body (no length announced) is counted as it arrives: past the
#   bound it is read, dropped and answered 503.
# - The bytes are given back when a request ends: once the slow clients go
#   (hung up or answered), the same requests pass, and the gauge
#   remat_request_body_bytes returns to 0.
# - --max-bodies-bytes below --max-body-bytes is refused at start; the
#   default follows a larger --max-body-bytes.
. "$(dirname "$0")/lib.sh"
RAW="$top_srcdir/tests/api"

# ---- the settings ----
"$REMATD" --max-body-bytes 4194304 --max-bodies-bytes 2097152 --print-config >/dev/null 2>"$T/cfg.err" &&
    fail "--max-bodies-bytes below --max-body-bytes was accepted" || ok
grep -q 'max-bodies-bytes' "$T/cfg.err" && ok || fail "the refusal does not name the flag: $(cat "$T/cfg.err")"
"$REMATD" --max-body-bytes 268435456 --print-config | grep -q '"max-bodies-bytes": 268435456' && ok ||
    fail "the default total does not follow a larger --max-body-bytes"
"$REMATD" --print-config | grep -q '"max-bodies-bytes": 134217728' && ok || fail "default 128 MiB"
"$REMATD" --help | grep -q -- '--max-bodies-bytes' && ok || fail "--help does not list --max-bodies-bytes"

start_rematd --max-body-bytes 1048576 --max-bodies-bytes 2097152 --request-timeout 60
profile 1000 >"$T/p.json"
printf '{"algorithm":"sqrt","profile":%s}' "$(cat "$T/p.json")" >"$T/plan.json"
size=$(wc -c <"$T/plan.json")
[ "$size" -gt 100000 ] && [ "$size" -lt 1000000 ] && ok || fail "plan body of $size bytes"

# gauge: the value of remat_request_body_bytes now.
gauge() {
    curl -s "$BASE/metrics" | sed -n 's/^remat_request_body_bytes //p'
}
# until_gauge VALUE: polls (up to 20 s) until the gauge reads VALUE.
until_gauge() {
    i=0
    while [ "$(gauge)" != "$1" ] && [ $i -lt 200 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    [ "$(gauge)" = "$1" ]
}
until_gauge 0 && ok || fail "body bytes held at rest: $(gauge)"

# Two slow clients announce 1,000,000 bytes each and send 1,000: they hold
# the promise (2,000,000 of 2,097,152) until they go.  They wait for
# $T/go, then hang up.
"$PYTHON" - "$PORT" "$T/go" "$T/slow.ready" <<'PY' >"$T/slow.out" 2>&1 &
import os, socket, sys, time
port, go, ready = int(sys.argv[1]), sys.argv[2], sys.argv[3]
conns = []
for i in range(2):
    s = socket.socket()
    s.connect(("127.0.0.1", port))
    s.sendall(b"POST /v1/plans HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
              b"Content-Length: 1000000\r\n\r\n" + b" " * 1000)
    conns.append(s)
open(ready, "w").close()
t0 = time.time()
while not os.path.exists(go) and time.time() - t0 < 50:
    time.sleep(0.05)
for s in conns:
    s.close()
PY
slow=$!
i=0
while [ ! -e "$T/slow.ready" ] && [ $i -lt 200 ]; do
    sleep 0.1
    i=$((i + 1))
done
until_gauge 2000000 && ok || fail "two announced bodies: gauge $(gauge), want 2000000"

req POST /v1/plans -H 'Content-Type: application/json' --data-binary @"$T/plan.json"
problem "a body past --max-bodies-bytes" 503 queue-full
grep -q 'max-bodies-bytes' "$BODY" && ok || fail "the 503 does not name the flag: $(head -c 300 "$BODY")"
[ "$(header Retry-After)" = 1 ] && ok || fail "503 without Retry-After: 1"
# Chunked: no length announced, counted as it comes, refused at the end.
req POST /v1/plans -H 'Content-Type: application/json' -H 'Transfer-Encoding: chunked' \
    --data-binary @"$T/plan.json"
problem "a chunked body past --max-bodies-bytes" 503 queue-full
[ "$(header Retry-After)" = 1 ] && ok || fail "chunked 503 without Retry-After: 1"
# A small body still fits beside them, and health answers.
post /v1/plans "{\"algorithm\":\"sqrt\",\"profile\":$(profile 8)}" && expect 201
req GET /healthz && expect 200
# Nothing leaked by the refused ones: still the slow clients' promise only.
until_gauge 2000000 && ok || fail "after the refusals: gauge $(gauge), want 2000000"

# The slow clients hang up: their bytes are given back, and the same
# bodies pass, chunked or not.
: >"$T/go"
wait "$slow"
until_gauge 0 && ok || fail "after the slow clients left: gauge $(gauge), want 0"
req POST /v1/plans -H 'Content-Type: application/json' --data-binary @"$T/plan.json" && expect 201
req POST /v1/plans -H 'Content-Type: application/json' -H 'Transfer-Encoding: chunked' \
    --data-binary @"$T/plan.json" && expect 201
until_gauge 0 && ok || fail "after answered requests: gauge $(gauge), want 0"

# Many bodies at once, each under the limit, together over it: every
# answer is 201 or 503 queue-full, never anything else, and the bound
# was honoured (at most 2,097,152 / size bodies in at once).
j=0
pids=
while [ $j -lt 12 ]; do
    curl -s -o /dev/null -w '%{http_code}\n' -H 'Content-Type: application/json' \
        --data-binary @"$T/plan.json" "$BASE/v1/plans" >"$T/burst.$j" &
    pids="$pids $!"
    j=$((j + 1))
done
for p in $pids; do wait "$p"; done
cat "$T"/burst.? "$T"/burst.?? >"$T/burst.codes"
bad=$(grep -v -x -e 201 -e 503 "$T/burst.codes" | wc -l)
[ "$bad" -eq 0 ] && ok || fail "burst answers other than 201/503: $(sort "$T/burst.codes" | uniq -c)"
[ "$(grep -c -x 201 "$T/burst.codes")" -ge 1 ] && ok || fail "no body of the burst passed"
until_gauge 0 && ok || fail "after the burst: gauge $(gauge), want 0"
stop_rematd
finish
