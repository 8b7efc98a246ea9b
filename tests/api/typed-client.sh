#!/bin/sh
# openapi.yaml as a typed client sees it: openapi-typescript generates the
# types, and fifteen ordinary uses of rematd through openapi-fetch
# (tests/api/typed-client/uses.ts) must compile under tsc --strict, with
# the generated file checked too (no skipLibCheck: a schema TypeScript
# cannot type is an error here, not an any).  The uses' last lines are
# requests rematd refuses, which the types must refuse.
#
# The npm tools are pinned and installed once into $REMAT_OPENAPI_TOOLS, by
# default $top_builddir/.openapi-tools (git-ignored; tests/run-all shares one
# folder between its builds), so a run after the first takes seconds.
# Without node or npm, or without the registry, or when the install fails
# (a registry that stops answering midway), the test is skipped (77):
# nothing of remat needs them.  REMAT_OPENAPI_LINT=1 also lints openapi.yaml with Redocly
# (recommended rules) and Spectral (spectral:oas) and fails on any result.
#
# Versions: the newest that run on node 18 (Debian 12's nodejs).
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
PINS="openapi-typescript@7.13.0 openapi-fetch@0.17.0 typescript@5.9.3"
LINT_PINS="@redocly/cli@1.34.20 @stoplight/spectral-cli@6.16.3"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "SKIP: node or npm not found"
    exit 77
fi
major=$(node -e 'process.stdout.write(process.versions.node.split(".")[0])')
if [ "$major" -lt 18 ]; then
    echo "SKIP: node $major; the pinned tools need 18 or newer"
    exit 77
fi
pins=$PINS
[ "${REMAT_OPENAPI_LINT:-0}" = 1 ] && pins="$PINS $LINT_PINS"
tools=${REMAT_OPENAPI_TOOLS:-$(cd "$top_builddir" && pwd)/.openapi-tools}
if [ "$(cat "$tools/pins" 2>/dev/null)" != "$pins" ]; then
    if ! timeout 30 npm ping >/dev/null 2>&1; then
        echo "SKIP: the npm registry does not answer"
        exit 77
    fi
    rm -rf "$tools"
    mkdir -p "$tools" || exit 1
    echo '{"private": true}' >"$tools/package.json"
    # shellcheck disable=SC2086
    if ! (cd "$tools" && npm install --no-audit --no-fund --ignore-scripts --loglevel=error \
        $pins); then
        rm -rf "$tools"
        echo "SKIP: npm install $pins failed (the registry or the network; see above)"
        exit 77
    fi
    echo "$pins" >"$tools/pins"
fi
bin=$tools/node_modules/.bin
work=$(mktemp -d "$tools/run.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
status=0

# Defaults are what rematd fills in when a field is absent: a client need
# not send them, so they do not make a request's field required.
if ! "$bin/openapi-typescript" "$top_srcdir/openapi.yaml" -o "$work/remat.d.ts" \
    --default-non-nullable=false >"$work/gen.log" 2>&1; then
    cat "$work/gen.log"
    echo "FAIL: openapi-typescript could not read openapi.yaml"
    exit 1
fi
cp "$top_srcdir/tests/api/typed-client/uses.ts" "$work/"
ln -s "$tools/node_modules" "$work/node_modules"
cat >"$work/tsconfig.json" <<'EOF'
{
  "compilerOptions": {
    "strict": true, "noEmit": true, "target": "es2022", "module": "es2022",
    "moduleResolution": "bundler", "lib": ["es2022", "dom"], "types": [],
    "skipLibCheck": false
  },
  "files": ["uses.ts"]
}
EOF
uses=$(grep -c '^    // [0-9][0-9]*\. ' "$work/uses.ts")
if "$bin/tsc" -p "$work/tsconfig.json" >"$work/tsc.log" 2>&1; then
    echo "ok: openapi-typescript's types of openapi.yaml: $uses numbered uses compile, 0 errors"
else
    cat "$work/tsc.log"
    echo "FAIL: $(grep -c 'error TS' "$work/tsc.log") TypeScript errors"
    status=1
fi

if [ "${REMAT_OPENAPI_LINT:-0}" = 1 ]; then
    printf 'extends: ["spectral:oas"]\n' >"$work/spectral.yaml"
    if "$bin/spectral" lint -q -r "$work/spectral.yaml" -F hint "$top_srcdir/openapi.yaml" \
        >"$work/spectral.log" 2>&1; then
        echo "ok: spectral:oas, no results"
    else
        cat "$work/spectral.log"
        echo "FAIL: Spectral (spectral:oas) has results"
        status=1
    fi
    if "$bin/redocly" lint --format=stylish --max-problems 1000 "$top_srcdir/openapi.yaml" \
        >"$work/redocly.log" 2>&1 && ! grep -q 'warning\|error' "$work/redocly.log"; then
        echo "ok: Redocly (recommended), no problems"
    else
        cat "$work/redocly.log"
        echo "FAIL: Redocly (recommended) has problems"
        status=1
    fi
fi
exit $status
