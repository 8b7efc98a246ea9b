#!/bin/sh
# Uploaded models against the real rematd on loopback (docs/models.md):
# raw and multipart uploads (201, then 200 for the same bytes, the id the
# SHA-256's first half), GET, the list, the worker's fetch (worker token,
# the digest in X-Remat-Sha256, the same bytes), 415, 413 from
# Content-Length and mid-stream, each refusal of the archive check
# (random bytes, a truncated archive, torch.save's layout, ../ names, a
# bomb by total size and one by ratio), 507 past --max-models-bytes,
# profile requests on a model (their 400s), DELETE refused with 409 while
# a job uses the model and done after, two identical uploads at once (one
# 201, one 200), and kill -9 in the middle of an upload: after a restart
# no partial file is left and nothing half-uploaded is listed.  The
# archives are made with Python's zipfile in TorchScript's layout; no
# torch needed (tests/worker/models-e2e.py runs real ones).
. "$(dirname "$0")/lib.sh"
export REMAT_WORKER_TOKEN=wtok
start_rematd --max-model-bytes 2000000 --max-models-bytes 3000000

# mkzip FILE KIND [SIZE]: a zip of that kind with SIZE bytes of stored data.
mkzip() {
    "$PYTHON" - "$@" <<'PY'
import os, sys, zipfile
path, kind = sys.argv[1], sys.argv[2]
size = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
    root = "net/"
    if kind != "saved":
        z.writestr(root + "code/__torch__/net.py", "class Net(Module):\n  pass\n")
    z.writestr(root + "data.pkl", b"\x80\x02}q\x00.")
    z.writestr(root + "version", "3\n")
    if kind == "ts" or kind == "saved":
        z.writestr(root + "data/0", os.urandom(size))
    elif kind == "traversal":
        z.writestr(root + "../../evil.sh", "rm -rf /\n")
    elif kind == "bomb-total":
        z.writestr(zipfile.ZipInfo(root + "data/0"), b"\0" * (9 << 20), zipfile.ZIP_DEFLATED)
    elif kind == "bomb-ratio":
        z.writestr(zipfile.ZipInfo(root + "data/0"), b"\0" * (1 << 20), zipfile.ZIP_DEFLATED)
    elif kind == "duplicate":
        import warnings
        warnings.simplefilter("ignore")  # zipfile warns, and writes it
        z.writestr(root + "code/__torch__/net.py", "import os\n")
    elif kind == "badname":
        z.writestr(root + "code/__torch__/X.py", "pass\n")
if kind == "badname":  # the name's X becomes a byte that is not UTF-8
    with open(path, "rb") as f:
        b = f.read()
    with open(path, "wb") as f:
        f.write(b.replace(b"__torch__/X.py", b"__torch__/\xff.py"))
PY
}

# mkmodule FILE [deflated]: an archive whose data.pkl is a module as
# torch.jit.save pickles one (protocol 2, objects of __torch__ classes built
# from dicts): children embed, act, head and act2 (act again), besides a
# flag, a real and an int; with "deflated" its data.pkl is compressed.
mkmodule() {
    "$PYTHON" - "$@" <<'PY'
import pickle, sys, types, zipfile

def torch_class(module, name):
    m = sys.modules.setdefault(module, types.ModuleType(module))
    c = type(name, (), {"__module__": module})
    setattr(m, name, c)
    return c

def obj(cls, **attrs):
    o = cls.__new__(cls)
    o.__dict__.update(attrs)
    return o

Net = torch_class("__torch__", "Net")
Linear = torch_class("__torch__.torch.nn.modules.linear", "Linear")
ReLU = torch_class("__torch__.torch.nn.modules.activation", "ReLU")
act = obj(ReLU, training=True)
net = obj(Net, training=True, scale=0.5, embed=obj(Linear, training=True, weight=None), act=act,
          head=obj(Linear, training=True), act2=act, steps=3)
method = zipfile.ZIP_DEFLATED if len(sys.argv) > 2 else zipfile.ZIP_STORED
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_STORED) as z:
    z.writestr("net/code/__torch__.py", "class Net(Module):\n  pass\n")
    z.writestr(zipfile.ZipInfo("net/data.pkl"), pickle.dumps(net, protocol=2), method)
    z.writestr("net/version", "3\n")
