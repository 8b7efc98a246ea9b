/* dynbuf.c - the bounded growable buffer (dynbuf.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "remat.h"
#include "rematx/dynbuf.h"

/* The first allocation: small texts (a problem, a log line) fit in it. */
#define FIRST_CAP 256

void rematx_dyn_init(struct rematx_dynbuf *b, size_t max)
{
    b->buf = NULL;
    b->len = 0;
    b->cap = 0;
    /* Keeps len + more + 1 from wrapping whatever is asked. */
    b->max = max < SIZE_MAX / 4 ? max : SIZE_MAX / 4;
    b->err = 0;
}

void rematx_dyn_free(struct rematx_dynbuf *b)
{
    free(b->buf);
    b->buf = NULL;
    b->len = 0;
    b->cap = 0;
    b->err = 0;
}

void rematx_dyn_reset(struct rematx_dynbuf *b)
{
    b->len = 0;
    b->err = 0;
    if (b->buf)
        b->buf[0] = '\0';
}

static int fail(struct rematx_dynbuf *b, int code)
{
    free(b->buf);
    b->buf = NULL;
    b->len = 0;
    b->cap = 0;
    b->err = code;
    return code;
}

int rematx_dyn_grow(struct rematx_dynbuf *b, size_t more)
{
    if (b->err)
        return b->err;
    if (more > b->max || b->len > b->max - more)
        return fail(b, REMAT_ELIMIT);
    size_t need = b->len + more + 1; /* cannot wrap: max is far below SIZE_MAX */
    if (b->buf && need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : FIRST_CAP;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    if (cap > b->max + 1)
        cap = b->max + 1;
    char *p = realloc(b->buf, cap);
    if (p == NULL)
        return fail(b, REMAT_ENOMEM);
    if (b->buf == NULL)
        p[0] = '\0';
    b->buf = p;
    b->cap = cap;
    return 0;
}

int rematx_dyn_addn(struct rematx_dynbuf *b, const void *p, size_t n)
{
    char *room = rematx_dyn_room(b, n);
    if (room == NULL)
        return b->err;
    if (n)
        memcpy(room, p, n);
    rematx_dyn_setlen(b, b->len + n);
    return 0;
}

int rematx_dyn_add(struct rematx_dynbuf *b, const char *s)
{
    return rematx_dyn_addn(b, s, strlen(s));
}

int rematx_dyn_vaddf(struct rematx_dynbuf *b, const char *fmt, va_list ap)
{
    if (b->err)
        return b->err;
    va_list again;
    va_copy(again, ap);
    /* Most texts fit in what is left: one vsnprintf, no measuring pass. */
    size_t left = b->buf ? b->cap - b->len : 0;
    int n = left ? vsnprintf(b->buf + b->len, left, fmt, ap) : vsnprintf(NULL, 0, fmt, ap);
    if (n < 0) {
        va_end(again);
        return fail(b, REMAT_EINVAL);
    }
    if ((size_t)n < left) {
        va_end(again);
        b->len += (size_t)n;
        return 0;
    }
    if (b->buf)
        b->buf[b->len] = '\0'; /* vsnprintf wrote a truncated text */
    char *room = rematx_dyn_room(b, (size_t)n);
    if (room == NULL) {
        va_end(again);
        return b->err;
    }
    vsnprintf(room, (size_t)n + 1, fmt, again);
    va_end(again);
    b->len += (size_t)n;
    return 0;
}

int rematx_dyn_addf(struct rematx_dynbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = rematx_dyn_vaddf(b, fmt, ap);
    va_end(ap);
    return rc;
}

char *rematx_dyn_ptr(const struct rematx_dynbuf *b)
{
    if (b->err)
        return NULL;
    return b->buf ? b->buf : (char *)"";
}

char *rematx_dyn_take(struct rematx_dynbuf *b, size_t *len)
{
    if (b->err)
        return NULL;
    if (b->buf == NULL && rematx_dyn_grow(b, 0) != 0)
        return NULL;
    char *p = b->buf;
    if (len)
        *len = b->len;
    b->buf = NULL;
    b->len = 0;
    b->cap = 0;
    return p;
}
