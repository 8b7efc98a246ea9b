#!/bin/sh
# No hand-written source file over 900 lines (issue 23's rule, kept closed
# here as check-limits.sh keeps the request limits closed): every .c, .h,
# .cpp, .py and .sh file under the source directories is counted, less any
# region a generator writes between "BEGIN generated" and "END generated"
# (worker/allowed_ops.h's operator list), any file whose first line says
# "do not edit" (what the build writes: api/openapi.c, in the source tree
# when it is built in place), and bench/old_*.c: frozen copies
# of solvers as they were, which `make bench` times beside today's and
# nobody edits.  A file that grows past the bound fails with its name and
# count: split it by concern.
srcdir=${top_srcdir:-.}
max=${REMAT_MAX_FILE_LINES:-900}
files=$(cd "$srcdir" && find src api worker cli bench python tests deploy \
    -path '*/build' -prune -o -path 'bench/old_*.c' -prune -o -type f \
    \( -name '*.c' -o -name '*.h' -o -name '*.cpp' -o -name '*.py' -o -name '*.sh' \) \
    -print 2>/dev/null | sort)
if [ -z "$files" ]; then
    echo "check-lengths: no source files under $srcdir"
    exit 1
fi
n=0
fails=0
for f in $files; do
    n=$((n + 1))
    lines=$(awk 'NR == 1 && /do not edit/ { exit } /BEGIN generated/ { skip = 1 } !skip { c++ } /END generated/ { skip = 0 } END { print c + 0 }' \
        "$srcdir/$f")
    if [ "$lines" -gt "$max" ]; then
        echo "check-lengths: $f has $lines hand-written lines (at most $max)"
        fails=$((fails + 1))
    fi
done
echo "check-lengths: $n files, $fails over $max lines"
[ "$fails" -eq 0 ]