PY
}
mkzip "$T/a.pt" ts 500000
mkzip "$T/b.pt" ts 1200000
mkzip "$T/c.pt" ts 1900000
mkzip "$T/big.pt" ts 2100000
sha() { sha256sum "$1" | cut -c1-64; }
RAW="-H Content-Type:application/octet-stream"

# Raw upload: 201 + Location, the id the digest's first half.
req POST /v1/models $RAW --data-binary "@$T/a.pt" && expect 201 /v1/models
A=$(field id)
[ "$(field sha256)" = "$(sha "$T/a.pt")" ] && ok || fail "sha256 $(field sha256) is not the file's"
[ "$A" = "$(sha "$T/a.pt" | cut -c1-32)" ] && ok || fail "id $A is not the digest's first half"
[ "$(field bytes)" = "$(wc -c <"$T/a.pt")" ] && ok || fail "bytes $(field bytes)"
[ "$(header Location)" = "/v1/models/$A" ] && ok || fail "Location $(header Location)"
grep -q '"root":"net"' "$BODY" && ok || fail "no archive root: $(cat "$BODY")"
grep -q '"stages"' "$BODY" && fail "stages for a data.pkl that is no module: $(cat "$BODY")" || ok
# The same bytes again, as a form: 200, the same model.
req POST /v1/models -F "file=@$T/a.pt" && expect 200 /v1/models
[ "$(field id)" = "$A" ] && ok || fail "the second upload is another model: $(field id)"
req GET "/v1/models/$A" && expect 200 '/v1/models/{id}'
req GET /v1/models && expect 200 /v1/models
grep -q "\"id\":\"$A\"" "$BODY" && grep -q '"name":"alexnet"' "$BODY" && ok ||
    fail "the list lacks the zoo or the upload"
req GET /v1/models/0123456789abcdef0123456789abcdef
problem "unknown model" 404 not-found

# The worker's fetch: its token, the same bytes, the digest.
req GET "/v1/worker/models/$A"
problem "fetch without the worker token" 401 unauthorized
req GET "/v1/worker/models/$A" -H "Authorization: Bearer wtok"
[ "$CODE" = 200 ] && cmp -s "$BODY" "$T/a.pt" && ok || fail "fetch: $CODE, bytes differ"
[ "$(header X-Remat-Sha256)" = "$(sha "$T/a.pt")" ] && ok || fail "X-Remat-Sha256 $(header X-Remat-Sha256)"

