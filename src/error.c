/* error.c - filling struct remat_error, and the names of codes. */
#include <stdarg.h>
#include <stdio.h>

#include "remat_private.h"

int remat__error(struct remat_error *err, int code, const char *pointer, const char *fmt, ...)
{
    if (err == NULL)
        return code;
    err->code = code;
    snprintf(err->pointer, sizeof err->pointer, "%s", pointer != NULL ? pointer : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    /* The message is documented as one line: a newline from a caller's
     * string (a stage name, say) must not break that promise. */
    for (char *c = err->message; *c != '\0'; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
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
