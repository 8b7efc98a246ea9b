#!/bin/sh
# Every tracked file is in the release tarball, but for the few that only
# make sense in a git checkout (CI's entry point, .gitignore, tests/run-all,
# which builds from git).  `make distcheck` proves the tarball builds and
# passes its tests; this proves it holds everything the git tree does, so
# that run-all's distcheck can leave libtorch out (the worker is built and
# tested twice from the git tree before it, and the tarball holds the same
# files).
#
#   tests/check-dist.sh TARBALL
set -e
tarball=${1:?usage: $0 TARBALL}
top=$(cd "$(dirname "$0")/.." && pwd -P)
if [ "$(git -C "$top" rev-parse --show-toplevel 2>/dev/null)" != "$top" ]; then
    echo "check-dist: skipped: $top is not a git checkout"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git -C "$top" ls-files | grep -v -x -e .ci/run -e .gitignore -e tests/run-all | sort >"$tmp/git"
[ -s "$tmp/git" ] || { echo "check-dist: git lists no files in $top" >&2; exit 1; }
tar tzf "$tarball" | sed 's|^[^/]*/||' | grep -v '/$' | sort >"$tmp/dist"
missing=$(comm -23 "$tmp/git" "$tmp/dist")
if [ -n "$missing" ]; then
    echo "check-dist: tracked but not in $(basename "$tarball") (add them to EXTRA_DIST):"
    echo "$missing" | sed 's/^/  /'
    exit 1
fi
echo "check-dist: all $(wc -l <"$tmp/git") tracked files are in $(basename "$tarball")"
