#!/bin/sh
# Step time predicted against measured, on a CUDA GPU (docs/accuracy.md,
# "Step time"): every plan of the GPU tables there (VGG-19 batch 64 fp32 and
# fp16, ResNet-50 batch 32 fp32 and bf16, the zoo's gpt at batch 8) must run
# within TIME_TOLERANCE percent (10) of its predicted step time (the plan's
# total_ms), its peak within PEAK_TOLERANCE percent (3), and the min-time
# frontier's plans (FRONTIER points, 6) must measure in the order their
# predicted times give (pairs predicted more than ORDER_GAP, 0.02, apart).
# Exit 1 on any miss, each one named.
#
# It needs a CUDA device and a CUDA PyTorch: without them it stops at once
# with exit 2 and says so. It cannot run on the CPU-only CI machines.
#
#   tests/worker/gpu-time.sh RESULTS_DIR [HEADER_DIR]
#
# The worker is built against the torch package's libtorch
# (tests/worker/gpu-common.sh); WORKER and REMAT name binaries already built
# instead. Also: DEVICE (cuda:0), WARMUP (2), PROFILE_REPEATS (5),
# REPEATS (5), MODELS (the five configurations above, side-by-side.py's syntax).
set -e
. "$(dirname "$0")/gpu-common.sh"
gpu_setup gpu-time.sh "this check" "$@"
: "${MODELS:=vgg19:batch=64 vgg19:batch=64,dtype=fp16 resnet50:batch=32 resnet50:batch=32,dtype=bf16 gpt:batch=8}"
# shellcheck disable=SC2086
python3 "$top/tests/worker/side-by-side.py" --worker "$WORKER" --remat "$REMAT" --device "$dev" \
    --out "$res/runs" --svg-dir "$res/svg" --markdown "$res/table.md" \
    --algorithms store-all,sqrt,min-peak,min-time --frontier "${FRONTIER:-6}" \
    --warmup "${WARMUP:-2}" --profile-repeats "${PROFILE_REPEATS:-5}" \
    --repeats "${REPEATS:-5}" --validate-warmup "${WARMUP:-2}" \
    --time-tolerance "${TIME_TOLERANCE:-10}" --peak-tolerance "${PEAK_TOLERANCE:-3}" \
    --check-order --order-gap "${ORDER_GAP:-0.02}" -v $MODELS
