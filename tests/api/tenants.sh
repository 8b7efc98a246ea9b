#!/bin/sh
# Tenants (docs/security.md, "Tenants") against the real rematd on
# loopback: two tenants from a tokens file.  Without a token, or with one
# rematd does not know, a client route is 401.  Tenant beta gets 404, as
# for an id that does not exist, on alpha's model (GET, DELETE, a profile
# of it), alpha's profile job (GET, a plan, a validation of it) and
# alpha's plan (GET, its timeline), and lists none of alpha's models; the
# same bytes uploaded by both are a model each; one Idempotency-Key used
# by both gives each its own answer; a done profile of alpha's is not
# beta's to reuse.  Each tenant has its share of the models' bytes and of
# the queue: alpha at its share is refused (507, 503) while beta still
# uploads and queues.  /metrics names no tenant.
#
# At start: beyond loopback (0.0.0.0, refused before anything binds)
# without REMAT_TOKEN or a tokens file rematd refuses to start, even with
# REMAT_WORKER_TOKEN; with --allow-anonymous it starts and logs a warning.
# A bad tokens file stops it with the line named; a group-readable one
# starts with a warning.
#
# The supervised workers' Unix socket: with every connection
# --max-connections-per-ip allows 127.0.0.1 held by idle clients, a
# supervised (fake) worker still leases a job over the socket and
# completes it; the socket serves no client route.
#
# With REMAT_TEST_PG (tests/api/postgresql.sh) the tenant checks run on
# the PostgreSQL store, two replicas alternating; the start-up and socket
# checks run once, on SQLite.
. "$(dirname "$0")/lib.sh"

RAW="-H Content-Type:application/octet-stream"
TA=alpha-token-0123456789
TB=beta-token-0123456789abc
TB2=beta-rotated-token-0123456
AA="Authorization: Bearer $TA"
AB="Authorization: Bearer $TB"

# mkzip FILE SIZE: a TorchScript-shaped archive with SIZE random bytes.
mkzip() {
    "$PYTHON" - "$@" <<'PY'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_STORED) as z:
    z.writestr("net/code/__torch__/net.py", "class Net(Module):\n  pass\n")
    z.writestr("net/data.pkl", b"\x80\x02}q\x00.")
    z.writestr("net/version", "3\n")
    z.writestr("net/data/0", os.urandom(int(sys.argv[2])))
PY
}

# refused_start NAME PATTERN [env...] -- [flags...]: rematd must exit
# non-zero by itself, before it listens (no port file), saying PATTERN.
refused_start() {
    name=$1
    pattern=$2
    shift 2
    rm -f "$T/refused.port"
    timeout 30 env "$@" --port-file "$T/refused.port" 2>"$T/refused.log" >/dev/null
    rc=$?
    if [ "$rc" = 0 ] || [ "$rc" = 124 ] || [ -e "$T/refused.port" ]; then
        fail "$name: rematd started (exit $rc): $(cat "$T/refused.log")"
    elif grep -q -- "$pattern" "$T/refused.log"; then
        ok
    else
        fail "$name: no '$pattern' in: $(cat "$T/refused.log")"
    fi
}

printf '# the tenants of tests/api/tenants.sh\nalpha %s\n\nbeta %s\nbeta\t%s  # rotated\n' \
    "$TA" "$TB" "$TB2" >"$T/tokens"
chmod 640 "$T/tokens"

