#!/bin/sh
# The health listener (--health-listen, issue 24 item 8), with real
# sockets on loopback:
# - 1,152 connections that send nothing, from 20 loopback addresses
#   (127.0.0.2 .. 127.0.0.21, each under --max-connections-per-ip 64),
#   fill --max-connections 1024, the 16 health slots past it, and 112 more
#   wait in the accept queue.  A probe of the main port then waits behind
#   them (the outage issue 24 measured); every probe of the health port
#   (/healthz, /readyz, /metrics) answers within 5 s, for 10 s.
# - The health port serves nothing else: /v1 routes and /openapi.yaml are
#   404 there.
# - rematd refuses a health address that is its main address.
. "$(dirname "$0")/lib.sh"
RAW="$top_srcdir/tests/api"

# One descriptor per idle connection here, and as many in rematd (which
# raises its own soft limit to what --max-connections needs).
ulimit -n 4096 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

free_port() {
    "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# --- A health address equal to the main one is refused at start.
P=$(free_port)
for args in "--listen 127.0.0.1:$P --health-listen 127.0.0.1:$P" \
    "--listen 127.0.0.1:$P --health-listen 0.0.0.0:$P" \
    "--listen 0.0.0.0:$P --health-listen 127.0.0.1:$P"; do
    # shellcheck disable=SC2086 # the flags are words
    "$REMATD" $args --data-dir "$T/refused" >"$T/refused.out" 2>&1
    rc=$?
    if [ $rc = 2 ] && grep -q 'the same address as --listen' "$T/refused.out"; then ok; else
        fail "$args: want exit 2 naming --listen, got $rc: $(head -c 300 "$T/refused.out")"
    fi
done
REMAT_HEALTH_LISTEN=127.0.0.1:$P "$REMATD" --listen "127.0.0.1:$P" --data-dir "$T/refused" \
    >"$T/refused.out" 2>&1
rc=$?
if [ $rc = 2 ] && grep -q 'same address' "$T/refused.out"; then ok; else
    fail "REMAT_HEALTH_LISTEN equal to --listen: want exit 2, got $rc"
fi
"$REMATD" --listen "127.0.0.1:$P" --health-listen "127.0.0.1:99999" --data-dir "$T/refused" \
    >"$T/refused.out" 2>&1
rc=$?
if [ $rc = 2 ] && grep -q -- '--health-listen 127.0.0.1:99999' "$T/refused.out"; then ok; else
    fail "--health-listen with port 99999: want exit 2, got $rc"
fi

# --- The flood.  The idle connections must outlive the checks however
# slow the machine: a request deadline far past them.
HP=$(free_port)
start_rematd --request-timeout 300 --health-listen "127.0.0.1:$HP"
grep -q "\"msg\":\"listening for health probes\".*\"port\":$HP" "$T/rematd.log" && ok ||
    fail "the health listener was not logged: $(tail -3 "$T/rematd.log")"

"$PYTHON" - "$PORT" "$HP" "$RAW" <<'PY' >"$T/flood.out" 2>&1
import resource, socket, sys, time
sys.path.insert(0, sys.argv[3])
from rawhttp import exchange
port, hport = int(sys.argv[1]), int(sys.argv[2])
fails = 0

want = 1152
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if soft != resource.RLIM_INFINITY and soft < want + 100:
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    except (ValueError, OSError):
        pass
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
n = want if soft == resource.RLIM_INFINITY or soft >= want + 100 else soft - 100
if n < want:
    print("note: only %d idle connections (descriptor limit %d)" % (n, soft))

idle = []
for i in range(n):
    s = socket.socket()
    s.bind(("127.0.0.%d" % (2 + i % 20), 0))
    s.settimeout(10.0)
    s.connect(("127.0.0.1", port))
    idle.append(s)

# rematd takes 1024 + 16 of them; the rest stay in its accept queue.
queued_want = max(0, n - 1040)
hexport = ":%04X" % port
deadline = time.time() + 60
while True:
    queued = 0
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            col = line.split()
            if col[1].endswith(hexport) and col[3] == "0A":
                queued += int(col[4].split(":")[1], 16)
    if queued <= queued_want or time.time() > deadline:
        break
    time.sleep(0.05)
print("%d idle connections, %d of them in the accept queue" % (n, queued))


def probe(p, path, timeout):
    """The whole probe as a kubelet makes it: connect, ask, read the
    answer to its end. Returns (status, seconds, body)."""
    t0 = time.time()
    s = socket.socket()
    s.settimeout(timeout)
    buf = b""
    try:
        s.connect(("127.0.0.1", p))
        s.sendall(b"GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n" % path.encode())
        while True:
            c = s.recv(65536)
            if not c:
                break
            buf += c
    except (socket.timeout, OSError):
        pass
    s.close()
    st = int(buf.split(b" ")[1]) if buf.startswith(b"HTTP/") else 0
    return st, time.time() - t0, buf


# The main port is out of reach for a probe (a figure, not a check: how
# long the wait is depends on the machine).
st, took, _ = probe(port, "/healthz", 2.0)
print("main port /healthz during the flood: %s after %.2f s" % (st or "no answer", took))

# Every probe of the health port answers, for 10 s.  The bound is
# generous (a kubelet's default timeout is 1 s); without the listener
# they wait behind the accept queue.
worst = 0.0
count = 0
end = time.time() + 10
while time.time() < end:
    for path in ("/healthz", "/readyz", "/metrics"):
        st, took, buf = probe(hport, path, 10.0)
        count += 1
        worst = max(worst, took)
        good = st == 200 and took < 5.0
        if path == "/metrics":
            good = good and b"remat_http_requests_total" in buf
        if not good:
            print("FAIL: health port %s: %s in %.2f s" % (path, st, took))
            fails += 1
    time.sleep(0.3)
print("%s: %d health-port probes during the flood, the slowest %.3f s"
      % ("ok" if fails == 0 else "FAIL", count, worst))

# Nothing else is served there.
for method, path in (("GET", "/v1/models"), ("POST", "/v1/plans"), ("GET", "/openapi.yaml"),
                     ("GET", "/v1/worker/lease")):
    data = b"%s %s HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n" % (method.encode(),
                                                                        path.encode())
    st, buf, closed, took = exchange(hport, data, timeout=10.0)
    good = st == 404 and b"/problems/not-found" in buf
    print("%s: health port %s %s: %d" % ("ok" if good else "FAIL", method, path, st))
    fails += not good

# The pool stayed full the whole time: the probes did not get in because
# idle connections had gone.
alive = 0
for s in idle[:1040]:
    s.setblocking(False)
    try:
        alive += s.recv(1) != b""
    except BlockingIOError:
        alive += 1
good = alive == min(n, 1040)
print("%s: %d of the first %d idle connections held" % ("ok" if good else "FAIL", alive,
                                                       min(n, 1040)))
fails += not good
for s in idle:
    s.close()
sys.exit(1 if fails else 0)
PY
rc=$?
cat "$T/flood.out"
[ $rc = 0 ] && ok || fail "the health port under a connection flood"
# The flood reached the main pool (its limit was logged) and the health
# listener's requests are logged as any other.
grep -q '"msg":"connection limit reached: serving health probes only"' "$T/rematd.log" && ok ||
    fail "the connection limit was not logged"
stop_rematd
finish
