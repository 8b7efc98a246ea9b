#!/bin/sh
# Every GPU check of docs/accuracy.md in one run, for a GPU lent for a few
# minutes: the worker is built once (tests/worker/gpu-common.sh), then, most
# wanted first, each step under the time left before DEADLINE seconds (480)
# from the start, a step that does not fit skipped and said so:
#
#   1. side by side (tests/worker/side-by-side.py, every solver and six
#      frontier points, step times checked within 10% and the frontier's
#      order, as gpu-time.sh does): ResNet-50 batch 32, VGG-19 batch 64, the
#      zoo's gpt at batch 8;
#   2. one more step of ResNet-50's min-peak and store-all plans with
#      --timeline: each op's peak, live bytes after it, wall time and the
#      allocator's reserved bytes (where a step's time goes), and a second
#      profile of it (how far a prediction moves between two profiles);
#   3. the same plans of ResNet-50 and VGG-19 again with the allocator's
#      classic segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False;
#      the worker's default is expandable segments, docs/accuracy.md);
#   4. the other dtypes of docs/accuracy.md's GPU tables: VGG-19 fp16,
#      ResNet-50 bf16 (store-all, sqrt, min-peak, min-time, the frontier);
#   5. the rest of the side-by-side table: ResNet-101 and -152 batch 32, a
#      24-block gpt at batch 4.
#
# Results go to RESULTS_DIR (runs/ holds every spec, profile, plan and
# result, as side-by-side.py keeps them: `side-by-side.py --no-run --out
# RESULTS_DIR/runs ...` redraws the tables and figures from them anywhere);
# with SNAPSHOT=FILE.tar.gz, RESULTS_DIR is packed there after every step,
# so that a run cut short still leaves what it measured.
#
#   tests/worker/gpu-all.sh RESULTS_DIR [HEADER_DIR]
#
# HEADER_DIR as for gpu-common.sh; a lib/ folder in it holds libjansson.so.4
# and libcurl.so.4 (and what they need) for a machine that lacks them.
# Without a CUDA device it stops at once with exit 2 (gpu-common.sh).
set -e
t_start=$(date +%s)
left() { echo $((${DEADLINE:-480} - ($(date +%s) - t_start))); }
snapshot() {
    [ -z "${SNAPSHOT:-}" ] || tar -C "$res" -czf "$SNAPSHOT" . 2>/dev/null || true
}
# step NAME MIN_SECONDS COMMAND...: COMMAND's output into RESULTS_DIR/NAME.log.
step() {
    name=$1 need=$2
    shift 2
    l=$(left)
    if [ "$l" -lt "$need" ]; then
        echo "gpu-all.sh: $name: SKIPPED, $l s left of ${DEADLINE:-480}"
        return 0
    fi
    s0=$(date +%s)
    rc=0
    timeout -k 5 "$l" sh "$0" --do "$@" >"$res/$name.log" 2>&1 || rc=$?
    echo "gpu-all.sh: $name: exit $rc after $(($(date +%s) - s0)) s"
    tail -n 25 "$res/$name.log"
    snapshot
}
sbs() { # side-by-side.py with the GPU settings; $1 the table's name
    t=$1
    shift
    python3 "$top/tests/worker/side-by-side.py" --worker "$WORKER" --remat "$REMAT" \
        --device "$dev" --out "$runs" --svg-dir "$res/svg" --markdown "$res/table-$t.md" \
        --warmup 2 --profile-repeats 5 --repeats 3 --validate-warmup 2 --peak-tolerance 3 \
        --time-tolerance 10 --check-order --order-gap 0.02 -v "$@"
}
# validate TAG PLAN OUT [worker options...]
validate() {
    v_tag=$1 v_plan=$2 v_out=$3
    shift 3
    [ -f "$runs/$v_tag.$v_plan.plan.json" ] || { echo "no $v_tag $v_plan plan"; return 0; }
    echo "$v_tag $v_plan -> $v_out"
    "$WORKER" --device "$dev" --validate-local "$runs/$v_tag.spec.json" \
        "$runs/$v_tag.$v_plan.plan.json" --profile "$runs/$v_tag.profile.json" \
        --repeats 3 --warmup 2 "$@" >"$res/$v_out.json" || echo "FAILED: $v_tag $v_plan"
}
timelines() {
    for p in min-peak store-all sqrt; do
        validate resnet50-b32 "$p" "timeline-resnet50-b32-$p" --timeline
    done
    # A second profile: how far the prediction itself moves between two.
    "$WORKER" --device "$dev" --profile-local "$runs/resnet50-b32.spec.json" \
        >"$res/reprofile-resnet50-b32.json" || echo "FAILED: the second profile"
}
classic() {
    export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False
    for t in resnet50-b32 vgg19-b64; do
        for p in store-all sqrt min-peak min-time; do
            validate "$t" "$p" "classic-$t-$p"
        done
    done
}

# A step: one of the functions above, run by step() under timeout.
if [ "${1:-}" = --do ]; then
    shift
    "$@"
    exit $?
fi
if [ -n "${2:-}" ] && [ -d "$2/lib" ]; then
    carried=$(cd "$2/lib" && pwd)
    if ! ldconfig -p 2>/dev/null | grep -q "libjansson.so.4 "; then
        echo "gpu-all.sh: libjansson.so.4 is not on this machine: using $carried"
        export JANSSON_LIBS="-L$carried -l:libjansson.so.4"
        export LD_LIBRARY_PATH="$carried${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fi
    if ! ldconfig -p 2>/dev/null | grep -q "libcurl.so.4 "; then
        echo "gpu-all.sh: libcurl.so.4 is not on this machine: using $carried"
        export CURL_LIBS="-L$carried -l:libcurl.so.4"
        case ":${LD_LIBRARY_PATH:-}:" in
        *":$carried:"*) ;;
        *) export LD_LIBRARY_PATH="$carried${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
        esac
    fi
fi
. "$(dirname "$0")/gpu-common.sh"
gpu_setup gpu-all.sh "this run" "$@"
echo "gpu-all.sh: built and probed in $(($(date +%s) - t_start)) s"
runs=$res/runs
mkdir -p "$runs" "$res/svg"
# What the steps (this script again, under timeout) need.
export WORKER REMAT dev top res runs

step side-by-side-1 60 sbs main resnet50:batch=32 vgg19:batch=64 gpt:batch=8
step timelines 20 timelines
step classic 30 classic
step dtypes 40 sbs dtypes --algorithms store-all,sqrt,min-peak,min-time \
    vgg19:batch=64,dtype=fp16 resnet50:batch=32,dtype=bf16
step side-by-side-2 40 sbs rest resnet101:batch=32 resnet152:batch=32 \
    gpt:label=gpt-24,batch=4,layers=24
echo "gpu-all.sh: done in $(($(date +%s) - t_start)) s"
snapshot
