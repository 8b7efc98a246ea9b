# The core's tests: one cmocka program per module, the helpers every solver
# test links (seeded random chains, exhaustive search), the CLI script, and
# the export and format checks.
noinst_LTLIBRARIES += tests/libtesthelp.la
tests_libtesthelp_la_SOURCES = tests/randchain.c tests/randchain.h tests/exhaustive.c \
	tests/exhaustive.h
tests_libtesthelp_la_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)

CORE_TEST_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS) $(CMOCKA_CFLAGS) -I$(top_srcdir)/tests
CORE_TEST_LDADD = tests/libtesthelp.la src/libremat_core.la $(CMOCKA_LIBS) $(JANSSON_LIBS) -lm
# The allocation-failure loop (tests/failalloc.h): its programs link it and
# have libremat's and jansson's allocations wrapped at link time.
FAILALLOC_SRC = tests/failalloc.c tests/failalloc.h
FAILALLOC_WRAP = -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free

check_PROGRAMS += tests/test_simulate
TESTS += tests/test_simulate
tests_test_simulate_SOURCES = tests/test_simulate.c
tests_test_simulate_CFLAGS = $(CORE_TEST_CFLAGS)
tests_test_simulate_LDADD = $(CORE_TEST_LDADD)

check_PROGRAMS += tests/test_simulate_store_all
TESTS += tests/test_simulate_store_all
tests_test_simulate_store_all_SOURCES = tests/test_simulate_store_all.c
tests_test_simulate_store_all_CFLAGS = $(CORE_TEST_CFLAGS)
tests_test_simulate_store_all_LDADD = $(CORE_TEST_LDADD)

check_PROGRAMS += tests/test_solve
TESTS += tests/test_solve
tests_test_solve_SOURCES = tests/test_solve.c
tests_test_solve_CFLAGS = $(CORE_TEST_CFLAGS)
tests_test_solve_LDADD = $(CORE_TEST_LDADD)

check_PROGRAMS += tests/test_profile
TESTS += tests/test_profile
tests_test_profile_SOURCES = tests/test_profile.c
tests_test_profile_CFLAGS = $(CORE_TEST_CFLAGS)
tests_test_profile_LDADD = $(CORE_TEST_LDADD)

check_PROGRAMS += tests/test_profile_equiv
TESTS += tests/test_profile_equiv
tests_test_profile_equiv_SOURCES = tests/test_profile_equiv.c
tests_test_profile_equiv_CFLAGS = $(CORE_TEST_CFLAGS)
tests_test_profile_equiv_LDADD = $(CORE_TEST_LDADD)

check_PROGRAMS += tests/test_plan_dump
TESTS += tests/test_plan_dump
tests_test_plan_dump_SOURCES = tests/test_plan_dump.c
tests_test_plan_dump_CFLAGS = $(CORE_TEST_CFLAGS)
tests_test_plan_dump_LDADD = $(CORE_TEST_LDADD)

check_PROGRAMS += tests/test_exports
TESTS += tests/test_exports
tests_test_exports_SOURCES = tests/test_exports.c
tests_test_exports_CFLAGS = $(CORE_TEST_CFLAGS)
tests_test_exports_LDADD = $(CORE_TEST_LDADD)
check_PROGRAMS += tests/test_real
TESTS += tests/test_real
tests_test_real_SOURCES = tests/test_real.c
tests_test_real_CFLAGS = $(CORE_TEST_CFLAGS)
tests_test_real_LDADD = $(CORE_TEST_LDADD)

check_PROGRAMS += tests/test_plan_dump_reals
TESTS += tests/test_plan_dump_reals
tests_test_plan_dump_reals_SOURCES = tests/test_plan_dump_reals.c
tests_test_plan_dump_reals_CFLAGS = $(CORE_TEST_CFLAGS)
tests_test_plan_dump_reals_LDADD = $(CORE_TEST_LDADD)

# Test data and scripts (read through $(top_srcdir), listed for make distcheck).
EXTRA_DIST += \
	tests/data/profiles/bad/bad_json.json \
	tests/data/profiles/bad/bool_input_bytes.json \
	tests/data/profiles/bad/bwd_tmp_real.json \
	tests/data/profiles/bad/bytes_over_limit.json \
	tests/data/profiles/bad/dtype_too_long.json \
	tests/data/profiles/bad/duplicate_key.json \
	tests/data/profiles/bad/empty_stages.json \
	tests/data/profiles/bad/fractional_bytes.json \
	tests/data/profiles/bad/freed_over_held.json \
	tests/data/profiles/bad/index.txt \
	tests/data/profiles/bad/missing_input_bytes.json \
	tests/data/profiles/bad/missing_out_bytes.json \
	tests/data/profiles/bad/missing_stages.json \
	tests/data/profiles/bad/model_not_string.json \
	tests/data/profiles/bad/name_not_string.json \
	tests/data/profiles/bad/name_too_long.json \
	tests/data/profiles/bad/negative_batch_size.json \
	tests/data/profiles/bad/negative_grad_tmp.json \
	tests/data/profiles/bad/negative_input_bytes.json \
	tests/data/profiles/bad/negative_out_bytes.json \
	tests/data/profiles/bad/negative_time.json \
	tests/data/profiles/bad/negative_tmp.json \
	tests/data/profiles/bad/root_not_object.json \
	tests/data/profiles/bad/saved_below_out.json \
	tests/data/profiles/bad/stage_not_object.json \
	tests/data/profiles/bad/stages_not_array.json \
	tests/data/profiles/bad/string_bytes.json \
	tests/data/profiles/bad/string_time.json \
	tests/data/profiles/bad/step_time_over_limit.json \
	tests/data/profiles/bad/time_just_over_limit.json \
	tests/data/profiles/bad/time_over_limit.json \
	tests/data/profiles/bad/total_over_limit.json \
	tests/data/profiles/bad/unknown_format.json \
	tests/data/profiles/good/full.json \
	tests/data/profiles/good/t1.json \
	tests/data/profiles/good/t10.json \
	tests/data/profiles/good/t2.json \
	tests/data/profiles/good/t3.json \
	tests/data/profiles/good/t4.json \
	tests/data/profiles/good/t5.json \
	tests/data/profiles/good/t6.json \
	tests/data/profiles/good/t7.json \
	tests/data/profiles/good/t8.json \
	tests/data/profiles/good/t9.json

