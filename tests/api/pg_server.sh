# pg_server.sh - a throwaway PostgreSQL server for the tests (sourced).
#
# pg_start: initdb on a temporary directory and start the server on a free
# loopback port, as an unprivileged user: PostgreSQL refuses to run as
# root, so a root caller (CI) runs it as "nobody" with runuser.  Sets
# PGBIN (set it first to choose), PGT (the directory), PGPORT.  User
# "remat", trust authentication on 127.0.0.1 only.
# pg_stop: a fast shutdown.  pg_restart_stopped: start again after pg_halt.
# pg_halt: stop the server (the tests' outage), data kept.

if [ -z "${PGBIN:-}" ]; then
    for d in /usr/lib/postgresql/*/bin; do
        [ -x "$d/postgres" ] && PGBIN=$d
    done
fi

as_pg() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u nobody -- "$@"
    else
        "$@"
    fi
}

free_port() {
    "${PYTHON:-python3}" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

pg_start() {
    PGT=$(mktemp -d "${TMPDIR:-/tmp}/remat-pg.XXXXXX")
    chmod 755 "$PGT"
    [ "$(id -u)" = 0 ] && chown nobody "$PGT"
    PGPORT=$(free_port)
    if ! as_pg "$PGBIN/initdb" -D "$PGT/data" -U remat --auth=trust -E UTF8 --no-locale \
        >"$PGT/initdb.log" 2>&1; then
        echo "initdb failed:"
        cat "$PGT/initdb.log"
        return 1
    fi
    pg_run
}

# The server with its socket in $PGT, listening on 127.0.0.1 only.
pg_run() {
    if ! as_pg "$PGBIN/pg_ctl" -D "$PGT/data" -l "$PGT/server.log" -w -t 60 \
        -o "-p $PGPORT -k $PGT -c listen_addresses=127.0.0.1 -c max_connections=200" \
        start >/dev/null; then
        echo "PostgreSQL did not start:"
        cat "$PGT/server.log"
        return 1
    fi
}

pg_halt() {
    as_pg "$PGBIN/pg_ctl" -D "$PGT/data" -m fast -w stop >/dev/null
}

pg_stop() {
    [ -n "${PGT:-}" ] && [ -f "$PGT/data/postmaster.pid" ] && pg_halt
    return 0
}
