#!/bin/sh
# The remat program for a person: on a terminal (a pseudo-terminal here,
# tests/pty-run.py) plan, simulate, frontier and fits print tables with
# bytes in KiB/MiB/GiB, the plan beside store-all and sqrt(n), checkpoints
# by stage name, in colour unless NO_COLOR is set; piped they print the
# JSON of --format json byte for byte, with no escape codes; frontier
# --format svg draws a picture that renders (rsvg-convert) to a PNG that is
# neither empty nor blank (tests/png-check.py).
set -u
remat=${top_builddir:-.}/cli/remat
src=${top_srcdir:-.}
if [ -x /usr/bin/python3 ]; then py=/usr/bin/python3; else py=python3; fi
pty() { "$py" "$src/tests/pty-run.py" "$@"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
die() { echo "FAIL: $*"; fail=1; }
esc=$(printf '\033')
has() { grep -qF -- "$2" "$1" || die "$1 lacks '$2': $(head -c 600 "$1")"; }
no_escapes() { ! grep -q "$esc" "$1" || die "$2: escape codes in $(cat -v "$1" | head -5)"; }
# A byte count as the tables write it, computed here on its own.
human() {
    awk -v b="$1" 'BEGIN { split("B KiB MiB GiB TiB", u, " "); i = 1
        while (b >= 1023.995 && i < 5) { b /= 1024; i++ }
        if (i == 1) printf "%d B", b
        else if (b < 9.995) printf "%.2f %s", b, u[i]
        else if (b < 99.95) printf "%.1f %s", b, u[i]
        else printf "%.0f %s", b, u[i] }'
}
jget() { "$py" -c 'import json,sys; v=json.load(open(sys.argv[1]))
for k in sys.argv[2:]: v=v[int(k)] if isinstance(v, list) else v[k]
print(len(v) if isinstance(v, list) else v)' "$@"; }
cnn=$src/docs/examples/tiny-cnn.json

# plan: on a terminal, a coloured table; piped, the JSON unchanged.
pty "$tmp/tty" "$remat" plan --algorithm min-peak "$cnn" || die "plan on a terminal exited $?"
"$remat" plan --algorithm min-peak "$cnn" >"$tmp/piped" || die "plan piped"
"$remat" plan --algorithm min-peak --format json "$cnn" >"$tmp/json" || die "plan --format json"
cmp -s "$tmp/piped" "$tmp/json" || die "piped plan differs from --format json"
no_escapes "$tmp/piped" "plan piped"
grep -q "$esc\[" "$tmp/tty" || die "no colour on a terminal: $(head -3 "$tmp/tty")"
peak=$(jget "$tmp/json" peak_bytes)
all=$(jget "$tmp/json" store_all_peak_bytes)
saving=$(awk -v p="$peak" -v a="$all" 'BEGIN { printf "%.1f %%", 100 * (a - p) / a }')
has "$tmp/tty" "min-peak (single-level)      $(human "$peak")"
[ "$(human 3754064)" = "3.58 MiB" ] && [ "$(human 98304)" = "96.0 KiB" ] &&
    [ "$(human 512)" = "512 B" ] && [ "$(human 1342177280)" = "1.25 GiB" ] ||
    die "the test's own byte units are wrong"
NO_COLOR=1 pty "$tmp/nocolor" "$remat" plan --algorithm min-peak "$cnn" || die "plan NO_COLOR"
no_escapes "$tmp/nocolor" "NO_COLOR=1"
note="min-peak: the least peak among single-level checkpoint plans (each stage"
note2="recomputed at most once); min-time's multi-level plans can peak lower."
for want in "min-peak (single-level)" "$note" "$note2" "$(human "$peak")" "$(human "$all")" \
    "sqrt(n)" "store-all" "$saving" \
    "checkpoints (2): after relu1 (2), after pool1 (3)" \
    "segments: [conv1 .. relu1] [pool1] [conv2 .. fc]" \
    "remat plan: 8 stages of tiny-cnn, batch 8, input 96.0 KiB"; do
    has "$tmp/nocolor" "$want"
done
# --format table piped: the table, never coloured.
"$remat" plan --format table "$cnn" >"$tmp/table" || die "plan --format table"
no_escapes "$tmp/table" "--format table piped"
has "$tmp/table" "store-all"
# --format json on a terminal: the JSON.
pty "$tmp/ttyjson" "$remat" plan --algorithm min-peak --format=json "$cnn" || die "json on a tty"
cmp -s "$tmp/ttyjson" "$tmp/json" || die "--format json on a terminal is not the JSON"

# frontier: one line per point, each point's peak humanised.
"$remat" frontier --format json "$cnn" >"$tmp/fj" || die "frontier json"
NO_COLOR=1 pty "$tmp/ft" "$remat" frontier "$cnn" || die "frontier table"
n=$(jget "$tmp/fj" points)
rows=$(grep -c '^ *[0-9][0-9]* .* %' "$tmp/ft")
[ "$n" -ge 2 ] && [ "$rows" = "$n" ] || die "frontier: $rows table rows for $n points"
i=0
while [ $i -lt "$n" ]; do
    has "$tmp/ft" "$(human "$(jget "$tmp/fj" points $i peak_bytes)")"
    i=$((i + 1))
done
has "$tmp/ft" "min-peak (single-level)"
has "$tmp/ft" "$note"
# Why the note: the frontier's least peak (min-time at its least budget)
# is below min-peak's where a multi-level schedule helps, as on the
# four-stage chain of docs/min-time.md (14 bytes against 16).
"$remat" plan --algorithm min-peak "$src/tests/data/mintime/nested4.json" >"$tmp/n4" ||
    die "plan nested4"
"$remat" frontier --format json "$src/tests/data/mintime/nested4.json" >"$tmp/n4f" ||
    die "frontier nested4"
[ "$(jget "$tmp/n4f" points 0 peak_bytes)" -lt "$(jget "$tmp/n4" peak_bytes)" ] ||
    die "nested4: the frontier's least peak is not below min-peak's"
# A plan by another algorithm has no min-peak row, so no note.
NO_COLOR=1 pty "$tmp/sq" "$remat" plan --algorithm sqrt "$cnn" || die "plan sqrt"
! grep -qF "$note" "$tmp/sq" || die "a sqrt plan's table explains min-peak"

# simulate: the peak op by stage, one line per op with --timeline.
NO_COLOR=1 pty "$tmp/st" "$remat" simulate --checkpoints 2 --timeline "$cnn" || die "simulate table"
"$remat" simulate --checkpoints 2 --timeline "$cnn" >"$tmp/sj" || die "simulate json"
ops=$(jget "$tmp/sj" timeline)
[ "$(grep -c '^ *[0-9][0-9]* \(F_ck\|F_none\|F_all\|loss\|B\) ' "$tmp/st")" = "$ops" ] ||
    die "simulate: not one line per op ($ops): $(cat "$tmp/st")"
has "$tmp/st" "$(human "$(jget "$tmp/sj" peak_bytes)")"
has "$tmp/st" "peak during op $(jget "$tmp/sj" peak_phase) of $ops: B of pool2"

# fits: the batch per memory.
fd=$src/tests/data/fits
"$remat" fits --memory 4294967296 "$fd/b4.json" "$fd/b8.json" "$fd/b16.json" >"$tmp/fitj" || die "fits json"
NO_COLOR=1 pty "$tmp/fitt" "$remat" fits --memory 4294967296 "$fd/b4.json" "$fd/b8.json" "$fd/b16.json" ||
    die "fits table"
has "$tmp/fitt" "4.00 GiB"
has "$tmp/fitt" "$note"
grep -q "4.00 GiB  *$(jget "$tmp/fitj" answers 0 largest batch) " "$tmp/fitt" ||
    die "fits: the batch $(jget "$tmp/fitj" answers 0 largest batch) is not beside 4.00 GiB: $(cat "$tmp/fitt")"

# A stage name is the profile's text: its control characters never reach
# the terminal.
sed 's/"name": *"relu1"/"name":"evil\\u001b[2J"/' "$cnn" >"$tmp/evil.json"
grep -q 'u001b' "$tmp/evil.json" || die "the test's profile has no escape"
NO_COLOR=1 pty "$tmp/evil" "$remat" plan --algorithm min-peak "$tmp/evil.json" || die "evil plan"
no_escapes "$tmp/evil" "a stage name with ESC"
has "$tmp/evil" "after evil?[2J (2)"

# Bad --format: exit 2, one line on stderr.
for args in "plan --format xml" "plan --format svg" "fits --format" "frontier --format=png"; do
    # shellcheck disable=SC2086
    "$remat" $args "$cnn" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ $rc = 2 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q -- "--format" "$tmp/err" ||
        die "remat $args: exit $rc, stderr $(cat "$tmp/err")"
done

# The frontier picture: renders, is the right size, is not blank, and
# names the three plans in human units.
"$remat" frontier --format svg "$cnn" >"$tmp/f.svg" || die "frontier --format svg"
for want in '<svg' '</svg>' 'store-all: ' 'sqrt(n): ' 'min-peak (single-level): ' \
    'min-peak: least peak of single-level plans' 'peak memory (MiB)' \
    "$(human "$all")" 'step time (ms): '; do
    has "$tmp/f.svg" "$want"
done
if ! command -v rsvg-convert >/dev/null 2>&1; then
    die "rsvg-convert is missing (deploy/install-deps.sh installs librsvg2-bin)"
elif ! rsvg-convert -o "$tmp/f.png" "$tmp/f.svg"; then
    die "rsvg-convert cannot render the frontier"
else
    "$py" "$src/tests/png-check.py" "$tmp/f.png" 900 500 1 >"$tmp/png" || die "frontier PNG: $(cat "$tmp/png")"
    [ -n "${REMAT_KEEP_PNG:-}" ] && cp "$tmp/f.png" "$REMAT_KEEP_PNG"
fi

# The README's picture is what this remat draws.
cmp -s "$tmp/f.svg" "$src/docs/frontier.svg" ||
    die "docs/frontier.svg is stale: remat frontier --format svg docs/examples/tiny-cnn.json > docs/frontier.svg"

[ $fail = 0 ] && echo "cli-human: all passed"
exit $fail
