#!/bin/sh
# The GPU rows of docs/accuracy.md, on a machine with a CUDA PyTorch and
# nothing else: builds the worker against the libtorch inside the torch
# package (worker/build-standalone.sh), times the ResNet-50 batch 32 profile,
# and runs tests/worker/accuracy.sh for VGG-19 at batch 64 and ResNet-50 at
# batch 32.
#
#   tests/worker/gpu-accuracy.sh RESULTS_DIR [HEADER_DIR]
set -e
top=$(cd "$(dirname "$0")/../.." && pwd)
res=$1
hdr=${2:-}
mkdir -p "$res"
torch=$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))')
b=${BUILD_DIR:-/tmp/remat-gpu-build}
sh "$top/worker/build-standalone.sh" "$b" "$torch" "$hdr" >"$res/build.log" 2>&1 || {
    tail -40 "$res/build.log"
    exit 1
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$res/device.txt"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' >>"$res/device.txt"
cat "$res/device.txt"
acc=${ACC_DIR:-/tmp/remat-gpu-acc}
mkdir -p "$acc"
printf '{"model":"resnet50","batch_size":32,"dtype":"fp32","device":"cuda:0","warmup":2,"repeats":5}\n' \
    >"$acc/r50.json"
t0=$(date +%s.%N)
"$b/remat-worker" --device cuda:0 --profile-local "$acc/r50.json" >"$acc/r50.profile.json"
t1=$(date +%s.%N)
python3 -c "print('resnet50 batch 32 profile, start to finish: %.2f s' % ($t1 - $t0))" | tee "$res/timing.txt"
export WARMUP=${WARMUP:-2} PROFILE_REPEATS=${PROFILE_REPEATS:-5} REPEATS=${REPEATS:-3}
{
    OUTDIR="$acc" "$top/tests/worker/accuracy.sh" "$b/remat-worker" "$b/remat" cuda:0 64 vgg19 || true
    OUTDIR="$acc" "$top/tests/worker/accuracy.sh" "$b/remat-worker" "$b/remat" cuda:0 32 resnet50 \
        | tail -n +3 || true
} | tee "$res/table.md"
tar -C "$acc" -czf "$res/acc.tar.gz" .
