/* json_lex.c - the JSON lexer of the profile reader (json_lex.h says what
 * syntax it reads and why some of it is inline there). */
#include <errno.h>
#include <math.h>
#include <stdio.h>

#include "json_lex.h"

/* A key of an object whose keys are not all known, for the duplicate check. */
struct remat__lex_dup {
    uint64_t frame;
    size_t off, len;
    uint32_t hash;
    int used;
};

void remat__lex_init(struct remat__lex *lx, const char *text, size_t len, struct remat_error *err,
                     int *syntax)
{
    memset(lx, 0, sizeof *lx);
    lx->start = lx->p = text;
    lx->end = text + len;
    lx->err = err;
    lx->syntax = syntax;
    if (syntax != NULL)
        *syntax = 0;
}

void remat__lex_free(struct remat__lex *lx)
{
    free(lx->scratch);
    free(lx->tab);
    free(lx->keys);
}

int remat__lex_nomem(struct remat__lex *lx)
{
    if (!lx->failed) {
        lx->failed = 1;
        remat__error(lx->err, REMAT_ENOMEM, "", "out of memory");
    }
    return -1;
}

static void line_col(const struct remat__lex *lx, int *line, int *col)
{
    *line = 1;
    *col = 0;
    for (const char *q = lx->start; q < lx->p && q < lx->end; q++) {
        if (*q == '\n') {
            (*line)++;
            *col = 0;
        } else {
            (*col)++;
        }
    }
}

int remat__lex_syntax_error(struct remat__lex *lx, const char *what)
{
    if (lx->failed)
        return -1;
    lx->failed = 1;
    int line, col;
    line_col(lx, &line, &col);
    remat__error(lx->err, REMAT_EINVAL, "", "bad JSON at line %d, column %d: %s", line, col, what);
    if (lx->syntax != NULL)
        *lx->syntax = 1;
    return -1;
}

/* Length of a valid UTF-8 sequence at q (first byte >= 0x80), or 0. */
static size_t utf8_seq(const unsigned char *q, const unsigned char *end)
{
    unsigned c = q[0];
    size_t n;
    uint32_t v;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
        v = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        v = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        v = c & 0x07;
    } else {
        return 0;
    }
    if ((size_t)(end - q) < n)
        return 0;
    for (size_t k = 1; k < n; k++) {
        if (q[k] < 0x80 || q[k] > 0xBF)
            return 0;
        v = (v << 6) | (q[k] & 0x3F);
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF) || (n == 3 && v < 0x800) ||
        (n == 4 && v < 0x10000))
        return 0;
    return n;
}

static int scratch_reserve(struct remat__lex *lx, size_t need)
{
    if (need <= lx->scratch_cap)
        return 0;
    size_t cap = lx->scratch_cap ? lx->scratch_cap : 256;
    while (cap < need)
        cap *= 2;
    char *s = realloc(lx->scratch, cap);
    if (s == NULL)
        return remat__lex_nomem(lx);
    lx->scratch = s;
    lx->scratch_cap = cap;
    return 0;
}

