#!/bin/sh
# Formatting is part of `make check`: every C file of the tree must be as
# clang-format (with the repository's .clang-format) would write it.
top=${top_srcdir:-.}
if ! command -v clang-format >/dev/null 2>&1; then
    echo "check-format: clang-format not found; skipping"
    exit 77
fi
cd "$top" || exit 1
files=$(find src cli bench api worker -name '*.c' -o -name '*.h' -o -name '*.cc' \
    -o -name '*.cpp' 2>/dev/null | grep -v '/data/' | sort)
[ -n "$files" ] || { echo "check-format: no files"; exit 1; }
# shellcheck disable=SC2086
if ! clang-format --dry-run -Werror $files; then
    echo "check-format: run clang-format -i on the files above"
    exit 1
fi
echo "check-format: $(echo "$files" | wc -l) files formatted"
