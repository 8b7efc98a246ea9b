#!/bin/sh
# The remat program end to end: plan prints the documented fields, simulate
# works, and bad input exits 2 with one line on stderr.
set -u
remat=${top_builddir:-.}/cli/remat
data=${top_srcdir:-.}/tests/data/profiles
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
die() { echo "FAIL: $*"; fail=1; }

has() { # file, key...
    f=$1; shift
    for k in "$@"; do
        grep -q "\"$k\":" "$f" || die "$f lacks \"$k\": $(head -c 300 "$f")"
    done
}

# plan, every single-level algorithm this build has.
for alg in store-all sqrt paper-linear paper-cubic acg; do
    "$remat" plan --algorithm $alg "$data/good/t1.json" >"$tmp/out" 2>"$tmp/err" ||
        die "plan --algorithm $alg exited $?: $(cat "$tmp/err")"
    has "$tmp/out" algorithm checkpoints segments torch_segments objective peak_bytes \
        store_all_peak_bytes recompute_ms total_ms schedule model value
done
"$remat" plan --algorithm paper-linear "$data/good/t1.json" >"$tmp/out"
grep -q '"checkpoints":\[3\]' "$tmp/out" || die "T1 paper-linear is not {3}: $(cat "$tmp/out")"
grep -q '"torch_segments":\[\[0,3\],\[3,4\]\]' "$tmp/out" || die "T1 torch_segments: $(cat "$tmp/out")"
grep -q '"segments":\[\[1,3\],\[4,4\]\]' "$tmp/out" || die "T1 segments: $(cat "$tmp/out")"
"$remat" plan --algorithm uniform --segments 2 --model sum - <"$data/good/t6.json" >"$tmp/out" ||
    die "plan from stdin"
grep -q '"objective":{"model":"sum","value":17}' "$tmp/out" || die "T6 uniform 2 under sum: $(cat "$tmp/out")"

# simulate
"$remat" simulate --checkpoints 3 --model prefix "$data/good/t1.json" >"$tmp/out" || die "simulate"
grep -q '"peak_bytes":10' "$tmp/out" || die "T1 {3} under prefix is not 10: $(cat "$tmp/out")"
"$remat" simulate --checkpoints 2,4 --model sum --timeline "$data/good/t8.json" >"$tmp/out" ||
    die "simulate --timeline"
grep -q '"peak_bytes":14' "$tmp/out" || die "T8 {2,4} under sum is not 14"
has "$tmp/out" timeline peak_bytes
"$remat" simulate --checkpoints= "$data/good/full.json" >"$tmp/out" || die "simulate store-all"

# bad input: exit 2, exactly one line on stderr, naming the place.
bad() { # expected-substring, args...
    want=$1; shift
    "$remat" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ $rc -eq 2 ] || die "remat $* exited $rc, not 2"
    [ "$(wc -l <"$tmp/err")" -eq 1 ] || die "remat $*: stderr is not one line: $(cat "$tmp/err")"
    grep -q -- "$want" "$tmp/err" || die "remat $*: stderr lacks '$want': $(cat "$tmp/err")"
    [ ! -s "$tmp/out" ] || die "remat $*: printed on stdout"
}
bad /stages/1/out_bytes plan "$data/bad/missing_out_bytes.json"
bad /stages/2/saved_bytes plan "$data/bad/fractional_bytes.json"
bad "line 1" plan "$data/bad/bad_json.json"
bad /checkpoints/0 simulate --checkpoints 4 "$data/good/t1.json"
bad /checkpoints/1 simulate --checkpoints 2,2 "$data/good/t1.json"
bad "--checkpoints" simulate --checkpoints 1,x "$data/good/t1.json"
bad "unknown algorithm" plan --algorithm fastest "$data/good/t1.json"
bad "unknown model" plan --model peak "$data/good/t1.json"
bad "needs --segments" plan --algorithm uniform "$data/good/t1.json"
bad "cannot open" plan "$tmp/no-such-file.json"
bad "unknown command" frobnicate
bad "no profile" plan
bad "--deadline" plan --deadline 0 "$data/good/t1.json"
bad "--deadline" frontier --deadline soon "$data/good/t1.json"
bad "--deadline" fits --memory 1000000 --deadline -1 "$data/good/t1.json"

# Every command has --help: its usage on stdout, exit 0, nothing on stderr.
for c in plan simulate frontier fits; do
    "$remat" "$c" --help >"$tmp/out" 2>"$tmp/err" || die "remat $c --help exited $?"
    head -1 "$tmp/out" | grep -q "^usage: remat $c " || die "remat $c --help: $(head -1 "$tmp/out")"
    [ ! -s "$tmp/err" ] || die "remat $c --help wrote on stderr: $(cat "$tmp/err")"
    "$remat" "$c" -h >"$tmp/out2" 2>/dev/null && cmp -s "$tmp/out" "$tmp/out2" || die "remat $c -h"
done
grep -q -- --deadline "$tmp/out" || die "remat fits --help does not name --deadline"

# --deadline stops a long solve: exit 1, one line saying so, nothing on
# stdout.  A 300-stage min-time table at 1,400 slots takes seconds (1.6 s
# on an idle 2-core machine); 0.05 s is far short.  (400 stages plan over
# runs of stages now, in a fifth of a second: too near the deadline.)
python3 -c '
import json, random
random.seed(1)
st = [{"out_bytes": random.randint(1, 100) * 1000, "fwd_ms": random.random() * 3,
       "bwd_ms": random.random() * 6} for i in range(300)]
print(json.dumps({"input_bytes": 1000, "batch_size": 4, "stages": st}))' >"$tmp/p300.json"
stopped() { # SECONDS remat ARGS...: stopped by the deadline
    s=$1
    shift
    "$remat" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ $rc -eq 1 ] || die "remat $1 --deadline exited $rc, not 1: $(cat "$tmp/err")"
    grep -q "stopped at the --deadline of $s s" "$tmp/err" || die "remat $1: $(cat "$tmp/err")"
    [ ! -s "$tmp/out" ] || die "remat $1 --deadline printed on stdout"
}
stopped 0.05 plan --algorithm min-time --budget 10000000 --slots 1400 --deadline 0.05 "$tmp/p300.json"
stopped 0.05 frontier --slots 1400 --deadline 0.05 "$tmp/p300.json"
# fits checks its deadline before each batch it tries: a microsecond has
# passed by the first, once the profile is read.
stopped 1e-06 fits --memory 100000000000 --deadline 0.000001 "$tmp/p300.json"
# A deadline that is not reached changes nothing.
"$remat" plan --format json "$data/good/t1.json" >"$tmp/a" &&
    "$remat" plan --format json --deadline 60 "$data/good/t1.json" >"$tmp/b" && cmp -s "$tmp/a" "$tmp/b" ||
    die "--deadline 60 changed the plan"

exit $fail
