# The min-time solver and the frontier: against every persistent schedule of
# tiny chains (generated inside the test, each simulated), and the CLI.
MINTIME_HELP = tests/mintime_help.c tests/mintime_help.h
check_PROGRAMS += tests/test_mintime
TESTS += tests/test_mintime
tests_test_mintime_SOURCES = tests/test_mintime.c $(MINTIME_HELP)
tests_test_mintime_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS) $(CMOCKA_CFLAGS) -I$(top_srcdir)/tests
tests_test_mintime_LDADD = tests/libtesthelp.la src/libremat_core.la $(CMOCKA_LIBS) $(JANSSON_LIBS) -lm

# The table's fills against each other: pruned against Rotor's full fill,
# the periodic sharing against the plain table on random stacks, the runs
# and the part fills against the whole table.
check_PROGRAMS += tests/test_mintime_table
TESTS += tests/test_mintime_table
tests_test_mintime_table_SOURCES = tests/test_mintime_table.c $(MINTIME_HELP)
tests_test_mintime_table_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS) $(CMOCKA_CFLAGS) -I$(top_srcdir)/tests
tests_test_mintime_table_LDADD = tests/libtesthelp.la src/libremat_core.la $(CMOCKA_LIBS) $(JANSSON_LIBS) -lm

dist_check_SCRIPTS += tests/mintime-cli.sh
TESTS += tests/mintime-cli.sh
EXTRA_DIST += tests/data/mintime/nested4.json

# The allocation-failure loop over min-time and the frontier.
check_PROGRAMS += tests/test_mintime_alloc
TESTS += tests/test_mintime_alloc
tests_test_mintime_alloc_SOURCES = tests/test_mintime_alloc.c $(FAILALLOC_SRC)
tests_test_mintime_alloc_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_mintime_alloc_LDADD = src/libremat_core.la $(CMOCKA_LIBS) $(JANSSON_LIBS) -lm
tests_test_mintime_alloc_LDFLAGS = $(FAILALLOC_WRAP)
