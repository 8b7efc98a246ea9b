#!/bin/sh
# A data directory written by rematd 0.1.0, which stored each plan's answer
# as JSON text and its request in a `requests` table, and kept an HTTP
# status and Location with each Idempotency-Key: this rematd migrates it
# once (PRAGMA user_version), renaming that plans table to plans_v1, and
# keeps serving its plans byte for byte (and their timelines, solved again
# from the stored request), replays its keys, stores new plans in the
# compact form beside them, and opens the result again.  A database from a
# newer rematd is refused.
. "$(dirname "$0")/lib.sh"
mkdir -p "$T/data"
OLD_ID=0123456789abcdef0123456789abcdef
T1='{"format":"remat.profile/v1","input_bytes":4,"stages":[{"out_bytes":1},{"out_bytes":4},{"out_bytes":1},{"out_bytes":4}]}'
OLD_BODY='{"algorithm":"sqrt","checkpoints":[2],"legacy":"kept as stored","id":"'$OLD_ID'","created_at":"2026-11-22T23:00:00Z"}'
OLD_JOB=fedcba9876543210fedcba9876543210
OLD_REQUEST="{\"algorithm\":\"sqrt\",\"profile\":$T1}"
JOB_REQUEST='{"model":"alexnet","device":"cpu"}'
JOB_BODY='{"id":"'$OLD_JOB'","kind":"profile","status":"queued","stored":"by 0.1.0"}'
printf '%s' "$OLD_BODY" >"$T/old.json"
printf '%s' "$JOB_BODY" >"$T/job.json"
"$PYTHON" - "$T/data/rematd.db" "$OLD_ID" "$OLD_BODY" "$OLD_REQUEST" "$OLD_JOB" "$JOB_REQUEST" \
    "$JOB_BODY" <<'PY' ||
import hashlib, sqlite3, sys, time
db, pid, body, request, jid, job_request, job_body = sys.argv[1:8]
c = sqlite3.connect(db)
c.executescript("""
PRAGMA journal_mode=WAL;
CREATE TABLE requests (hash TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE plans (id TEXT PRIMARY KEY, created_at TEXT NOT NULL,
 algorithm TEXT NOT NULL, options TEXT NOT NULL, request_hash TEXT, body TEXT NOT NULL);
CREATE TABLE jobs (id TEXT PRIMARY KEY, kind TEXT NOT NULL,
 status TEXT NOT NULL, device TEXT NOT NULL, spec TEXT NOT NULL,
 attempts INTEGER NOT NULL DEFAULT 0, expiries INTEGER NOT NULL DEFAULT 0,
 lease_id TEXT, lease_expires_at REAL, worker_id TEXT, progress TEXT, result TEXT,
 reason TEXT, last_error TEXT, created_at REAL NOT NULL, updated_at REAL NOT NULL);
CREATE INDEX jobs_status ON jobs(status);
CREATE TABLE idempotency (scope TEXT NOT NULL, key TEXT NOT NULL,
 body_hash TEXT NOT NULL, status INTEGER NOT NULL, location TEXT, body TEXT NOT NULL,
 created_at REAL NOT NULL, PRIMARY KEY (scope, key));
CREATE INDEX idempotency_created ON idempotency(created_at);
""")
now = time.time()
c.execute("INSERT INTO requests VALUES (?, ?)", ("plan:" + pid, request))
c.execute("INSERT INTO plans VALUES (?, ?, 'sqrt', '{\"algorithm\":\"sqrt\"}', ?, ?)",
          (pid, "2026-11-22T23:00:00Z", "plan:" + pid, body))
c.execute("INSERT INTO jobs (id, kind, status, device, spec, created_at, updated_at)"
          " VALUES (?, 'profile', 'queued', 'cpu', ?, ?, ?)", (jid, job_request, now, now))
sha = lambda t: hashlib.sha256(t.encode()).hexdigest()
c.execute("INSERT INTO idempotency VALUES ('plans_create', 'k-010', ?, 201, ?, ?, ?)",
          (sha(request), "/v1/plans/" + pid, body, now))
c.execute("INSERT INTO idempotency VALUES ('profiles_create', 'k-010', ?, 202, ?, ?, ?)",
          (sha(job_request), "/v1/profiles/" + jid, job_body, now))
c.commit()
c.close()
PY
    { echo "cannot write the 0.1.0 database (python3's sqlite3)"; exit 1; }

