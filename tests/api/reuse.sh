#!/bin/sh
# Profile reuse (docs/api.md, "Profile reuse"): a profile request whose
# normalised spec matches a done profile is answered from it (200,
# "cached": true, Content-Location), however its defaults are spelled and
# across a restart; a queued one is not reused; "reuse": false, or any
# change that moves the numbers (batch, dtype, device), queues a new job.
# The store is at schema 4 with the reuse index.
. "$(dirname "$0")/lib.sh"
start_rematd
W='{"worker_id":"fake-1","kinds":["profile"],"devices":["cpu"]}'

post /v1/profiles '{"model":"vgg11","device":"cpu","batch_size":4}' && expect 202 /v1/profiles
J1=$(field id)
# Not done yet: the same request queues another job.
post /v1/profiles '{"model":"vgg11","device":"cpu","batch_size":4}' && expect 202 /v1/profiles
J2=$(field id)
[ "$J1" != "$J2" ] && ok || fail "a queued profile was reused"
post /v1/worker/lease "$W" && expect 200 /v1/worker/lease
JOB=$(field job_id)
LEASE=$(field lease_id)
post "/v1/worker/jobs/$JOB/complete" "{\"lease_id\":\"$LEASE\",\"result\":$(job_profile 29 vgg11 4 fp32 cpu)}" &&
    expect 200 '/v1/worker/jobs/{id}/complete'

# The same spec, defaults spelled out and members in another order.
post /v1/profiles '{"batch_size":4,"dtype":"fp32","warmup":2,"repeats":5,"device":"cpu","model":"vgg11"}'
expect 200 /v1/profiles && ok
[ "$(field cached)" = true ] && [ "$(field id)" = "$JOB" ] && [ "$(field status)" = done ] && ok ||
    fail "not answered from the done profile $JOB: $(head -c 300 "$BODY")"
grep -q '"profile":{' "$BODY" && ok || fail "cached answer without the profile"
[ "$(header Content-Location)" = "/v1/profiles/$JOB" ] && ok ||
    fail "Content-Location: $(header Content-Location)"

# What changes the numbers, or asking not to reuse, queues a new job.
for body in '{"model":"vgg11","device":"cpu","batch_size":8}' \
    '{"model":"vgg11","device":"cpu","batch_size":4,"dtype":"bf16"}' \
    '{"model":"vgg11","device":"cuda","batch_size":4}' \
    '{"model":"vgg11","device":"cpu","batch_size":4,"repeats":9}' \
    '{"model":"vgg11","device":"cpu","batch_size":4,"reuse":false}'; do
    post /v1/profiles "$body"
    expect 202 /v1/profiles && [ "$(field cached)" = "" ] && ok || fail "$body was reused"
done
post /v1/profiles '{"model":"vgg11","device":"cpu","batch_size":4,"reuse":"yes"}'
problem "reuse not a boolean" 400 validation /reuse

"$PYTHON" - "$T/data/rematd.db" <<'PY' && ok || fail "schema: version or index missing"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
assert c.execute("PRAGMA user_version").fetchone()[0] == 5
assert c.execute("SELECT 1 FROM sqlite_master WHERE type='index' AND name='jobs_reuse'").fetchone()
plan = " ".join(str(r) for r in c.execute(
    "EXPLAIN QUERY PLAN SELECT id FROM jobs WHERE reuse_key = 'x' AND status = 'done' AND"
    " kind = 'profile' ORDER BY updated_at DESC LIMIT 1"))
assert "jobs_reuse" in plan, plan
PY

# Durable: after a restart the done profile still answers.
stop_rematd
start_rematd
post /v1/profiles '{"model":"vgg11","device":"cpu","batch_size":4}'
[ "$CODE" = 200 ] && [ "$(field cached)" = true ] && [ "$(field id)" = "$JOB" ] && ok ||
    fail "after restart: $CODE $(head -c 300 "$BODY")"
schema_check "$T/manifest"
stop_rematd
finish
