#!/bin/sh
# HTTP framing (RFC 9112 section 6) with raw sockets, since curl would fix
# or refuse these requests: Content-Length with Transfer-Encoding, two
# different Content-Lengths and a non-numeric one are 400 and the
# connection is closed (where the next request would begin is unknown:
# request smuggling behind a proxy); a transfer coding other than chunked
# is 501 at once, not a hang until the timeout; a path that is not UTF-8
# or a method that is not a token is 400 (was a 500 "out of memory"), and
# so are a header name with whitespace before its colon and an HTTP/1.1
# request without exactly one Host (RFC 9112 3.2, 5.1);
# every log line stays valid UTF-8; the header limit is the one
# docs/api.md gives; paths are routed as sent, not percent-decoded; a NUL
# byte in a JSON body is refused.
# The front door (api/http/door.c, issue 23): what libmicrohttpd answered
# with HTML pages of its own, or not at all, is problem+json naming what
# is wrong: a request line of one word, an HTTP version not 1.x (505) or
# not one at all, a request line over 8 KiB (414), a head over
# libmicrohttpd's memory (431: one long header, or many short ones), a
# header line without a colon or folded; a head that never ends is 408
# problem+json at --request-timeout without the door spinning while it
# waits.  A head that comes in pieces, a kept-alive pipeline of two
# requests and a higher minor version (HTTP/1.7, served as 1.1: RFC 9110
# 2.5) still go through, and so does all of it on an IPv6 listener.
. "$(dirname "$0")/lib.sh"
start_rematd --request-timeout 3
"$PYTHON" - "$PORT" "$top_srcdir/tests/api" "$PID" >"$T/framing.out" 2>&1 <<'PY'
import json
import socket
import sys
import time
sys.path.insert(0, sys.argv[2])
from rawhttp import exchange

port = int(sys.argv[1])
pid = int(sys.argv[3])
fails = 0


def problem_of(buf):
    """The answer's Content-Type and its problem's type (None when the body
    is not a JSON object)."""
    head, _, body = buf.partition(b"\r\n\r\n")
    ctype = None
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-type":
            ctype = value.strip().decode()
    try:
        doc = json.loads(body)
    except ValueError:
        return ctype, None, None
    return ctype, doc.get("type") if isinstance(doc, dict) else None, doc


def check(name, data, want, closed=None, within=None, text=None, ptype=None):
    global fails
    status, buf, was_closed, took = exchange(port, data)
    bad = []
    if status != want:
        bad.append("status %d, want %d" % (status, want))
    if ptype is not None:
        ctype, typ, doc = problem_of(buf)
        if ctype != "application/problem+json":
            bad.append("Content-Type %r" % ctype)
        if typ != "/problems/" + ptype:
            bad.append("type %r, want /problems/%s" % (typ, ptype))
        elif not (doc.get("title") and doc.get("detail") and doc.get("status") == want):
            bad.append("title, detail or status missing")
    if closed is not None and was_closed != closed:
        bad.append("connection %s" % ("closed" if was_closed else "kept"))
    if within is not None and took > within:
        bad.append("took %.1f s" % took)
    if text is not None and text not in buf:
        bad.append("no %r in the answer" % text)
    if bad:
        fails += 1
        print("FAIL: %s: %s: %r" % (name, "; ".join(bad), buf[:300]))
    else:
        print("ok: %s" % name)


body = b'{"algorithm":"sqrt","profile":{"input_bytes":1,"stages":[{"out_bytes":1}]}}'
post = b"POST /v1/plans HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
n = len(body)
check("Content-Length and Transfer-Encoding",
      post + b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n" % n + body,
      400, closed=True, text=b"/problems/bad-request")
check("Transfer-Encoding then Content-Length",
      post + b"Transfer-Encoding: chunked\r\nContent-Length: %d\r\n\r\n" % n + body,
      400, closed=True)
check("two different Content-Lengths",
      post + b"Content-Length: %d\r\nContent-Length: 5\r\n\r\n" % n + body, 400, closed=True,
      text=b"different values")
check("the same Content-Length twice",
      post + b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (n, n) + body, 201)
check("Content-Length not a number", post + b"Content-Length: 5x\r\n\r\nhello", 400, closed=True)
check("Content-Length with a sign", post + b"Content-Length: +5\r\n\r\nhello", 400, closed=True)
check("unknown transfer coding", post + b"Transfer-Encoding: gzip\r\n\r\n", 501, closed=True,
      within=2.0, text=b"/problems/not-implemented")
check("gzip, chunked", post + b"Transfer-Encoding: gzip, chunked\r\n\r\n", 501, closed=True,
      within=2.0)
check("chunked still works",
      post + b"Transfer-Encoding: chunked\r\n\r\n%x\r\n" % n + body + b"\r\n0\r\n\r\n", 201)
