"""contract_wire.py - tests/api/contract.py's transport and its judge of
answers: requests written byte by byte on connections of their own (so that
framing can be provoked), the answer read to the end, and each answer held
to the spec (status, headers, content type, body, members) with the
statuses it covers recorded.  `port` is the rematd under test's, set by
contract.py once it has started one."""
import json
import socket
import xml.etree.ElementTree

from contract_spec import (SENT_HEADERS, SERVER_PROBLEMS, UNREACHABLE, check, deref,
                           operations, schema_errors)

class Answer:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def header(self, name):
        return self.headers.get(name.lower())

    def json(self):
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def __repr__(self):
        return "%d %s" % (self.status, self.body[:300])


port = None


def raw(method, path, body=b"", headers=None, content_length=None, timeout=30.0):
    """One request on its own connection (Connection: close); the answer
    read to the end.  content_length announces a size without sending it."""
    h = {"Host": "127.0.0.1", "Connection": "close"}
    h.update(headers or {})
    if body or content_length is not None or method in ("POST", "PUT", "PATCH"):
        h["Content-Length"] = str(len(body) if content_length is None else content_length)
    head = "%s %s HTTP/1.1\r\n%s\r\n" % (method, path,
                                         "".join("%s: %s\r\n" % kv for kv in h.items()))
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(head.encode() + (body if content_length is None else b""))
    except (ConnectionResetError, BrokenPipeError):
        pass
    return parse_answer(read_all(s))


def parse_answer(buf):
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    if not lines[0].startswith("HTTP/"):
        return Answer(0, {}, buf)
    hdrs = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return Answer(int(lines[0].split()[1]), hdrs, rest)


def read_all(s):
    buf = b""
    try:
        while True:
            c = s.recv(65536)
            if not c:
                break
            buf += c
    except (ConnectionResetError, BrokenPipeError, socket.timeout):
        pass
    finally:
        s.close()
    return buf


