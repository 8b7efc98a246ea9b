/* error.c - filling struct remat_error, and the names of codes. */
#include <stdarg.h>

#include "remat_private.h"
#include "rematx/error.h"

/* The one body is rematx_verror's (src/rematx/error.c), which remat's
 * programs share; libremat keeps its own name for it. */
int remat__error(struct remat_error *err, int code, const char *pointer, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rematx_verror(err, code, pointer, fmt, ap);
    va_end(ap);
    return code;
}

const char *remat_strerror(int code)
{
    switch (code) {
    case REMAT_OK:
        return "success";
    case REMAT_EINVAL:
        return "invalid input";
    case REMAT_ENOMEM:
        return "out of memory";
    case REMAT_ELIMIT:
        return "over a limit";
    case REMAT_EINFEASIBLE:
        return "no schedule fits the budget";
    case REMAT_EUNSUPPORTED:
        return "not supported";
    case REMAT_ECANCELED:
        return "canceled";
    default:
        return "unknown error";
    }
}
