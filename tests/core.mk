# The core's tests: one cmocka program per module, the helpers every solver
# test links (seeded random chains, exhaustive search), the CLI script, and
# the export and format checks.
noinst_LTLIBRARIES += tests/libtesthelp.la
tests_libtesthelp_la_SOURCES = tests/randchain.c tests/randchain.h tests/exhaustive.c \
	tests/exhaustive.h
tests_libtesthelp_la_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)

CORE_TEST_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS) $(CMOCKA_CFLAGS) -I$(top_srcdir)/tests
CORE_TEST_LDADD = tests/libtesthelp.la src/libremat_core.la $(CMOCKA_LIBS) $(JANSSON_LIBS) -lm

check_PROGRAMS += tests/test_simulate
TESTS += tests/test_simulate
tests_test_simulate_SOURCES = tests/test_simulate.c
tests_test_simulate_CFLAGS = $(CORE_TEST_CFLAGS)
tests_test_simulate_LDADD = $(CORE_TEST_LDADD)

check_PROGRAMS += tests/test_solve
TESTS += tests/test_solve
tests_test_solve_SOURCES = tests/test_solve.c
tests_test_solve_CFLAGS = $(CORE_TEST_CFLAGS)
tests_test_solve_LDADD = $(CORE_TEST_LDADD)
