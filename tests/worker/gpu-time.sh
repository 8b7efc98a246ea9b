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
# The worker is built against the torch package's libtorch as
# tests/worker/gpu-accuracy.sh does; WORKER and REMAT name binaries already
# built instead. Also: DEVICE (cuda:0), WARMUP (2), PROFILE_REPEATS (5),
# REPEATS (5), MODELS (the five configurations above, side-by-side.py's syntax).
set -e
top=$(cd "$(dirname "$0")/../.." && pwd)
res=${1:?usage: $0 RESULTS_DIR [HEADER_DIR]}
hdr=${2:-}
dev=${DEVICE:-cuda:0}
no_cuda() {
    echo "gpu-time.sh: NO CUDA DEVICE: $*" >&2
    echo "gpu-time.sh: this check needs a CUDA GPU and a CUDA PyTorch; nothing was checked." >&2
    exit 2
}
command -v nvidia-smi >/dev/null 2>&1 || no_cuda "nvidia-smi is not installed"
nvidia-smi -L >/dev/null 2>&1 || no_cuda "nvidia-smi sees no GPU"
python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
    no_cuda "python3's torch has no CUDA (or no torch at all)"
mkdir -p "$res"
if [ -z "$WORKER" ] || [ -z "$REMAT" ]; then
    torch=$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))')
    b=${BUILD_DIR:-/tmp/remat-gpu-build}
    sh "$top/worker/build-standalone.sh" "$b" "$torch" "$hdr" >"$res/build.log" 2>&1 || {
        tail -40 "$res/build.log"
        exit 1
    }
    WORKER=$b/remat-worker REMAT=$b/remat
fi
# A worker built without CUDA fails here rather than in the middle.
printf '{"layers":[{"type":"linear","out_features":8}],"input_shape":[8],"batch_size":2,"device":"%s","warmup":0,"repeats":1}\n' \
    "$dev" >"$res/probe.json"
"$WORKER" --device "$dev" --profile-local "$res/probe.json" >/dev/null ||
    no_cuda "remat-worker cannot open $dev (built without CUDA?)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$res/device.txt"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' >>"$res/device.txt"
cat "$res/device.txt"
: "${MODELS:=vgg19:batch=64 vgg19:batch=64,dtype=fp16 resnet50:batch=32 resnet50:batch=32,dtype=bf16 gpt:batch=8}"
# shellcheck disable=SC2086
python3 "$top/tests/worker/side-by-side.py" --worker "$WORKER" --remat "$REMAT" --device "$dev" \
    --out "$res/runs" --svg-dir "$res/svg" --markdown "$res/table.md" \
    --algorithms store-all,sqrt,min-peak,min-time --frontier "${FRONTIER:-6}" \
    --warmup "${WARMUP:-2}" --profile-repeats "${PROFILE_REPEATS:-5}" \
    --repeats "${REPEATS:-5}" --validate-warmup "${WARMUP:-2}" \
    --time-tolerance "${TIME_TOLERANCE:-10}" --peak-tolerance "${PEAK_TOLERANCE:-3}" \
    --check-order --order-gap "${ORDER_GAP:-0.02}" -v $MODELS
