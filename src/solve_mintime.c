/* solve_mintime.c - placeholder until the min-time solver lands. */
#include "mintime.h"

int remat__solve_min_time(const struct remat_profile *p, const struct remat_options *opts,
                          struct remat_plan *plan, struct remat_error *err)
{
    (void)p;
    (void)opts;
    (void)plan;
    return remat__error(err, REMAT_EUNSUPPORTED, "", "min-time is not built yet");
}

json_t *remat__nested_segments_json(const struct remat_profile *p, const struct remat_plan *plan)
{
    (void)p;
    (void)plan;
    return json_array();
}
