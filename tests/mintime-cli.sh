#!/bin/sh
# `remat frontier` and `remat plan --algorithm min-time` end to end, on a
# four-stage chain whose saved tensors are ten times its outputs: there the
# least budget (14 bytes) is below every checkpoint set's peak (16), the
# frontier runs from 14 to store-all (43 bytes), and bad input exits 2 with
# one line on stderr.
set -u
remat=${top_builddir:-.}/cli/remat
data=${top_srcdir:-.}/tests/data/mintime
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
die() { echo "FAIL: $*"; fail=1; }

# The frontier: six points, least peak first, store-all last, times falling.
"$remat" frontier "$data/nested4.json" >"$tmp/out" 2>"$tmp/err" ||
    die "frontier exited $?: $(cat "$tmp/err")"
[ -s "$tmp/err" ] && die "frontier wrote to stderr: $(cat "$tmp/err")"
pts=$(grep -o '{"peak_bytes":[0-9]*,"total_ms":[0-9.]*' "$tmp/out" | sed 's/{"peak_bytes"://; s/,"total_ms":/ /')
[ "$(echo "$pts" | head -n 1)" = "14 18.0" ] || die "first point is not (14, 18.0): $pts"
[ "$(echo "$pts" | tail -n 1)" = "43 12.0" ] || die "last point is not store-all (43, 12.0): $pts"
echo "$pts" | awk 'NR > 1 && !($1 > p && $2 < t) { bad = 1 } { p = $1; t = $2 } END { exit bad }' ||
    die "the frontier is not monotone: $pts"
grep -q '"min_peak_bytes":14' "$tmp/out" || die "frontier min_peak_bytes"
grep -q '"store_all_peak_bytes":43' "$tmp/out" || die "frontier store_all_peak_bytes"
grep -q '"nested_segments":\[{"stages":\[1,3\],"checkpoint":true,"inner":' "$tmp/out" ||
    die "the least-peak point is not nested: $(head -c 400 "$tmp/out")"
"$remat" frontier --slots 7 - <"$data/nested4.json" >"$tmp/out" || die "frontier --slots from stdin"
grep -q '"peak_bytes":14,' "$tmp/out" || die "frontier --slots 7 lost the least peak"

# plan: the least budget, a middle one, and unlimited = store-all.
"$remat" plan --algorithm min-time --budget 14 "$data/nested4.json" >"$tmp/out" 2>"$tmp/err" ||
    die "plan --budget 14 exited $?: $(cat "$tmp/err")"
for k in algorithm nested_segments objective peak_bytes store_all_peak_bytes recompute_ms \
    total_ms budget_bytes schedule; do
    grep -q "\"$k\":" "$tmp/out" || die "plan lacks \"$k\": $(head -c 300 "$tmp/out")"
done
grep -q '"peak_bytes":14,' "$tmp/out" || die "plan --budget 14: $(cat "$tmp/out")"
"$remat" plan --algorithm min-peak "$data/nested4.json" >"$tmp/mp" || die "plan min-peak"
grep -q '"peak_bytes":16,' "$tmp/mp" || die "min-peak is not 16 here: $(cat "$tmp/mp")"
"$remat" plan --algorithm min-time --budget 30 --slots 50 "$data/nested4.json" >"$tmp/out" ||
    die "plan --budget 30"
grep -q '"total_ms":14.0' "$tmp/out" || die "plan --budget 30 is not 14 ms: $(cat "$tmp/out")"
"$remat" plan --algorithm min-time --budget 1000 "$data/nested4.json" >"$tmp/out" ||
    die "plan --budget 1000"
grep -q '"checkpoints":\[\],' "$tmp/out" || die "unlimited is not store-all: $(cat "$tmp/out")"
grep -q '"torch_segments":\[\[0,4\]\]' "$tmp/out" || die "store-all torch_segments: $(cat "$tmp/out")"

# Bad input: exit 2, one line on stderr.
bad() { # description, command...
    what=$1; shift
    "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ $rc -eq 2 ] || die "$what: exit $rc, not 2"
    [ "$(wc -l <"$tmp/err")" -eq 1 ] || die "$what: stderr is not one line: $(cat "$tmp/err")"
    [ -s "$tmp/out" ] && die "$what: wrote to stdout"
}
bad "plan below the least budget" "$remat" plan --algorithm min-time --budget 13 "$data/nested4.json"
grep -q "least budget that fits is 14" "$tmp/err" || die "no least budget: $(cat "$tmp/err")"
bad "frontier without a profile" "$remat" frontier
bad "frontier of a missing file" "$remat" frontier "$data/no-such-file.json"
bad "frontier --slots 0" "$remat" frontier --slots 0 "$data/nested4.json"
bad "frontier --slots junk" "$remat" frontier --slots=x "$data/nested4.json"
bad "frontier unknown option" "$remat" frontier --budget 3 "$data/nested4.json"
bad "frontier two profiles" "$remat" frontier "$data/nested4.json" "$data/nested4.json"
printf '{"format": "remat.profile/v1", "input_bytes": 1, "stages": [{"out_bytes": -1}]}' >"$tmp/neg.json"
bad "frontier of a bad profile" "$remat" frontier "$tmp/neg.json"
grep -q "/stages/0/out_bytes" "$tmp/err" || die "bad profile error names no field: $(cat "$tmp/err")"

[ $fail -eq 0 ] && echo "mintime-cli: all passed"
exit $fail
