/* mintime.h - min-time schedules under a byte budget, and the frontier. */
#ifndef REMAT_MINTIME_H
#define REMAT_MINTIME_H
#include "remat_private.h"

/* Fills *plan completely (schedule, checkpoints when single-level, peak,
 * times) for the fastest persistent schedule whose traced peak is at most
 * opts->budget_bytes; REMAT_EINFEASIBLE with plan->min_budget_bytes set when
 * none fits. */
int remat__solve_min_time(const struct remat_profile *p, const struct remat_options *opts,
                          struct remat_plan *plan, struct remat_error *err);

/* For a nested (multi-level) plan: the nested segment description that maps
 * onto nested torch.utils.checkpoint calls, as plan JSON's "nested_segments".
 * Returns: new reference, or NULL when out of memory. */
json_t *remat__nested_segments_json(const struct remat_profile *p, const struct remat_plan *plan);
#endif
