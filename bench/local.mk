# make bench: bench/solve_bench times every solver and prints a table.
noinst_PROGRAMS += bench/solve_bench
bench_solve_bench_SOURCES = bench/bench.h bench/solve_bench.c bench/bench_mintime.c
bench_solve_bench_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS) -I$(top_srcdir)/tests
bench_solve_bench_LDADD = tests/libtesthelp.la src/libremat_core.la $(JANSSON_LIBS) -lm
BENCH_TARGETS += bench-solve
.PHONY: bench-solve
bench-solve: bench/solve_bench
	$(builddir)/bench/solve_bench
