/* solve_minpeak.h - the min-peak solver (least traced peak over checkpoint sets).
 *
 * Both functions solve the same problem exactly and return the same plan;
 * docs/min-peak.md derives the recurrence, proves the fast algorithm and
 * states what the tie-breaking guarantees. */
#ifndef REMAT_SOLVE_MINPEAK_H
#define REMAT_SOLVE_MINPEAK_H
#include "remat_private.h"

/* Fills plan->checkpoints / n_checkpoints and plan->objective_value (the
 * traced peak) for the plan of least traced peak, ties broken as
 * docs/min-peak.md says.  solve.c fills the rest of the plan.
 * plan->checkpoints is new (malloc; NULL when there are none).
 * Returns REMAT_OK, REMAT_ENOMEM, or REMAT_ELIMIT when the profile's byte
 * counts add up to more than 2^58 (64-bit arithmetic could overflow). */
int remat__solve_min_peak(const struct remat_profile *p, struct remat_plan *plan,
                          struct remat_error *err);

/* The O(n^2) suffix dynamic program the fast solver is tested against: the
 * same contract, the same plan. */
int remat__min_peak_ref(const struct remat_profile *p, struct remat_plan *plan,
                        struct remat_error *err);

enum remat__minpeak_method {
    REMAT__MINPEAK_AUTO = 0,         /* the deque, direct scans, the tree past a work budget */
    REMAT__MINPEAK_REF = 1,          /* the quadratic program */
    REMAT__MINPEAK_TREE = 2,         /* the tree alone throughout (no deque, no scans) */
    REMAT__MINPEAK_EARLY_SWITCH = 3, /* AUTO with a budget of n, so tests see the switch */
    REMAT__MINPEAK_SPENT_PASS = 4    /* AUTO, but a least-recompute pass that will give up
                                      * runs until it does (the old path, for the bench) */
};
/* Every method but REF falls back to the quadratic program when some
 * saved_bytes < out_bytes (a profile remat_profile_validate refuses). */

/* Either of the above with the method chosen, so that the tests can run the
 * tree on small chains. */
int remat__min_peak_with(const struct remat_profile *p, enum remat__minpeak_method method,
                         struct remat_plan *plan, struct remat_error *err);
#endif
