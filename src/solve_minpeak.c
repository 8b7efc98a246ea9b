/* solve_minpeak.c - placeholder until the min-peak solver lands. */
#include "minpeak.h"

int remat__solve_min_peak(const struct remat_profile *p, struct remat_plan *plan,
                          struct remat_error *err)
{
    (void)p;
    (void)plan;
    return remat__error(err, REMAT_EUNSUPPORTED, "", "min-peak is not built yet");
}
