#!/bin/sh
# rematd --workers 2 starts two workers pointed at itself with the worker
# token, restarts one that is killed (after its backoff), and on SIGTERM
# stops them (they see SIGTERM) and exits 0.  The worker is a fake script.
. "$(dirname "$0")/lib.sh"
fake_workers
REMAT_WORKER_TOKEN=wtok start_rematd --workers 2 --worker-path "$T/remat-worker"

wait_for '^start' 2 && ok || fail "two workers did not start: $(cat "$FAKE_WORKER_LOG")"
grep -q "^start [0-9]* cpu .* http://127.0.0.1:$PORT lease=204" "$FAKE_WORKER_LOG" && ok ||
    fail "worker args or token wrong: $(cat "$FAKE_WORKER_LOG")"
[ "$(awk '/^start/ {print $4}' "$FAKE_WORKER_LOG" | sort -u | wc -l)" = 2 ] && ok || fail "worker ids not distinct"
victim=$(awk '/^start/ {print $2; exit}' "$FAKE_WORKER_LOG")
kill -9 "$victim"
wait_for '^start' 3 && ok || fail "a killed worker was not restarted"
grep -q '"msg":"worker exited"' "$T/rematd.log" && ok || fail "no log line for the dead worker"
# The crash is counted, and both are alive again.
two_alive() { [ "$(metric remat_workers_alive)" = 2 ]; }
until_true 30 two_alive && ok || fail "remat_workers_alive is $(metric remat_workers_alive), not 2"
[ "$(metric remat_worker_crashes_total)" -ge 1 ] && [ "$(metric remat_workers_supervised)" = 2 ] &&
    ok || fail "the killed worker is not counted: $(metric remat_worker_crashes_total) crashes"
req GET /readyz
[ "$CODE" = 200 ] && grep -q '"workers":"2 of 2 alive"' "$BODY" && ok ||
    fail "/readyz with two workers: $CODE $(cat "$BODY")"
live=$(awk '/^start/ {print $2}' "$FAKE_WORKER_LOG" | grep -v "^$victim$")
stop_rematd
for p in $live; do
    grep -q "^term $p$" "$FAKE_WORKER_LOG" && ok || fail "worker $p did not get SIGTERM"
    kill -0 "$p" 2>/dev/null && fail "worker $p still running" || ok
done

# A worker that dies by a signal at once, every time (a model that crashes
# it): still restarted after the fifth quick death, which used to end its
# restarts for good (backoff 1, 2, 4, 8 s: the fifth exit comes about 15 s
# in); /readyz is 503 while none is alive, and /metrics counts the crashes.
: >"$FAKE_WORKER_LOG"
: >"$T/rematd.log"
FAKE_WORKER_CRASH=1
export FAKE_WORKER_CRASH
start_rematd --workers 1 --worker-path "$T/remat-worker"
unset FAKE_WORKER_CRASH
none_alive() {
    req GET /readyz
    [ "$CODE" = 503 ] && grep -q 'no worker is alive' "$BODY"
}
until_true 30 none_alive && ok || fail "/readyz with no worker alive: $CODE $(cat "$BODY")"
five_exits() { [ "$(grep -c '"msg":"worker exited' "$T/rematd.log")" -ge 5 ]; }
until_true 60 five_exits && ok || fail "five exits were not seen: $(grep -c 'worker exited' "$T/rematd.log")"
grep -q 'not restarted' "$T/rematd.log" && fail "a crashing worker was given up: $(grep -m1 'not restarted' "$T/rematd.log")" || ok
grep '"msg":"worker exited"' "$T/rematd.log" | tail -1 | grep -q '"signal":11' && ok ||
    fail "the exit's signal is not logged: $(grep 'worker exited' "$T/rematd.log" | tail -1)"
[ "$(metric remat_worker_crashes_total)" -ge 5 ] && ok ||
    fail "remat_worker_crashes_total $(metric remat_worker_crashes_total), want >= 5"
stop_rematd

# --workers auto: one per /dev/nvidiaN, else one CPU worker.
: >"$FAKE_WORKER_LOG"
start_rematd --workers auto --worker-path "$T/remat-worker"
wait_for '^start' 1 && ok || fail "auto started no worker"
if ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
    grep -q '^start [0-9]* cuda:0 ' "$FAKE_WORKER_LOG" && ok || fail "auto: no cuda:0 worker"
else
    grep -q '^start [0-9]* cpu ' "$FAKE_WORKER_LOG" && ok || fail "auto: no cpu worker"
fi
stop_rematd
req_help=$("$REMATD" --help)
for flag in --listen --data-dir --max-body-bytes --max-stages --max-connections --connection-timeout \
    --threads --lease-seconds --max-attempts --idempotency-ttl --workers --worker-path REMAT_TOKEN; do
    echo "$req_help" | grep -q -- "$flag" && ok || fail "--help does not list $flag"
done
# Flags beat the environment, which beats the defaults.
cfg=$(REMAT_LISTEN=127.0.0.1:9999 REMAT_THREADS=3 "$REMATD" --threads 5 --print-config)
echo "$cfg" | grep -q '"listen": "127.0.0.1:9999"' && echo "$cfg" | grep -q '"threads": 5' && ok ||
    fail "precedence: $cfg"
"$REMATD" --print-config | grep -q '"listen": "127.0.0.1:8080"' && ok || fail "default listen"
REMAT_THREADS=lots "$REMATD" --print-config >/dev/null 2>&1 && fail "a bad REMAT_THREADS was accepted" || ok
finish