if [ -z "${REMAT_TEST_PG:-}" ]; then
    # ---- start-up: clients authenticated beyond loopback ----
    refused_start "0.0.0.0 with only a worker token" "set REMAT_TOKEN or --tokens-file" \
        REMAT_WORKER_TOKEN=wtok "$REMATD" --listen 0.0.0.0:0 --data-dir "$T/d1"
    [ -e "$T/d1/rematd.db" ] && fail "refused, yet the store was created" || ok
    refused_start "[::] with only a worker token" "--allow-anonymous" \
        REMAT_WORKER_TOKEN=wtok "$REMATD" --listen "[::]:0" --data-dir "$T/d1"
    rm -f "$T/anon.port"
    REMAT_WORKER_TOKEN=wtok "$REMATD" --listen 0.0.0.0:0 --allow-anonymous --data-dir "$T/anon" \
        --port-file "$T/anon.port" 2>"$T/anon.log" &
    ANON=$!
    until_true 60 test -s "$T/anon.port" && ok || fail "--allow-anonymous did not start: $(cat "$T/anon.log")"
    grep -q '"level":"warn","msg":"anonymous clients beyond loopback"' "$T/anon.log" && ok ||
        fail "--allow-anonymous without the warning: $(cat "$T/anon.log")"
    kill -TERM "$ANON"
    wait "$ANON" && ok || fail "the anonymous rematd did not stop cleanly"
    REMAT_ALLOW_ANONYMOUS=yes "$REMATD" --print-config | grep -q '"allow-anonymous": true' && ok ||
        fail "REMAT_ALLOW_ANONYMOUS=yes not taken"
    refused_start "REMAT_ALLOW_ANONYMOUS=maybe" "REMAT_ALLOW_ANONYMOUS" \
        REMAT_ALLOW_ANONYMOUS=maybe "$REMATD" --listen 127.0.0.1:0 --data-dir "$T/d1"
    # A token makes 0.0.0.0 fine without --allow-anonymous (a tokens file
    # is the other way, used below on loopback).
    rm -f "$T/tok.port"
    REMAT_TOKEN=only-token-0123456789 REMAT_WORKER_TOKEN=wtok "$REMATD" --listen 0.0.0.0:0 \
        --data-dir "$T/tok" --port-file "$T/tok.port" 2>"$T/tok.log" &
    TOK=$!
    until_true 60 test -s "$T/tok.port" && ok || fail "0.0.0.0 with REMAT_TOKEN did not start: $(cat "$T/tok.log")"
    grep -q 'anonymous clients' "$T/tok.log" && fail "a token, yet the anonymous warning" || ok
    kill -TERM "$TOK"
    wait "$TOK" || fail "the REMAT_TOKEN rematd did not stop cleanly"

    # ---- bad tokens files: refused, the line named ----
    bad() { # bad NAME PATTERN CONTENT
        printf '%b' "$3" >"$T/bad-tokens"
        chmod 600 "$T/bad-tokens"
        refused_start "$1" "$2" REMAT_WORKER_TOKEN=wtok "$REMATD" --listen 127.0.0.1:0 --data-dir "$T/d2" \
            --tokens-file "$T/bad-tokens"
    }
    bad "a bad tenant name" "bad-tokens line 3: the tenant name" "# c\nalpha $TA\nAlpha $TB\n"
    bad "a short token" "line 1: the token is not 16 to 255" "alpha short\n"
    bad "a token that is no b64token" "line 2: the token is not an RFC 6750 b64token" \
        "\nalpha abc=def0123456789xyz\n"
    bad "a token twice" "line 2: this token is given already" "alpha $TA\nbeta $TA\n"
    bad "three words" "line 1: want '<tenant> <token>', more words" "alpha $TA extra\n"
    bad "no token" "line 1: want '<tenant> <token>', no token" "alpha\n"
    bad "an empty file" "no token in it" "# nothing\n"
    bad "a 65-character name" "line 1: the tenant name" \
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa $TA\n"
    printf 'alpha %s\n' "$TA" >"$T/open-tokens"
    chmod 644 "$T/open-tokens"
    refused_start "a world-readable file" "lets others read it" REMAT_WORKER_TOKEN=wtok "$REMATD" --listen 127.0.0.1:0 \
        --data-dir "$T/d2" --tokens-file "$T/open-tokens"
    refused_start "a missing file" "--tokens-file $T/none" REMAT_WORKER_TOKEN=wtok "$REMATD" --listen 127.0.0.1:0 \
        --data-dir "$T/d2" --tokens-file "$T/none"
    refused_start "REMAT_TOKEN again in the file" "line 2: this token is given already" \
        REMAT_TOKEN="$TA" REMAT_WORKER_TOKEN=wtok "$REMATD" --listen 127.0.0.1:0 --data-dir "$T/d2" \
        --tokens-file "$T/tokens"
    [ -e "$T/d2/rematd.db" ] && fail "a bad tokens file, yet the store was created" || ok
    # A tenant's token never opens the worker routes: a tokens file needs
    # REMAT_WORKER_TOKEN, or supervised workers to make one for.
    refused_start "a tokens file without a worker token" "needs REMAT_WORKER_TOKEN" \
        "$REMATD" --listen 127.0.0.1:0 --data-dir "$T/d2" --tokens-file "$T/tokens"
