/* solve_bench.c - placeholder, filled in below the milestone. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "bench.h"

int64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void bench_report(const struct bench_config *cfg, const char *solver, size_t n, int64_t median_ns,
                  int runs, const char *extra_json)
{
    if (cfg->json)
        printf("{\"solver\": \"%s\", \"n\": %zu, \"median_ns\": %lld, \"runs\": %d%s%s}\n", solver,
               n, (long long)median_ns, runs, extra_json != NULL ? ", " : "",
               extra_json != NULL ? extra_json : "");
    else
        printf("%-14s %9zu %14lld %6d\n", solver, n, (long long)median_ns, runs);
}

int main(int argc, char **argv)
{
    struct bench_config cfg = {.json = 0, .scale = 1.0};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            cfg.json = 1;
        else if (strcmp(argv[i], "--quick") == 0)
            cfg.scale = 0.1;
    }
    bench_mintime(&cfg);
    return 0;
}
