/* names.h - messages that list what a name table holds, built from the
 * table, so that a new member (a solver in src/plan.c's names) shows in
 * every "must be one of" without an edit there. */
#ifndef REMATX_NAMES_H
#define REMATX_NAMES_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every algorithm's name (remat_algorithm_name of 0..REMAT_ALG_COUNT-1),
 * in enum order, ", "-separated: "store-all, sqrt, ..., min-time", cut to
 * fit buf (size bytes, at least 1) and NUL-terminated.  Returns buf. */
const char *rematx_algorithm_names(char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif
