#!/bin/sh
# Every solver side by side on a CUDA GPU (docs/accuracy.md, "Side by side"):
# tests/worker/side-by-side.py at the sizes the paper's claim is about (VGG-19
# batch 64, ResNet-50/101/152 batch 32, the zoo's gpt at batch 8 and a
# 24-block one), with every solver, six frontier points, and the figures.
#
# It needs a CUDA device and a CUDA PyTorch: without them it stops at once
# with exit 2 and says so. It cannot run on the CPU-only CI machines.
#
#   tests/worker/gpu-side-by-side.sh RESULTS_DIR [HEADER_DIR]
#
# WORKER and REMAT name binaries already built (else they are built as
# tests/worker/gpu-common.sh says); DEVICE (cuda:0), MODELS, WARMUP (2),
# PROFILE_REPEATS (5), REPEATS (3).
set -e
. "$(dirname "$0")/gpu-common.sh"
gpu_setup gpu-side-by-side.sh "this run" "$@"
: "${MODELS:=vgg19:batch=64 resnet50:batch=32 resnet101:batch=32 resnet152:batch=32 gpt:batch=8 gpt:label=gpt-24,batch=4,layers=24}"
# shellcheck disable=SC2086
python3 "$top/tests/worker/side-by-side.py" --worker "$WORKER" --remat "$REMAT" --device "$dev" \
    --out "$res/runs" --svg-dir "$res/svg" --markdown "$res/table.md" --frontier 6 \
    --warmup "${WARMUP:-2}" --profile-repeats "${PROFILE_REPEATS:-5}" \
    --repeats "${REPEATS:-3}" --validate-warmup "${WARMUP:-2}" --peak-tolerance 3 -v $MODELS