fi

# ---- two tenants ----
export REMAT_WORKER_TOKEN=wtok
# Two tenants: each may keep 1.5 MB of models, have 2 jobs queued and 4
# Idempotency-Key records.
start_rematd --tokens-file "$T/tokens" --max-models-bytes 3000000 --max-queued-jobs 4 \
    --max-idempotency-keys 8
grep -q '"msg":"the tokens file is readable by its group"' "$T/rematd.log" && ok ||
    fail "a group-readable tokens file without its warning"
grep -q '"msg":"tenants","tenants":2,"tenant_max_models_bytes":1500000,"tenant_max_queued_jobs":2,"tenant_max_idempotency_keys":4' \
    "$T/rematd.log" && ok || fail "the tenants' shares: $(grep tenants "$T/rematd.log")"

req GET /v1/models
problem "no token" 401 unauthorized
req GET /v1/models -H "Authorization: Bearer not-a-tenant-token-0000"
problem "an unknown token" 401 unauthorized
req GET /v1/models -H "Authorization: Bearer wtok"
problem "the worker token on a client route" 401 unauthorized
req GET /v1/models -H "Authorization: Bearer $TB2" && expect 200 /v1/models
post /v1/worker/lease '{"worker_id":"x","devices":["cpu"]}' -H "$AA"
problem "a tenant's token on a worker route" 401 unauthorized

# Models: alpha's is not beta's.
mkzip "$T/a.pt" 1000
req POST /v1/models $RAW --data-binary "@$T/a.pt" -H "$AA" && expect 201 /v1/models
MA=$(field id)
req GET /v1/models -H "$AB" && expect 200 /v1/models
grep -q '"uploaded":\[\]' "$BODY" && ok || fail "beta lists models: $(head -c 300 "$BODY")"
req GET /v1/models -H "$AA"
grep -q "\"id\":\"$MA\"" "$BODY" && ok || fail "alpha does not list its model"
req GET "/v1/models/$MA" -H "$AB"
problem "beta GETs alpha's model" 404 not-found
# The same answer as for no model at all, but for the id and request id.
same() { sed -e "s/$1/X/g" -e 's/"request_id":"[^"]*"//' "$BODY"; }
other=$(same "$MA")
req GET /v1/models/0123456789abcdef0123456789abcdef -H "$AB"
problem "an unknown model" 404 not-found
[ "$other" = "$(same 0123456789abcdef0123456789abcdef)" ] && ok ||
    fail "another tenant's model and none answer differently: $other / $(cat "$BODY")"
req DELETE "/v1/models/$MA" -H "$AB"
problem "beta DELETEs alpha's model" 404 not-found
post /v1/profiles "{\"model_id\":\"$MA\",\"input\":{\"shape\":[8]},\"device\":\"cpu\"}" -H "$AB"
problem "beta profiles alpha's model" 404 not-found /model_id
req GET "/v1/models/$MA" -H "$AA" && expect 200 '/v1/models/{id}'
# The same bytes from beta: a model of its own (201, another id).
req POST /v1/models $RAW --data-binary "@$T/a.pt" -H "$AB" && expect 201 /v1/models
MB=$(field id)
[ -n "$MB" ] && [ "$MB" != "$MA" ] && ok || fail "beta's upload of the same bytes: id $MB, alpha's $MA"
req DELETE "/v1/models/$MB" -H "$AB" && expect 204
# alpha's model keeps the archive both had.
[ -e "$T/data/models/$(sha256sum "$T/a.pt" | cut -c1-64)" ] || [ -n "${REMAT_TEST_PG:-}" ] && ok ||
    fail "beta's delete removed the archive alpha's model uses"
