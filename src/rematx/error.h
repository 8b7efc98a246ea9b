/* error.h - filling a struct remat_error, the one way every part of remat
 * does it: libremat (remat__error in src/error.c is this), the zoo's and
 * the layer table's checks, and rematd's checks of a worker's result. */
#ifndef REMATX_ERROR_H
#define REMATX_ERROR_H

#include <stdarg.h>

#include "remat.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fills err (when not NULL) with code, pointer (NULL: "") and a
 * printf-style message, cut to fit and kept on one line (a newline from a
 * caller's string, a stage name say, becomes a space), and returns code,
 * so that a failing path is `return rematx_error(...)`. */
int rematx_error(struct remat_error *err, int code, const char *pointer, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int rematx_verror(struct remat_error *err, int code, const char *pointer, const char *fmt,
                  va_list ap) __attribute__((format(printf, 4, 0)));

#ifdef __cplusplus
}
#endif

#endif