static int hex4(const char *q, uint32_t *out)
{
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
        char c = q[k];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (uint32_t)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

/* Bytes a string holds as they are: printable ASCII but '"' and '\\'. */
const unsigned char remat__lex_plain[256] = {
#define R16(v) v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v
    R16(0), R16(0), 1,      1,      0,      1,      1,      1,      1,      1,     1, 1,
    1,      1,      1,      1,      1,      1,      R16(1), R16(1), 1,      1,     1, 1,
    1,      1,      1,      1,      1,      1,      1,      1,      0,      1,     1, 1,
    R16(1), R16(1), R16(0), R16(0), R16(0), R16(0), R16(0), R16(0), R16(0), R16(0)
#undef R16
};

/* Reads a string whose opening quote is at lx->p.  *s and *len are the
 * decoded bytes: in the text itself when there is no escape, else in the
 * scratch buffer (valid until the next string). */
int remat__lex_string(struct remat__lex *lx, const char **s, size_t *len)
{
    const unsigned char *q = (const unsigned char *)lx->p + 1;
    const unsigned char *end = (const unsigned char *)lx->end;
    const unsigned char *begin = q;
    for (;;) {
        while (q < end && remat__lex_plain[*q])
            q++;
        if (q >= end) {
            lx->p = (const char *)q;
            return remat__lex_syntax_error(lx, "premature end of input");
        }
        if (*q == '"') {
            *s = (const char *)begin;
            *len = (size_t)(q - begin);
            lx->p = (const char *)q + 1;
            return 0;
        }
        if (*q < 0x20) {
            lx->p = (const char *)q;
            return remat__lex_syntax_error(lx, "control character in string");
        }
        if (*q == '\\')
            break;
        size_t n = utf8_seq(q, end);
        if (n == 0) {
            lx->p = (const char *)q;
            return remat__lex_syntax_error(lx, "invalid UTF-8 in string");
        }
        q += n;
    }
    /* Escapes: decode from here into the scratch buffer, which never needs
     * more bytes than the rest of the text. */
    size_t used = (size_t)(q - begin);
    if (scratch_reserve(lx, used + (size_t)(end - q) + 1) < 0)
        return -1;
    char *out = lx->scratch;
    memcpy(out, begin, used);
    while (q < end && *q != '"') {
        unsigned c = *q;
        if (c < 0x20) {
            lx->p = (const char *)q;
            return remat__lex_syntax_error(lx, "control character in string");
        }
        if (c >= 0x80) {
            size_t n = utf8_seq(q, end);
            if (n == 0) {
                lx->p = (const char *)q;
                return remat__lex_syntax_error(lx, "invalid UTF-8 in string");
            }
            memcpy(out + used, q, n);
            used += n;
            q += n;
            continue;
        }
        if (c != '\\') {
            out[used++] = (char)c;
            q++;
            continue;
        }
        if (end - q < 2)
            break;
        lx->p = (const char *)q;
        switch (q[1]) {
        case '"':
        case '\\':
        case '/':
            out[used++] = (char)q[1];
            q += 2;
            continue;
        case 'b':
            out[used++] = '\b';
            q += 2;
            continue;
        case 'f':
            out[used++] = '\f';
            q += 2;
            continue;
        case 'n':
            out[used++] = '\n';
            q += 2;
            continue;
        case 'r':
            out[used++] = '\r';
            q += 2;
            continue;
        case 't':
            out[used++] = '\t';
            q += 2;
            continue;
        case 'u':
            break;
        default:
            return remat__lex_syntax_error(lx, "invalid escape");
        }
        uint32_t v;
        if (end - q < 6 || hex4((const char *)q + 2, &v) < 0)
            return remat__lex_syntax_error(lx, "invalid escape");
        q += 6;
        if (v >= 0xD800 && v <= 0xDBFF) {
            uint32_t lo;
            if (end - q < 6 || q[0] != '\\' || q[1] != 'u' || hex4((const char *)q + 2, &lo) < 0 ||
                lo < 0xDC00 || lo > 0xDFFF)
                return remat__lex_syntax_error(lx, "invalid Unicode surrogate pair");
            v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
            q += 6;
        } else if (v >= 0xDC00 && v <= 0xDFFF) {
            return remat__lex_syntax_error(lx, "invalid Unicode low surrogate");
        } else if (v == 0) {
            return remat__lex_syntax_error(lx, "\\u0000 is not allowed");
        }
        if (v < 0x80) {
            out[used++] = (char)v;
        } else if (v < 0x800) {
            out[used++] = (char)(0xC0 | (v >> 6));
            out[used++] = (char)(0x80 | (v & 0x3F));
        } else if (v < 0x10000) {
            out[used++] = (char)(0xE0 | (v >> 12));
            out[used++] = (char)(0x80 | ((v >> 6) & 0x3F));
            out[used++] = (char)(0x80 | (v & 0x3F));
        } else {
            out[used++] = (char)(0xF0 | (v >> 18));
            out[used++] = (char)(0x80 | ((v >> 12) & 0x3F));
            out[used++] = (char)(0x80 | ((v >> 6) & 0x3F));
            out[used++] = (char)(0x80 | (v & 0x3F));
        }
    }
    if (q >= end) {
        lx->p = (const char *)q;
        return remat__lex_syntax_error(lx, "premature end of input");
    }
    lx->p = (const char *)q + 1;
    *s = out;
    *len = used;
    return 0;
}

static int is_digit(const char *q, const char *end)
{
    return q < end && *q >= '0' && *q <= '9';
}

/* Powers of ten that are exact doubles. */
const double remat__lex_pow10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                     1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                     1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static int read_number(struct remat__lex *lx, struct remat__jval *v)
{
    const char *q = lx->p, *end = lx->end, *begin = q;
    int neg = *q == '-';
    q += neg;
    if (!is_digit(q, end))
        return remat__lex_syntax_error(lx, "invalid token");
    /* One pass checks the syntax and reads what either kind of number
     * needs.  An integer: its magnitude m, exactly strtoll's range as
     * jansson reads integers (too_big past it).  A real: most are short
     * decimals, a mantissa below 2^53 (at most 15 significant digits, in
     * m) and a power of ten up to 10^22, both exact doubles, so one
     * multiplication or division is correctly rounded, which is what
     * strtod returns too; digits counts the significant digits up to 16,
     * frac those after the point while they may matter. */
    uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, m = 0;
    int too_big = 0, digits = 0, frac = 0, exp = 0, exp_neg = 0, exp_huge = 0, real = 0;
    if (*q == '0') {
        q++;
        if (is_digit(q, end))
            return remat__lex_syntax_error(lx, "invalid token");
    } else {
        for (; is_digit(q, end); q++) {
            unsigned digit = (unsigned)(*q - '0');
            if (too_big || m > (limit - digit) / 10)
                too_big = 1;
            else
                m = m * 10 + digit;
            digits += digits <= 15;
        }
    }
    if (q < end && *q == '.') {
        q++;
        if (!is_digit(q, end))
            return remat__lex_syntax_error(lx, "invalid token");
        for (; is_digit(q, end); q++) {
            /* Past 15 digits, or so many zeros that no exponent within
             * reach brings the power back to 10^-22: not short. */
            if (digits > 15 || frac > 100000)
                continue;
            frac++;
            if (m == 0 && *q == '0')
                continue;
            if (++digits <= 15)
                m = m * 10 + (uint64_t)(*q - '0');
        }
        real = 1;
    }
    if (q < end && (*q == 'e' || *q == 'E')) {
        q++;
        if (q < end && (*q == '+' || *q == '-'))
            exp_neg = *q++ == '-';
        if (!is_digit(q, end))
            return remat__lex_syntax_error(lx, "invalid token");
        for (; is_digit(q, end); q++) {
            if (exp > 1000)
                exp_huge = 1;
            else
                exp = exp * 10 + (*q - '0');
        }
        real = 1;
    }
    if (!real) {
        if (too_big)
            return remat__lex_syntax_error(lx,
                                           neg ? "too big negative integer" : "too big integer");
        v->type = REMAT__J_INT;
        v->i = neg ? (m == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)m) : (int64_t)m;
        lx->p = q;
        return 0;
    }
    int e = (exp_neg ? -exp : exp) - frac;
    if (digits <= 15 && !exp_huge && e >= -22 && e <= 22) {
        double x = (double)m;
        x = e >= 0 ? x * remat__lex_pow10[e] : x / remat__lex_pow10[-e];
        v->type = REMAT__J_REAL;
        v->d = neg ? -x : x;
        lx->p = q;
        return 0;
    }
    /* strtod needs a NUL-terminated copy: the text need not end in one. */
    size_t len = (size_t)(q - begin);
    char small[64];
    char *copy = small;
    if (len >= sizeof small) {
        copy = malloc(len + 1);
        if (copy == NULL)
            return remat__lex_nomem(lx);
    }
    memcpy(copy, begin, len);
    copy[len] = '\0';
    errno = 0;
    double d = strtod(copy, NULL);
    int overflow = errno == ERANGE && (d == HUGE_VAL || d == -HUGE_VAL);
    if (copy != small)
        free(copy);
    if (overflow)
        return remat__lex_syntax_error(lx, "real number overflow");
    v->type = REMAT__J_REAL;
    v->d = d;
    lx->p = q;
    return 0;
}

