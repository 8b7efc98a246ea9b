/* json_lex.h - the JSON lexer the profile reader stands on (not installed).
 *
 * It reads the syntax jansson reads as remat_profile_loadb calls it: strict
 * RFC 8259, no NUL in strings or keys, duplicate keys refused, nesting at
 * most JSON_PARSER_MAX_DEPTH values deep, integers in int64_t, reals
 * through strtod with overflow an error.  It knows nothing of profiles: a
 * reader walks the text with these calls and decides what each value means
 * (src/profile_fast.c).  The first syntax error or out-of-memory fills the
 * caller's remat_error, sets `failed` and every later call returns -1.
 *
 * What a reader calls once per stage field (skipping whitespace, reading a
 * short number, closing a member) is inline here: the reader is measured
 * per byte and a call per field shows. */
#ifndef REMAT_JSON_LEX_H
#define REMAT_JSON_LEX_H

#include <stdint.h>

#include "remat_private.h"

/* Value types, as json_typeof would tell them (ABSENT: not in the text). */
enum remat__jtype {
    REMAT__J_ABSENT,
    REMAT__J_NULL,
    REMAT__J_TRUE,
    REMAT__J_FALSE,
    REMAT__J_INT,
    REMAT__J_REAL,
    REMAT__J_STR,
    REMAT__J_ARR,
    REMAT__J_OBJ
};

/* A scalar as read: its type, an integer's value in i (a string's length),
 * a real's in d.  Containers and strings keep only their type here. */
struct remat__jval {
    enum remat__jtype type;
    int64_t i;
    double d;
};

struct remat__lex_dup;

struct remat__lex {
    const char *start, *p, *end;
    int depth;     /* values open around r->p */
    int max_depth; /* deepest seen */
    int failed;    /* a syntax error or out of memory: stop */
    struct remat_error *err;
    int *syntax; /* set to 1 on a syntax error, when not NULL */

    char *scratch; /* decoded strings with escapes */
    size_t scratch_cap;

    struct remat__lex_dup *tab; /* keys of objects whose keys are not all known */
    size_t tab_cap, tab_count;
    char *keys;
    size_t keys_len, keys_cap;
    uint64_t next_frame; /* one per object, so equal keys of two objects differ */
};

/* Starts lexing text[0..len) (need not be NUL-terminated); errors go to
 * err (may be NULL), and *syntax (may be NULL) is set to 0 now and to 1 on
 * a syntax error. */
void remat__lex_init(struct remat__lex *lx, const char *text, size_t len, struct remat_error *err,
                     int *syntax);
void remat__lex_free(struct remat__lex *lx);

/* Record a syntax error at lx->p, with line and column (the first one
 * wins), or out of memory.  Both return -1. */
int remat__lex_syntax_error(struct remat__lex *lx, const char *what);
int remat__lex_nomem(struct remat__lex *lx);

/* A string whose opening quote is at lx->p.  *s and *len are the decoded
 * bytes: in the text itself when it holds no escape, else in scratch
 * memory valid until the next string. */
int remat__lex_string(struct remat__lex *lx, const char **s, size_t *len);

/* Any value at lx->p (after whitespace): its type, and a number's value.
 * Containers are read through and dropped. */
int remat__lex_value(struct remat__lex *lx, struct remat__jval *v);

/* `"key" :` at lx->p (after whitespace). */
int remat__lex_key(struct remat__lex *lx, const char **k, size_t *klen);

/* The value of a member whose key `k` is not one the reader knows: the key
 * checked (no NUL, not twice in object `frame`), the value read and
 * dropped. */
int remat__lex_unknown_member(struct remat__lex *lx, uint64_t frame, const char *k, size_t klen);

/* The members of an object opened at lx->p: a key equal to known[j] calls
 * member(lx, ctx, j) with lx->p at its value, any other is dropped.
 * At most 32 known keys. */
typedef int (*remat__lex_member_fn)(struct remat__lex *lx, void *ctx, int which);
int remat__lex_object(struct remat__lex *lx, const char *const *known,
                      const unsigned char *known_len, int n_known, remat__lex_member_fn member,
                      void *ctx);

/* Bytes a string holds as they are: printable ASCII but '"' and '\\'. */
extern const unsigned char remat__lex_plain[256];
/* Powers of ten that are exact doubles, 1e0 to 1e22. */
extern const double remat__lex_pow10[23];

static inline void remat__lex_skip_ws(struct remat__lex *lx)
{
    while (lx->p < lx->end && (*lx->p == ' ' || *lx->p == '\n' || *lx->p == '\r' || *lx->p == '\t'))
        lx->p++;
}

/* Takes the '{' or '[' at lx->p and the whitespace after it: 1 when the
 * container closes at once (its closer taken too), 0 when a member or an
 * element follows. */
static inline int remat__lex_open(struct remat__lex *lx, char closer)
{
    lx->p++;
    remat__lex_skip_ws(lx);
    if (lx->p < lx->end && *lx->p == closer) {
        lx->p++;
        return 1;
    }
    return 0;
}

/* remat__lex_skip_ws where the next byte may be whitespace: a byte above
 * ' ' is never any, and most often there is none. */
static inline void remat__lex_skip_ws_if_any(struct remat__lex *lx)
{
    if (lx->p < lx->end && (unsigned char)*lx->p <= ' ')
        remat__lex_skip_ws(lx);
}

