/* mintime_help.h - what the min-time test programs (test_mintime.c, the
 * solver against every persistent schedule; test_mintime_table.c, the
 * table's fills against each other) share. */
#ifndef REMAT_TESTS_MINTIME_HELP_H
#define REMAT_TESTS_MINTIME_HELP_H
#include <stddef.h>
#include <stdint.h>

#include "solve_mintime.h"

/* A chain whose every field is a small random integer (scale multiplies
 * the byte sizes), times in quarter milliseconds; new (the caller frees
 * it). */
struct remat_profile *tiny_chain(uint64_t seed, size_t n, int64_t scale);
/* A chain with bigger random sizes, for the rounding checks; new. */
struct remat_profile *big_chain(uint64_t seed, size_t n);
/* Store-all's traced peak, and its time in *time when not NULL. */
int64_t store_all_peak(const struct remat_profile *p, double *time);
/* Fails the test unless the two schedules are the same, op for op. */
void assert_same_ops(const struct remat_schedule *a, const struct remat_schedule *b);
/* Re-simulates a min-time plan and checks every field the solver filled. */
void check_plan(const struct remat_profile *p, const struct remat_plan *plan, int64_t budget);
/* remat_solve with min-time at that budget and slots; its return code. */
int solve(const struct remat_profile *p, int64_t budget, size_t slots, struct remat_plan *plan);
#endif
