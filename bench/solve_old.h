/* solve_old.h - the solvers and the profile reader as they were before the
 * changes that bench/solve_bench measures (old_prefix.c, old_minpeak.c,
 * old_profile_fast.c), so that
 * `make bench` times the old path beside the new one in the same run and
 * checks that both give the same plan. */
#ifndef REMAT_BENCH_SOLVE_OLD_H
#define REMAT_BENCH_SOLVE_OLD_H

#include "solve_minpeak.h"

/* remat__solve_paper_linear as it was: the same contract. */
int bench_old_paper_linear(const struct remat_profile *p, struct remat_plan *plan,
                           struct remat_error *err);

/* remat__min_peak_with as it was: the same contract. */
int bench_old_min_peak_with(const struct remat_profile *p, enum remat__minpeak_method method,
                            struct remat_plan *plan, struct remat_error *err);

/* remat__profile_parse as it was: the same contract. */
struct remat_profile *bench_old_profile_parse(const char *text, size_t len,
                                              const char *pointer_prefix, int *syntax,
                                              int *max_depth, size_t *consumed,
                                              struct remat_error *err);

#endif
