# lib.sh - shared by the rematd end-to-end tests (sourced).
#
# Starts the real rematd on a free loopback port (--listen 127.0.0.1:0, the
# bound port read back from --port-file) with a temporary data directory,
# and talks HTTP to it with curl.  Every response is saved; responses of the
# happy paths are listed in $T/manifest for the openapi.yaml schema check.
#
# Another store: with REMAT_TEST_PG set (a PostgreSQL URI of a server's
# maintenance database, as tests/api/postgresql.sh sets it), each test
# script gets a database of its own on that server (dropped at exit) and
# rematd runs with --store on it.  With REMAT_TEST_REPLICAS=2 as well,
# start_rematd starts two replicas on that database, each with its own
# data directory, and req alternates between them (BASE is the one the
# last request went to; PID and PORT are the first replica's, PID2 and
# PORT2 the second's).
set -u
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
REMATD=${REMATD:-$top_builddir/api/rematd}
# Debian's python3 is the one deploy/install-deps.sh gives jsonschema and yaml.
if [ -z "${PYTHON:-}" ]; then
    if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/remat-api-test.XXXXXX")
N=0
FAILS=0
CHECKS=0
PID=
PID2=
REPLICAS=${REMAT_TEST_REPLICAS:-1}
STORE_DB=
STORE_ARGS=
if [ -n "${REMAT_TEST_PG:-}" ]; then
    STORE_DB="remat_test_$$_$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')"
    psql -q -X -v ON_ERROR_STOP=1 -d "$REMAT_TEST_PG" -c "CREATE DATABASE $STORE_DB" >/dev/null ||
        { echo "cannot create database $STORE_DB on $REMAT_TEST_PG"; exit 1; }
    # The maintenance database's URI with this script's database instead.
    STORE_URI=$(echo "$REMAT_TEST_PG" | sed "s|/[^/?]*\(?.*\)\{0,1\}$|/$STORE_DB\1|")
    STORE_ARGS="--store $STORE_URI"
fi
drop_store_db() {
    [ -n "$STORE_DB" ] || return 0
    psql -q -X -d "$REMAT_TEST_PG" -c "DROP DATABASE IF EXISTS $STORE_DB WITH (FORCE)" >/dev/null 2>&1
}
trap 'stop_rematd_kill; drop_store_db; [ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT
trap 'exit 1' INT TERM

fail() {
    FAILS=$((FAILS + 1))
    echo "FAIL: $*"
}
ok() {
    CHECKS=$((CHECKS + 1))
}

# start_one DATA PORTFILE [flags...]: starts one rematd; sets STARTED
# (its pid).  Its own names only: the tests' variables are theirs.
start_one() {
    start_data=$1
    start_pf=$2
    shift 2
    rm -f "$start_pf"
    # shellcheck disable=SC2086 # STORE_ARGS is one flag and a URI without spaces
    "$REMATD" --listen 127.0.0.1:0 --data-dir "$start_data" --port-file "$start_pf" $STORE_ARGS "$@" \
        2>>"$T/rematd.log" &
    STARTED=$!
    i=0
    while [ ! -s "$start_pf" ]; do
        i=$((i + 1))
        if [ $i -gt 1200 ] || ! kill -0 "$STARTED" 2>/dev/null; then # 60 s: a loaded machine
            echo "rematd did not start:"
            cat "$T/rematd.log"
            exit 1
        fi
        sleep 0.05
    done
}

# start_rematd [flags...]: starts rematd with $T/data, sets PORT, BASE, PID
# (and the second replica's PORT2, BASE2, PID2 with REMAT_TEST_REPLICAS=2).
start_rematd() {
    # A second replica left running when the first was killed goes first:
    # the test restarts the service, not half of it.
    if [ -n "$PID2" ]; then
        kill -TERM "$PID2" 2>/dev/null
        wait "$PID2" 2>/dev/null
        PID2=
    fi
    start_one "$T/data" "$T/port" "$@"
    PID=$STARTED
    PORT=$(cat "$T/port")
    BASE1="http://127.0.0.1:$PORT"
    BASE=$BASE1
    if [ "$REPLICAS" -ge 2 ]; then
        start_one "$T/data2" "$T/port2" "$@"
        PID2=$STARTED
        PORT2=$(cat "$T/port2")
        BASE2="http://127.0.0.1:$PORT2"
    fi
}

# stop_rematd: SIGTERM, and the exit status must be 0.
stop_rematd() {
    [ -n "$PID" ] || return 0
    kill -TERM "$PID"
    [ -n "$PID2" ] && kill -TERM "$PID2"
    if wait "$PID"; then ok; else fail "rematd exited with $? after SIGTERM"; fi
    if [ -n "$PID2" ]; then
        if wait "$PID2"; then ok; else fail "the second replica exited with $? after SIGTERM"; fi
    fi
    PID=
    PID2=
}
stop_rematd_kill() {
    [ -n "$PID" ] && kill -9 "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    [ -n "$PID2" ] && kill -9 "$PID2" 2>/dev/null && wait "$PID2" 2>/dev/null
    PID=
    PID2=
}

