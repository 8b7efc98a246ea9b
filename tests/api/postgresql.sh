#!/bin/sh
# The PostgreSQL store (issue 16): starts a real PostgreSQL from Debian
# (postgresql-15) on a temporary directory and a free loopback port, as an
# unprivileged user (the server refuses root: as root, as in CI, it runs as
# "nobody"), and runs the endpoint, job and durability suites against it
# with two rematd replicas on one database, requests alternating between
# them, after the store's unit tests (tests/api/test_store_pg), then the
# replica tests (tests/api/replicas.sh: one plan per
# Idempotency-Key across replicas, leases taken once, models readable from
# every replica, faults).  Skipped (77) when PostgreSQL or a rematd built
# with libpq is missing.
set -u
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
REMATD=${REMATD:-$top_builddir/api/rematd}
export top_srcdir top_builddir REMATD

PGBIN=
for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/postgres" ] && [ -x "$d/initdb" ] && PGBIN=$d
done
if [ -z "$PGBIN" ]; then
    echo "skipped: PostgreSQL is not installed (apt-get install postgresql; deploy/install-deps.sh)"
    exit 77
fi
if ! command -v psql >/dev/null 2>&1; then
    echo "skipped: psql is not installed (postgresql-client)"
    exit 77
fi
if "$REMATD" --store postgresql://x@127.0.0.1:1/x --listen 127.0.0.1:0 --data-dir /nonexistent/x 2>&1 |
    grep -q 'built without PostgreSQL'; then
    echo "skipped: rematd was built without libpq (apt-get install libpq-dev, then configure)"
    exit 77
fi

. "$(dirname "$0")/pg_server.sh"
pg_start || exit 1
trap 'pg_stop; rm -rf "$PGT"' EXIT
# replicas.sh stops and starts this server for its fault tests.
export PGBIN PGT PGPORT
trap 'exit 1' INT TERM

export REMAT_TEST_PG="postgresql://remat@127.0.0.1:$PGPORT/postgres"
export REMAT_TEST_REPLICAS=2
FAILED=0
# The store's unit tests with two handles on one database (cmocka).
unit=$top_builddir/tests/api/test_store_pg
if [ -x "$unit" ]; then
    echo "--- test_store_pg on PostgreSQL"
    "$unit" || FAILED=$((FAILED + 1))
fi
for suite in endpoints jobs durability replicas tenants store-bounds; do
    echo "--- $suite.sh on PostgreSQL, two replicas"
    if sh "$top_srcdir/tests/api/$suite.sh"; then
        :
    else
        # Lease-timing suites may flake on a loaded machine: once more.
        echo "--- $suite.sh failed; once more"
        sh "$top_srcdir/tests/api/$suite.sh" || FAILED=$((FAILED + 1))
    fi
done
[ "$FAILED" = 0 ] && echo "PostgreSQL store: all suites passed" ||
    echo "PostgreSQL store: $FAILED suites failed"
[ "$FAILED" = 0 ]