static int literal(struct remat__lex *lx, const char *word, size_t len, enum remat__jtype t,
                   struct remat__jval *v)
{
    if ((size_t)(lx->end - lx->p) < len || memcmp(lx->p, word, len) != 0)
        return remat__lex_syntax_error(lx, "invalid token");
    lx->p += len;
    v->type = t;
    return 0;
}

static uint32_t key_hash(uint64_t frame, const char *s, size_t len)
{
    uint32_t h = 2166136261u ^ (uint32_t)frame ^ (uint32_t)(frame >> 32);
    for (size_t k = 0; k < len; k++)
        h = (h ^ (unsigned char)s[k]) * 16777619u;
    return h;
}

static int dup_grow(struct remat__lex *lx)
{
    size_t cap = lx->tab_cap ? lx->tab_cap * 2 : 64;
    struct remat__lex_dup *t = calloc(cap, sizeof *t);
    if (t == NULL)
        return remat__lex_nomem(lx);
    for (size_t k = 0; k < lx->tab_cap; k++) {
        if (!lx->tab[k].used)
            continue;
        size_t j = lx->tab[k].hash & (cap - 1);
        while (t[j].used)
            j = (j + 1) & (cap - 1);
        t[j] = lx->tab[k];
    }
    free(lx->tab);
    lx->tab = t;
    lx->tab_cap = cap;
    return 0;
}

