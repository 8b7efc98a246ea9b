/* bench_mintime.c - placeholder until the min-time benchmarks land. */
#include "bench.h"

void bench_mintime(const struct bench_config *cfg)
{
    (void)cfg;
}
