#!/bin/sh
# One FSDP rank's memory measured on GPUs against remat's model of it
# (docs/scheduling.md, "Sharded jobs"), for a machine with PyTorch 2.x and
# CUDA: Debian's torch 1.13 cannot import FSDP under Python 3.11, so
# zero3/fsdp/hsdp are only modelled until this runs.  Not run in CI.
#
#   tests/worker/gpu-sharded.sh RESULTS_DIR
#
# Builds libremat (no libtorch needed) into BUILD_DIR (/tmp/remat-sharded-
# build) unless REMAT_LIB names a libremat.so, then runs
# tests/worker/sharded_gpu.py with one rank per GPU (NCCL cannot put two
# ranks of a group on one device): FULL_SHARD over every GPU, and
# HYBRID_SHARD with shard groups of half of them when there are four or
# more.  With fewer than two GPUs it stops with exit 2 and says so: one
# rank shards nothing.  RESULTS_DIR/sharded.json has every figure;
# exit 1 when a measured term is off the model's by more than 3%.
set -eu
res=${1:?usage: gpu-sharded.sh RESULTS_DIR}
top=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$res"
py=${PYTHON:-python3}
n=$("$py" -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)' 2>/dev/null || echo 0)
if [ "$n" -lt 2 ]; then
    echo "gpu-sharded: $n CUDA devices: FSDP needs two ranks on two GPUs; nothing was run." >&2
    exit 2
fi
"$py" -c 'import torch.distributed.fsdp' || {
    echo "gpu-sharded: this PyTorch has no FSDP; nothing was run." >&2
    exit 2
}
lib=${REMAT_LIB:-}
if [ -z "$lib" ]; then
    b=${BUILD_DIR:-/tmp/remat-sharded-build}
    mkdir -p "$b"
    (cd "$top" && [ -x configure ] || ./autogen.sh) >"$res/build.log" 2>&1
    (cd "$b" && "$top/configure" --without-libtorch && make -j"$(nproc)" src/libremat.la) \
        >>"$res/build.log" 2>&1
    lib=$b/src/.libs/libremat.so
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >"$res/device.txt" || :
"$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' >>"$res/device.txt"
cat "$res/device.txt"
status=0
"$py" "$top/tests/worker/sharded_gpu.py" --lib "$lib" --ranks "$n" --strategy fsdp \
    --out "$res/sharded-fsdp.json" || status=1
if [ "$n" -ge 4 ]; then
    "$py" "$top/tests/worker/sharded_gpu.py" --lib "$lib" --ranks "$n" --strategy hsdp \
        --shard-group $((n / 2)) --out "$res/sharded-hsdp.json" || status=1
fi
exit $status
