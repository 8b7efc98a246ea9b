#!/bin/sh
# Every symbol libremat.so exports is public API: it starts with remat_ and
# not remat__ (internal names, libuv's rule).  jansson's test does the same.
lib=${top_builddir:-.}/src/.libs/libremat.so
if [ ! -f "$lib" ]; then
    echo "check-exports: $lib not built (static-only build?); skipping"
    exit 77
fi
if ! command -v nm >/dev/null 2>&1; then
    echo "check-exports: nm not found; skipping"
    exit 77
fi
bad=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' |
    grep -v '^remat_[a-z0-9]' | grep -v '^_init$' | grep -v '^_fini$' || true)
internal=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep '^remat__' || true)
count=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -c '^remat_' || true)
if [ -n "$bad$internal" ]; then
    echo "check-exports: symbols that must not be exported:"
    echo "$bad$internal"
    exit 1
fi
if [ "$count" -lt 20 ]; then
    echo "check-exports: only $count remat_ symbols exported; the API is missing"
    exit 1
fi
echo "check-exports: $count symbols, all remat_*"
