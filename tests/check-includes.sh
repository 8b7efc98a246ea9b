#!/bin/sh
# What remat's programs (rematd in api/, the remat CLI in cli/, remat-worker
# in worker/) may use of libremat: remat.h, its public API, and
# src/rematx/, the internals lent to them under rematx_ names (rematx.h says
# why, after curl's lib/curlx/).  Never remat_private.h or another header of
# src/, and never a remat__ function: this test fails when one creeps in.
srcdir=${top_srcdir:-.}
builddir=${top_builddir:-.}
status=0

# Headers private to libremat: every header directly under src/ but remat.h.
private=$(cd "$srcdir/src" && ls *.h | grep -v '^remat\.h$')
# api/ has folders (http/, routes/, plans/, ...): every file under them.
for f in $(find "$srcdir/api" "$srcdir/cli" "$srcdir/worker" -name '*.c' -o -name '*.h' -o \
    -name '*.cpp' | sort); do
    [ -f "$f" ] || continue
    for h in $private; do
        if grep -n "^[[:space:]]*#[[:space:]]*include[[:space:]]*[\"<]$h[\">]" "$f"; then
            echo "check-includes: ${f#"$srcdir"/} includes src/$h, private to libremat;" \
                "lend what it needs through src/rematx/"
            status=1
        fi
    done
done

# The objects as built: none of rematd's may call a remat__ function (a
# declaration written by hand would get past the include check above).
if command -v nm >/dev/null 2>&1; then
    found=0
    for o in $(find "$builddir/api" "$builddir/cli" "$builddir/worker" -name '*.o' 2>/dev/null |
        sort); do
        [ -f "$o" ] || continue
        found=1
        bad=$(nm -u "$o" | awk '{print $NF}' | grep '^remat__' || true)
        if [ -n "$bad" ]; then
            echo "check-includes: ${o#"$builddir"/} calls libremat internals: $bad"
            status=1
        fi
    done
    [ $found = 1 ] || echo "check-includes: no objects under $builddir/api, cli, worker; headers only"
fi
[ $status = 0 ] && echo "check-includes: api/, cli/ and worker/ use remat.h and src/rematx/ only"
exit $status
