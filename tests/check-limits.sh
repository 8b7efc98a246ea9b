#!/bin/sh
# The request limits rematd checks (api/request_limits.h) against the ones
# openapi.yaml states: every "openapi:" pointer listed under a #define in the
# header must name a maximum (or maxItems) of the spec equal to the define's
# value, as tests/check-exports.sh holds libremat's exports to one list.  A
# limit changed on one side only, or a pointer the spec no longer has,
# fails here with the place.
srcdir=${top_srcdir:-.}
if [ -z "${PYTHON:-}" ]; then
    if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi
fi
if ! "$PYTHON" -c 'import yaml' 2>/dev/null; then
    echo "check-limits: $PYTHON lacks yaml (sh deploy/install-deps.sh installs it)"
    exit 1
fi
exec "$PYTHON" - "$srcdir/api/request_limits.h" "$srcdir/openapi.yaml" \
    "$srcdir/src/rematx/layers.h" <<'PY'
import re
import sys

import yaml

header, spec_path, shared = sys.argv[1], sys.argv[2], sys.argv[3]
with open(spec_path) as f:
    spec = yaml.safe_load(f)
text = open(header).read()
# The bounds request_limits.h takes from the layer table's header, by name.
shared_defs = dict(re.findall(r"#define\s+(REMATX_MAX_\w+)\s+([0-9()<\s]+)\n", open(shared).read()))
fails = 0
checked = 0
names = 0
# Each define with the comment just above it (its pointers).
for comment, name, value in re.findall(r"/\*((?:(?!\*/).)*)\*/\s*#define\s+(REMATD_\w+)\s+([^\n]+)",
                                       text, re.S):
    names += 1
    expr = value.strip()
    expr = shared_defs.get(expr, expr).strip()
    if not re.fullmatch(r"[0-9()<\s]+", expr):
        print("check-limits: %s = %s is not a constant this check can read" % (name, expr))
        fails += 1
        continue
    want = eval(expr)  # digits, parentheses and << only
    pointers = re.findall(r"openapi:\s*(\S+)", comment)
    if not pointers:
        print("check-limits: %s names no place of openapi.yaml" % name)
        fails += 1
    for ptr in pointers:
        node = spec
        for part in ptr.strip("/").split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            elif isinstance(node, dict) and part in node:
                node = node[part]
            else:
                node = None
                break
        checked += 1
        if node is None:
            print("check-limits: %s: openapi.yaml has no %s" % (name, ptr))
            fails += 1
        elif node != want:
            print("check-limits: %s is %d in api/request_limits.h, %r at %s in openapi.yaml"
                  % (name, want, node, ptr))
            fails += 1
if names == 0:
    print("check-limits: no limits read from %s" % header)
    fails += 1
print("check-limits: %d limits, %d places in openapi.yaml, %d differ" % (names, checked, fails))
sys.exit(1 if fails else 0)
PY
