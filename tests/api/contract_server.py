"""contract_server.py - the live rematd contract.py drives: starting and
stopping it (its data and log in tmp), calling an operation of the spec
with the token it needs, the spec's examples; and the framing answers that
can meet any operation, provoked on each against a server of their own.

The framing is judged before any route: rematd's front door reads the
head of a connection's first request (api/http/door.c) and answers what
libmicrohttpd would refuse as problem+json, so every framing answer the
test provokes (each is a connection's first request) must be
problem+json; libmicrohttpd's own HTML pages remain only for a later
request of a kept-alive connection, which the spec declares as well."""
import copy
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import contract_wire
from contract_spec import CLIENT_TOKEN, REMATD, SRC, WORKER_TOKEN, check, deref, doc
from contract_wire import op_by_id, parse_answer, raw, raw_bytes, read_all, validate


def auth_for(op):
    sec = op.get("security", doc.get("security", []))
    if not sec:
        return None
    return WORKER_TOKEN if "workerBearer" in sec[0] else CLIENT_TOKEN


def call(op_id, ids=None, body=None, ctype=None, headers=None, token="default", method=None,
         expect=None, what="", content_length=None, path_suffix=""):
    """Calls an operation (path parameters from ids); body: a JSON value
    (sent as application/json unless ctype), or bytes.  Validates the
    answer and, with expect, checks its status."""
    path, m, op = op_by_id[op_id]
    url = path
    for k, v in (ids or {}).items():
        url = url.replace("{%s}" % k, v)
    h = dict(headers or {})
    tok = auth_for(op) if token == "default" else token
    if tok:
        h["Authorization"] = "Bearer " + tok
    data = b""
    if body is not None:
        if isinstance(body, bytes):
            data = body
        else:
            data = json.dumps(body).encode()
            ctype = ctype or "application/json"
    if ctype:
        h["Content-Type"] = ctype
    a = raw((method or m).upper(), url + path_suffix, data, h, content_length)
    validate(op_id, a, what or "call")
    if expect is not None:
        check(a.status == expect, "%s %s: want %d, got %r" % (op_id, what, expect, a))
    return a


def example(op_id, ct="application/json"):
    path, m, op = op_by_id[op_id]
    media = op["requestBody"]["content"][ct]
    if "example" in media:
        return copy.deepcopy(media["example"])
    for e in media["examples"].values():
        if "value" in e:
            return copy.deepcopy(e["value"])
        with open(os.path.join(SRC, e["externalValue"]), "rb") as f:
            return f.read()
    raise KeyError(op_id)


def path_example():
    return deref(doc["components"]["parameters"]["Id"])["example"]


tmp = tempfile.mkdtemp(prefix="remat-contract-")
proc = None  # the rematd running now, started by start_rematd


def start_rematd(*flags):
    global proc
    env = dict(os.environ, REMAT_TOKEN=CLIENT_TOKEN, REMAT_WORKER_TOKEN=WORKER_TOKEN)
    pf = os.path.join(tmp, "port")
    if os.path.exists(pf):
        os.unlink(pf)
    log = open(os.path.join(tmp, "rematd.log"), "a")
    proc = subprocess.Popen([REMATD, "--listen", "127.0.0.1:0", "--data-dir",
                             os.path.join(tmp, "data"), "--port-file", pf] + list(flags),
                            stdout=subprocess.DEVNULL, stderr=log, env=env)
    deadline = time.time() + 30
    while not (os.path.exists(pf) and os.path.getsize(pf) > 0):
        if proc.poll() is not None or time.time() > deadline:
            print(open(os.path.join(tmp, "rematd.log")).read())
            sys.exit("rematd did not start")
        time.sleep(0.05)
    with open(pf) as f:
        contract_wire.port = int(f.read())


def stop_rematd():
    global proc
    if proc and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            check(proc.wait(timeout=60) == 0, "rematd exit status after SIGTERM")
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            check(False, "rematd did not exit after SIGTERM")
    proc = None



