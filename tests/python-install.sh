#!/bin/sh
# `make install` of the Python package lands where the interpreter imports
# it: install-data into a DESTDIR at prefix /usr/local and /usr (Debian's
# python3 searches /usr/local/lib/python3.X/dist-packages and
# /usr/lib/python3/dist-packages) and at the interpreter's own prefix, then
# import remat from there.  Also: configure's interpreter imports torch
# whenever a python3 on PATH or /usr/bin/python3 does.  77 without python3.
top_builddir=${top_builddir:-.}
if test -z "${PYTHON3:-}"; then
    echo "SKIP: configure found no python3"
    exit 77
fi
MAKE=${MAKE:-make}
fail() { echo "FAIL: $*"; exit 1; }

# The pick: a python3 that imports torch when one exists.
if test "${PYTHON3_HOW:-found}" = found && test "${PYTHON3_TORCH:-no}" != yes; then
    for py in $(command -v python3) /usr/bin/python3; do
        test -x "$py" || continue
        if "$py" -c 'import torch' >/dev/null 2>&1; then
            fail "configure picked $PYTHON3 (no torch) although $py imports torch"
        fi
    done
fi
if test "${PYTHON3_TORCH:-no}" = yes; then
    "$PYTHON3" -c 'import torch' >/dev/null 2>&1 || fail "$PYTHON3 was said to import torch"
fi

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# One install and its checks: $1 the interpreter, $2 the prefix.
check() {
    py=$1 prefix=$2 dest="$tmp/d$3"
    # MAKEFLAGS emptied: this make is not the one running the tests' jobs.
    MAKEFLAGS= $MAKE -s -C "$top_builddir" install-data DESTDIR="$dest" prefix="$prefix" \
        PYTHON3="$py" >"$tmp/log" 2>&1 || { cat "$tmp/log"; fail "make install-data prefix=$prefix"; }
    dir=$("$py" "$top_srcdir/python/install-dir.py" "$prefix")
    test -f "$dest$dir/remat/__init__.py" || {
        find "$dest" -name __init__.py; fail "$py, prefix $prefix: no $dir/remat/__init__.py"; }
    test -f "$dest$dir/remat/client.py" || fail "$py, prefix $prefix: client.py missing"
    # The directory is one the interpreter searches (without DESTDIR).
    "$py" -c 'import sys; sys.exit(0 if sys.argv[1] in sys.path else 1)' "$dir" ||
        fail "$py, prefix $prefix: $dir is not on its sys.path"
    # And the package imports from there.
    got=$(cd "$tmp" && PYTHONPATH="$dest$dir" "$py" -c 'import remat; print(remat.__file__)') ||
        fail "$py: import remat from $dest$dir"
    case $got in
    "$dest$dir/remat/"*) ;;
    *) fail "$py: remat imported from $got, not $dest$dir" ;;
    esac
    MAKEFLAGS= $MAKE -s -C "$top_builddir" uninstall-local DESTDIR="$dest" prefix="$prefix" \
        PYTHON3="$py" >"$tmp/log" 2>&1 || { cat "$tmp/log"; fail "make uninstall-local"; }
    test ! -e "$dest$dir/remat" || fail "$py, prefix $prefix: uninstall left $dir/remat"
    echo "ok: $py, prefix $prefix: $dir"
}

n=0
for py in "$PYTHON3" /usr/bin/python3; do
    test -x "$py" || command -v "$py" >/dev/null 2>&1 || continue
    test "$n" -gt 0 && test "$py" = "$PYTHON3" && continue
    n=$((n + 1))
    own=$("$py" -c 'import sys; print(sys.prefix)')
    # Debian's interpreter (its deb_system scheme): /usr/local and /usr.
    if "$py" -c 'import sysconfig, sys; sys.exit("deb_system" not in sysconfig.get_scheme_names())'; then
        check "$py" /usr/local "$n-local"
        check "$py" /usr "$n-usr"
    fi
    case $own in /usr | /usr/local) ;; *) check "$py" "$own" "$n-own" ;; esac
done
exit 0