req GET "/v1/models/$MA" -H "$AA" && expect 200

# Jobs and the queue: alpha's share is 2 of 4.
post /v1/profiles '{"model":"alexnet","device":"cpu"}' -H "$AA" && expect 202 /v1/profiles
JA=$(field id)
post /v1/profiles '{"model":"vgg11","device":"cpu"}' -H "$AA" && expect 202 /v1/profiles
post /v1/profiles '{"model":"vgg19","device":"cpu"}' -H "$AA"
problem "alpha past its share of the queue" 503 queue-full
post /v1/profiles '{"model":"vgg19","device":"cpu"}' -H "$AB" && expect 202 /v1/profiles
req GET "/v1/profiles/$JA" -H "$AB"
problem "beta GETs alpha's job" 404 not-found
req GET "/v1/profiles/$JA" -H "$AA" && expect 200 '/v1/profiles/{id}'
# alpha's profile done (the oldest queued job is leased first).
post /v1/worker/lease '{"worker_id":"w","kinds":["profile"],"devices":["cpu"]}' \
    -H "Authorization: Bearer wtok" && expect 200 /v1/worker/lease
[ "$(field job_id)" = "$JA" ] && ok || fail "leased $(field job_id), not alpha's first $JA"
LEASE=$(field lease_id)
post "/v1/worker/jobs/$JA/complete" "{\"lease_id\":\"$LEASE\",\"result\":$(job_profile 21 alexnet 1 fp32 cpu)}" \
    -H "Authorization: Bearer wtok" && expect 200
req GET "/v1/profiles/$JA/frontier.svg" -H "$AB"
problem "beta's frontier of alpha's profile" 404 not-found
post /v1/plans "{\"profile_id\":\"$JA\",\"budget_bytes\":100000000}" -H "$AB"
problem "beta plans from alpha's profile" 404 not-found /profile_id
post /v1/validations "{\"profile_id\":\"$JA\",\"budget_bytes\":100000000}" -H "$AB"
problem "beta validates alpha's profile" 404 not-found /profile_id
post /v1/fits "{\"profiles\":{\"1\":\"$JA\"}}" -H "$AB"
[ "$CODE" = 404 ] || [ "$CODE" = 400 ] && ! grep -q "$JA\"" "$BODY" && ok ||
    fail "beta's fits of alpha's profile: $CODE $(head -c 300 "$BODY")"
# Reuse: alpha's done profile answers alpha again, never beta.
post /v1/profiles '{"model":"alexnet","device":"cpu"}' -H "$AA"
[ "$CODE" = 200 ] && [ "$(field id)" = "$JA" ] && ok || fail "alpha's reuse: $CODE $(head -c 300 "$BODY")"
post /v1/profiles '{"model":"alexnet","device":"cpu"}' -H "$AB"
[ "$CODE" = 202 ] && [ "$(field id)" != "$JA" ] && [ "$(field cached)" = "" ] && ok ||
    fail "beta was given alpha's profile: $CODE $(head -c 300 "$BODY")"

# Plans: alpha's is not beta's, by id or through its timeline.
post /v1/plans "{\"profile_id\":\"$JA\",\"budget_bytes\":100000000}" -H "$AA" && expect 201 /v1/plans
PA=$(field id)
req GET "/v1/plans/$PA" -H "$AB"
problem "beta GETs alpha's plan" 404 not-found
req GET "/v1/plans/$PA/timeline.svg" -H "$AB"
problem "beta's timeline of alpha's plan" 404 not-found
req GET "/v1/plans/$PA" -H "$AA" && expect 200 '/v1/plans/{id}'
# The same body from beta is not answered from alpha's (the planning
# threads' cache): beta cannot plan from alpha's profile.
post /v1/plans "{\"profile_id\":\"$JA\",\"budget_bytes\":100000000}" -H "$AB"
problem "beta repeats alpha's plan request" 404 not-found /profile_id

# One Idempotency-Key, two tenants: two plans, each replayed to its own.
P1=$(profile 6)
P2=$(profile 7)
post /v1/plans "{\"profile\":$P1,\"budget_bytes\":100000000}" -H "$AA" -H "Idempotency-Key: k-1" &&
    expect 201 /v1/plans
