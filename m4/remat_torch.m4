# REMAT_CHECK_TORCH
# Finds libtorch for the worker (worker/).  Sets TORCH_CPPFLAGS, TORCH_LIBS,
# TORCH_DIR, have_torch, have_torch_cuda, the conditionals HAVE_TORCH and
# HAVE_TORCH_CUDA, and the config.h defines the shim needs to compile against
# both libtorch 1.13 (Debian) and 2.x (a PyTorch wheel's torch/ folder).
#
# Everything is decided by compiling and linking, never by a header's
# presence: Debian's libtorch ships CUDA headers that do not even compile.
# Without libtorch configure says so and builds everything else.
AC_DEFUN([REMAT_CHECK_TORCH], [
  AC_ARG_WITH([libtorch],
    [AS_HELP_STRING([--with-libtorch=DIR], [libtorch to build the worker against: DIR holds include/ and lib/ (default: Debian's, if installed; no to skip)])],
    [], [with_libtorch=check])
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda=DIR], [CUDA toolkit whose headers a CUDA libtorch needs (default: /usr/local/cuda)])],
    [], [with_cuda=/usr/local/cuda])
  have_torch=no
  have_torch_cuda=no
  TORCH_DIR=none
  TORCH_CPPFLAGS=
  TORCH_LIBS=
  AS_IF([test "x$with_libtorch" != xno], [
    AS_CASE([$with_libtorch],
      [check|yes|/usr], [
        dnl Debian's layout: the headers sit in /usr/include (already searched,
        dnl never added with -I) and the C++ API one level deeper.
        TORCH_DIR=/usr
        torch_cppflags="-isystem /usr/include/torch/csrc/api/include"
        torch_libs="-ltorch -ltorch_cpu -lc10"],
      [
        TORCH_DIR=$with_libtorch
        torch_cppflags="-isystem $with_libtorch/include -isystem $with_libtorch/include/torch/csrc/api/include"
        torch_libs="-L$with_libtorch/lib -Wl,-rpath,$with_libtorch/lib -ltorch -ltorch_cpu -lc10"])
    AC_LANG_PUSH([C++])
    torch_save_CPPFLAGS=$CPPFLAGS
    torch_save_CXXFLAGS=$CXXFLAGS
    torch_save_LIBS=$LIBS
    dnl The C++11 ABI of the library decides std::string's mangling: link a
    dnl program that passes a std::string across, once with each setting.
    for torch_abi in 1 0; do
      AC_MSG_CHECKING([for libtorch in $TORCH_DIR with _GLIBCXX_USE_CXX11_ABI=$torch_abi])
      CPPFLAGS="$torch_save_CPPFLAGS $torch_cppflags -D_GLIBCXX_USE_CXX11_ABI=$torch_abi"
      CXXFLAGS="-std=c++17 -O0"
      LIBS="$torch_libs $torch_save_LIBS"
      AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <string>
#include <c10/core/Device.h>
#include <ATen/ATen.h>]],
        [[std::string s("cpu"); c10::Device d(s); at::Tensor t = at::ones({2}); return (int)d.is_cuda() + (int)t.numel() - 2;]])],
        [have_torch=yes], [have_torch=no])
      AC_MSG_RESULT([$have_torch])
      AS_IF([test "x$have_torch" = xyes], [break])
    done
    AS_IF([test "x$have_torch" = xyes], [
      TORCH_CPPFLAGS="$torch_cppflags -D_GLIBCXX_USE_CXX11_ABI=$torch_abi"
      TORCH_LIBS=$torch_libs
      CPPFLAGS="$torch_save_CPPFLAGS $TORCH_CPPFLAGS"
      dnl libtorch 2.x dropped the const of Allocator::allocate ...
      AC_MSG_CHECKING([whether c10::Allocator::allocate is const])
      AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <c10/core/Allocator.h>
struct A : c10::Allocator {
  c10::DataPtr allocate(size_t) const override { return {}; }
};]], [[]])],
        [AC_MSG_RESULT([yes]); AC_DEFINE([REMAT_TORCH_ALLOCATE_CONST], [1], [Define if c10::Allocator::allocate is a const method (libtorch 1.x).])],
        [AC_MSG_RESULT([no])])
      dnl ... and made copy_data a method every allocator must give.
      AC_MSG_CHECKING([whether c10::Allocator has copy_data])
      AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <c10/core/Allocator.h>]],
        [[auto m = &c10::Allocator::copy_data; (void)m;]])],
        [AC_MSG_RESULT([yes]); AC_DEFINE([REMAT_TORCH_HAS_COPY_DATA], [1], [Define if c10::Allocator declares copy_data (libtorch 2.x).])],
        [AC_MSG_RESULT([no])])
      dnl CUDA: compile against the caching allocator's statistics and link
      dnl libtorch_cuda without --as-needed dropping it (nothing names it).
      AC_MSG_CHECKING([whether libtorch has CUDA])
      torch_cuda_cppflags=
      AS_IF([test -d "$with_cuda/include"], [torch_cuda_cppflags="-isystem $with_cuda/include"])
      torch_cuda_libs="-Wl,--no-as-needed -ltorch_cuda -lc10_cuda -Wl,--as-needed"
      CPPFLAGS="$torch_save_CPPFLAGS $TORCH_CPPFLAGS $torch_cuda_cppflags"
      LIBS="$TORCH_LIBS $torch_cuda_libs $torch_save_LIBS"
      AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>]],
        [[auto s = c10::cuda::CUDACachingAllocator::getDeviceStats(0);
          c10::cuda::CUDACachingAllocator::resetPeakStats(0);
          return (int)(s.allocated_bytes[0].current + c10::cuda::device_count());]])],
        [have_torch_cuda=yes], [have_torch_cuda=no])
      AC_MSG_RESULT([$have_torch_cuda])
      AS_IF([test "x$have_torch_cuda" = xyes], [
        dnl The shim calls the CUDA runtime itself: link the copy libtorch
        dnl loads (a wheel's nvidia/*/lib), else the toolkit's.
        torch_cudart=`ls -d "$TORCH_DIR"/../nvidia/*/lib/libcudart.so* 2>/dev/null | head -n 1`
        AS_IF([test -n "$torch_cudart"], [
          torch_cudart_dir=`dirname "$torch_cudart"`
          torch_cuda_libs="$torch_cuda_libs -L$torch_cudart_dir -Wl,-rpath,$torch_cudart_dir -l:`basename "$torch_cudart"`"
        ], [torch_cuda_libs="$torch_cuda_libs -L$with_cuda/lib64 -lcudart"])
        TORCH_CPPFLAGS="$TORCH_CPPFLAGS $torch_cuda_cppflags -DREMAT_TORCH_CUDA=1"
        TORCH_LIBS="$TORCH_LIBS $torch_cuda_libs"
        dnl The bytes asked for, before the allocator's rounding (libtorch 2.1+).
        AC_MSG_CHECKING([whether the CUDA caching allocator counts requested bytes])
        AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <c10/cuda/CUDACachingAllocator.h>]],
          [[return (int)c10::cuda::CUDACachingAllocator::getDeviceStats(0).requested_bytes[0].peak;]])],
          [AC_MSG_RESULT([yes]); TORCH_CPPFLAGS="$TORCH_CPPFLAGS -DREMAT_TORCH_HAS_REQUESTED=1"],
          [AC_MSG_RESULT([no])])])
    ], [
      AS_IF([test "x$with_libtorch" != xcheck],
        [AC_MSG_ERROR([--with-libtorch=$with_libtorch: cannot link a program against libtorch there (see config.log)])])
      AC_MSG_WARN([libtorch not found: remat-worker will not be built (install libtorch-dev or use --with-libtorch=DIR)])
      TORCH_DIR=none
    ])
    CPPFLAGS=$torch_save_CPPFLAGS
    CXXFLAGS=$torch_save_CXXFLAGS
    LIBS=$torch_save_LIBS
    AC_LANG_POP([C++])
  ])
  AC_SUBST([TORCH_DIR])
  AC_SUBST([TORCH_CPPFLAGS])
  AC_SUBST([TORCH_LIBS])
  AM_CONDITIONAL([HAVE_TORCH], [test "x$have_torch" = xyes])
  AM_CONDITIONAL([HAVE_TORCH_CUDA], [test "x$have_torch_cuda" = xyes])
])
