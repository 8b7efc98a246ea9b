/* real.h - how remat prints a real: the shortest text that reads back
 * (strtod) to the identical double, 0.54 and not 0.54000000000000004.
 *
 * The layout is jansson's, so that only the digits differ from what
 * json_dumps writes: fixed notation when the decimal exponent X of the
 * first digit is in [-4, 17), else d.ddde<X> with no '+' and no leading
 * zeros in X; ".0" after a fixed number without a point, so that it reads
 * back as a real.  Plans (remat_plan_dumps), the CLI, rematd's answers and
 * what remat-worker reports all print reals through here; tests/test_real
 * reads every one back. */
#ifndef REMATX_REAL_H
#define REMATX_REAL_H

#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Room for any real's text and its NUL ("-2.2250738585072014e-308"). */
#define REMATX_REAL_MAX 32

/* Writes v's text and a NUL to out (REMATX_REAL_MAX bytes) and returns its
 * length.  NaN and infinities, which JSON cannot hold, come out as printf's
 * "nan", "inf" and "-inf". */
size_t rematx_real_text(double v, char *out);

/* json_dumps and json_dumpf with every real printed by rematx_real_text.
 * rematx_json_dumps returns new text (free it), or NULL on failure;
 * rematx_json_dumpf returns 0, or -1 on failure. */
char *rematx_json_dumps(const json_t *v, size_t flags);
int rematx_json_dumpf(const json_t *v, FILE *f, size_t flags);

/* The same rewriting of text that jansson wrote: every number with a point
 * or an exponent outside strings printed by rematx_real_text.  Returns new
 * text (free it), or NULL when out of memory. */
char *rematx_json_reals(const char *text, size_t len, size_t *len_out);

#ifdef __cplusplus
}
#endif

#endif
