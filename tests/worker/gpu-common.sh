# gpu-common.sh - what the GPU checks (tests/worker/gpu-*.sh) do before
# their own work, sourced by each (". gpu-common.sh"), never run alone:
#
#   gpu_setup NAME WHAT "$@"
#
# NAME is the script's name and WHAT what it does ("this check", "this
# run"), for the messages.  From the script's arguments (RESULTS_DIR
# [HEADER_DIR]) and the environment it sets:
#   top  the source tree;  res  RESULTS_DIR (made);  hdr  HEADER_DIR or "";
#   dev  DEVICE, cuda:0 by default;
#   WORKER, REMAT  binaries already built, or built here against the torch
#        package's libtorch (worker/build-standalone.sh, into BUILD_DIR,
#        /tmp/remat-gpu-build by default; its log is RESULTS_DIR/build.log).
# It stops at once with exit 2, saying why, when there is no CUDA device, no
# CUDA PyTorch, or a worker that cannot open the device (built without
# CUDA): these checks cannot run on the CPU-only CI machines, and must not
# fail half-way there.  It ends by writing RESULTS_DIR/device.txt (the GPU,
# its driver and memory, torch's version and CUDA) and printing it.

no_cuda() {
    echo "$gpu_name: NO CUDA DEVICE: $*" >&2
    echo "$gpu_name: $gpu_what needs a CUDA GPU and a CUDA PyTorch; nothing was run." >&2
    exit 2
}

gpu_setup() {
    gpu_name=$1
    gpu_what=$2
    shift 2
    top=$(cd "$(dirname "$0")/../.." && pwd)
    res=${1:?usage: $0 RESULTS_DIR [HEADER_DIR]}
    hdr=${2:-}
    dev=${DEVICE:-cuda:0}
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
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' \
        >>"$res/device.txt"
    cat "$res/device.txt"
}
