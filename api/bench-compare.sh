#!/bin/sh
# Compares two rematd builds with bench-http.sh, alternating runs so that
# both see the same (noisy) machine: ROUNDS rounds of A then B.
# Usage: bench-compare.sh A/api/rematd B/api/rematd [ROUNDS] [SRCDIR]
# (bench-http.sh's environment applies: BENCH_SECONDS, REMAT_BENCH_SAME, ...)
set -e
a=$1
b=$2
rounds=${3:-3}
srcdir=${4:-$(cd "$(dirname "$0")/.." && pwd)}
[ -x "$a" ] && [ -x "$b" ] || { echo "usage: $0 A/api/rematd B/api/rematd [ROUNDS] [SRCDIR]"; exit 2; }
i=1
while [ $i -le "$rounds" ]; do
    for which in A B; do
        if [ $which = A ]; then bin=$a; else bin=$b; fi
        echo "== $which ($bin), round $i"
        sh "$srcdir/api/bench-http.sh" "$bin" "$srcdir" | sed -n '2,3p;5,6p'
    done
    i=$((i + 1))
done