for round in 1 2; do
    start_rematd
    req GET "/v1/plans/$OLD_ID"
    [ "$CODE" = 200 ] && cmp -s "$BODY" "$T/old.json" && ok ||
        fail "round $round: the 0.1.0 plan: $CODE $(head -c 300 "$BODY")"
    req GET "/v1/plans/$OLD_ID/timeline.svg"
    [ "$CODE" = 200 ] && grep -q '<svg' "$BODY" && ok || fail "round $round: 0.1.0 timeline: $CODE"
    # Its Idempotency-Keys: the first answers again, Location made from the
    # id the migration kept.
    post /v1/plans "$OLD_REQUEST" -H 'Idempotency-Key: k-010'
    [ "$CODE" = 201 ] && cmp -s "$BODY" "$T/old.json" && [ "$(header Location)" = "/v1/plans/$OLD_ID" ] &&
        [ "$(header Idempotent-Replayed)" = true ] && ok ||
        fail "round $round: the 0.1.0 plan's key: $CODE $(tr -d '\r' <"$HDRS") $(head -c 300 "$BODY")"
    post /v1/profiles "$JOB_REQUEST" -H 'Idempotency-Key: k-010'
    [ "$CODE" = 202 ] && cmp -s "$BODY" "$T/job.json" &&
        [ "$(header Location)" = "/v1/profiles/$OLD_JOB" ] && [ "$(header Retry-After)" = 2 ] &&
        [ "$(header Idempotent-Replayed)" = true ] && ok ||
        fail "round $round: the 0.1.0 job's key: $CODE $(tr -d '\r' <"$HDRS") $(head -c 300 "$BODY")"
    post /v1/profiles '{"model":"vgg11","device":"cpu"}' -H 'Idempotency-Key: k-010' &&
        problem "round $round: the 0.1.0 key with another body" 422 idempotency-key-reused
    req GET "/v1/profiles/$OLD_JOB"
    [ "$CODE" = 200 ] && [ "$(field status)" = queued ] && ok ||
        fail "round $round: the 0.1.0 job: $CODE $(head -c 300 "$BODY")"
    if [ $round = 1 ]; then
        post /v1/plans "{\"algorithm\":\"sqrt\",\"profile\":$T1}" && expect 201 /v1/plans
        [ "$(field checkpoints)" = "[2]" ] && ok || fail "new plan: $(head -c 300 "$BODY")"
        NEW_ID=$(field id)
        cp "$BODY" "$T/new.json"
    fi
    req GET "/v1/plans/$NEW_ID"
    [ "$CODE" = 200 ] && cmp -s "$BODY" "$T/new.json" && ok ||
        fail "round $round: the new plan: $CODE $(head -c 300 "$BODY")"
    stop_rematd
done
# The 0.1.0 table was renamed once, the new one made beside it.
tables=$("$PYTHON" -c 'import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
print(" ".join(r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = '"'table'"' ORDER BY name")))' "$T/data/rematd.db")
case " $tables " in
*" plans plans_v1 "*) ok ;;
*) fail "tables after the upgrade: $tables" ;;
esac
# Migrated once, to the version this rematd writes.
version=$("$PYTHON" -c 'import sqlite3, sys
print(sqlite3.connect(sys.argv[1]).execute("PRAGMA user_version").fetchone()[0])' "$T/data/rematd.db")
[ "$version" = 5 ] && ok || fail "user_version after the upgrade: $version"
[ "$(grep -c '"msg":"store migrated"' "$T/rematd.log")" = 1 ] && ok ||
    fail "want one migration over two starts: $(grep -c 'store migrated' "$T/rematd.log")"

# A database from a newer rematd: refused at start, with the reason, and
# left as it was.
mkdir -p "$T/newer"
"$PYTHON" -c 'import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.executescript("CREATE TABLE future (x); PRAGMA user_version = 99;")
c.close()' "$T/newer/rematd.db"
timeout 20 "$REMATD" --listen 127.0.0.1:0 --data-dir "$T/newer" --port-file "$T/newer/port" \
    2>"$T/newer.log"
rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] && [ ! -e "$T/newer/port" ] &&
    grep -q 'schema version 99, newer than this rematd knows' "$T/newer.log" && ok ||
    fail "a newer database: exit $rc, $(cat "$T/newer.log")"
version=$("$PYTHON" -c 'import sqlite3, sys
print(sqlite3.connect(sys.argv[1]).execute("PRAGMA user_version").fetchone()[0])' "$T/newer/rematd.db")
[ "$version" = 99 ] && ok || fail "the newer database was changed: user_version $version"
finish
