/* bench.h - shared by the parts of bench/solve_bench. */
#ifndef REMAT_BENCH_H
#define REMAT_BENCH_H

#include <stddef.h>
#include <stdint.h>

struct bench_config {
    int json;     /* --json: one JSON object per line instead of the table */
    double scale; /* --quick makes this < 1: fewer repetitions */
};

/* Prints one result as a table row or, with cfg->json, as
 * {"solver", "n", "median_ns", "runs", ...extra}.  extra_json is either NULL
 * or a string of additional members such as "\"slots\": 500". */
void bench_report(const struct bench_config *cfg, const char *solver, size_t n, int64_t median_ns,
                  int runs, const char *extra_json);

/* Monotonic clock in nanoseconds. */
int64_t bench_now_ns(void);

/* The min-time and frontier benchmarks (bench_mintime.c). */
void bench_mintime(const struct bench_config *cfg);

#endif
