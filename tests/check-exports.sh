#!/bin/sh
# libremat.so exports exactly the symbols listed in tests/exports.txt, its
# public API (src/remat.h), as jansson's test compares against its list: a
# new remat_ function, or an internal one that leaks out, fails here with a
# diff, and so does one that disappears.
lib=${top_builddir:-.}/src/.libs/libremat.so
list=${top_srcdir:-.}/tests/exports.txt
if [ ! -f "$lib" ]; then
    echo "check-exports: $lib not built (static-only build?); skipping"
    exit 77
fi
if ! command -v nm >/dev/null 2>&1; then
    echo "check-exports: nm not found; skipping"
    exit 77
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
grep -v '^#' "$list" | grep -v '^$' | LC_ALL=C sort >"$tmp/want"
# Defined symbols of every kind but the linker's own (_init, _fini, and
# the version nodes nm lists as absolute).
nm -D --defined-only "$lib" | awk '$2 != "A" {print $3}' | grep -v '^_init$' |
    grep -v '^_fini$' | LC_ALL=C sort >"$tmp/got"
if ! diff -u "$tmp/want" "$tmp/got" >"$tmp/diff"; then
    echo "check-exports: libremat.so's exports differ from tests/exports.txt"
    echo "(- listed but not exported, + exported but not listed):"
    cat "$tmp/diff"
    exit 1
fi
echo "check-exports: $(wc -l <"$tmp/got") symbols, exactly tests/exports.txt"
