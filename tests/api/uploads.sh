#!/bin/sh
# Uploads (POST /v1/models) under time and space (issue 24, item 6):
# - An upload has no whole-request deadline, only --upload-idle-timeout
#   between reads: with --request-timeout 2, a 600 KB model sent at
#   100 KB/s (6 s) is stored; a client that stops sending is answered 408
#   and cut about --upload-idle-timeout (3 s) after its last byte, and
#   leaves no temporary file.  Other routes keep --request-timeout.
# - Uploads in flight count against --max-models-bytes: while a 1.2 MB
#   upload is on its way, a second one of 1.2 MB (each under the 2 MB
#   quota, not both) is 507, with Content-Length, chunked and as a form;
#   the first is stored, and the same bytes again are 200 however full the
#   quota; once it is deleted the second goes through (no reservation is
#   left behind).
. "$(dirname "$0")/lib.sh"
RAW='-H Content-Type:application/octet-stream'

# mkzip FILE SIZE: a TorchScript archive's layout with SIZE random bytes.
mkzip() {
    "$PYTHON" - "$@" <<'PY'
import os, sys, zipfile
path, size = sys.argv[1], int(sys.argv[2])
with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
    z.writestr("net/code/__torch__/net.py", "class Net(Module):\n  pass\n")
    z.writestr("net/data.pkl", b"\x80\x02}q\x00.")
    z.writestr("net/version", "3\n")
    z.writestr("net/data/0", os.urandom(size))
PY
}
mkzip "$T/slow.pt" 600000
mkzip "$T/x.pt" 1200000
mkzip "$T/y.pt" 1200000

start_rematd --max-model-bytes 2000000 --max-models-bytes 2000000 --request-timeout 2 \
    --upload-idle-timeout 3

# --- A slow upload past --request-timeout is stored.
t0=$(date +%s)
req POST /v1/models $RAW --limit-rate 100k --data-binary "@$T/slow.pt" && expect 201 /v1/models
took=$(($(date +%s) - t0))
SLOW=$(field id)
[ "$took" -ge 4 ] && ok || fail "the slow upload took $took s: it did not outlast --request-timeout 2"
echo "a 600 KB upload at 100 KB/s: $CODE after $took s (--request-timeout 2)"
req DELETE "/v1/models/$SLOW" && expect 204

# --- An upload that stops sending is cut after --upload-idle-timeout.
"$PYTHON" - "$PORT" <<'PY' >"$T/stall.out" 2>&1
import socket, sys, time
port = int(sys.argv[1])
s = socket.socket()
s.connect(("127.0.0.1", port))
s.sendall(b"POST /v1/models HTTP/1.1\r\nHost: t\r\nContent-Type: application/octet-stream\r\n"
          b"Content-Length: 100000\r\n\r\n")
# Bytes for 4 s, past --request-timeout 2, each within the idle timeout.
for i in range(9):
    if i:
        time.sleep(0.5)
    s.sendall(b"x" * 100)
last = time.time()
s.settimeout(30)
got = b""
try:
    while True:
        c = s.recv(4096)
        if not c:
            break
        got += c
except (socket.timeout, ConnectionResetError):
    pass
took = time.time() - last
# 3 s, less the quarter second a deadline may lag its read.
good = got.startswith(b"HTTP/1.1 408") and 2.5 <= took <= 12
print("%s: stalled upload cut %.1f s after its last byte: %r" % ("ok" if good else "FAIL", took,
                                                                 got[:60]))
sys.exit(0 if good else 1)
PY
rc=$?
cat "$T/stall.out"
[ $rc = 0 ] && ok || fail "a stalled upload was not cut after --upload-idle-timeout"
if until_true 10 sh -c '[ -z "$(ls "$1")" ]' sh "$T/data/models/tmp"; then ok; else
    fail "a temporary file was left: $(ls "$T/data/models/tmp")"
fi

# --- Two uploads that fit one at a time, not together.
curl -s -o "$T/x.body" -w '%{http_code}' $RAW --limit-rate 200k --data-binary "@$T/x.pt" \
    "$BASE/v1/models" >"$T/x.code" &
CX=$!
# Until the first is on its way (its temporary file has bytes).
in_flight() {
    for f in "$T"/data/models/tmp/*; do [ -s "$f" ] && return 0; done
    return 1
}
until_true 30 in_flight && ok || fail "the first upload did not start"
req POST /v1/models $RAW --data-binary "@$T/y.pt"
problem "a second upload with Content-Length while the first is in flight" 507 storage-full &&
    { grep -q "in flight" "$BODY" && ok || fail "the 507 does not say why: $(cat "$BODY")"; }
req POST /v1/models $RAW -H 'Transfer-Encoding: chunked' --data-binary "@$T/y.pt"
problem "a second upload, chunked" 507 storage-full
req POST /v1/models -F "file=@$T/y.pt"
problem "a second upload as a form" 507 storage-full
kill -0 $CX 2>/dev/null && ok || fail "the first upload ended before the second was tried: the test proves nothing"
wait $CX
[ "$(cat "$T/x.code")" = 201 ] && ok || fail "the first upload: $(cat "$T/x.code") $(head -c 300 "$T/x.body")"
X=$(grep -o '"id":"[0-9a-f]*"' "$T/x.body" | cut -d'"' -f4)
req POST /v1/models $RAW --data-binary "@$T/y.pt"
problem "the second with the first stored" 507 storage-full
# Bytes already stored are the model they are, however full the quota.
req POST /v1/models -F "file=@$T/x.pt" && expect 200 /v1/models
[ "$(field id)" = "$X" ] && ok || fail "the same bytes as a form: $(field id), not $X"
req POST /v1/models $RAW -H 'Transfer-Encoding: chunked' --data-binary "@$T/x.pt" && expect 200 /v1/models
req DELETE "/v1/models/$X" && expect 204
req POST /v1/models $RAW -H 'Transfer-Encoding: chunked' --data-binary "@$T/y.pt" && expect 201 /v1/models
stop_rematd
finish
