#!/bin/sh
# A data directory written by rematd 0.1.0, which stored each plan's answer
# as JSON text and its request in a `requests` table: this rematd renames
# that plans table to plans_v1 and keeps serving its plans byte for byte
# (and their timelines, solved again from the stored request), stores new
# plans in the compact form beside them, and opens the result again.
. "$(dirname "$0")/lib.sh"
mkdir -p "$T/data"
OLD_ID=0123456789abcdef0123456789abcdef
T1='{"format":"remat.profile/v1","input_bytes":4,"stages":[{"out_bytes":1},{"out_bytes":4},{"out_bytes":1},{"out_bytes":4}]}'
OLD_BODY='{"algorithm":"sqrt","checkpoints":[2],"legacy":"kept as stored","id":"'$OLD_ID'","created_at":"2026-11-22T23:00:00Z"}'
printf '%s' "$OLD_BODY" >"$T/old.json"
"$PYTHON" - "$T/data/rematd.db" "$OLD_ID" "$OLD_BODY" "{\"algorithm\":\"sqrt\",\"profile\":$T1}" <<'PY' ||
import sqlite3, sys
db, pid, body, request = sys.argv[1:5]
c = sqlite3.connect(db)
c.executescript("""
PRAGMA journal_mode=WAL;
CREATE TABLE requests (hash TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE plans (id TEXT PRIMARY KEY, created_at TEXT NOT NULL,
 algorithm TEXT NOT NULL, options TEXT NOT NULL, request_hash TEXT, body TEXT NOT NULL);
""")
c.execute("INSERT INTO requests VALUES (?, ?)", ("plan:" + pid, request))
c.execute("INSERT INTO plans VALUES (?, ?, 'sqrt', '{\"algorithm\":\"sqrt\"}', ?, ?)",
          (pid, "2026-11-22T23:00:00Z", "plan:" + pid, body))
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
finish
