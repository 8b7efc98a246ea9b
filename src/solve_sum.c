/* solve_sum.c - placeholder */
#include "remat_private.h"

int remat__solve_acg(const struct remat_profile *p, struct remat_plan *plan,
                     struct remat_error *err)
{
    (void)p;
    (void)plan;
    return remat__error(err, REMAT_EUNSUPPORTED, "", "acg is not built yet");
}

int remat__solve_paper_cubic(const struct remat_profile *p, struct remat_plan *plan,
                             struct remat_error *err)
{
    (void)p;
    (void)plan;
    return remat__error(err, REMAT_EUNSUPPORTED, "", "paper-cubic is not built yet");
}