check("path not UTF-8", b"GET /v1/plans/\xff\xfe HTTP/1.1\r\nHost: t\r\n\r\n", 400,
      closed=True, text=b"/problems/bad-request")
check("overlong UTF-8 in the path", b"GET /v1/\xc0\xaf HTTP/1.1\r\nHost: t\r\n\r\n", 400)
check("method not a token", b"G\xc3\xa9T /healthz HTTP/1.1\r\nHost: t\r\n\r\n", 400,
      text=b"not an HTTP token")
check("percent-encoded path not decoded", b"GET /health%7A HTTP/1.1\r\nHost: t\r\n\r\n", 404)
check("encoded slash is no separator",
      b"GET /v1/plans%2F0123456789abcdef0123456789abcdef HTTP/1.1\r\nHost: t\r\n\r\n", 404)
check("headers of 15,000 bytes", b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-A: " + b"a" * 15000 +
      b"\r\n\r\n", 200)
check("headers of 17,000 bytes", b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-A: " + b"a" * 17000 +
      b"\r\n\r\n", 431, closed=True, ptype="headers-too-large")
# libmicrohttpd keeps a record for each header: 300 of 8 bytes are over
# its memory (it closed the connection unanswered), and 150 are not.
check("300 short headers", b"GET /healthz HTTP/1.1\r\nHost: t\r\n" +
      b"".join(b"X%03d: b\r\n" % i for i in range(300)) + b"\r\n", 431, closed=True,
      ptype="headers-too-large")
check("150 short headers", b"GET /healthz HTTP/1.1\r\nHost: t\r\n" +
      b"".join(b"X%03d: b\r\n" % i for i in range(150)) + b"\r\n", 200)
check("a request line of one word", b"GARBAGE\r\n\r\n", 400, closed=True, within=2.0,
      ptype="bad-request")
check("a request line of one word, bare LF", b"hello\n\n", 400, closed=True,
      ptype="bad-request")
check("no HTTP version", b"GET /healthz\r\nHost: t\r\n\r\n", 400, closed=True,
      ptype="bad-request")
check("HTTP/2.0", b"GET /healthz HTTP/2.0\r\nHost: t\r\n\r\n", 505, closed=True,
      ptype="http-version-not-supported", text=b"HTTP/2.0")
check("HTTP/0.9", b"GET /healthz HTTP/0.9\r\n\r\n", 505, ptype="http-version-not-supported")
check("HTTP/1.10 is no version", b"GET /healthz HTTP/1.10\r\nHost: t\r\n\r\n", 400,
      ptype="bad-request")
check("HTTP/1.7 is served as 1.1", b"GET /healthz HTTP/1.7\r\nHost: t\r\n\r\n", 200)
check("a request line of 9,000 bytes", b"GET /healthz?" + b"a" * 9000 +
      b" HTTP/1.1\r\nHost: t\r\n\r\n", 414, closed=True, ptype="uri-too-long")
check("a request line of 17,000 bytes, never ended", b"GET /" + b"a" * 17000, 414,
      closed=True, ptype="uri-too-long")
check("a header line without a colon", b"GET /healthz HTTP/1.1\r\nHost: t\r\nNoColon\r\n\r\n",
      400, closed=True, ptype="bad-request", text=b"no colon")
check("a folded header line", b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-A: a\r\n b\r\n\r\n",
      400, closed=True, ptype="bad-request", text=b"folding")
check("a bare CR in a header", b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-A: a\rb\r\n\r\n", 400,
      ptype="bad-request")
check("an empty line before the request line", b"\r\nGET /healthz HTTP/1.1\r\nHost: t\r\n\r\n",
      200)
check("bare LF line ends", b"GET /healthz HTTP/1.1\nHost: t\n\n", 200)


def pieces(name, parts, gap, want):
    """A head sent in parts, gap seconds apart: passed on once whole."""
    global fails
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    for i, part in enumerate(parts):
        if i:
            time.sleep(gap)
        s.sendall(part)
    buf = b""
    try:
        while b"\r\n\r\n" not in buf:
            c = s.recv(65536)
            if not c:
                break
            buf += c
    except socket.timeout:
        pass
    s.close()
    status = int(buf.split(b" ")[1]) if buf.startswith(b"HTTP/") else 0
    good = status == want
    fails += not good
    print("%s: %s: %d" % ("ok" if good else "FAIL", name, status))


pieces("a head in three pieces", [b"GET /hea", b"lthz HTTP/1.1\r\nHo", b"st: t\r\n\r\n"], 0.3, 200)
pieces("a bad version after a pause", [b"GET /healthz HTT", b"P/3.0\r\n\r\n"], 0.3, 505)


def answers(buf):
    """The statuses of the whole answers in buf, one after the other."""
    out = []
    while buf.startswith(b"HTTP/"):
        head, sep, rest = buf.partition(b"\r\n\r\n")
        if not sep:
            break
        n = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                n = int(line.split(b":")[1])
        if len(rest) < n:
            break
        out.append(int(head.split(b" ")[1]))
        buf = rest[n:]
    return out


