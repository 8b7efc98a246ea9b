#!/bin/sh
# POST /v1/plans reads an inline profile without jansson's tree (the fast
# path, api/routes/plans_create.c) and falls back to the plain path for
# anything unusual, such as a top-level key written with an escape.  Every
# request here is sent both ways ("profile" and "\u0070rofile") and the two
# answers must agree: the status, and the body byte for byte once the
# fields that differ per request (id, created_at, links; a problem's
# instance and request id; the column of a JSON error, which the escape
# moves) are left out.
. "$(dirname "$0")/lib.sh"
start_rematd
P8=$(profile 8)
P50=$(profile 50)
NEG='{"input_bytes":1,"stages":[{"out_bytes":-1}]}'
DUP='{"input_bytes":1,"input_bytes":2,"stages":[{"out_bytes":1}]}'
ODD='{"input_bytes":1,"x":{"y":[1,2,{"z":"\u00e9\"}"}]},"stages":[{"out_bytes":1,"name":"a\"b"}]}'

# strip FILE: the body without what differs between two requests.
strip() {
    sed -e 's/,"id":"[0-9a-f]*","created_at":"[^"]*","links":{[^}]*}}$/}/' \
        -e 's/"instance":"[^"]*",\{0,1\}//' -e 's/"request_id":"[^"]*",\{0,1\}//' \
        -e 's/line [0-9]*, column [0-9]*/line L, column C/' "$1"
}

both() {
    name=$1
    want=$2
    fast="{$3\"profile\":$4$5}"
    plain="{$3\"\\u0070rofile\":$4$5}"
    post /v1/plans "$fast"
    c1=$CODE
    b1=$BODY
    post /v1/plans "$plain"
    c2=$CODE
    b2=$BODY
    if [ "$c1" != "$want" ] || [ "$c2" != "$want" ]; then
        fail "$name: want $want both ways, got $c1 (fast) and $c2 (plain): $(head -c 300 "$b1")"
        return
    fi
    if [ "$(strip "$b1")" != "$(strip "$b2")" ]; then
        fail "$name: the fast and plain answers differ:
$(strip "$b1" | head -c 600)
$(strip "$b2" | head -c 600)"
        return
    fi
    ok
}

for alg in store-all sqrt acg paper-cubic paper-linear min-peak; do
    both "$alg" 201 "\"algorithm\":\"$alg\"," "$P50" ""
done
both "segments" 201 "\"algorithm\":\"uniform\",\"segments\":3," "$P8" ""
both "min-time" 201 "\"algorithm\":\"min-time\",\"budget_bytes\":200000000," "$P8" ""
both "min-time nested" 201 "\"algorithm\":\"min-time\",\"budget_bytes\":90000000," "$P8" ""
both "min-time infeasible" 422 "\"algorithm\":\"min-time\",\"budget_bytes\":1," "$P8" ""
both "model" 201 "\"model\":\"sum\"," "$P8" ""
both "profile last" 201 "\"algorithm\":\"sqrt\"," "$P8" ""
both "profile first" 201 "" "$P8" ",\"algorithm\":\"sqrt\""
both "odd but valid" 201 "" "$ODD" ""
both "bad algorithm" 400 "\"algorithm\":\"nope\"," "$P8" ""
both "unknown field" 400 "\"x\":1," "$P8" ""
both "segments 0" 400 "\"segments\":0," "$P8" ""
both "profile and profile_id" 400 "\"profile_id\":\"0123456789abcdef0123456789abcdef\"," "$P8" ""
both "bad profile" 400 "" "$NEG" ""
both "duplicate key in the profile" 400 "" "$DUP" ""
both "not an object" 400 "" "[1]" ""
both "bad JSON after the profile" 400 "" "$P8" ",\"x\":"
both "duplicate top-level key" 400 "\"model\":\"sum\",\"model\":\"sum\"," "$P8" ""
# A body repeated (each planning thread remembers the last body it planned
# and what came of it): every answer the same plan under its own id, each
# readable byte for byte.
for body in "{\"algorithm\":\"min-peak\",\"profile\":$P50}" "{\"algorithm\":\"sqrt\",\"profile\":$P8}"; do
    prev=
    for k in 1 2 3 4 5 6; do
        post /v1/plans "$body"
        [ "$CODE" = 201 ] || { fail "repeat $k: $CODE"; continue; }
        id=$(field id)
        cp "$BODY" "$T/rep.$k"
        if [ -n "$prev" ]; then
            [ "$(strip "$T/rep.$k")" = "$(strip "$T/rep.1")" ] && ok || fail "repeat $k: another plan"
            [ "$id" != "$prev" ] && ok || fail "repeat $k: the same id $id"
        fi
        req GET "/v1/plans/$id"
        cmp -s "$BODY" "$T/rep.$k" && ok || fail "repeat $k: GET differs from its 201"
        prev=$id
    done
done
stop_rematd
finish