KA=$(field id)
post /v1/plans "{\"profile\":$P2,\"budget_bytes\":100000000}" -H "$AB" -H "Idempotency-Key: k-1" &&
    expect 201 /v1/plans
KB=$(field id)
[ "$(header Idempotent-Replayed)" = "" ] && [ "$KB" != "$KA" ] && ok ||
    fail "beta's key k-1 answered with alpha's: $KB"
post /v1/plans "{\"profile\":$P2,\"budget_bytes\":100000000}" -H "$AB" -H "Idempotency-Key: k-1"
[ "$CODE" = 201 ] && [ "$(header Idempotent-Replayed)" = true ] && [ "$(field id)" = "$KB" ] && ok ||
    fail "beta's replay: $CODE $(field id)"
post /v1/plans "{\"profile\":$P1,\"budget_bytes\":100000000}" -H "$AA" -H "Idempotency-Key: k-1"
[ "$CODE" = 201 ] && [ "$(header Idempotent-Replayed)" = true ] && [ "$(field id)" = "$KA" ] && ok ||
    fail "alpha's replay: $CODE $(field id)"
# Room in the queue: the two oldest jobs (alpha's vgg11, beta's vgg19) fail.
for i in 1 2; do
    post /v1/worker/lease '{"worker_id":"w","kinds":["profile"],"devices":["cpu"]}' \
        -H "Authorization: Bearer wtok"
    post "/v1/worker/jobs/$(field job_id)/fail" "{\"lease_id\":\"$(field lease_id)\",\"reason\":\"x\",\"retryable\":false}" \
        -H "Authorization: Bearer wtok" && expect 200
done
post /v1/profiles '{"model":"resnet18","device":"cpu"}' -H "$AB" -H "Idempotency-Key: k-2" &&
    expect 202 /v1/profiles
JK=$(field id)
post /v1/profiles '{"model":"resnet18","device":"cpu"}' -H "$AA" -H "Idempotency-Key: k-2"
[ "$CODE" = 202 ] && [ "$(field id)" != "$JK" ] && ok ||
    fail "alpha's key k-2 answered with beta's job: $CODE $(field id)"
# Idempotency-Key records: alpha's share is 4 of 8, and it has 2 (k-1,
# k-2).  Two more fit; a fifth new key is 503 though 5 of 8 are kept,
# while alpha's recorded keys still replay and beta still records new ones.
for k in k-3 k-4; do
    post /v1/plans "{\"profile\":$P1,\"budget_bytes\":100000000}" -H "$AA" -H "Idempotency-Key: $k" &&
        expect 201 /v1/plans
done
K3=$(field id)
post /v1/plans "{\"profile\":$P1,\"budget_bytes\":100000000}" -H "$AA" -H "Idempotency-Key: k-5"
problem "alpha past its share of the Idempotency-Key records" 503 queue-full
grep -q 'tenant-max-idempotency-keys' "$BODY" && ok || fail "the 503 does not name the share: $(cat "$BODY")"
post /v1/profiles '{"model":"vgg16","device":"cpu"}' -H "$AA" -H "Idempotency-Key: k-5"
problem "alpha past its share of the records, with a job" 503 queue-full
post /v1/plans "{\"profile\":$P1,\"budget_bytes\":100000000}" -H "$AA" -H "Idempotency-Key: k-4"
[ "$CODE" = 201 ] && [ "$(header Idempotent-Replayed)" = true ] && [ "$(field id)" = "$K3" ] && ok ||
    fail "alpha's replay at its share: $CODE $(field id)"
post /v1/plans "{\"profile\":$P1,\"budget_bytes\":100000000}" -H "$AB" -H "Idempotency-Key: k-5" &&
    expect 201 /v1/plans
[ "$(header Idempotent-Replayed)" = "" ] && ok || fail "beta's new key k-5 was a replay"

