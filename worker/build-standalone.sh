#!/bin/sh
# Builds remat-worker and cli/remat without configure, for a machine that has
# a libtorch (a PyTorch wheel's torch/ folder, with CUDA) but none of the
# Debian development packages: the GPU machine of docs/accuracy.md.
#
#   worker/build-standalone.sh OUTDIR TORCH_DIR [HEADER_DIR]
#
# HEADER_DIR holds jansson.h and curl/ when the system lacks them; the
# libraries themselves are linked by soname (JANSSON_LIBS, CURL_LIBS override).
# The same decisions as m4/remat_torch.m4 are made by compiling small tests.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
out=$1
torch=$2
hdr=${3:-}
[ -n "$out" ] && [ -d "$torch/include" ] || { echo "usage: $0 OUTDIR TORCH_DIR [HEADER_DIR]" >&2; exit 2; }
mkdir -p "$out"
CXX=${CXX:-g++}
CC=${CC:-gcc}
JANSSON_LIBS=${JANSSON_LIBS:--l:libjansson.so.4}
CURL_LIBS=${CURL_LIBS:--l:libcurl.so.4}
extra=
[ -n "$hdr" ] && extra="-isystem $hdr"
cuda=${CUDA_HOME:-/usr/local/cuda}
tinc="-isystem $torch/include"
[ "$torch" = /usr ] && tinc= # never -isystem /usr/include: it breaks #include_next
tflags="-std=c++17 $tinc -isystem $torch/include/torch/csrc/api/include $extra"
tlibs="-L$torch/lib -Wl,-rpath,$torch/lib -ltorch -ltorch_cpu -lc10"

try() { # compile-test: flags, then a program on stdin
    printf '%s\n' "$(cat)" >"$out/t.cpp"
    $CXX $tflags "$@" -fsyntax-only "$out/t.cpp" 2>/dev/null
}
defs=
abi=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))' 2>/dev/null || echo 1)
defs="$defs -D_GLIBCXX_USE_CXX11_ABI=$abi"
if try <<'EOF'
#include <c10/core/Allocator.h>
struct A : c10::Allocator { c10::DataPtr allocate(size_t) const override { return {}; } };
EOF
then defs="$defs -DREMAT_TORCH_ALLOCATE_CONST=1"; fi
if try <<'EOF'
#include <c10/core/Allocator.h>
void f() { auto m = &c10::Allocator::copy_data; (void)m; }
EOF
then defs="$defs -DREMAT_TORCH_HAS_COPY_DATA=1"; fi
if [ -f "$torch/lib/libtorch_cuda.so" ] && try -isystem "$cuda/include" <<'EOF'
#include <c10/cuda/CUDACachingAllocator.h>
void f() { auto s = c10::cuda::CUDACachingAllocator::getDeviceStats(0); (void)s; }
EOF
then
    defs="$defs -DREMAT_TORCH_CUDA=1 -isystem $cuda/include"
    if try -isystem "$cuda/include" <<'EOF'
#include <c10/cuda/CUDACachingAllocator.h>
void f() { auto s = c10::cuda::CUDACachingAllocator::getDeviceStats(0); (void)s.requested_bytes[0].peak; }
EOF
    then defs="$defs -DREMAT_TORCH_HAS_REQUESTED=1"; fi
    tlibs="$tlibs -Wl,--no-as-needed -ltorch_cuda -lc10_cuda -Wl,--as-needed"
    # The shim calls the CUDA runtime itself: link the copy libtorch loads
    # (a wheel's nvidia/*/lib), else the toolkit's.
    rt=$(ls -d "$torch"/../nvidia/*/lib/libcudart.so* "$torch"/../nvidia/cuda_runtime/lib/libcudart.so* 2>/dev/null | head -1)
    if [ -n "$rt" ]; then
        tlibs="$tlibs -L$(dirname "$rt") -Wl,-rpath,$(dirname "$rt") -l:$(basename "$rt")"
    else
        tlibs="$tlibs -L$cuda/lib64 -lcudart"
    fi
fi
echo "build-standalone: $defs"
cflags="-std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -O2 -g -Wall -Wno-unused-parameter $extra"
# The CLI wants a config.h for its version only.
version=$(sed -n 's/^AC_INIT(\[remat\], \[\([^]]*\)\].*/\1/p' "$top/configure.ac")
echo "#define PACKAGE_VERSION \"${version:-unknown}\"" >"$out/config.h"
# Every compile at once (the GPU machine has the cores); model.cpp, the one
# with libtorch's module headers, takes the longest.  A failed compile fails
# the build.
# The sources are worker/local.mk's, so that a file added there is never
# missing here (a link error on the GPU machine costs its whole lease).
srcs=$(sed -n '/^worker_remat_worker_SOURCES/,/[^\\]$/p' "$top/worker/local.mk" |
    tr ' \\\t' '\n\n\n' | grep -E '^worker/.*\.(c|cpp)$')
[ -n "$srcs" ] || { echo "build-standalone: no sources in worker/local.mk" >&2; exit 1; }
mkdir -p "$out/obj"
pids=
objs=
for f in $srcs; do
    o="$out/obj/$(basename "$f").o"
    objs="$objs $o"
    case $f in
    *.cpp) $CXX $tflags $defs -I"$top/src" -O2 -g -Wall -Wno-unused-parameter \
        -c "$top/$f" -o "$o" & ;;
    *) $CC $cflags -I"$top/src" -c "$top/$f" -o "$o" & ;;
    esac
    pids="$pids $!"
done
# libremat and rematx (src/, src/rematx/): the worker runs libremat's op lists
# and expands the zoo with rematx; the CLI computes plans on the profile.
lib=
for c in "$top"/src/*.c "$top"/src/rematx/*.c; do
    o="$out/obj/lib-$(basename "$(dirname "$c")")-$(basename "$c" .c).o"
    $CC $cflags -I"$out" -I"$top/src" -c "$c" -o "$o" &
    pids="$pids $!"
    lib="$lib $o"
done
failed=
for p in $pids; do wait "$p" || failed=1; done
[ -z "$failed" ] || { echo "build-standalone: a compile failed" >&2; exit 1; }
# shellcheck disable=SC2086
$CC $cflags -I"$out" -I"$top/src" -I"$top/cli" -o "$out/remat" "$top"/cli/*.c $lib \
    $JANSSON_LIBS -lm || echo "build-standalone: cli/remat not built"
# shellcheck disable=SC2086
$CXX -o "$out/remat-worker" $objs $lib $tlibs $CURL_LIBS $JANSSON_LIBS -lm -lpthread
echo "build-standalone: $out/remat-worker"
