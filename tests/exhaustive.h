/* exhaustive.h - the ground truth of the solver tests: every checkpoint set
 * of a small chain, simulated, and the canonical optimum. */
#ifndef REMAT_TESTS_EXHAUSTIVE_H
#define REMAT_TESTS_EXHAUSTIVE_H

#include <stddef.h>
#include <stdint.h>

#include "remat.h"

/* 2^(EXHAUSTIVE_MAX_N - 1) subsets is the most this will try. */
#define EXHAUSTIVE_MAX_N 24

struct exhaustive_result {
    int64_t value;        /* least peak over all 2^(n-1) sets, in the model */
    size_t n_checkpoints; /* the canonical optimal set (docs/memory-model.md, Ties): */
    size_t checkpoints[EXHAUSTIVE_MAX_N]; /* least recompute, fewest, lexicographically first */
    size_t n_optimal;                     /* how many sets reach value (1: the optimum is unique) */
};

/* Simulates every subset of 1..n-1 with remat_simulate_checkpoints under
 * model.  Returns REMAT_OK, or REMAT_ELIMIT when n > EXHAUSTIVE_MAX_N, or
 * the simulator's error. */
int exhaustive_search(const struct remat_profile *p, enum remat_model model,
                      struct exhaustive_result *out);

/* The checkpoint set of subset `mask` of 1..n-1 (bit c - 1 for checkpoint
 * c), ascending, into ck (n - 1 entries at most).  Returns how many. */
size_t exhaustive_set_of(uint32_t mask, size_t n, size_t *ck);

/* The value of one set under model (a simulation); sets *value. */
int exhaustive_value(const struct remat_profile *p, enum remat_model model, const size_t *ck,
                     size_t m, int64_t *value);

#endif
