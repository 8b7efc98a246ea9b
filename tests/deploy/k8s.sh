#!/bin/sh
# The Kubernetes manifests (deploy/k8s), rendered with `kubectl kustomize`
# for each overlay and checked offline by k8s_check.py: Pod Security
# "restricted", probes, resources, thread counts, tokens, and ports, flags and
# environment variables against what rematd's --help and remat-worker's
# source say.  Each check is also shown to fail on a broken copy.  When
# `make lint-k8s` has installed kubernetes-models, the objects are also
# validated against the Kubernetes schemas.  Skips (77) without kubectl or
# Debian's python3-yaml.
set -u
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
if [ -z "${PYTHON:-}" ]; then
    if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi
fi
command -v kubectl >/dev/null 2>&1 || { echo "SKIP: kubectl is not installed"; exit 77; }
"$PYTHON" -c 'import yaml' 2>/dev/null || { echo "SKIP: $PYTHON lacks yaml"; exit 77; }
REMATD=$top_builddir/api/rematd
[ -x "$REMATD" ] || { echo "FAIL: $REMATD is not built"; exit 1; }

T=$(mktemp -d "${TMPDIR:-/tmp}/remat-k8s.XXXXXX")
trap 'rm -rf "$T"' EXIT
fails=0

# What the programs know: rematd's flags and variables from its --help,
# remat-worker's variables from its source (it may not be built here).
"$REMATD" --help >"$T/help"
sed -n 's/.*env \(REMAT_[A-Z_]*\),.*/\1/p' "$T/help" >"$T/env"
sed -n 's/^  \(--[a-z-]*\).*/\1/p' "$T/help" >"$T/flags"
sed -n 's/.*getenv("\(REMAT_[A-Z_]*\)").*/\1/p' "$top_srcdir/worker/main.c" | sort -u >"$T/worker-env"
for f in env flags worker-env; do
    [ -s "$T/$f" ] || { echo "FAIL: no names read for $f"; exit 1; }
done
grep -qx REMAT_PLAN_THREADS "$T/env" && grep -qx -- --listen "$T/flags" && grep -qx REMAT_WORKER_TOKEN "$T/worker-env" ||
    { echo "FAIL: rematd --help or worker/main.c changed shape"; exit 1; }

for overlay in cpu gpu postgresql; do
    # kubectl kustomize refuses paths outside the kustomization root, so
    # render from the source tree itself.
    if ! kubectl kustomize "$top_srcdir/deploy/k8s/overlays/$overlay" >"$T/$overlay.yaml" 2>"$T/err"; then
        echo "FAIL: kubectl kustomize overlays/$overlay: $(cat "$T/err")"
        fails=$((fails + 1))
        continue
    fi
    if "$PYTHON" "$top_srcdir/tests/deploy/k8s_check.py" "$T/$overlay.yaml" "$T/env" "$T/flags" "$T/worker-env" >"$T/out"; then
        echo "ok   overlays/$overlay: $(tail -n 1 "$T/out")"
    else
        cat "$T/out"
        echo "FAIL: overlays/$overlay"
        fails=$((fails + 1))
    fi
done

# The checker fails where it should: one broken copy per kind of mistake.
broken() { # name, sed expression [overlay]
    src="$T/${3:-cpu}.yaml"
    sed -e "$2" "$src" >"$T/broken.yaml"
    if cmp -s "$src" "$T/broken.yaml"; then
        echo "FAIL: broken copy '$1' changed nothing"
        fails=$((fails + 1))
    elif "$PYTHON" "$top_srcdir/tests/deploy/k8s_check.py" "$T/broken.yaml" "$T/env" "$T/flags" "$T/worker-env" >"$T/out"; then
        echo "FAIL: the check accepts manifests with $1"
        fails=$((fails + 1))
    else
        echo "ok   rejected: $1 ($(grep -m1 '^FAIL' "$T/out" | cut -c6-))"
    fi
}
broken "no seccomp profile" '/type: RuntimeDefault/d'
broken "a mistyped readOnlyRootFilesystem" 's/readOnlyRootFilesystem/readOnlyRootFilesytem/'
broken "the token mounted" 's/automountServiceAccountToken: false/automountServiceAccountToken: true/'
broken "another listen port" 's/0.0.0.0:8080/0.0.0.0:9090/'
broken "an unknown variable" 's/name: REMAT_PLAN_THREADS/name: REMAT_PLANNING_THREADS/'
broken "an unknown flag" 's/- --data-dir/- --data-directory/'
broken "probes on the main port beside a health listener" 's/port: health$/port: http/'
broken "a health listener on loopback" 's/0.0.0.0:8081/127.0.0.1:8081/'
broken "the liveness timeout left out" '/livenessProbe:/,/timeoutSeconds/{/timeoutSeconds/d}'
broken "more planning threads than CPUs" '/name: REMAT_PLAN_THREADS/{n;s/value: "2"/value: "8"/}'
broken "OMP_NUM_THREADS not the CPU limit" '/name: OMP_NUM_THREADS/{n;s/value: "2"/value: "16"/}'
broken "workers pointed at another port" 's|http://rematd:8080|http://rematd:80|'
broken "rematd rolling" 's/type: Recreate/type: RollingUpdate/'
# The shared store: replicas, no outage on a rollout, a budget for drains.
broken "one replica on PostgreSQL" '/^  name: rematd$/,/replicas:/{s/replicas: 3/replicas: 1/}' postgresql
broken "a rollout taking a replica down first" 's/maxUnavailable: 0/maxUnavailable: 1/' postgresql
broken "no budget for rematd" '/kind: PodDisruptionBudget/,/^---/{s/name: rematd$/name: rematd-x/;s/app.kubernetes.io\/name: rematd$/app.kubernetes.io\/name: rematd-x/}' postgresql

# Schema validation, where `make lint-k8s` installed the schemas.
models=${REMAT_K8S_NODE_MODULES:-$top_builddir/lint-k8s/node_modules}
if command -v node >/dev/null 2>&1 && [ -d "$models/kubernetes-models" ]; then
    if NODE_PATH=$models node "$top_srcdir/tests/deploy/k8s-schema.js" "$T/cpu.yaml" "$T/gpu.yaml" "$T/postgresql.yaml" >"$T/out"; then
        echo "ok   every object matches the Kubernetes schemas ($(grep -c '^ok' "$T/out") checks)"
    else
        grep FAIL "$T/out"
        fails=$((fails + 1))
    fi
else
    echo "note: Kubernetes schema validation not run here: 'make lint-k8s' installs kubernetes-models (npm) and runs it"
fi

echo "$fails failures"
[ "$fails" = 0 ]
