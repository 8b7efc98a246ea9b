/* solve_baselines.c - the plans remat compares against: store-all,
 * PyTorch's checkpoint_sequential at k = round(sqrt(n)) segments, and the
 * same with K segments (paper-notes.md §5.1). */
#include <math.h>

#include "remat_private.h"

int remat__solve_store_all(const struct remat_profile *p, struct remat_plan *plan,
                           struct remat_error *err)
{
    (void)p;
    return remat__plan_set_checkpoints(plan, NULL, 0, err);
}

int remat__solve_uniform(const struct remat_profile *p, size_t segments, struct remat_plan *plan,
                         struct remat_error *err)
{
    size_t n = p->n_stages;
    size_t k = segments < 1 ? 1 : segments > n ? n : segments;
    /* checkpoint_sequential: k-1 chunks of floor(n/k) stages, each run under
     * checkpoint, and the remainder in the last chunk, run normally. */
    size_t s = n / k;
    size_t *ck = malloc((k > 1 ? k - 1 : 1) * sizeof *ck);
    if (ck == NULL)
        return remat__error(err, REMAT_ENOMEM, "", "out of memory");
    for (size_t j = 1; j < k; j++)
        ck[j - 1] = j * s;
    int rc = remat__plan_set_checkpoints(plan, ck, k - 1, err);
    free(ck);
    return rc;
}

int remat__solve_sqrt(const struct remat_profile *p, struct remat_plan *plan,
                      struct remat_error *err)
{
    size_t k = (size_t)lround(sqrt((double)p->n_stages));
    return remat__solve_uniform(p, k, plan, err);
}
