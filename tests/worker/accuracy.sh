#!/bin/sh
# Predicted against measured peaks: profiles each model on a device, plans it
# with cli/remat (store-all, sqrt, min-peak), runs each plan for real with the
# worker, and prints one markdown table row per plan (docs/accuracy.md).
#
#   tests/worker/accuracy.sh WORKER REMAT DEVICE BATCH MODEL...
#
# Environment: WARMUP (1, for the profile), VALIDATE_WARMUP (WARMUP), PROFILE_REPEATS
# (3), REPEATS (validation steps, 2), INPUT_SHAPE (e.g. 3,112,112; the zoo's
# default when unset),
# DTYPE (fp32), MODEL_OPTIONS (a JSON object, the zoo model's options, e.g.
# {"d_model":64,"heads":4,"layers":2,"seq_len":32,"vocab":100} for a tiny gpt),
# ALGORITHMS ("store-all sqrt min-peak"), OUTDIR (where the
# profiles, plans and results are kept; a temporary folder by default),
# TOLERANCE (percent: exit 1 when any |error| is larger, or any gradient
# differs from store-all's by more than rounding).
set -e
worker=$1
remat=$2
device=$3
batch=$4
shift 4 || { echo "usage: $0 WORKER REMAT DEVICE BATCH MODEL..." >&2; exit 2; }
: "${WARMUP:=1}" "${PROFILE_REPEATS:=3}" "${REPEATS:=2}" "${DTYPE:=fp32}"
: "${ALGORITHMS:=store-all sqrt min-peak}"
if [ -z "$OUTDIR" ]; then
    OUTDIR=$(mktemp -d)
    trap 'rm -rf "$OUTDIR"' EXIT
fi
mkdir -p "$OUTDIR"
PYTHON=${PYTHON3:-python3}
status=0
[ -n "$NO_HEADER" ] || echo "| model | batch | plan | checkpoints | predicted bytes | measured bytes | error | step ms | store-all ms | max grad diff | profile s |"
[ -n "$NO_HEADER" ] || echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for model in "$@"; do
    spec="$OUTDIR/$model-$batch.spec.json"
    prof="$OUTDIR/$model-$batch.profile.json"
    shape=
    [ -n "$INPUT_SHAPE" ] && shape=",\"input_shape\":[$INPUT_SHAPE]"
    [ -n "$MODEL_OPTIONS" ] && shape="$shape,\"model_options\":$MODEL_OPTIONS"
    printf '{"model":"%s","batch_size":%s,"dtype":"%s","device":"%s","warmup":%s,"repeats":%s%s}\n' \
        "$model" "$batch" "$DTYPE" "$device" "$WARMUP" "$PROFILE_REPEATS" "$shape" >"$spec"
    t0=$(date +%s.%N)
    "$worker" --device "$device" --profile-local "$spec" >"$prof"
    t1=$(date +%s.%N)
    for alg in $ALGORITHMS; do
        plan="$OUTDIR/$model-$batch.$alg.plan.json"
        res="$OUTDIR/$model-$batch.$alg.result.json"
        "$remat" plan --algorithm "$alg" "$prof" >"$plan"
        "$worker" --device "$device" --validate-local "$spec" "$plan" --profile "$prof" \
            --repeats "$REPEATS" --warmup "${VALIDATE_WARMUP:-$WARMUP}" >"$res"
        "$PYTHON" - "$plan" "$res" "$model" "$batch" "$alg" "$t0" "$t1" "${TOLERANCE:-}" <<'EOF' || status=1
import json, sys
plan = json.load(open(sys.argv[1]))
r = json.load(open(sys.argv[2]))
model, batch, alg, t0, t1, tol = sys.argv[3:9]
err = r["relative_error"] * 100
ck = plan.get("checkpoints", [])
cks = ",".join(map(str, ck)) if ck else "-"
if len(cks) > 40:
    cks = "%d checkpoints" % len(ck)
print("| %s | %s | %s | %s | %d | %d | %+.3f%% | %.1f | %.1f | %.3g | %.1f |" % (
    model, batch, alg, cks, r["predicted_peak_bytes"], r["measured_peak_bytes"], err,
    r["step_ms"], r["store_all_step_ms"], r["max_grad_diff"], float(t1) - float(t0)))
if r["predicted_peak_bytes"] != plan["peak_bytes"]:
    sys.exit("predicted peak differs from the plan's")
if tol and (abs(err) > float(tol) or r["max_grad_diff"] > 1e-3):
    sys.exit("%s %s: error %.3f%% or gradient difference %g over the bound" % (
        model, alg, err, r["max_grad_diff"]))
EOF
    done
done
exit $status
