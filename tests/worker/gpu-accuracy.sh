#!/bin/sh
# The GPU rows of docs/accuracy.md, on a machine with a CUDA PyTorch and
# nothing else: builds the worker against the libtorch inside the torch
# package (worker/build-standalone.sh), times the ResNet-50 batch 32 profile,
# and runs tests/worker/accuracy.sh for VGG-19 at batch 64 and ResNet-50 at
# batch 32. It stops with exit 2 where there is no CUDA device
# (tests/worker/gpu-common.sh); WORKER and REMAT name binaries already built.
#
#   tests/worker/gpu-accuracy.sh RESULTS_DIR [HEADER_DIR]
set -e
. "$(dirname "$0")/gpu-common.sh"
gpu_setup gpu-accuracy.sh "this run" "$@"
acc=${ACC_DIR:-/tmp/remat-gpu-acc}
mkdir -p "$acc"
printf '{"model":"resnet50","batch_size":32,"dtype":"fp32","device":"%s","warmup":2,"repeats":5}\n' \
    "$dev" >"$acc/r50.json"
t0=$(date +%s.%N)
"$WORKER" --device "$dev" --profile-local "$acc/r50.json" >"$acc/r50.profile.json"
t1=$(date +%s.%N)
python3 -c "print('resnet50 batch 32 profile, start to finish: %.2f s' % ($t1 - $t0))" | tee "$res/timing.txt"
export WARMUP=${WARMUP:-2} PROFILE_REPEATS=${PROFILE_REPEATS:-5} REPEATS=${REPEATS:-3}
{
    OUTDIR="$acc" "$top/tests/worker/accuracy.sh" "$WORKER" "$REMAT" "$dev" 64 vgg19 || true
    OUTDIR="$acc" "$top/tests/worker/accuracy.sh" "$WORKER" "$REMAT" "$dev" 32 resnet50 \
        | tail -n +3 || true
} | tee "$res/table.md"
tar -C "$acc" -czf "$res/acc.tar.gz" .
