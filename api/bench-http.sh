#!/bin/sh
# make bench-http: start rematd on a free loopback port with a temporary
# data directory, drive POST /v1/plans (a 50-stage profile, default
# algorithm) and GET /healthz with wrk, 64 connections for 10 s each, and
# print requests/s, p50 and p99 of both and their ratio.
# Usage: bench-http.sh PATH/TO/rematd SRCDIR   (env: BENCH_SECONDS, BENCH_CONNECTIONS,
#        BENCH_ALGORITHM to pass an algorithm, BENCH_THREADS and BENCH_SYNC for rematd
#        --threads and --sync, REMAT_BENCH_SAME=1 to repeat one body (rematd's cached
#        path) instead of a distinct profile every request;
#        BENCH_STORE for rematd --store: a postgresql:// URI, or "postgresql" for a
#        throwaway PostgreSQL server started here (tests/api/pg_server.sh);
#        BENCH_REPLICAS=2 for two rematd replicas on that store, wrk driving each
#        with half the connections and the requests/s summed;
#        REMAT_BENCH_KEYS=1 for a new Idempotency-Key on every plan)
set -e
rematd=$1
srcdir=${2:-.}
secs=${BENCH_SECONDS:-10}
conns=${BENCH_CONNECTIONS:-64}
command -v wrk >/dev/null || { echo "bench-http: wrk is not installed (apt-get install wrk)"; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/remat-bench.XXXXXX")
pid=
pids=
pg=
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    [ -n "$pg" ] && pg_stop && rm -rf "$PGT"
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
replicas=${BENCH_REPLICAS:-1}
store=${BENCH_STORE:-}
if [ "$store" = postgresql ]; then
    . "$srcdir/tests/api/pg_server.sh"
    [ -n "$PGBIN" ] || { echo "bench-http: PostgreSQL is not installed"; exit 1; }
    pg_start
    pg=1
    psql -q -X -d "postgresql://remat@127.0.0.1:$PGPORT/postgres" -c "CREATE DATABASE bench"
    store="postgresql://remat@127.0.0.1:$PGPORT/bench"
fi
[ "$replicas" = 1 ] || [ -n "$store" ] || { echo "bench-http: BENCH_REPLICAS needs a shared BENCH_STORE"; exit 1; }

# The profile: 50 stages of a convolutional-network-like shape.
{
    printf '{'
    [ -n "$BENCH_ALGORITHM" ] && printf '"algorithm":"%s",' "$BENCH_ALGORITHM"
    printf '"profile":{"format":"remat.profile/v1","input_bytes":19267584,"stages":['
    i=1
    while [ $i -le 50 ]; do
        out=$(( (i % 7 + 1) * 3211264 ))
        [ $i -gt 1 ] && printf ','
        printf '{"name":"layer%d","out_bytes":%d,"saved_bytes":%d,"fwd_tmp_bytes":%d,"bwd_tmp_bytes":%d,"param_bytes":%d,"fwd_ms":%d.%d,"bwd_ms":%d.%d}' \
            $i $out $((out * 2)) $((out / 2)) $out $(( (i % 5) * 147456 )) $((i % 3)) $((i % 10)) $((i % 4 + 1)) $((i % 7))
        i=$((i + 1))
    done
    printf ']}}'
} > "$tmp/body.json"

bases=
r=0
while [ $r -lt "$replicas" ]; do
    r=$((r + 1))
    "$rematd" --listen 127.0.0.1:0 --data-dir "$tmp/data$r" --port-file "$tmp/port$r" \
        ${store:+--store "$store"} \
        ${BENCH_THREADS:+--threads $BENCH_THREADS} ${BENCH_SYNC:+--sync $BENCH_SYNC} 2>>"$tmp/rematd.log" &
    pids="$pids $!"
    [ $r = 1 ] && pid=$!
    i=0
    while [ ! -s "$tmp/port$r" ]; do
        i=$((i + 1)); [ $i -gt 400 ] && { echo "rematd did not start:"; cat "$tmp/rematd.log"; exit 1; }
        sleep 0.05
    done
    bases="$bases http://127.0.0.1:$(cat "$tmp/port$r")"
done
base=${bases# }
base=${base%% *}
code=$(curl -s -o "$tmp/first.json" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary @"$tmp/body.json" "$base/v1/plans")
[ "$code" = 201 ] || { echo "POST /v1/plans answered $code:"; cat "$tmp/first.json"; exit 1; }

run() { # name path [script]: every replica at once, the connections shared
    k=0
    wpids=
    for b in $bases; do
        k=$((k + 1))
        out="$tmp/$1.txt"
        [ $k = 1 ] || out="$tmp/$1.$k.txt"
        if [ -n "$3" ]; then
            REMAT_BENCH_KEY_PREFIX="$$-$k-" REMAT_BENCH_BODY="$tmp/body.json" wrk -t2 -c$((conns / replicas)) -d"${secs}s" --latency -s "$3" "$b$2" > "$out" &
        else
            wrk -t2 -c$((conns / replicas)) -d"${secs}s" --latency "$b$2" > "$out" &
        fi
        wpids="$wpids $!"
    done
    for w in $wpids; do wait "$w"; done
}
# wrk prints latencies as 1.23ms / 456.00us / 1.02s; convert to ms.
to_ms() { awk '{v=$1; if (v ~ /us$/) {sub(/us$/,"",v); v=v/1000} else if (v ~ /ms$/) {sub(/ms$/,"",v)} else if (v ~ /s$/) {sub(/s$/,"",v); v=v*1000}; printf "%.3f", v}'; }
pct() { awk -v p="$2" '$1 == p {print $2}' "$tmp/$1.txt" | to_ms; }
rps() { cat "$tmp/$1.txt" "$tmp/$1".[0-9]*.txt 2>/dev/null | awk '/^Requests\/sec:/ {s += $2} END {printf "%.0f", s}'; }
errs() { awk '/Non-2xx or 3xx responses:/ {print $5} /Socket errors/ {print}' "$tmp/$1.txt"; }

# rematd's CPU time by thread (utime + stime, clock ticks) from /proc: the
# CPU a request costs is steadier than requests/s on a shared machine.
cpu_snap() {
    for t in /proc/$pid/task/*; do
        [ -r "$t/stat" ] && printf '%s %s\n' "$(cat "$t/comm")" "$(awk '{print $14 + $15}' "$t/stat")"
    done | awk '{a[$1] += $2} END {for (k in a) print k, a[k]}' | sort
}
count() { curl -s "$base/metrics" | awk -v r="$1" '$1 ~ "^remat_http_requests_total" && $0 ~ "route=\"" r "\"" {s += $2} END {print s + 0}'; }
cpu_report() { # name before after requests
    tck=$(getconf CLK_TCK)
    join "$2" "$3" | awk -v n="$4" -v t="$tck" -v name="$1" '
        {d = $3 - $2; tot += d; if (d > 0) parts = parts sprintf(" %s %.1f", $1, d / t * 1e6 / n)}
        END {if (n > 0) printf "rematd CPU per %s: %.1f us (%s )\n", name, tot / t * 1e6 / n, parts}'
}

cpu_snap >"$tmp/cpu0"; n0=$(count plans_create)
run plans /v1/plans "$srcdir/api/bench-plan.lua"
cpu_snap >"$tmp/cpu1"; n1=$(count plans_create)
run healthz /healthz
cpu_snap >"$tmp/cpu2"; n2=$(count healthz)

printf '%-22s %12s %10s %10s\n' "endpoint" "requests/s" "p50 ms" "p99 ms"
printf '%-22s %12s %10s %10s\n' "POST /v1/plans" "$(rps plans)" "$(pct plans 50%)" "$(pct plans 99%)"
printf '%-22s %12s %10s %10s\n' "GET /healthz" "$(rps healthz)" "$(pct healthz 50%)" "$(pct healthz 99%)"
awk -v a="$(rps plans)" -v b="$(rps healthz)" 'BEGIN {printf "plans/healthz ratio: %.2f\n", a / b}'
cpu_report plan "$tmp/cpu0" "$tmp/cpu1" $((n1 - n0))
cpu_report "health check" "$tmp/cpu1" "$tmp/cpu2" "$n2"
e=$(errs plans)$(errs healthz)
[ -z "$e" ] || echo "errors: $e"
if [ "${REMAT_BENCH_SAME:-0}" = 1 ]; then bodies="the same body every request: the cached path"; else bodies="a distinct body every request"; fi
if [ -n "$store" ]; then where="store ${BENCH_STORE:-}, $replicas replica(s)"; else where="SQLite store, --sync ${BENCH_SYNC:-full}"; fi
echo "($secs s each, $conns connections, wrk -t2 per replica, 50-stage profile, $bodies, ${BENCH_ALGORITHM:-default (min-peak)} algorithm, $where, $(nproc) cores)"
[ "$replicas" = 1 ] || echo "(CPU figures: the first replica only; p50/p99: the first replica's wrk)"
n=0
for b in $bases; do
    n=$((n + $(curl -s "$b/metrics" | awk '/^remat_plans_created_total/ {s += $2} END {print s + 0}')))
done
echo "plans stored: $n"
