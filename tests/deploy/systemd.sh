#!/bin/sh
# deploy/rematd.service (made from rematd.service.in by make): clean under
# `systemd-analyze verify`, sandboxed to an exposure of at most 1.5 ("OK")
# under `systemd-analyze security --offline`, its ExecStart the configured
# bindir, and every REMAT_* variable it sets one that rematd reads.  The
# unit without its sandboxing lines must score worse, or the score check
# could not fail.  Skips (77) without systemd-analyze (systemd 250 or later
# for --offline).
set -u
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
unit=$top_builddir/deploy/rematd.service
REMATD=$top_builddir/api/rematd
command -v systemd-analyze >/dev/null 2>&1 || { echo "SKIP: systemd-analyze is not installed"; exit 77; }
systemd-analyze security --help 2>/dev/null | grep -q -- --offline ||
    { echo "SKIP: systemd-analyze has no --offline (systemd < 250)"; exit 77; }
[ -f "$unit" ] && [ -x "$REMATD" ] || { echo "FAIL: $unit or $REMATD is not built"; exit 1; }

T=$(mktemp -d "${TMPDIR:-/tmp}/remat-systemd.XXXXXX")
trap 'rm -rf "$T"' EXIT
fails=0
check() { # condition-status, what
    if [ "$1" = 0 ]; then echo "ok   $2"; else echo "FAIL $2"; fails=$((fails + 1)); fi
}

exec_start=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$unit")
bindir=$(sed -n 's/^bindir = //p' "$top_builddir/Makefile")
prefix=$(sed -n 's/^prefix = //p' "$top_builddir/Makefile")
bindir=$(echo "$bindir" | sed "s|\${exec_prefix}|$prefix|; s|\$(exec_prefix)|$prefix|")
[ "$exec_start" = "$bindir/rematd" ]
check $? "ExecStart is $exec_start, the configured bindir's rematd ($bindir)"

# verify wants ExecStart's program to exist: point it at the built one.
sed "s|^ExecStart=[^ ]*|ExecStart=$REMATD|" "$unit" >"$T/rematd.service"
systemd-analyze verify "$T/rematd.service" >"$T/verify" 2>&1
rc=$?
[ $rc = 0 ] && [ ! -s "$T/verify" ]
check $? "systemd-analyze verify: exit $rc, $(wc -l <"$T/verify") lines of complaint $(head -c 300 "$T/verify")"

score() { # unit file: prints the overall exposure
    systemd-analyze security --offline=true "$1" 2>/dev/null |
        sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p'
}
s=$(score "$T/rematd.service")
[ -n "$s" ] && awk "BEGIN { exit !($s <= 1.5) }"
check $? "systemd-analyze security: exposure $s (at most 1.5)"

# The same unit without sandboxing: from DynamicUser= to [Install].
mkdir "$T/plain"
sed '/^DynamicUser=/,/^\[Install\]/{/^\[Install\]/!d}' "$T/rematd.service" >"$T/plain/rematd.service"
p=$(score "$T/plain/rematd.service")
[ -n "$p" ] && awk "BEGIN { exit !($p > 5) }"
check $? "without its sandboxing the unit scores $p (above 5): the score check can fail"

"$REMATD" --help >"$T/help"
for v in $(sed -n 's/^Environment=//p' "$unit" | tr ' ' '\n' | sed -n 's/^\(REMAT_[A-Z_]*\)=.*/\1/p'); do
    grep -q "env $v," "$T/help"
    check $? "Environment= $v is a variable rematd reads"
done
# The unit runs rematd with what it gives: the flags parse.
args=$(sed -n 's/^ExecStart=[^ ]* //p' "$unit")
# shellcheck disable=SC2086
env -i REMAT_LISTEN=127.0.0.1:8080 "$REMATD" $args --print-config >/dev/null
check $? "rematd accepts the unit's arguments ($args)"

echo "$fails failures"
[ "$fails" = 0 ]
