#!/bin/sh
# Connection slots that idle or slow clients cannot exhaust, with real
# sockets (issue 13, found 1):
# - 1,030 connections that send nothing (from 17 loopback addresses, under
#   the per-IP limit) fill --max-connections 1024; /healthz and /readyz
#   still answer at once on the health slots, any other route there is
#   503 with Retry-After, and the limit is logged.
# - One address gets at most --max-connections-per-ip connections.
# - A client that trickles its headers or its body a byte a second, or
#   sends nothing, is cut at --request-timeout (408), although each byte
#   comes well within the per-read --connection-timeout.
. "$(dirname "$0")/lib.sh"
RAW="$top_srcdir/tests/api"

# The idle connections must outlive the checks however slow the machine:
# a request deadline far past them.
start_rematd --request-timeout 300
"$PYTHON" - "$PORT" "$RAW" <<'PY' >"$T/flood.out" 2>&1
import socket, sys, time
sys.path.insert(0, sys.argv[2])
from rawhttp import exchange, wait_accepted
port = int(sys.argv[1])
idle = []
for i in range(1030):
    s = socket.socket()
    s.bind(("127.0.0.%d" % (2 + i // 60), 0))
    s.connect(("127.0.0.1", port))
    idle.append(s)
# Wait until rematd has accepted them all, not for a fixed time: on a
# loaded machine the probes below would otherwise find free slots.
wait_accepted(port)
time.sleep(0.2)
fails = 0
# At once: within 5 s on a loaded machine; without the health slots a probe
# waits in the backlog until an idle connection is cut (minutes here).
for path, want in (("/healthz", 200), ("/readyz", 200), ("/v1/models", 503)):
    st, buf, closed, took = exchange(port, b"GET %s HTTP/1.1\r\nHost: t\r\n\r\n" % path.encode(),
                                     timeout=10.0)
    ok = st == want and took < 5.0 and (want != 503 or b"Retry-After: 1" in buf)
    print("%s: %s %d in %.2f s" % ("ok" if ok else "FAIL", path, st, took))
    fails += not ok
# The idle connections are all still open: the pool was full.
alive = 0
for s in idle:
    s.setblocking(False)
    try:
        alive += s.recv(1) != b""
    except BlockingIOError:
        alive += 1
print("%s: %d of 1030 idle connections held" % ("ok" if alive == 1030 else "FAIL", alive))
fails += alive != 1030
for s in idle:
    s.close()
sys.exit(1 if fails else 0)
PY
rc=$?
cat "$T/flood.out"
[ $rc = 0 ] && ok || fail "health under a full pool"
grep -q '"msg":"connection limit reached: serving health probes only"' "$T/rematd.log" && ok ||
    fail "the connection limit was not logged"
stop_rematd

start_rematd --request-timeout 3 --connection-timeout 60 --max-connections-per-ip 8
"$PYTHON" - "$PORT" "$RAW" <<'PY' >"$T/slow.out" 2>&1
import socket, sys, threading, time
sys.path.insert(0, sys.argv[2])
port = int(sys.argv[1])
fails = 0


def trickle(name, first, drip):
    """Sends first, then one byte of drip a second; returns when the server
    closes, with the seconds it took and what came back."""
    global fails
    s = socket.socket()
    s.connect(("127.0.0.1", port))
    t0 = time.time()
    s.sendall(first)
    got = b""
    s.settimeout(1.0)
    i = 0
    while time.time() - t0 < 12:
        try:
            c = s.recv(4096)
            if not c:
                break
            got += c
        except socket.timeout:
            pass
        except ConnectionResetError:
            break
        try:
            if drip:
                s.send(drip[i % len(drip):i % len(drip) + 1])
        except (BrokenPipeError, ConnectionResetError):
            break
        i += 1
    took = time.time() - t0
    s.close()
    # --request-timeout 3; the 12 s loop is what a client that is never cut
    # gets.  The upper bound leaves the reaper room on a loaded machine.
    ok = 2.5 <= took <= 9 and (not got or got.startswith(b"HTTP/1.1 408"))
    print("%s: %s cut after %.1f s: %r" % ("ok" if ok else "FAIL", name, took, got[:40]))
    fails += not ok


runs = [
    ("headers trickled", b"GET /healthz HTTP/1.1\r\nHost: t\r\n", b"X-Slow: aaaaaaaa\r\n"),
    ("body trickled", b"POST /v1/plans HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
     b"Content-Length: 1000\r\n\r\n", b" "),
    ("nothing sent", b"", b""),
]
threads = [threading.Thread(target=trickle, args=r) for r in runs]
for t in threads:
    t.start()
for t in threads:
    t.join()
# The per-IP limit: of 12 connections from one address, 8 are kept and 4
# closed at accept (which 4 depends on the order the polling threads
# accept them in). They come from an address of their own: the server may
# still be closing the trickled connections above (from 127.0.0.1), and
# those count against their address until it has.
conns = []
for i in range(12):
    s = socket.socket()
    s.bind(("127.0.0.5", 0))
    s.connect(("127.0.0.1", port))
    conns.append(s)
# Poll until the server has closed what it will (under load it accepts
# late), then give it a moment more to close one too many.
def count_closed():
    n = 0
    for s in conns:
        s.setblocking(False)
        try:
            n += s.recv(1, socket.MSG_PEEK) == b""
        except BlockingIOError:
            pass
        except ConnectionResetError:
            n += 1
    return n
deadline = time.time() + 10
closed = count_closed()
while closed < 4 and time.time() < deadline:
    time.sleep(0.1)
    closed = count_closed()
time.sleep(0.5)
closed = count_closed()
print("%s: of 12 connections from one address %d closed, want 4" %
      ("ok" if closed == 4 else "FAIL", closed))
fails += closed != 4
# Another address is still served.
from rawhttp import exchange
st, _, _, _ = exchange(port, b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n", src="127.0.0.9")
print("%s: another address served (%d)" % ("ok" if st == 200 else "FAIL", st))
fails += st != 200
for c in conns:
    c.close()
sys.exit(1 if fails else 0)
PY
rc=$?
cat "$T/slow.out"
[ $rc = 0 ] && ok || fail "deadlines and per-IP limit"
grep -q '"msg":"request deadline passed: connection closed"' "$T/rematd.log" && ok ||
    fail "the deadline was not logged"
stop_rematd
finish
