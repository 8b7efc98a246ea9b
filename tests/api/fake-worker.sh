#!/bin/sh
# A stand-in for remat-worker in the supervision test: records how it was
# started, asks the server for a job once with the token it was given, and
# waits; on SIGTERM it records that and exits 0, as the real worker does.
server= device= id=
while [ $# -gt 0 ]; do
    case $1 in
    --server) server=$2; shift ;;
    --device) device=$2; shift ;;
    --id) id=$2; shift ;;
    esac
    shift
done
log=${FAKE_WORKER_LOG:?}
trap 'echo "term $$" >>"$log"; exit 0' TERM
# REMAT_SERVER_SOCKET: rematd's socket for its workers, used as the real
# worker uses it.
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
    ${REMAT_SERVER_SOCKET:+--unix-socket "$REMAT_SERVER_SOCKET"} \
    -H "Authorization: Bearer ${REMAT_WORKER_TOKEN:-}" \
    --data-binary "{\"worker_id\":\"$id\",\"devices\":[\"$device\"]}" "$server/v1/worker/lease")
# Whether the clients' token reached the worker (it must not).
echo "start $$ $device $id $server lease=$code client_token=${REMAT_TOKEN:+leaked} socket=${REMAT_SERVER_SOCKET:-}" >>"$log"
# FAKE_WORKER_CRASH=1: a worker whose model kills it, every time.
[ -n "${FAKE_WORKER_CRASH:-}" ] && kill -SEGV $$
while :; do sleep 0.1; done
