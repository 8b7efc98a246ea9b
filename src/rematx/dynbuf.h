/* dynbuf.h - the one growable byte buffer of remat (curl's dynbuf is the
 * model): every buffer is given its maximum size when it is created, and
 * growing past it is an error, not a realloc.
 *
 * The text is always NUL-terminated (ptr() is a C string).  The first
 * failure (out of memory, or over the maximum) frees the contents and is
 * sticky: every later add returns the same code at once and ptr() is NULL,
 * so a writer may make many adds and check rematx_dyn_error() once. */
#ifndef REMATX_DYNBUF_H
#define REMATX_DYNBUF_H

#include <stdarg.h>
#include <stddef.h>
#include <string.h>

struct rematx_dynbuf {
    char *buf;  /* owned; NULL until the first add */
    size_t len; /* bytes held, the NUL excluded */
    size_t cap; /* bytes allocated */
    size_t max; /* the most bytes it may hold, the NUL excluded */
    int err;    /* 0, or the sticky REMAT_ENOMEM / REMAT_ELIMIT */
};

/* An empty buffer that may hold up to max bytes (max >= 1). */
void rematx_dyn_init(struct rematx_dynbuf *b, size_t max);
/* Frees the contents; the buffer is empty and usable again (same max). */
void rematx_dyn_free(struct rematx_dynbuf *b);
/* Empties the buffer, keeping its memory; clears a sticky error. */
void rematx_dyn_reset(struct rematx_dynbuf *b);

/* Appends n bytes.  Returns 0, or REMAT_ENOMEM / REMAT_ELIMIT (sticky). */
int rematx_dyn_addn(struct rematx_dynbuf *b, const void *p, size_t n);
/* Appends a C string. */
int rematx_dyn_add(struct rematx_dynbuf *b, const char *s);
/* Appends printf-style text. */
int rematx_dyn_addf(struct rematx_dynbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int rematx_dyn_vaddf(struct rematx_dynbuf *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/* Makes room for `more` bytes past len (and the NUL), for a writer that
 * fills them itself and then calls rematx_dyn_setlen.  Returns 0 or the
 * sticky error.  The slow part of rematx_dyn_room. */
int rematx_dyn_grow(struct rematx_dynbuf *b, size_t more);

/* Where `more` bytes may be written now, or NULL after a failure: the
 * check is inline because writers of long texts make one per token. */
static inline char *rematx_dyn_room(struct rematx_dynbuf *b, size_t more)
{
    if (b->len + more < b->cap)
        return b->buf + b->len;
    return rematx_dyn_grow(b, more) == 0 ? b->buf + b->len : NULL;
}

/* Sets the length after writing into room (len <= what room allowed) and
 * writes the NUL. */
static inline void rematx_dyn_setlen(struct rematx_dynbuf *b, size_t len)
{
    b->len = len;
    b->buf[len] = '\0';
}

/* The text (borrowed, NUL-terminated; "" when empty, NULL after a failure). */
char *rematx_dyn_ptr(const struct rematx_dynbuf *b);
static inline size_t rematx_dyn_len(const struct rematx_dynbuf *b)
{
    return b->err ? 0 : b->len;
}
/* The sticky error, or 0. */
static inline int rematx_dyn_error(const struct rematx_dynbuf *b)
{
    return b->err;
}
/* Hands the text to the caller (new: free() it; *len gets its length when
 * len is not NULL) and empties the buffer.  Returns NULL after a failure
 * (or when out of memory for an empty text). */
char *rematx_dyn_take(struct rematx_dynbuf *b, size_t *len);

#endif
