/* minpeak.h - the min-peak solver (least traced peak over checkpoint sets). */
#ifndef REMAT_MINPEAK_H
#define REMAT_MINPEAK_H
#include "remat_private.h"

/* Fills plan->checkpoints / n_checkpoints and plan->objective_value (the
 * traced peak) for the plan of least traced peak, ties broken as
 * docs/memory-model.md says.  solve.c fills the rest of the plan. */
int remat__solve_min_peak(const struct remat_profile *p, struct remat_plan *plan,
                          struct remat_error *err);
#endif