# req METHOD PATH [curl args...]: sets CODE, CTYPE, BODY (file), HDRS (file).
req() {
    method=$1
    path=$2
    shift 2
    N=$((N + 1))
    # Two replicas: every other request goes to the second (while it runs).
    if [ -n "$PID2" ]; then
        if [ $((N % 2)) = 0 ]; then BASE=$BASE2; else BASE=$BASE1; fi
    fi
    BODY="$T/r$N.body"
    HDRS="$T/r$N.hdrs"
    CODE=$(curl -s -S -o "$BODY" -D "$HDRS" -w '%{http_code}' -X "$method" "$@" "$BASE$path") ||
        CODE=000
    CTYPE=$(sed -n 's/^[Cc]ontent-[Tt]ype: *\([^;\r]*\).*/\1/p' "$HDRS" | tail -1)
}

# base_of I: the base URL the I-th of concurrent clients uses: with two
# replicas, odd ones the first, even ones the second; else BASE.
base_of() {
    if [ -n "$PID2" ]; then
        if [ $(($1 % 2)) = 0 ]; then echo "$BASE2"; else echo "$BASE1"; fi
    else
        echo "$BASE"
    fi
}

# post PATH JSON [curl args...]: a JSON POST.
post() {
    p=$1
    d=$2
    shift 2
    req POST "$p" -H 'Content-Type: application/json' --data-binary "$d" "$@"
}

# header NAME: the value of a response header of the last request.
header() {
    tr -d '\r' <"$HDRS" | sed -n "s/^$1: *//Ip" | tail -1
}

# field NAME: the first "NAME": value of the last (compact JSON) body: a
# string without its quotes, a number, or a flat array as "[1, 2]".  Plain
# grep and sed, so that the lease-timing tests are not slowed by starting
# an interpreter per field.
field() {
    grep -o "\"$1\":\(\"[^\"]*\"\|-\{0,1\}[0-9][0-9.eE+-]*\|\[[^]]*\]\|true\|false\|null\)" "$BODY" |
        head -1 | sed -e "s/^\"$1\"://" -e 's/^"\(.*\)"$/\1/' -e '/^\[/s/,/, /g' -e 's/^null$//'
}

# expect STATUS TEMPLATE: checks the status of the last request and lists a
# JSON body for the schema check under the openapi path TEMPLATE.
expect() {
    if [ "$CODE" != "$1" ]; then
        fail "$method $path: want $1, got $CODE: $(head -c 400 "$BODY")"
        return 1
    fi
    ok
    [ -n "${2:-}" ] && echo "$method $2 $CODE ${CTYPE:-none} $BODY" >>"$T/manifest"
    return 0
}

# problem NAME STATUS TYPE [POINTER]: the last response must be
# application/problem+json with this status, type (and pointer).
problem() {
    name=$1
    if [ "$CODE" != "$2" ]; then
        fail "$name: want $2, got $CODE: $(head -c 300 "$BODY")"
        return 1
    fi
    if [ "$CTYPE" != application/problem+json ]; then
        fail "$name: content type $CTYPE, not application/problem+json"
        return 1
    fi
    if ! grep -q "\"type\":\"/problems/$3\"" "$BODY"; then
        fail "$name: want type /problems/$3: $(head -c 300 "$BODY")"
        return 1
    fi
    if ! grep -q "\"status\":$2" "$BODY" || ! grep -q '"title":"' "$BODY" ||
        ! grep -q '"detail":"' "$BODY"; then
        fail "$name: problem without status, title or detail: $(head -c 300 "$BODY")"
        return 1
    fi
    if [ -n "${4:-}" ] && ! grep -q "\"pointer\":\"$4\"" "$BODY"; then
        fail "$name: want pointer $4: $(head -c 300 "$BODY")"
        return 1
    fi
    ok
    HOSTILE=$((${HOSTILE:-0} + 1))
    echo "$method - $CODE application/problem+json $BODY" >>"$T/problems"
    return 0
}

# schema_check: validates every listed response against openapi.yaml.
schema_check() {
    if ! "$PYTHON" -c 'import jsonschema, yaml' 2>/dev/null; then
        fail "schema check impossible: $PYTHON lacks jsonschema or yaml (sh deploy/install-deps.sh installs them)"
        return 1
    fi
    if "$PYTHON" "$top_srcdir/tests/api/check_schema.py" "$top_srcdir/openapi.yaml" "$1"; then
        ok
    else
        fail "responses do not match openapi.yaml"
    fi
}