# Refusals: media type, size, and the archive check.
req POST /v1/models -H 'Content-Type: application/json' --data-binary "@$T/a.pt"
problem "JSON content type" 415 unsupported-media-type
req POST /v1/models $RAW --data-binary "@$T/big.pt"
problem "over --max-model-bytes by Content-Length" 413 body-too-large
req POST /v1/models $RAW -H 'Transfer-Encoding: chunked' --data-binary "@$T/big.pt"
problem "over --max-model-bytes mid-stream" 413 body-too-large
head -c 100000 /dev/urandom >"$T/random.bin"
req POST /v1/models $RAW --data-binary "@$T/random.bin"
problem "random bytes" 400 invalid-archive
head -c 300000 "$T/a.pt" >"$T/trunc.pt"
req POST /v1/models $RAW --data-binary "@$T/trunc.pt"
problem "a truncated archive" 400 invalid-archive
mkzip "$T/saved.pt" saved
req POST /v1/models $RAW --data-binary "@$T/saved.pt"
problem "torch.save's layout" 422 not-torchscript
grep -q 'net/code/' "$BODY" && ok || fail "the reason does not say what is missing: $(cat "$BODY")"
mkzip "$T/trav.pt" traversal
req POST /v1/models $RAW --data-binary "@$T/trav.pt"
problem "../ in a name" 422 unsafe-archive
grep -q 'evil.sh' "$BODY" && ok || fail "the reason does not name the entry"
mkzip "$T/bomb1.pt" bomb-total
req POST /v1/models $RAW --data-binary "@$T/bomb1.pt"
problem "a bomb by total size" 422 unsafe-archive
mkzip "$T/bomb2.pt" bomb-ratio
req POST /v1/models $RAW --data-binary "@$T/bomb2.pt"
problem "a bomb by ratio" 422 unsafe-archive
grep -q ratio "$BODY" && ok || fail "the reason does not say ratio: $(cat "$BODY")"
# Two entries of one name: rematd would check one and libtorch load the other.
mkzip "$T/dup.pt" duplicate
req POST /v1/models $RAW --data-binary "@$T/dup.pt"
problem "two entries of one name" 422 unsafe-archive
grep -q 'both named .net/code/__torch__/net.py' "$BODY" && ok ||
    fail "the reason does not name the duplicate: $(cat "$BODY")"
# A name that is not UTF-8: a 422 saying so (it was a 500: the reason could
# not be written as JSON).
mkzip "$T/badname.pt" badname
req POST /v1/models $RAW --data-binary "@$T/badname.pt"
problem "a name that is not UTF-8" 422 unsafe-archive
grep -q 'not UTF-8' "$BODY" && ok || fail "the reason does not say UTF-8: $(cat "$BODY")"
req POST /v1/models -F "other=x"
problem "a form without a file" 400 validation

# The quota: 0.5 MB + 1.2 MB stored; 1.9 MB more is past 3 MB, refused
# from Content-Length (raw) and at the end (a form has no early length).
req POST /v1/models $RAW --data-binary "@$T/b.pt" && expect 201 /v1/models
B=$(field id)
req POST /v1/models $RAW --data-binary "@$T/c.pt"
problem "past --max-models-bytes" 507 storage-full
req POST /v1/models -F "file=@$T/c.pt"
problem "past --max-models-bytes, as a form" 507 storage-full
[ "$(ls "$T/data/models" | grep -c .)" = 3 ] && ok || fail "models folder: $(ls "$T/data/models")"
[ -z "$(ls "$T/data/models/tmp")" ] && ok || fail "temporary files left: $(ls "$T/data/models/tmp")"

# The default stages, read from data.pkl: the root's children in order, a
# child held twice listed twice, other attributes not; in the upload's
# answer and in GET.  None for a deflated data.pkl (nor for A's, which is
# not a module: above).
mkmodule "$T/mod.pt"
STAGES='"stages":{"count":4,"names":["embed","act","head","act2"]}'
req POST /v1/models $RAW --data-binary "@$T/mod.pt" && expect 201 /v1/models
MOD=$(field id)
grep -qF "$STAGES" "$BODY" && ok || fail "upload: not the module's children: $(cat "$BODY")"
req GET "/v1/models/$MOD" && expect 200 '/v1/models/{id}'
grep -qF "$STAGES" "$BODY" && ! grep -q '"archive":{[^}]*stages' "$BODY" && ok ||
    fail "GET: not the module's children, or stages inside archive: $(cat "$BODY")"
mkmodule "$T/moddefl.pt" deflated
req POST /v1/models $RAW --data-binary "@$T/moddefl.pt" && expect 201 /v1/models
MODD=$(field id)
grep -q '"stages"' "$BODY" && fail "stages read from a deflated data.pkl: $(cat "$BODY")" || ok
# A profile of MOD whose job lists no stages: the worker finds them in the
# module's forward graph, which rematd does not read, so a count other than
# the 4 top-level children recorded at upload is taken (3 here).
post /v1/profiles "{\"model_id\":\"$MOD\",\"input\":{\"shape\":[8]},\"batch_size\":2,\"device\":\"cpu\"}" &&
    expect 202 /v1/profiles