def framing(ex_id):
    """The answers that can meet any operation, provoked on each: rematd's
    400 bad-request and 501 not-implemented, its 408 at --request-timeout,
    413 for a body over --max-body-bytes (on a GET too), and the front
    door's 400 (no HTTP version, a header line without a colon, a request
    line of one word), 414, 431 and 505, all problem+json of their type;
    libmicrohttpd's own pages on a later request of a kept-alive
    connection, which the spec declares too; and 503 on /healthz when the
    bodies held reach --max-bodies-bytes."""
    start_rematd("--request-timeout", "2", "--max-connections", "64",
                 "--max-connections-per-ip", "0", "--max-body-bytes", "4096",
                 "--max-bodies-bytes", "4096", "--max-model-bytes", "4096")
    heads = {}
    for op_id, (path, m, op) in sorted(op_by_id.items()):
        url = path.replace("{id}", ex_id)
        tok = auth_for(op)
        auth = ("Authorization: Bearer %s\r\n" % tok) if tok else ""
        heads[op_id] = (m.upper(), url, auth)
        probes = [
            ("400", "two Content-Lengths", "%s %s HTTP/1.1\r\nHost: t\r\n%sContent-Length: 1\r\n"
             "Content-Length: 2\r\n\r\nab" % (m.upper(), url, auth), "bad-request"),
            ("400", "no HTTP version", "%s %s\r\nHost: t\r\n\r\n" % (m.upper(), url),
             "bad-request"),
            ("400", "a header line without a colon", "%s %s HTTP/1.1\r\nHost: t\r\n%sX\r\n\r\n"
             % (m.upper(), url, auth), "bad-request"),
            ("414", "a request line over 8 KiB", "%s %s?%s HTTP/1.1\r\nHost: t\r\n\r\n"
             % (m.upper(), url, "a" * 9000), "uri-too-long"),
            ("431", "headers over 16 KiB", "%s %s HTTP/1.1\r\nHost: t\r\n%sX-A: %s\r\n\r\n"
             % (m.upper(), url, auth, "a" * 17000), "headers-too-large"),
            ("413", "a body over --max-body-bytes", "%s %s HTTP/1.1\r\nHost: t\r\n%s"
             "Content-Length: 5000\r\n\r\n" % (m.upper(), url, auth), "body-too-large"),
            ("501", "Transfer-Encoding gzip", "%s %s HTTP/1.1\r\nHost: t\r\n%s"
             "Transfer-Encoding: gzip\r\n\r\n" % (m.upper(), url, auth), "not-implemented"),
            ("505", "HTTP/2.0", "%s %s HTTP/2.0\r\nHost: t\r\n\r\n" % (m.upper(), url),
             "http-version-not-supported"),
        ]
        for status, what, data, slug in probes:
            a = raw_bytes(data.encode())
            validate(op_id, a, what)
            check(a.status == int(status) and
                  (a.header("content-type") or "").startswith("application/problem+json") and
                  (a.json() or {}).get("type") == "/problems/" + slug,
                  "%s %s: want %s %s, got %r %r" % (op_id, what, status, slug,
                                                    a.header("content-type"), a))
        # The same framing on the second request of a kept-alive
        # connection: libmicrohttpd reads it, past the door, and answers
        # with its own page (declared as FramingPage).
        first = "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"
        for status, what, data in (
                ("505", "HTTP/2.0", "%s %s HTTP/2.0\r\nHost: t\r\n\r\n" % (m.upper(), url)),
                ("431", "headers over 16 KiB", "%s %s HTTP/1.1\r\nHost: t\r\n%sX-A: %s\r\n\r\n"
                 % (m.upper(), url, auth, "a" * 17000))):
            buf = raw_bytes_all((first + data).encode())
            _, _, rest = buf.partition(b"\r\n\r\n")
            n = int(parse_answer(buf).header("content-length") or 0)
            a = parse_answer(rest[n:])
            validate(op_id, a, what + " on a kept-alive connection")
            check(a.status == int(status) and a.header("content-type") is None,
                  "%s %s on a kept-alive connection: want libmicrohttpd's %s, got %r"
                  % (op_id, what, status, a))
    # 408: every operation's head begun, none finished; all are cut at the
    # deadline together.
    socks = {}
    for op_id, (method, url, auth) in heads.items():
        s = socket.create_connection(("127.0.0.1", contract_wire.port), timeout=30)
        s.sendall(("%s %s HTTP/1.1\r\nHost: t\r\n%s" % (method, url, auth)).encode())
        socks[op_id] = s
    for op_id, s in socks.items():
        a = parse_answer(read_all(s))
        validate(op_id, a, "a head not finished within --request-timeout")
        check(a.status == 408 and (a.json() or {}).get("type") == "/problems/request-timeout",
              "%s: want 408 request-timeout, got %r" % (op_id, a))
    # The bodies held together: one announced and not sent holds 3000 of
    # the 4096 bytes; /healthz with a body of 3000 is then 503 queue-full.
    hold = socket.create_connection(("127.0.0.1", contract_wire.port), timeout=30)
    hold.sendall(("POST /v1/plans HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                  "Authorization: Bearer %s\r\nContent-Length: 3000\r\n\r\n{"
                  % CLIENT_TOKEN).encode())
    deadline = time.time() + 1.5  # within the hold's --request-timeout of 2 s
    while True:
        a = raw_bytes(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
                      b"Content-Length: 3000\r\n\r\n" + b"a" * 3000)
        if a.status == 503 or time.time() > deadline:
            break
        time.sleep(0.05)
    validate("healthz", a, "bodies held over --max-bodies-bytes")
    check(a.status == 503 and (a.json() or {}).get("type") == "/problems/queue-full",
          "healthz under --max-bodies-bytes: %r" % a)
    hold.close()
    # A request line of one word: libmicrohttpd closed without an answer;
    # the door answers 400 (for no operation: it names none).
    a = raw_bytes(b"hello\r\n\r\n")
    check(a.status == 400 and (a.json() or {}).get("type") == "/problems/bad-request",
          "a one-word request line: %r" % a)
    stop_rematd()


def raw_bytes_all(data, timeout=30.0):
    """data on one connection, and all the server sends until it closes."""
    s = socket.create_connection(("127.0.0.1", contract_wire.port), timeout=timeout)
    s.sendall(data)
    return read_all(s)
