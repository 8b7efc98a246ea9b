#!/bin/sh
# Formatting is part of `make check`: every C and C++ file of the tree,
# tests included, must be as clang-format (with the repository's
# .clang-format) would write it.  Only tracked sources count: files a build
# generates (api/openapi.c, made from openapi.yaml) are not written by hand,
# and an in-tree build leaves them beside the sources.
top=${top_srcdir:-.}
if ! command -v clang-format >/dev/null 2>&1; then
    echo "check-format: clang-format not found; skipping"
    exit 77
fi
cd "$top" || exit 1
# Files the build makes from other files (keep in step with CLEANFILES).
generated='^api/openapi\.c$'
if [ "$(git rev-parse --show-toplevel 2>/dev/null)" = "$(pwd -P)" ]; then
    files=$(git ls-files -- 'src' 'cli' 'bench' 'api' 'worker' 'tests' | grep -E '\.(c|h|cc|cpp)$')
else
    # A tarball (make distcheck): every source file but the generated ones.
    files=$(find src cli bench api worker tests -name '*.c' -o -name '*.h' -o -name '*.cc' \
        -o -name '*.cpp' 2>/dev/null)
fi
files=$(echo "$files" | grep -v '/data/' | grep -Ev "$generated" | sort)
[ -n "$files" ] || { echo "check-format: no files"; exit 1; }
# shellcheck disable=SC2086
if ! clang-format --dry-run -Werror $files; then
    echo "check-format: run clang-format -i on the files above"
    exit 1
fi
echo "check-format: $(echo "$files" | wc -l) files formatted"
