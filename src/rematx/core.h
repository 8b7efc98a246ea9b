/* core.h - the two pieces of libremat's core that rematd borrows, lent
 * under rematx_ names so that rematd needs nothing from remat_private.h.
 *
 * Both are libremat's own code (remat__profile_parse, remat__schedule_reserve),
 * reached through a call: the names and the contracts here are what
 * rematd relies on, and they change only together with rematd. */
#ifndef REMATX_CORE_H
#define REMATX_CORE_H

#include <stddef.h>

#include "remat.h"

/* The streaming profile reader behind remat_profile_parse, for a reader
 * of a larger document (POST /v1/plans reads the "profile" member of its
 * body in place).  The profile may be followed by more text: *consumed
 * (not NULL) gets the bytes read, the profile and the whitespace after it.
 * *max_depth (may be NULL) gets the deepest nesting seen, the profile's
 * own object being 1; *syntax (may be NULL) is 1 when the text is not
 * JSON rather than not a profile.  pointer_prefix starts the JSON pointers
 * of errors ("/profile").  Returns a new profile, or NULL with err filled. */
struct remat_profile *rematx_profile_parse_prefix(const char *text, size_t len,
                                                  const char *pointer_prefix, int *syntax,
                                                  int *max_depth, size_t *consumed,
                                                  struct remat_error *err);

/* Makes room in s for at least `more` further ops, within libremat's
 * limit on a schedule's length (a decoder of stored plans fills the ops
 * itself).  Returns REMAT_OK, REMAT_ENOMEM or REMAT_ELIMIT. */
int rematx_schedule_reserve(struct remat_schedule *s, size_t more);

#endif