# A small valid profile: n stages (default 8).
profile() {
    n=${1:-8}
    printf '{"format":"remat.profile/v1","input_bytes":1048576,"stages":['
    i=1
    while [ "$i" -le "$n" ]; do
        [ "$i" -gt 1 ] && printf ','
        printf '{"name":"s%d","out_bytes":%d,"saved_bytes":%d,"fwd_tmp_bytes":%d,"bwd_tmp_bytes":%d,"param_bytes":%d,"fwd_ms":%d.5,"bwd_ms":%d.25}' \
            "$i" $(( (i % 3 + 1) * 4194304 )) $(( (i % 3 + 1) * 8388608 )) 1048576 2097152 \
            $(( (i % 4) * 65536 )) $((i % 3)) $((i % 4 + 1))
        i=$((i + 1))
    done
    printf ']}'
}

# slow_profile: 300 stages with no repeating pattern (profile's repeat every
# 12, which min-time's table shares; past 300 stages min-time plans on runs
# of stages: both fast, docs/min-time.md).  min-time on it at 1,400 slots
# is a table of about 490 MiB by remat_solve_memory_bound and about 11 s of
# solving on a 2-core machine: the slow solve the limits tests need.
slow_profile() {
    awk 'BEGIN { s = 12345; printf "{\"format\":\"remat.profile/v1\",\"input_bytes\":1048576,\"stages\":[";
        for (i = 1; i <= 300; i++) {
            s = (s * 1103515245 + 12345) % 2147483648; o = (1 + s % 8) * 1048576;
            s = (s * 1103515245 + 12345) % 2147483648; f = s % 7;
            printf "%s{\"name\":\"s%d\",\"out_bytes\":%d,\"saved_bytes\":%d,\"fwd_ms\":%d.5,\"bwd_ms\":%d.25}",
                (i > 1 ? "," : ""), i, o, 2 * o, f, f + 1 }
        printf "]}" }'
}

# job_profile N MODEL BATCH DTYPE DEVICE: profile N with the metadata a
# worker writes, so that it answers a profile job of that model (rematd
# checks model, batch_size, dtype, device and the stage count against the
# job): stages per zoo model: alexnet 21, vgg11 29, resnet18 10.
job_profile() {
    profile "$1" | sed "s/^{/{\"model\":\"$2\",\"batch_size\":$3,\"dtype\":\"$4\",\"device\":\"$5\",/"
}

# metric NAME: the value of an unlabelled metric of /metrics now.
metric() {
    curl -s --max-time 10 "$BASE/metrics" | sed -n "s/^$1 //p"
}

# until_true SECONDS COMMAND...: runs COMMAND every 0.1 s until it
# succeeds (0) or SECONDS have passed (1).  Tests wait for a state this
# way, never for a fixed time: on a loaded machine a fixed sleep is either
# too short or wasted.
until_true() {
    _limit=$1
    shift
    _t0=$(date +%s)
    until "$@"; do
        [ $(($(date +%s) - _t0)) -ge "$_limit" ] && return 1
        sleep 0.1
    done
    return 0
}

# stops_refusing PID WHAT LOG PATTERN: the rematd started in the background
# as PID must stop by itself (waited for as until_true does, 60 s at most),
# exit non-zero and say PATTERN (grep) in LOG.  WHAT names the case.
stops_refusing() {
    _p=$1
    until_true 60 sh -c "! kill -0 $_p 2>/dev/null"
    if kill -0 "$_p" 2>/dev/null; then
        fail "$2: rematd still runs"
        kill -9 "$_p"
    else
        wait "$_p" && fail "$2: rematd exited 0" || ok
        grep -q -- "$4" "$3" && ok || fail "$2: no '$4' in: $(cat "$3")"
    fi
}

# fake_workers: tests/api/fake-worker.sh as $T/remat-worker, for rematd's
# --worker-path; each start and stop is a line in $FAKE_WORKER_LOG.
fake_workers() {
    cp "$top_srcdir/tests/api/fake-worker.sh" "$T/remat-worker"
    chmod +x "$T/remat-worker"
    FAKE_WORKER_LOG="$T/workers.log"
    export FAKE_WORKER_LOG
    : >"$FAKE_WORKER_LOG"
}

# wait_for PATTERN COUNT: until $FAKE_WORKER_LOG has COUNT lines matching
# PATTERN (0), or 30 s have passed (1): a loaded machine starts processes
# slowly.
wait_for() {
    until_true 30 sh -c '[ "$(grep -c "$1" "$FAKE_WORKER_LOG")" -ge "$2" ]' sh "$1" "$2"
}

# solving: a solve holds its memory reservation now (it has started).
solving() {
    _m=$(metric remat_solve_memory_bytes)
    [ -n "$_m" ] && [ "$_m" -gt 0 ]
}

# The script's verdict: it passes when no check failed and at least one
# ran (a script that checked nothing has stopped testing: a loop over an
# empty list, a block skipped by mistake).
finish() {
    echo "$CHECKS checks passed, $FAILS failed"
    if [ "$CHECKS" -eq 0 ]; then
        echo "FAIL: no check ran"
        return 1
    fi
    [ "$FAILS" -eq 0 ]
}
