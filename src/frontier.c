/* frontier.c - placeholder until the frontier lands. */
#include "mintime.h"

int remat_frontier_compute(const struct remat_profile *profile, size_t mem_slots,
                           struct remat_frontier *out, struct remat_error *err)
{
    (void)profile;
    (void)mem_slots;
    out->n_points = 0;
    out->points = NULL;
    return remat__error(err, REMAT_EUNSUPPORTED, "", "the frontier is not built yet");
}

void remat_frontier_clear(struct remat_frontier *f)
{
    if (f == NULL)
        return;
    for (size_t i = 0; i < f->n_points; i++)
        remat_plan_clear(&f->points[i].plan);
    free(f->points);
    f->points = NULL;
    f->n_points = 0;
}

json_t *remat_frontier_to_json(const struct remat_profile *profile, const struct remat_frontier *f)
{
    (void)profile;
    (void)f;
    return json_object();
}
