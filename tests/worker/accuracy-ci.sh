#!/bin/sh
# CI's accuracy bound: on CPU, the traced prediction of the store-all, sqrt
# and min-peak plans must be within 1% of the peak measured by running each
# plan for real, with gradients equal to store-all's.  AlexNet at batch 2,
# ResNet-50 at batch 2 on 112x112 inputs (a quarter of the work of 224x224,
# which two shared cores need minutes for), and a tiny GPT (d_model 64, 4
# heads, 2 blocks, seq_len 32, vocab 100) at batch 2; docs/accuracy.md gives
# ResNet-50 and VGG-19 at 224x224, with the command.
b=${top_builddir:-.}
s=${top_srcdir:-.}
if [ ! -x "$b/worker/remat-worker" ] || [ ! -x "$b/cli/remat" ]; then
    echo "SKIP: remat-worker or cli/remat is not built"
    exit 77
fi
# libtorch keeps memory until exit by design: leak reports would be noise.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export ASAN_OPTIONS
export TOLERANCE=1 WARMUP=1 VALIDATE_WARMUP=0 PROFILE_REPEATS=1 REPEATS=1
sh "$s/tests/worker/accuracy.sh" "$b/worker/remat-worker" "$b/cli/remat" cpu 2 alexnet || exit 1
NO_HEADER=1 INPUT_SHAPE=3,112,112 \
    sh "$s/tests/worker/accuracy.sh" "$b/worker/remat-worker" "$b/cli/remat" cpu 2 resnet50 || exit 1
# A tiny GPT: transformer blocks, whose forward without grad holds what the
# forward with grad saves, and whose backward frees saved tensors before it
# has made its gradients (the profile's block fields, docs/profile.md).
NO_HEADER=1 MODEL_OPTIONS='{"d_model":64,"heads":4,"layers":2,"seq_len":32,"vocab":100}' \
    sh "$s/tests/worker/accuracy.sh" "$b/worker/remat-worker" "$b/cli/remat" cpu 2 gpt