/* Records key in object `frame`; a second time is jansson's duplicate error. */
static int dup_check(struct remat__lex *lx, uint64_t frame, const char *s, size_t len)
{
    if ((lx->tab_count + 1) * 2 > lx->tab_cap && dup_grow(lx) < 0)
        return -1;
    uint32_t h = key_hash(frame, s, len);
    size_t j = h & (lx->tab_cap - 1);
    while (lx->tab[j].used) {
        const struct remat__lex_dup *e = &lx->tab[j];
        /* keys is NULL while every key so far was empty: no memcmp then
         * (NULL + 0 is undefined, and there is nothing to compare). */
        if (e->hash == h && e->frame == frame && e->len == len &&
            (len == 0 || memcmp(lx->keys + e->off, s, len) == 0))
            return remat__lex_syntax_error(lx, "duplicate object key");
        j = (j + 1) & (lx->tab_cap - 1);
    }
    if (lx->keys_len + len > lx->keys_cap) {
        size_t cap = lx->keys_cap ? lx->keys_cap : 256;
        while (cap < lx->keys_len + len)
            cap *= 2;
        char *k = realloc(lx->keys, cap);
        if (k == NULL)
            return remat__lex_nomem(lx);
        lx->keys = k;
        lx->keys_cap = cap;
    }
    if (len > 0)
        memcpy(lx->keys + lx->keys_len, s, len);
    lx->tab[j] = (struct remat__lex_dup){
        .frame = frame, .off = lx->keys_len, .len = len, .hash = h, .used = 1};
    lx->keys_len += len;
    lx->tab_count++;
    return 0;
}

