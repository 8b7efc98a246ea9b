# REMAT_CHECK_TORCH
# Placeholder until the worker's detection lands: libtorch is reported absent,
# so everything but worker/ builds.  --with-libtorch is accepted already.
AC_DEFUN([REMAT_CHECK_TORCH], [
  AC_ARG_WITH([libtorch],
    [AS_HELP_STRING([--with-libtorch=DIR], [libtorch to build the worker against (default: Debian's, if installed)])],
    [], [with_libtorch=check])
  have_torch=no
  have_torch_cuda=no
  TORCH_DIR=none
  AC_SUBST([TORCH_CPPFLAGS])
  AC_SUBST([TORCH_LIBS])
  AM_CONDITIONAL([HAVE_TORCH], [test "x$have_torch" = xyes])
  AM_CONDITIONAL([HAVE_TORCH_CUDA], [test "x$have_torch_cuda" = xyes])
])