/* One value level deeper, refused past jansson's limit. */
static inline int remat__lex_enter(struct remat__lex *lx)
{
    if (++lx->depth > JSON_PARSER_MAX_DEPTH)
        return remat__lex_syntax_error(lx, "maximum parsing depth reached");
    if (lx->depth > lx->max_depth)
        lx->max_depth = lx->depth;
    return 0;
}

/* After a member or element: ',' (1: another follows) or the closer (0). */
static inline int remat__lex_next_or_close(struct remat__lex *lx, char closer)
{
    remat__lex_skip_ws(lx);
    if (lx->p < lx->end && *lx->p == ',') {
        lx->p++;
        return 1;
    }
    if (lx->p < lx->end && *lx->p == closer) {
        lx->p++;
        return 0;
    }
    return remat__lex_syntax_error(lx, closer == '}' ? "'}' expected" : "']' expected");
}

/* The leading decimal digits among the 8 bytes at d, at most 8 of them:
 * their count, and their value in *m.  Byte counts have 6 to 10 digits;
 * one step of arithmetic on the 8 bytes as one word reads them instead of
 * a multiplication per digit.  The word is read in memory order, so this
 * is for little-endian machines; others get 0 and the loop of the caller. */
static inline int remat__lex_eight_digits(const unsigned char *d, uint64_t *m)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t w;
    memcpy(&w, d, 8);
    /* Each byte less '0'.  A digit's byte is 0..9 and the bytes before it
     * are digits too, so it borrows nothing: the first byte that is not a
     * digit gets its high bit set by one of the two terms, whatever the
     * bytes after it hold. */
    uint64_t t = w - 0x3030303030303030u;
    uint64_t bad = (t | (t + 0x7676767676767676u)) & 0x8080808080808080u;
    int k = bad == 0 ? 8 : __builtin_ctzll(bad) / 8;
    if (k == 0)
        return 0;
    /* Keep the k digits as the low end of an 8-digit number (zeros
     * first), then combine pairs, fours and eights. */
    t <<= 8 * (8 - k);
    t = t * 10 + (t >> 8);
    t = ((t & 0x000000FF000000FFu) * (100 + (1000000ull << 32)) +
         ((t >> 16) & 0x000000FF000000FFu) * (1 + (10000ull << 32))) >>
        32;
    *m = t;
    return k;
#else
    (void)d;
    (void)m;
    return 0;
#endif
}

/* The usual shape of a number, read without remat__lex_value's dispatch:
 * an integer of at most 18 digits (it cannot overflow), or digits '.'
 * digits with at most 15 significant ones and no exponent.  Returns 1 when
 * the value was read, 0 to leave everything (syntax errors, signs,
 * exponents, long numbers) to remat__lex_value from the same place: then
 * nothing was consumed.  Each value it reads is the one remat__lex_value
 * would read, by the same arithmetic. */
static inline int remat__lex_fast_number(struct remat__lex *lx, struct remat__jval *v)
{
    const unsigned char *q = (const unsigned char *)lx->p;
    const unsigned char *end = (const unsigned char *)lx->end;
    /* remat__lex_value would enter one level deeper: let it report the limit. */
    if (lx->depth + 1 > JSON_PARSER_MAX_DEPTH || q >= end)
        return 0;
    uint64_t m = 0;
    int digits = 0; /* significant ones: a lone leading zero is not */
    const unsigned char *d = q;
    if (*d == '0') {
        d++;
    } else if ((unsigned)(*d - '1') < 9) {
        const unsigned char *stop = end - d > 18 ? d + 18 : end;
        if (end - d >= 8)
            d += remat__lex_eight_digits(d, &m);
        while (d < stop && (unsigned)(*d - '0') < 10)
            m = m * 10 + (unsigned)(*d++ - '0');
        digits = (int)(d - q);
    } else {
        return 0;
    }
    if (d < end && (unsigned)(*d - '0') < 10)
        return 0; /* a leading zero, or past 18 digits */
    if (d < end && *d == '.') {
        /* The short-decimal path of the general reader: leading zeros are
         * not significant, every digit after the point is a power of ten. */
        if (digits > 15)
            return 0;
        d++;
        if (d >= end || (unsigned)(*d - '0') >= 10)
            return 0;
        int frac = 0;
        for (; d < end && (unsigned)(*d - '0') < 10; d++) {
            frac++;
            if (m == 0 && *d == '0')
                continue;
            if (++digits > 15)
                return 0;
            m = m * 10 + (unsigned)(*d - '0');
        }
        if (frac > 22 || (d < end && (*d == 'e' || *d == 'E')))
            return 0;
        if (lx->depth + 1 > lx->max_depth)
            lx->max_depth = lx->depth + 1;
        v->type = REMAT__J_REAL;
        v->d = (double)m / remat__lex_pow10[frac];
        lx->p = (const char *)d;
        return 1;
    }
    if (d < end && (*d == 'e' || *d == 'E'))
        return 0;
    if (lx->depth + 1 > lx->max_depth)
        lx->max_depth = lx->depth + 1;
    v->type = REMAT__J_INT;
    v->i = (int64_t)m;
    lx->p = (const char *)d;
    return 1;
}

#endif