# Models' bytes: alpha's share is 1.5 MB (a.pt is 1 kB of it).
mkzip "$T/big1.pt" 1000000
mkzip "$T/big2.pt" 1000000
req POST /v1/models $RAW --data-binary "@$T/big1.pt" -H "$AA" && expect 201 /v1/models
req POST /v1/models $RAW --data-binary "@$T/big2.pt" -H "$AA"
problem "alpha past its share, by Content-Length" 507 storage-full
grep -q 'tenant-max-models-bytes' "$BODY" && ok || fail "the 507 does not name the share: $(cat "$BODY")"
req POST /v1/models -F "file=@$T/big2.pt" -H "$AA"
problem "alpha past its share, as a form" 507 storage-full
req POST /v1/models $RAW --data-binary "@$T/big2.pt" -H "$AB" && expect 201 /v1/models

# /metrics names no tenant.
curl -s "$BASE/metrics" >"$T/metrics"
grep -q 'alpha\|beta' "$T/metrics" && fail "/metrics names a tenant" || ok
stop_rematd

[ -n "${REMAT_TEST_PG:-}" ] && {
    finish
    exit
}

# ---- the workers' socket, with the clients' cap exhausted ----
# A worker that waits for $T/go, then leases over REMAT_SERVER_SOCKET and
# completes its job with $T/result.json.
cat >"$T/lease-worker" <<'EOF'
#!/bin/sh
log=${FAKE_WORKER_LOG:?}
echo "start $$ socket=${REMAT_SERVER_SOCKET:-}" >>"$log"
trap 'exit 0' TERM
dir=$(dirname "$log")
while [ ! -e "$dir/go" ]; do sleep 0.1; done
auth="Authorization: Bearer ${REMAT_WORKER_TOKEN:-}"
body=$(curl -s --max-time 10 --unix-socket "$REMAT_SERVER_SOCKET" -H 'Content-Type: application/json' \
    -H "$auth" --data-binary '{"worker_id":"sock","kinds":["profile"],"devices":["cpu"]}' \
    http://rematd/v1/worker/lease)
job=$(echo "$body" | sed -n 's/.*"job_id":"\([0-9a-f]*\)".*/\1/p')
lease=$(echo "$body" | sed -n 's/.*"lease_id":"\([0-9a-f]*\)".*/\1/p')
echo "leased $job" >>"$log"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 --unix-socket "$REMAT_SERVER_SOCKET" \
    -H 'Content-Type: application/json' -H "$auth" \
    --data-binary "{\"lease_id\":\"$lease\",\"result\":$(cat "$dir/result.json")}" \
    "http://rematd/v1/worker/jobs/$job/complete")
echo "complete $job $code" >>"$log"
while :; do sleep 0.1; done
EOF
chmod +x "$T/lease-worker"
FAKE_WORKER_LOG="$T/workers.log"
export FAKE_WORKER_LOG
: >"$FAKE_WORKER_LOG"
job_profile 21 alexnet 1 fp32 cpu >"$T/result.json"
: >"$T/rematd.log"
rm -rf "$T/data"
# No REMAT_WORKER_TOKEN: with a tokens file rematd makes one for its
# workers (a tenant's token opens no worker route).
unset REMAT_WORKER_TOKEN
start_rematd --workers 1 --worker-path "$T/lease-worker" --max-connections-per-ip 4 \
    --request-timeout 120 --connection-timeout 120 --tokens-file "$T/tokens"
wait_for '^start' 1 && ok || fail "the worker did not start: $(cat "$T/rematd.log")"
SOCK="$T/data/workers/rematd.sock"
grep -q "^start .* socket=$SOCK$" "$FAKE_WORKER_LOG" && ok ||
    fail "the worker was not given the socket: $(cat "$FAKE_WORKER_LOG")"
[ "$(stat -c %a "$SOCK")" = 600 ] && [ "$(stat -c %a "$T/data/workers")" = 700 ] && ok ||
    fail "the socket or its folder is open to others: $(stat -c %a "$SOCK") $(stat -c %a "$T/data/workers")"
