#!/bin/sh
# cppcheck (Debian's) over every C file of the tree, as tests/run-all runs
# it: any finding fails.  A finding that is not a bug is suppressed inline
# (/* cppcheck-suppress ID */ on the line before) with a comment that says
# why, so each one is justified where the code is.  The generated
# api/openapi.c (one string) is skipped.  C++ (the worker's libtorch shim)
# is left to the compiler's warnings: cppcheck cannot see libtorch's
# headers.
top=${top_srcdir:-$(dirname "$0")/..}
if ! command -v cppcheck >/dev/null 2>&1; then
    echo "check-cppcheck: cppcheck not found (deploy/install-deps.sh installs it); skipping"
    exit 77
fi
cd "$top" || exit 1
# shellcheck disable=SC2046
cppcheck --quiet --std=c11 --enable=warning,portability --inline-suppr --error-exitcode=1 \
    --suppress=missingIncludeSystem -D__GNUC__ -I src -I api -I api/store -I tests \
    --file-filter='*.c' -i api/openapi.c src api cli bench tests worker || {
    echo "check-cppcheck: fix each finding above, or suppress it inline saying why"
    exit 1
}
echo "check-cppcheck: clean"