int remat__lex_unknown_member(struct remat__lex *lx, uint64_t frame, const char *k, size_t klen)
{
    if (memchr(k, '\0', klen) != NULL)
        return remat__lex_syntax_error(lx, "NUL byte in object key not supported");
    if (dup_check(lx, frame, k, klen) < 0)
        return -1;
    struct remat__jval v;
    return remat__lex_value(lx, &v);
}

int remat__lex_key(struct remat__lex *lx, const char **k, size_t *klen)
{
    remat__lex_skip_ws(lx);
    if (lx->p >= lx->end || *lx->p != '"')
        return remat__lex_syntax_error(lx, "string or '}' expected");
    if (remat__lex_string(lx, k, klen) < 0)
        return -1;
    remat__lex_skip_ws(lx);
    if (lx->p >= lx->end || *lx->p != ':')
        return remat__lex_syntax_error(lx, "':' expected");
    lx->p++;
    return 0;
}

/* Keys are short: a loop beats a call to memcmp. */
static int same_key(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return 0;
    return 1;
}

int remat__lex_object(struct remat__lex *lx, const char *const *known,
                      const unsigned char *known_len, int n_known, remat__lex_member_fn member,
                      void *ctx)
{
    uint64_t frame = lx->next_frame++;
    unsigned seen = 0;
    if (remat__lex_open(lx, '}'))
        return 0;
    do {
        const char *k;
        size_t klen;
        if (remat__lex_key(lx, &k, &klen) < 0)
            return -1;
        int which = -1;
        for (int j = 0; j < n_known; j++)
            if (known_len[j] == klen && same_key(known[j], k, klen)) {
                which = j;
                break;
            }
        if (which >= 0) {
            if (seen & (1u << which))
                return remat__lex_syntax_error(lx, "duplicate object key");
            seen |= 1u << which;
            remat__lex_skip_ws(lx);
            if (member(lx, ctx, which) < 0)
                return -1;
        } else {
            if (remat__lex_unknown_member(lx, frame, k, klen) < 0)
                return -1;
        }
    } while (remat__lex_next_or_close(lx, '}') == 1);
    return lx->failed ? -1 : 0;
}

static int read_array_rest(struct remat__lex *lx)
{
    if (remat__lex_open(lx, ']'))
        return 0;
    do {
        struct remat__jval v;
        if (remat__lex_value(lx, &v) < 0)
            return -1;
    } while (remat__lex_next_or_close(lx, ']') == 1);
    return lx->failed ? -1 : 0;
}

/* Any value at lx->p (after whitespace), its type and number kept. */
int remat__lex_value(struct remat__lex *lx, struct remat__jval *v)
{
    remat__lex_skip_ws(lx);
    if (remat__lex_enter(lx) < 0)
        return -1;
    int rc;
    v->type = REMAT__J_ABSENT;
    if (lx->p >= lx->end) {
        rc = remat__lex_syntax_error(lx, "unexpected end of input");
    } else {
        switch (*lx->p) {
        case '{':
            v->type = REMAT__J_OBJ;
            rc = remat__lex_object(lx, NULL, NULL, 0, NULL, NULL);
            break;
        case '[':
            v->type = REMAT__J_ARR;
            rc = read_array_rest(lx);
            break;
        case '"': {
            const char *s;
            size_t len;
            v->type = REMAT__J_STR;
            rc = remat__lex_string(lx, &s, &len);
            v->i = (int64_t)len;
            break;
        }
        case 't':
            rc = literal(lx, "true", 4, REMAT__J_TRUE, v);
            break;
        case 'f':
            rc = literal(lx, "false", 5, REMAT__J_FALSE, v);
            break;
        case 'n':
            rc = literal(lx, "null", 4, REMAT__J_NULL, v);
            break;
        default:
            if (*lx->p == '-' || (*lx->p >= '0' && *lx->p <= '9'))
                rc = read_number(lx, v);
            else
                rc = remat__lex_syntax_error(lx, "invalid token");
        }
    }
    lx->depth--;
    return rc;
}