dist_check_SCRIPTS += tests/cli.sh tests/check-exports.sh tests/check-format.sh tests/check-lengths.sh
EXTRA_DIST += tests/exports.txt tests/check-cppcheck.sh tests/check-dist.sh tests/README.md \
	tests/no-cmocka.h
TESTS += tests/cli.sh tests/check-exports.sh tests/check-format.sh tests/check-lengths.sh

# The allocation-failure loop: the core's allocations are wrapped at link time.
check_PROGRAMS += tests/test_alloc
TESTS += tests/test_alloc
tests_test_alloc_SOURCES = tests/test_alloc.c $(FAILALLOC_SRC)
tests_test_alloc_CFLAGS = $(CORE_TEST_CFLAGS)
tests_test_alloc_LDADD = $(CORE_TEST_LDADD)
tests_test_alloc_LDFLAGS = $(FAILALLOC_WRAP)

# The bounded buffer every part of remat writes text into, out-of-memory included.
check_PROGRAMS += tests/test_dynbuf
TESTS += tests/test_dynbuf
tests_test_dynbuf_SOURCES = tests/test_dynbuf.c $(FAILALLOC_SRC)
tests_test_dynbuf_CFLAGS = $(CORE_TEST_CFLAGS)
tests_test_dynbuf_LDADD = $(CORE_TEST_LDADD)
tests_test_dynbuf_LDFLAGS = $(FAILALLOC_WRAP)

# The model zoo rematd and the worker share, against the layer lists and the
# GET /v1/models body the code before it wrote (tests/data/zoo/).
check_PROGRAMS += tests/test_zoo
TESTS += tests/test_zoo
tests_test_zoo_SOURCES = tests/test_zoo.c $(FAILALLOC_SRC)
tests_test_zoo_CFLAGS = $(CORE_TEST_CFLAGS)
tests_test_zoo_LDADD = $(CORE_TEST_LDADD)
tests_test_zoo_LDFLAGS = $(FAILALLOC_WRAP)
# The layer vocabulary (src/rematx/layers.h): rematd's and the worker's
# checks of a layer list, the readers' defaults, and the name and error
# helpers beside it.
check_PROGRAMS += tests/test_layers
TESTS += tests/test_layers
tests_test_layers_SOURCES = tests/test_layers.c
tests_test_layers_CFLAGS = $(CORE_TEST_CFLAGS)
tests_test_layers_LDADD = $(CORE_TEST_LDADD)
EXTRA_DIST += \
	tests/data/zoo/alexnet.json \
	tests/data/zoo/gpt-1-layer.json \
	tests/data/zoo/gpt-small.json \
	tests/data/zoo/gpt.json \
	tests/data/zoo/models.json \
	tests/data/zoo/resnet101.json \
	tests/data/zoo/resnet152.json \
	tests/data/zoo/resnet18.json \
	tests/data/zoo/resnet50.json \
	tests/data/zoo/vgg11.json \
	tests/data/zoo/vgg16.json \
	tests/data/zoo/vgg19.json

check_PROGRAMS += tests/test_optimizer
TESTS += tests/test_optimizer
tests_test_optimizer_SOURCES = tests/test_optimizer.c
tests_test_optimizer_CFLAGS = $(CORE_TEST_CFLAGS)
tests_test_optimizer_LDADD = $(CORE_TEST_LDADD)

check_PROGRAMS += tests/test_fits
TESTS += tests/test_fits
tests_test_fits_SOURCES = tests/test_fits.c
tests_test_fits_CFLAGS = $(CORE_TEST_CFLAGS)
tests_test_fits_LDADD = $(CORE_TEST_LDADD)

# remat fits end to end on profiles of one model at three batch sizes.
dist_check_SCRIPTS += tests/fits-cli.sh
TESTS += tests/fits-cli.sh
# The CLI at a terminal (a pseudo-terminal) and its pictures (issue 17).
dist_check_SCRIPTS += tests/cli-human.sh
TESTS += tests/cli-human.sh
EXTRA_DIST += tests/pty-run.py tests/png-check.py docs/frontier.svg
EXTRA_DIST += tests/data/fits/b4.json tests/data/fits/b8.json tests/data/fits/b16.json

check_PROGRAMS += tests/test_sharded
TESTS += tests/test_sharded
tests_test_sharded_SOURCES = tests/test_sharded.c
tests_test_sharded_CFLAGS = $(CORE_TEST_CFLAGS)
tests_test_sharded_LDADD = $(CORE_TEST_LDADD)

check_PROGRAMS += tests/test_hfconfig
TESTS += tests/test_hfconfig
tests_test_hfconfig_SOURCES = tests/test_hfconfig.c
tests_test_hfconfig_CFLAGS = $(CORE_TEST_CFLAGS)
tests_test_hfconfig_LDADD = $(CORE_TEST_LDADD)

dist_check_SCRIPTS += tests/spec-cli.sh
TESTS += tests/spec-cli.sh