RJ=$(field id)
post /v1/worker/lease '{"worker_id":"w","kinds":["profile"],"devices":["cpu"]}' \
    -H "Authorization: Bearer wtok" && expect 200 /v1/worker/lease
[ "$(field job_id)" = "$RJ" ] && ok || fail "leased $(field job_id), not $RJ"
RL=$(field lease_id)
post "/v1/worker/jobs/$RJ/complete" "{\"lease_id\":\"$RL\",\"result\":$(job_profile 3 "uploaded:$MOD" 2 fp32 cpu)}" \
    -H "Authorization: Bearer wtok" && expect 200
req GET "/v1/profiles/$RJ"
[ "$(field status)" = done ] && ok || fail "3 found stages not taken: $(head -c 400 "$BODY")"
req DELETE "/v1/models/$MOD" && expect 204
req DELETE "/v1/models/$MODD" && expect 204

# Profile requests on an uploaded model.
post /v1/profiles "{\"model_id\":\"$A\",\"device\":\"cpu\"}"
problem "no input" 400 validation /input
post /v1/profiles "{\"model_id\":\"$A\",\"input\":{\"shape\":[8],\"dtype\":\"int64\"},\"device\":\"cpu\"}"
problem "int64 without high" 400 validation /input/high
post /v1/profiles "{\"model_id\":\"$A\",\"input\":{\"shape\":[8]},\"stages\":[\"a..b\"],\"device\":\"cpu\"}"
problem "a bad stage name" 400 validation /stages/0
post /v1/profiles "{\"model_id\":\"$A\",\"input\":{\"shape\":[8]},\"input_shape\":[8],\"device\":\"cpu\"}"
problem "input_shape with model_id" 400 validation /input_shape
post /v1/profiles '{"model_id":"0123456789abcdef0123456789abcdef","input":{"shape":[8]},"device":"cpu"}'
problem "an unknown model" 404 not-found /model_id
post /v1/profiles "{\"model_id\":\"$A\",\"input\":{\"shape\":[3,8,8]},\"stages\":[\"features.0\",\"head\"],\"batch_size\":2,\"device\":\"cpu\"}" &&
    expect 202 /v1/profiles
JOB=$(field id)
grep -q "\"model_sha256\":\"$(sha "$T/a.pt")\"" "$BODY" && ok || fail "the spec lacks the digest"

# In use: 409 while the job is queued and while it runs; 204 once it failed.
req DELETE "/v1/models/$A"
problem "delete while queued" 409 model-in-use
post /v1/worker/lease '{"worker_id":"w","kinds":["profile"],"devices":["cpu"]}' -H "Authorization: Bearer wtok" &&
    expect 200 /v1/worker/lease
LEASE=$(field lease_id)
req DELETE "/v1/models/$A"
problem "delete while running" 409 model-in-use
post "/v1/worker/jobs/$JOB/fail" "{\"lease_id\":\"$LEASE\",\"reason\":\"test\",\"retryable\":false}" \
    -H "Authorization: Bearer wtok" && expect 200
req DELETE "/v1/models/$A" && expect 204
[ ! -e "$T/data/models/$(sha "$T/a.pt")" ] && ok || fail "the archive is still there"
req GET "/v1/models/$A"
problem "deleted" 404 not-found
req DELETE "/v1/models/$A"
problem "deleted twice" 404 not-found
post /v1/profiles "{\"model_id\":\"$A\",\"input\":{\"shape\":[8]},\"device\":\"cpu\"}"
problem "a profile of a deleted model" 404 not-found /model_id

