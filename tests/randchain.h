/* randchain.h - seeded random chains (profiles) for the tests and benches.
 *
 * The same seed, n and distribution give the same profile on every machine:
 * the generator is splitmix64 and every time is a multiple of 1/4 ms, so
 * sums of times are exact in double and ties in recompute time are real. */
#ifndef REMAT_TESTS_RANDCHAIN_H
#define REMAT_TESTS_RANDCHAIN_H

#include <stddef.h>
#include <stdint.h>

#include "remat.h"

enum randchain_dist {
    RANDCHAIN_UNIFORM = 0, /* out_bytes uniform in 1..1000 */
    RANDCHAIN_HEAVY,       /* log-uniform over 1..~10^6: a few stages dominate */
    RANDCHAIN_TIES,        /* out_bytes from {0, 1, 2, 4} (mostly 1 and 2): many tied sets */
    RANDCHAIN_POOLING,     /* CNN-like: flat runs, 2x/4x drops at pools, some channel doublings */
    RANDCHAIN_N_DISTS
};

struct randchain_rng {
    uint64_t state;
};

void randchain_seed(struct randchain_rng *r, uint64_t seed);
uint64_t randchain_next(struct randchain_rng *r);
/* Uniform in 0..bound-1 (bound > 0). */
uint64_t randchain_below(struct randchain_rng *r, uint64_t bound);

const char *randchain_dist_name(enum randchain_dist d);

/* A new profile of n stages (caller frees with remat_profile_free).
 * full = 0: only out_bytes and input_bytes are random, the rest at their
 * documented defaults; full = 1: saved/tmp/param bytes and times random too,
 * fwd_grad_tmp_bytes and bwd_freed_bytes included (randchain_refine).
 * Returns NULL when out of memory. */
/* Draws a stage's fwd_grad_tmp_bytes (equal to, below or above its
 * fwd_tmp_bytes) and bwd_freed_bytes (0 half the time, else up to
 * saved_bytes + out_bytes, so often a negative net backward transient),
 * from its other fields. */
void randchain_refine(struct randchain_rng *r, struct remat_stage *s);

struct remat_profile *randchain_profile(uint64_t seed, size_t n, enum randchain_dist dist,
                                        int full);

/* A stack: `pre` random stages, then k copies of one random block of
 * `block` stages, then `post` random stages (what an embedding, replicated
 * transformer layers and a head give), every field random as with full = 1.
 * Returns a new profile, or NULL when out of memory. */
struct remat_profile *randchain_stack(uint64_t seed, size_t pre, size_t block, size_t k,
                                      size_t post, enum randchain_dist dist);

#endif
