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
. "$(dirname "$0")/lib.sh"
start_rematd
"$PYTHON" - "$PORT" "$top_srcdir/tests/api" >"$T/framing.out" 2>&1 <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
from rawhttp import exchange

port = int(sys.argv[1])
fails = 0


def check(name, data, want, closed=None, within=None, text=None):
    global fails
    status, buf, was_closed, took = exchange(port, data)
    bad = []
    if status != want:
        bad.append("status %d, want %d" % (status, want))
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
      b"\r\n\r\n", 431, closed=True)
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
finish