# Two requests in one write on a kept-alive connection: both answered, in
# order (the second is libmicrohttpd's to read, past the door).
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\nGET /v1/nothing HTTP/1.1\r\nHost: t\r\n\r\n")
buf = b""
t0 = time.time()
while len(answers(buf)) < 2 and time.time() - t0 < 10:
    try:
        c = s.recv(65536)
    except socket.timeout:
        break
    if not c:
        break
    buf += c
s.close()
got = answers(buf)
fails += got != [200, 404]
print("%s: a pipeline of two requests: %r" % ("ok" if got == [200, 404] else "FAIL", got))


def cpu_seconds():
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100.0


# A head that never ends: 408 problem+json at --request-timeout 3, and
# the door does not spin over the bytes it has peeked meanwhile (a second
# of CPU would be a busy loop).
cpu0 = cpu_seconds()
s = socket.create_connection(("127.0.0.1", port), timeout=15)
s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: ")
t0 = time.time()
buf = b""
try:
    for i in range(10):
        s.sendall(b"a")
        time.sleep(0.2)
    while True:
        c = s.recv(65536)
        if not c:
            break
        buf += c
except (socket.timeout, ConnectionResetError, BrokenPipeError):
    pass
took = time.time() - t0
s.close()
used = cpu_seconds() - cpu0
ctype, typ, doc = problem_of(buf)
good = (buf.startswith(b"HTTP/1.1 408 ") and ctype == "application/problem+json" and
        typ == "/problems/request-timeout" and 2.0 < took < 10)
fails += not good
print("%s: a head that never ends: %r after %.1f s" % ("ok" if good else "FAIL", buf[:60], took))
fails += used >= 1.0
print("%s: %.2f s of CPU while it waited" % ("ok" if used < 1.0 else "FAIL", used))
check("whitespace before the colon of Content-Length",
      post + b"Content-Length : %d\r\n\r\n" % n + body, 400, closed=True,
      text=b"not a token")
check("whitespace before the colon of Transfer-Encoding",
      post + b"Content-Length: %d\r\nTransfer-Encoding : chunked\r\n\r\n" % n + body, 400,
      closed=True)
check("HTTP/1.1 without Host", b"GET /healthz HTTP/1.1\r\n\r\n", 400, closed=True,
      text=b"exactly one Host")
check("two Host headers", b"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400,
      closed=True)
check("HTTP/1.0 without Host", b"GET /healthz HTTP/1.0\r\n\r\n", 200)
nul = b'{"algorithm":"sqrt","mem_slots":5\x00,"profile":{"input_bytes":1,"stages":[{"out_bytes":1}]}}'
check("a NUL byte in the JSON body", post + b"Content-Length: %d\r\n\r\n" % len(nul) + nul, 400,
      text=b"NUL byte")
sys.exit(1 if fails else 0)
PY
rc=$?
cat "$T/framing.out"
[ $rc = 0 ] && ok || fail "framing cases"
# Every log line is UTF-8, the bad path written escaped.
stop_rematd
if "$PYTHON" -c '
import sys
for n, line in enumerate(open(sys.argv[1], "rb"), 1):
    line.decode("utf-8")
' "$T/rematd.log"; then ok; else fail "a log line is not UTF-8"; fi
grep -q '"path":"/v1/plans/\\\\xFF\\\\xFE"' "$T/rematd.log" && ok ||
    fail "the bad path is not logged escaped: $(grep -a 'bad-request' "$T/rematd.log" | head -2)"
# The door's refusals are logged, with the id the answer gave.
grep -q '"msg":"request refused before routing","request_id":"[0-9a-f]\{16\}","status":505' \
    "$T/rematd.log" && ok || fail "no refusal logged: $(grep -a 'refused' "$T/rematd.log" | head -2)"

# An IPv6 listener: bound by the door as libmicrohttpd bound it (IPv6
# only), served and judged the same.
if "$PYTHON" -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' 2>/dev/null; then
    start_rematd --listen '[::1]:0'
    "$PYTHON" - "$PORT" <<'PY' && ok || fail "the IPv6 listener"
import socket
import sys
port = int(sys.argv[1])


def ask(data):
    s = socket.create_connection(("::1", port), timeout=10)
    s.sendall(data)
    buf = b""
    while True:
        c = s.recv(65536)
        if not c:
            break
        buf += c
    s.close()
    return buf


a = ask(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
b = ask(b"GARBAGE\r\n\r\n")
print("IPv6: %r / %r" % (a[:15], b[:25]))
sys.exit(0 if a.startswith(b"HTTP/1.1 200") and b.startswith(b"HTTP/1.1 400") and
         b"/problems/bad-request" in b else 1)
PY
    stop_rematd
else
    echo "no IPv6 loopback here: the IPv6 listener not checked"
fi
finish
