# make bench: bench/solve_bench times every solver and prints a table.
noinst_PROGRAMS += bench/solve_bench
bench_solve_bench_SOURCES = bench/bench.h bench/solve_bench.c bench/bench_mintime.c \
	bench/solve_old.h bench/old_prefix.c bench/old_minpeak.c bench/old_profile_fast.c
bench_solve_bench_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS) -I$(top_srcdir)/tests
bench_solve_bench_LDADD = tests/libtesthelp.la src/libremat_core.la $(JANSSON_LIBS) -lm
BENCH_TARGETS += bench-solve
.PHONY: bench-solve
bench-solve: bench/solve_bench
	$(builddir)/bench/solve_bench

# make bench: bench/fits_bench times remat_fits (POST /v1/fits's work).
noinst_PROGRAMS += bench/fits_bench
bench_fits_bench_SOURCES = bench/fits_bench.c
bench_fits_bench_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS) -I$(top_srcdir)/tests
bench_fits_bench_LDADD = tests/libtesthelp.la src/libremat_core.la $(JANSSON_LIBS) -lm
BENCH_TARGETS += bench-fits
.PHONY: bench-fits
bench-fits: bench/fits_bench
	$(builddir)/bench/fits_bench --data $(top_srcdir)/bench/data
# Llama-3-8B's cached profiles at seq 4096, scaled from 16 and 32 on CPU,
# and how they were made.
EXTRA_DIST += bench/data/llama3-8b-s4096-b1.json bench/data/llama3-8b-s4096-b2.json \
	bench/llama3-8b-profiles.py
