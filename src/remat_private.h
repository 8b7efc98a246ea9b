/* remat_private.h - declarations shared by libremat's files, not installed.
 * Internal names start with remat__ (libuv's rule). */
#ifndef REMAT_PRIVATE_H
#define REMAT_PRIVATE_H

#include <stdlib.h>
#include <string.h>

#include "remat.h"

/* Fills err (when not NULL) with code, pointer and a printf-style message,
 * and returns code, so that a failing path is `return remat__error(...)`. */
int remat__error(struct remat_error *err, int code, const char *pointer, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
