#!/bin/sh
# Every fuzz target on its checked-in corpus (tests/fuzz/corpus/<target>/):
# each input found by fuzzing stays a regression test.  Built with
# libFuzzer, a target given files runs each once; built without, replay.c
# does the same.
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
status=0
for t in fuzz_profile fuzz_solve fuzz_codec fuzz_result fuzz_plan_request fuzz_zip fuzz_pickle; do
    dir=$top_srcdir/tests/fuzz/corpus/$t
    set -- "$dir"/*
    if [ ! -e "$1" ]; then
        echo "FAIL: $t: no corpus in $dir"
        status=1
        continue
    fi
    if "$top_builddir/tests/fuzz/$t" "$@" >"$top_builddir/tests/fuzz/$t.replay" 2>&1; then
        echo "PASS: $t: $# inputs"
    else
        echo "FAIL: $t"
        tail -20 "$top_builddir/tests/fuzz/$t.replay"
        status=1
    fi
done
exit $status
