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
# tests/worker/gpu-accuracy.sh builds them); DEVICE (cuda:0), MODELS,
# WARMUP (2), PROFILE_REPEATS (5), REPEATS (3).
set -e
top=$(cd "$(dirname "$0")/../.." && pwd)
res=${1:?usage: $0 RESULTS_DIR [HEADER_DIR]}
hdr=${2:-}
dev=${DEVICE:-cuda:0}
no_cuda() {
    echo "gpu-side-by-side.sh: NO CUDA DEVICE: $*" >&2
    echo "gpu-side-by-side.sh: this needs a CUDA GPU and a CUDA PyTorch; nothing was run." >&2
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
printf '{"layers":[{"type":"linear","out_features":8}],"input_shape":[8],"batch_size":2,"device":"%s","warmup":0,"repeats":1}\n' \
    "$dev" >"$res/probe.json"
"$WORKER" --device "$dev" --profile-local "$res/probe.json" >/dev/null ||
    no_cuda "remat-worker cannot open $dev (built without CUDA?)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$res/device.txt"
: "${MODELS:=vgg19:batch=64 resnet50:batch=32 resnet101:batch=32 resnet152:batch=32 gpt:batch=8 gpt:label=gpt-24,batch=4,layers=24}"
# shellcheck disable=SC2086
python3 "$top/tests/worker/side-by-side.py" --worker "$WORKER" --remat "$REMAT" --device "$dev" \
    --out "$res/runs" --svg-dir "$res/svg" --markdown "$res/table.md" --frontier 6 \
    --warmup "${WARMUP:-2}" --profile-repeats "${PROFILE_REPEATS:-5}" \
    --repeats "${REPEATS:-3}" --validate-warmup "${WARMUP:-2}" --peak-tolerance 3 -v $MODELS
