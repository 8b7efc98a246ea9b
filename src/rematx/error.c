/* error.c - filling struct remat_error (error.h). */
#include <stdio.h>

#include "rematx/error.h"

int rematx_verror(struct remat_error *err, int code, const char *pointer, const char *fmt,
                  va_list ap)
{
    if (err == NULL)
        return code;
    err->code = code;
    snprintf(err->pointer, sizeof err->pointer, "%s", pointer != NULL ? pointer : "");
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    /* The message is documented as one line: a newline from a caller's
     * string (a stage name, say) must not break that promise. */
    for (char *c = err->message; *c != '\0'; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    return code;
}

int rematx_error(struct remat_error *err, int code, const char *pointer, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rematx_verror(err, code, pointer, fmt, ap);
    va_end(ap);
    return code;
}
