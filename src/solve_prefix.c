/* solve_prefix.c - placeholder */
#include "remat_private.h"

int remat__solve_paper_linear(const struct remat_profile *p, struct remat_plan *plan,
                              struct remat_error *err)
{
    (void)p;
    (void)plan;
    return remat__error(err, REMAT_EUNSUPPORTED, "", "paper-linear is not built yet");
}

int remat__prefix_ref(const struct remat_profile *p, struct remat_plan *plan,
                      struct remat_error *err)
{
    (void)p;
    (void)plan;
    return remat__error(err, REMAT_EUNSUPPORTED, "", "prefix_ref is not built yet");
}