# Two identical uploads at once: one stores, the other finds it.
mkzip "$T/d.pt" ts 300000
curl -s -o /dev/null -w '%{http_code}\n' $RAW --data-binary "@$T/d.pt" "$BASE/v1/models" >"$T/same1" &
C1=$!
curl -s -o /dev/null -w '%{http_code}\n' $RAW --data-binary "@$T/d.pt" "$BASE/v1/models" >"$T/same2" &
C2=$!
wait "$C1" "$C2"
codes=$(cat "$T/same1" "$T/same2" | sort | tr '\n' ' ')
[ "$codes" = "200 201 " ] && ok || fail "two identical uploads answered $codes"

# kill -9 in the middle of an upload, then a restart: nothing partial.
curl -s -o /dev/null --limit-rate 100k $RAW -H 'Transfer-Encoding: chunked' \
    --data-binary "@$T/b.pt" "$BASE/v1/models" &
CURL=$!
# Polled (a loaded machine starts curl slowly), then half a second more of
# upload before the kill.
uploading() { [ -n "$(ls "$T/data/models/tmp")" ]; }
until_true 30 uploading
sleep 0.5
[ -n "$(ls "$T/data/models/tmp")" ] && ok || fail "no temporary file while uploading"
stop_rematd_kill
wait "$CURL" 2>/dev/null
start_rematd --max-model-bytes 2000000 --max-models-bytes 3000000
[ -z "$(ls "$T/data/models/tmp")" ] && ok || fail "partial upload left: $(ls "$T/data/models/tmp")"
grep -q '"msg":"models folder cleaned"' "$T/rematd.log" && ok || fail "the cleaning is not logged"
req GET /v1/models && expect 200 /v1/models
[ "$(grep -o '"kind":"uploaded"' "$BODY" | wc -l)" = 2 ] && ok ||
    fail "after the restart the list is not B and D: $(cat "$BODY")"
grep -q "\"id\":\"$B\"" "$BODY" && ok || fail "B is not listed"

# While rematd drains (SIGTERM) every answer tells a keep-alive client to
# close the connection, the worker's fetch of an archive (sent from the
# file) as much as any other: connections accepted before the signal,
# their requests sent once rematd has logged that it is shutting down
# (within the second it waits for such connections' requests).
"$PYTHON" - "$PORT" "$PID" "$B" "$top_srcdir/tests/api" "$T/rematd.log" <<'PY' && ok ||
import os, signal, socket, sys, time
port, pid, mid, log = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[5]
sys.path.insert(0, sys.argv[4])
from rawhttp import wait_accepted
reqs = {
    "the model fetch": "GET /v1/worker/models/%s HTTP/1.1\r\nHost: x\r\n"
                       "Authorization: Bearer wtok\r\n\r\n" % mid,
    "GET /healthz": "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
}
socks = {k: socket.create_connection(("127.0.0.1", port)) for k in reqs}
wait_accepted(port, timeout=5.0)
time.sleep(0.05)
seen = os.path.getsize(log)
os.kill(pid, signal.SIGTERM)
deadline = time.time() + 10
while time.time() < deadline:
    with open(log, "rb") as f:
        f.seek(seen)
        if b'"msg":"shutting down"' in f.read():
            break
    time.sleep(0.005)
# draining is set right after that line is written.
time.sleep(0.05)
bad = 0
for k, s in socks.items():
    s.sendall(reqs[k].encode())
    s.settimeout(20)
    got = b""
    try:
        while b"\r\n\r\n" not in got:
            c = s.recv(65536)
            if not c:
                break
            got += c
    except OSError:
        pass
    s.close()
    head = got.partition(b"\r\n\r\n")[0].decode("latin-1").lower()
    if not head.startswith("http/1.1 200") or "\r\nconnection: close" not in head:
        sys.stderr.write("%s while draining: %r\n" % (k, head))
        bad = 1
sys.exit(bad)
PY
    fail "an answer while draining lacks Connection: close"
if wait "$PID"; then ok; else fail "rematd exited with $? after SIGTERM"; fi
PID=

schema_check "$T/manifest"
finish
