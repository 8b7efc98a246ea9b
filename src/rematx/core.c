/* core.c - libremat's internals lent to rematd (core.h).  The one file of
 * rematx that includes remat_private.h: a wrapper per borrowed function. */
#include "remat_private.h"
#include "rematx/core.h"

struct remat_profile *rematx_profile_parse_prefix(const char *text, size_t len,
                                                  const char *pointer_prefix, int *syntax,
                                                  int *max_depth, size_t *consumed,
                                                  struct remat_error *err)
{
    return remat__profile_parse(text, len, pointer_prefix, syntax, max_depth, consumed, err);
}

int rematx_schedule_reserve(struct remat_schedule *s, size_t more)
{
    return remat__schedule_reserve(s, more);
}
