/* exhaustive.c - brute force over checkpoint sets; see exhaustive.h. */
#include <string.h>

#include "exhaustive.h"
#include "remat_private.h"

int exhaustive_value(const struct remat_profile *p, enum remat_model model, const size_t *ck,
                     size_t m, int64_t *value)
{
    struct remat_sim sim;
    int rc = remat_simulate_checkpoints(p, model, ck, m, 0, &sim, NULL);
    if (rc < 0)
        return rc;
    *value = sim.peak_bytes;
    remat_sim_clear(&sim);
    return REMAT_OK;
}

size_t exhaustive_set_of(uint32_t mask, size_t n, size_t *ck)
{
    size_t m = 0;
    for (size_t c = 1; c < n; c++)
        if (mask & ((uint32_t)1 << (c - 1)))
            ck[m++] = c;
    return m;
}

int exhaustive_search(const struct remat_profile *p, enum remat_model model,
                      struct exhaustive_result *out)
{
    size_t n = p->n_stages;
    memset(out, 0, sizeof *out);
    if (n == 0 || n > EXHAUSTIVE_MAX_N)
        return REMAT_ELIMIT;
    size_t ck[EXHAUSTIVE_MAX_N];
    uint32_t subsets = (uint32_t)1 << (n - 1);
    int have = 0;
    for (uint32_t mask = 0; mask < subsets; mask++) {
        size_t m = exhaustive_set_of(mask, n, ck);
        int64_t v;
        int rc = exhaustive_value(p, model, ck, m, &v);
        if (rc < 0)
            return rc;
        if (have && v > out->value)
            continue;
        if (!have || v < out->value) {
            out->value = v;
            out->n_optimal = 0;
        }
        out->n_optimal++;
        if (out->n_optimal == 1 ||
            remat__tie_cmp(p, ck, m, out->checkpoints, out->n_checkpoints) < 0) {
            memcpy(out->checkpoints, ck, m * sizeof *ck);
            out->n_checkpoints = m;
        }
        have = 1;
    }
    return REMAT_OK;
}
