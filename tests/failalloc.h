/* failalloc.h - the allocation-failure loop shared by the torture tests
 * (SQLite's and curl's rule): make the N-th allocation fail, for every N,
 * and check that the operation either succeeds or fails cleanly and leaves
 * no allocation behind.
 *
 * A program using it is linked with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free so that
 * libremat's allocations go through failalloc.c; jansson's go through it
 * once failalloc_install_jansson() has run.  Single-threaded programs only. */
#ifndef REMAT_FAILALLOC_H
#define REMAT_FAILALLOC_H

#include <stdint.h>

#include "remat.h"

/* An operation under test: 0 when it ran through, nonzero when it failed
 * (cleanly: the operation itself asserts that the failure was ENOMEM). */
typedef int (*failalloc_op)(const struct remat_profile *p, int64_t arg);

void failalloc_install_jansson(void);

/* Fails allocation 0, 1, 2, ... until op runs through; fails the test when
 * an allocation is left behind, when op never allocates, or when it still
 * fails after max_n allocations. */
void failalloc_torture(const struct remat_profile *p, failalloc_op op, int64_t arg,
                       const char *what, long max_n);

/* The operation every torture test of a solver runs: remat_solve with o,
 * then the plan as JSON.  0 when both ran through; 1 when one failed, after
 * asserting that remat_solve's failure was REMAT_ENOMEM with nothing left
 * in the plan. */
int failalloc_solve_json(const struct remat_profile *p, const struct remat_options *o);

/* The end of an operation whose last step makes JSON: 1 when j is NULL (it
 * failed), else frees j and returns 0. */
int failalloc_json_made(json_t *j);

#endif
