#!/bin/sh
# openapi.yaml against the real rematd, driven from the spec's own examples
# (tests/api/contract.py): every operation, every declared status, every
# answer validated against the spec.  Offline: python3 with jsonschema and
# yaml (deploy/install-deps.sh), no npm.
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
export top_srcdir top_builddir
if [ -z "${PYTHON:-}" ]; then
    if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi
fi
if ! "$PYTHON" -c 'import jsonschema, yaml' 2>/dev/null; then
    echo "FAIL: $PYTHON lacks jsonschema or yaml (sh deploy/install-deps.sh installs them)"
    exit 1
fi
exec "$PYTHON" "$top_srcdir/tests/api/contract.py"
