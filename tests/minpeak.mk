# The min-peak solver's tests: exhaustive search over the simulator on small
# chains, the tree against the quadratic reference up to n = 2000, and
# hand-built chains (tests/test_minpeak.c).
check_PROGRAMS += tests/test_minpeak
TESTS += tests/test_minpeak
tests_test_minpeak_SOURCES = tests/test_minpeak.c
tests_test_minpeak_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS) $(CMOCKA_CFLAGS) -I$(top_srcdir)/tests
tests_test_minpeak_LDADD = tests/libtesthelp.la src/libremat_core.la $(CMOCKA_LIBS) $(JANSSON_LIBS) -lm
# The design note with the proofs (docs/min-peak.md), installed beside
# docs/memory-model.md.
dist_doc_DATA += docs/min-peak.md
