# rematx: libremat's internals that rematd, the CLI and the worker borrow
# (src/rematx/rematx.h says what and why), built once and linked into each.
noinst_LTLIBRARIES += src/rematx/librematx.la
src_rematx_librematx_la_SOURCES = src/rematx/rematx.h src/rematx/dynbuf.h src/rematx/dynbuf.c \
	src/rematx/zoo.h src/rematx/zoo.c src/rematx/core.h src/rematx/core.c \
	src/rematx/sha256.h src/rematx/sha256.c src/rematx/real.h src/rematx/real.c \
	src/rematx/svg.h src/rematx/svg.c src/rematx/error.h src/rematx/error.c \
	src/rematx/layers.h src/rematx/layers.c src/rematx/names.h src/rematx/names.c \
	src/rematx/utf8.h src/rematx/utf8.c \
	src/rematx/hfconfig.h src/rematx/hfconfig.c
src_rematx_librematx_la_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)

# JSON pointers to a member a request named (the problems' pointer).
src_rematx_librematx_la_SOURCES += src/rematx/pointer.h src/rematx/pointer.c

# libremat.  The convenience library holds everything, internals included,
# so the tests can reach remat__ functions; the installed library exports
# only remat_* (and tests/check-exports.sh proves it).
noinst_LTLIBRARIES += src/libremat_core.la
src_libremat_core_la_SOURCES = \
	src/remat.h src/remat_private.h \
	src/json_lex.h src/json_lex.c src/profile_rules.h src/profile_rules.c \
	src/big_alloc.c src/error.c src/fits.c src/optimizer.c src/sharded.c src/profile.c src/profile_fast.c src/schedule.c src/simulate.c src/plan.c src/plan_dump.c src/exports.c \
	src/solve.c src/solve_baselines.c src/solve_sum.c src/solve_prefix.c \
	src/solve_minpeak.h src/solve_minpeak_chain.h src/solve_minpeak.c src/solve_minpeak_set.c \
	src/solve_mintime.h src/solve_mintime_table.h src/solve_mintime_table.c src/solve_mintime_load.c \
	src/solve_mintime_period.c \
	src/solve_mintime_least.c src/solve_mintime_bound.c src/solve_mintime.c src/solve_mintime_nested.c src/frontier.c
src_libremat_core_la_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)
src_libremat_core_la_LIBADD = src/rematx/librematx.la $(JANSSON_LIBS) -lm

lib_LTLIBRARIES += src/libremat.la
src_libremat_la_SOURCES =
src_libremat_la_LIBADD = src/libremat_core.la
src_libremat_la_LDFLAGS = -version-info $(REMAT_LT_VERSION) -export-symbols-regex '^remat_[a-z0-9]'
include_HEADERS += src/remat.h
pkgconfig_DATA += src/remat.pc
EXTRA_DIST += src/remat.pc.in

# The design notes of the core, installed with the library and shipped in the tarball.
dist_doc_DATA += docs/profile.md docs/memory-model.md docs/scheduling.md
EXTRA_DIST += docs/examples/tiny-cnn.json
