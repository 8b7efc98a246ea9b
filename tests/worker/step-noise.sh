#!/bin/sh
# How far one step's time can be trusted on a device (docs/accuracy.md,
# "Step time"): profiles a model PROFILES times, then runs the same plan
# RUNS times with REPEATS steps each, and prints per profile its predicted
# step time and per run the measured steps' median, fastest and slowest, for
# the plan and for store-all (which every validation runs beside it).
#
#   tests/worker/step-noise.sh WORKER REMAT DEVICE SPEC.json [ALGORITHM]
#
# SPEC.json is a profile spec ({"model": ..., "batch_size": ..., ...}).
# Environment: PROFILES (2), RUNS (3), REPEATS (8), WARMUP (1), OUTDIR.
set -e
worker=$1
remat=$2
device=$3
spec=$4
alg=${5:-sqrt}
[ -n "$spec" ] || { echo "usage: $0 WORKER REMAT DEVICE SPEC.json [ALGORITHM]" >&2; exit 2; }
: "${PROFILES:=2}" "${RUNS:=3}" "${REPEATS:=8}" "${WARMUP:=1}"
if [ -z "$OUTDIR" ]; then
    OUTDIR=$(mktemp -d)
    trap 'rm -rf "$OUTDIR"' EXIT
fi
mkdir -p "$OUTDIR"
PYTHON=${PYTHON3:-python3}
p=1
while [ "$p" -le "$PROFILES" ]; do
    "$worker" --device "$device" --profile-local "$spec" >"$OUTDIR/profile$p.json"
    "$remat" plan --algorithm "$alg" "$OUTDIR/profile$p.json" >"$OUTDIR/plan$p.json"
    p=$((p + 1))
done
r=1
while [ "$r" -le "$RUNS" ]; do
    "$worker" --device "$device" --validate-local "$spec" "$OUTDIR/plan1.json" \
        --profile "$OUTDIR/profile1.json" --repeats "$REPEATS" --warmup "$WARMUP" \
        >"$OUTDIR/run$r.json"
    r=$((r + 1))
done
"$PYTHON" - "$OUTDIR" "$PROFILES" "$RUNS" "$alg" <<'EOF'
import json, os, sys
d, n_prof, n_runs, alg = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
for p in range(1, n_prof + 1):
    plan = json.load(open(os.path.join(d, "plan%d.json" % p)))
    prof = json.load(open(os.path.join(d, "profile%d.json" % p)))
    sa = sum(s["fwd_ms"] + s["bwd_ms"] for s in prof["stages"])
    print("profile %d: %s predicted %.1f ms, store-all predicted %.1f ms" % (
        p, alg, plan["total_ms"], sa))
meds = []
for r in range(1, n_runs + 1):
    x = json.load(open(os.path.join(d, "run%d.json" % r)))
    meds.append(x["step_ms"])
    print("run %d: %s median %.1f ms (%.1f..%.1f, max/min %.2f), error %+.1f%%; "
          "store-all median %.1f ms" % (
              r, alg, x["step_ms"], x["step_ms_min"], x["step_ms_max"],
              x["step_ms_max"] / x["step_ms_min"], 100 * x["step_time_error"],
              x["store_all_step_ms"]))
print("medians over runs: %.1f..%.1f ms (max/min %.2f)" % (min(meds), max(meds),
                                                        max(meds) / min(meds)))
EOF