def raw_bytes(data, timeout=30.0):
    """Bytes exactly as given on a connection of their own; the answer read
    until the server closes."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
    except (ConnectionResetError, BrokenPipeError):
        pass
    return parse_answer(read_all(s))


covered = {}   # (operationId) -> set of statuses seen
known_ids = []  # ids of every resource made (from 2xx JSON answers), oldest first
op_by_id = {}
for _path, _m, _op in operations():
    op_by_id[_op["operationId"]] = (_path, _m, _op)


def validate(op_id, a, what):
    """The answer against the spec: status declared, content type declared,
    JSON body valid.  Records the status as covered."""
    path, m, op = op_by_id[op_id]
    where = "%s (%s %s): %s" % (op_id, m.upper(), path, what)
    resp = op["responses"].get(str(a.status))
    if not check(resp is not None, "%s: status %d not declared: %s" % (where, a.status, a.body[:300])):
        return
    covered.setdefault(op_id, set()).add(str(a.status))
    resp = deref(resp)
    declared = {k.lower() for k in resp.get("headers", {})}
    for h in SENT_HEADERS:
        check(a.header(h) is None or h in declared,
              "%s: %d sends %s, not declared on the response" % (where, a.status, h))
    content = resp.get("content", {})
    ctype = (a.header("content-type") or "").split(";")[0].strip()
    if not content:
        check(a.status == 204 or not a.body,
              "%s: %d has a body the spec does not declare" % (where, a.status))
        return
    if "*/*" in content and ctype not in content:
        ctype = "*/*"
    if not check(ctype in content, "%s: %d content type %r not declared (%s)"
                 % (where, a.status, ctype, ", ".join(content))):
        return
    if ctype == "image/svg+xml":
        try:
            root = xml.etree.ElementTree.fromstring(a.body)
            check(root.tag.endswith("svg") and len(root) > 0, "%s: an empty SVG" % where)
        except xml.etree.ElementTree.ParseError as e:
            check(False, "%s: not well-formed SVG: %s" % (where, e))
    if ctype.endswith("json"):
        body = a.json()
        if not check(body is not None, "%s: %d body is not JSON: %r" % (where, a.status, a.body[:200])):
            return
        errs = schema_errors(content[ctype]["schema"], body)
        check(not errs, "%s: %d body invalid: %s" % (where, a.status, errs))
        extra = []
        undeclared([content[ctype]["schema"]], body, "", extra)
        check(not extra, "%s: %d members the schema does not name: %s"
              % (where, a.status, ", ".join(extra[:5])))
        rid = body.get("id") if isinstance(body, dict) else None
        if a.status < 300 and isinstance(rid, str) and rid not in known_ids:
            known_ids.append(rid)
        if ctype == "application/problem+json":
            check(body.get("status") == a.status, "%s: problem status %r, HTTP %d"
                  % (where, body.get("status"), a.status))
            slug = str(body.get("type", "")).rsplit("/", 1)[-1]
            check(SERVER_PROBLEMS.get(slug) == body.get("title"),
                  "%s: title %r of %s is not its fixed title %r"
                  % (where, body.get("title"), slug, SERVER_PROBLEMS.get(slug)))


def flatten(schemas, out, depth=0):
    """The schemas a value is checked against, $refs followed and
    compositions (allOf, anyOf, oneOf, then, else, dependentSchemas) opened,
    each branch included: a member any of them names is declared."""
    for s in schemas:
        if s is True:
            out.append({"additionalProperties": True})
        if not isinstance(s, dict) or depth > 30:
            continue
        if "$ref" in s:
            flatten([deref({"$ref": s["$ref"]})], out, depth + 1)
        out.append(s)
        for k in ("allOf", "anyOf", "oneOf"):
            flatten(s.get(k, []), out, depth + 1)
        flatten([s[k] for k in ("then", "else") if k in s], out, depth + 1)
        flatten(list(s.get("dependentSchemas", {}).values()), out, depth + 1)
    return out


def undeclared(schemas, value, where, out):
    """Appends to out the pointer of every member of value that no schema of
    schemas names, where the schemas name members and take no others."""
    flat = flatten(schemas, [])
    if isinstance(value, dict):
        named = {}
        for s in flat:
            for k, sub in s.get("properties", {}).items():
                named.setdefault(k, []).append(sub)
        free = not named or any(s.get("additionalProperties") not in (None, False) or
                                s.get("patternProperties") for s in flat)
        for k, v in value.items():
            if k in named:
                undeclared(named[k], v, where + "/" + k, out)
            elif not free:
                out.append(where + "/" + k)
    elif isinstance(value, list):
        items = [s["items"] for s in flat if isinstance(s.get("items"), (dict, bool))]
        for i, v in enumerate(value):
            undeclared(items, v, "%s/%d" % (where, i), out)


def coverage():
    """Every operation called, every declared status produced, or listed
    as unreachable with a reason."""
    unreachable = {}
    with open(UNREACHABLE) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            op_id, status, reason = (line.split(None, 2) + ["", ""])[:3]
            check(reason != "", "%s: %s %s is listed unreachable without a reason"
                  % (UNREACHABLE, op_id, status))
            # "*" stands for every operation (a status any of them may give).
            for one in (op_by_id if op_id == "*" else [op_id]):
                unreachable[(one, status)] = reason
    for op_id, (path, m, op) in sorted(op_by_id.items()):
        seen = covered.get(op_id, set())
        check(seen, "operation %s (%s %s) was never called" % (op_id, m.upper(), path))
        for status in op["responses"]:
            if (op_id, status) in unreachable:
                check(status not in seen, "%s %s is listed unreachable but was produced"
                      % (op_id, status))
                continue
            check(status in seen, "%s (%s %s): declared status %s never produced"
                  % (op_id, m.upper(), path, status))
    for op_id, status in unreachable:
        check(op_id in op_by_id and status in op_by_id[op_id][2]["responses"],
              "%s lists %s %s, which the spec does not declare" % (UNREACHABLE, op_id, status))