# The socket serves the worker routes and the probes only.
code=$(curl -s -o "$T/sock.body" -w '%{http_code}' --unix-socket "$SOCK" http://rematd/v1/models)
[ "$code" = 404 ] && grep -q 'worker routes only' "$T/sock.body" && ok ||
    fail "a client route on the workers' socket: $code $(cat "$T/sock.body")"
code=$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$SOCK" http://rematd/healthz)
[ "$code" = 200 ] && ok || fail "/healthz on the workers' socket: $code"
post /v1/profiles '{"model":"alexnet","device":"cpu"}' -H "$AA" && expect 202 /v1/profiles
JS=$(field id)
# Every connection 127.0.0.1 may have, held idle.
"$PYTHON" - "$PORT" 4 "$T/held" <<'PY' &
import socket, sys, time
port, n, flag = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
held = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
open(flag, "w").close()
time.sleep(120)
PY
HOLDER=$!
until_true 30 test -e "$T/held" && ok || fail "the idle connections were not opened"
sleep 0.5
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$BASE/healthz")
[ "$code" = 000 ] && ok || fail "a fifth connection from 127.0.0.1 was served ($code): the cap is not full"
touch "$T/go"
until_true 30 grep -q '^complete ' "$FAKE_WORKER_LOG" && ok || fail "the worker did not finish: $(cat "$FAKE_WORKER_LOG")"
grep -q "^complete $JS 200$" "$FAKE_WORKER_LOG" && ok ||
    fail "the worker did not complete the job through the socket: $(cat "$FAKE_WORKER_LOG")"
kill "$HOLDER"
wait "$HOLDER" 2>/dev/null
until_true 10 sh -c "curl -s -o /dev/null --max-time 2 '$BASE/healthz'" || true
req GET "/v1/profiles/$JS" -H "$AA"
[ "$(field status)" = done ] && ok || fail "the job is not done: $(head -c 300 "$BODY")"
stop_rematd
[ ! -e "$SOCK" ] && ok || fail "the socket was left behind"

# ---- the same with the real remat-worker (built with libtorch) ----
# 127.0.0.1's connections are all held from the start; the job is posted
# and read from 127.0.0.2 (another loopback address, its own cap), so the
# worker can only have come in on its socket.
WORKER=$top_builddir/worker/remat-worker
if [ -x "$WORKER" ]; then
    rm -rf "$T/data" "$T/held"
    start_rematd --workers 1 --worker-path "$WORKER" --max-connections-per-ip 4 \
        --request-timeout 300 --connection-timeout 300 --tokens-file "$T/tokens"
    "$PYTHON" - "$PORT" 4 "$T/held" <<'PY' &
import socket, sys, time
port, n, flag = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
held = []
for _ in range(n):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.connect(("127.0.0.1", port))
    held.append(s)
open(flag, "w").close()
time.sleep(300)
PY
    HOLDER=$!
    until_true 30 test -e "$T/held" && ok || fail "the idle connections were not opened"
    B2="http://127.0.0.1:$PORT"
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$B2/healthz")
    [ "$code" = 000 ] && ok || fail "127.0.0.1 is not at its cap ($code)"
    code=$(curl -s -o "$T/real.body" -w '%{http_code}' --interface 127.0.0.2 -H "$AA" -H 'Content-Type: application/json' \
        --data-binary '{"model":"alexnet","device":"cpu","batch_size":1}' "$B2/v1/profiles")
    JR=$(sed -n 's/.*"id":"\([0-9a-f]*\)".*/\1/p' "$T/real.body" | head -1)
    [ "$code" = 202 ] && ok || fail "the job could not be posted from 127.0.0.2: $code $(cat "$T/real.body")"
    real_done() {
        curl -s -o "$T/real.body" --interface 127.0.0.2 -H "$AA" "$B2/v1/profiles/$JR"
        grep -q '"status":"\(done\|failed\)"' "$T/real.body"
    }
    until_true 240 real_done && grep -q '"status":"done"' "$T/real.body" && ok ||
        fail "the real worker did not finish the job: $(head -c 400 "$T/real.body")"
    kill "$HOLDER"
    wait "$HOLDER" 2>/dev/null
    stop_rematd
else
    echo "note: remat-worker is not built (configure without --without-libtorch): the real worker's check was not run"
fi
finish
