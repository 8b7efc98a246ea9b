/* profile_fast.c - a streaming reader of remat.profile/v1 text.
 *
 * remat_profile_from_json needs jansson's tree of the whole document: for a
 * million stages that is seconds and hundreds of megabytes, and for a
 * service answering thousands of small requests a second it is most of the
 * time spent.  This reader goes over the text once, writing stages straight
 * into the stage array and names into the name arena (both grown
 * geometrically), and allocates nothing else per stage.
 *
 * It is held to the jansson path's answers, not just its spirit: the same
 * profile, and for bad input the same code and JSON pointer.  Three rules
 * make that so.
 *  - The syntax is jansson's as remat_profile_loadb calls it (strict RFC
 *    8259, a top-level object or array, no NUL in strings, duplicate keys
 *    rejected, nesting at most JSON_PARSER_MAX_DEPTH values deep, integers
 *    in int64_t, reals through strtod with overflow an error).  A syntax
 *    error wins over everything, so the whole text is read before any other
 *    error is reported.
 *  - The jansson path checks fields in a fixed order whatever the order of
 *    the text.  Each semantic error found here gets a rank from that order
 *    and only the least-ranked one is kept.
 *  - Values are checked exactly as profile.c checks them.
 * Stage objects, nearly all of the text, have shortcuts for their usual
 * shape (read_stage_object, fast_number): each one either reads exactly
 * what the general path would read or consumes nothing and leaves the text
 * to it.  tests/test_profile_equiv holds the two paths to the same answers.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include "remat_private.h"

#define DEFAULT_FWD_MS 1.0
#define DEFAULT_BWD_MS 2.0
#define MAX_DEPTH JSON_PARSER_MAX_DEPTH

/* Value types, as json_typeof would tell them. */
enum vtype { V_ABSENT, V_NULL, V_TRUE, V_FALSE, V_INT, V_REAL, V_STR, V_ARR, V_OBJ };

struct val {
    enum vtype type;
    int64_t i;
    double d;
};

/* Ranks of the semantic errors, in the order remat_profile_from_json checks. */
enum major {
    R_ROOT = 1,
    R_FORMAT,
    R_INPUT,
    R_STAGES,
    R_STAGE_SHAPE, /* the first pass over stages: object, name */
    R_STAGE_FIELD, /* the second pass: byte and time fields, saved >= out */
    R_META,
    R_BATCH,
    R_TOTAL,
    R_NONE = 255
};

static uint64_t rank(unsigned major, size_t index, unsigned minor)
{
    return ((uint64_t)major << 56) | ((uint64_t)index << 8) | minor;
}

/* A key of an object whose keys are not all known, for the duplicate check. */
struct dupent {
    uint64_t frame;
    size_t off, len;
    uint32_t hash;
    int used;
};

static const char *const meta_keys[] = {"model", "dtype", "device", "driver", "libtorch"};
#define N_META 5

/* Stage fields in the order parse_stage() checks them. */
static const char *const stage_keys[] = {"out_bytes",     "saved_bytes", "fwd_tmp_bytes",
                                         "bwd_tmp_bytes", "param_bytes", "fwd_ms",
                                         "bwd_ms"};
#define N_FIELDS 7
#define F_NAME N_FIELDS

/* The stage members as they appear in compact text, quotes and colon
 * included: "out_bytes": and so on, then "name":. */
static const char *const stage_quoted[] = {
    "\"out_bytes\":",   "\"saved_bytes\":", "\"fwd_tmp_bytes\":", "\"bwd_tmp_bytes\":",
    "\"param_bytes\":", "\"fwd_ms\":",      "\"bwd_ms\":",        "\"name\":"};
static const unsigned char stage_quoted_len[] = {12, 14, 16, 16, 14, 9, 9, 7};

struct reader {
    const char *start, *p, *end;
    const char *prefix;
    int depth, max_depth;
    int failed; /* a syntax error or out of memory: stop */
    struct remat_error *err;
    int *syntax;

    uint64_t best; /* rank of bad, or R_NONE */
    struct remat_error bad;

    char *scratch; /* decoded strings with escapes */
    size_t scratch_cap;

    struct dupent *tab; /* open addressing, power-of-two size */
    size_t tab_cap, tab_count;
    char *keys;
    size_t keys_len, keys_cap;
    uint64_t next_frame;

    /* The stage member that last followed member k (N_FIELDS + 1: the
     * start of a stage, N_FIELDS + 2: an unknown key), -1 for none yet. */
    signed char follow[N_FIELDS + 3];

    struct remat_stage *stages;
    size_t n, cap;
    char *names;
    size_t names_len, names_cap;

    /* Top-level members seen. */
    struct val format, input, stages_v, batch;
    int format_ok;
    struct val meta[N_META];
    size_t meta_len[N_META];
    char *meta_str[N_META];
    unsigned root_seen;
};

static void line_col(const struct reader *r, int *line, int *col)
{
    *line = 1;
    *col = 0;
    for (const char *q = r->start; q < r->p && q < r->end; q++) {
        if (*q == '\n') {
            (*line)++;
            *col = 0;
        } else {
            (*col)++;
        }
    }
}

static int syntax_error(struct reader *r, const char *what)
{
    if (r->failed)
        return -1;
    r->failed = 1;
    int line, col;
    line_col(r, &line, &col);
    remat__error(r->err, REMAT_EINVAL, "", "bad JSON at line %d, column %d: %s", line, col, what);
    if (r->syntax != NULL)
        *r->syntax = 1;
    return -1;
}

static int nomem(struct reader *r)
{
    if (!r->failed) {
        r->failed = 1;
        remat__error(r->err, REMAT_ENOMEM, "", "out of memory");
    }
    return -1;
}

/* Keeps the error if it comes before the one kept so far. */
__attribute__((format(printf, 5, 6))) static void note(struct reader *r, uint64_t rk, int code,
                                                       const char *pointer, const char *fmt, ...)
{
    if (rk >= r->best)
        return;
    r->best = rk;
    r->bad.code = code;
    snprintf(r->bad.pointer, sizeof r->bad.pointer, "%s", pointer);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->bad.message, sizeof r->bad.message, fmt, ap);
    va_end(ap);
}

static const char *top_pointer(char *buf, size_t size, const char *prefix, const char *key)
{
    snprintf(buf, size, "%s/%s", prefix, key);
    return buf;
}

static const char *stage_pointer(char *buf, size_t size, const char *prefix, size_t i,
                                 const char *key)
{
    snprintf(buf, size, "%s/stages/%zu/%s", prefix, i, key);
    return buf;
}

static void skip_ws(struct reader *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\n' || *r->p == '\r' || *r->p == '\t'))
        r->p++;
}

/* skip_ws() where the next byte may be whitespace: a byte above ' ' is
 * never any, and most often there is none. */
static inline void skip_ws_if_any(struct reader *r)
{
    if (r->p < r->end && (unsigned char)*r->p <= ' ')
        skip_ws(r);
}

/* ---- strings ---------------------------------------------------------- */

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

static int scratch_reserve(struct reader *r, size_t need)
{
    if (need <= r->scratch_cap)
        return 0;
    size_t cap = r->scratch_cap ? r->scratch_cap : 256;
    while (cap < need)
        cap *= 2;
    char *s = realloc(r->scratch, cap);
    if (s == NULL)
        return nomem(r);
    r->scratch = s;
    r->scratch_cap = cap;
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
static const unsigned char plain[256] = {
#define R16(v) v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v
    R16(0), R16(0), 1,      1,      0,      1,      1,      1,      1,      1,     1, 1,
    1,      1,      1,      1,      1,      1,      R16(1), R16(1), 1,      1,     1, 1,
    1,      1,      1,      1,      1,      1,      1,      1,      0,      1,     1, 1,
    R16(1), R16(1), R16(0), R16(0), R16(0), R16(0), R16(0), R16(0), R16(0), R16(0)
#undef R16
};

/* Reads a string whose opening quote is at r->p.  *s and *len are the
 * decoded bytes: in the text itself when there is no escape, else in the
 * scratch buffer (valid until the next string). */
static int read_string(struct reader *r, const char **s, size_t *len)
{
    const unsigned char *q = (const unsigned char *)r->p + 1;
    const unsigned char *end = (const unsigned char *)r->end;
    const unsigned char *begin = q;
    for (;;) {
        while (q < end && plain[*q])
            q++;
        if (q >= end) {
            r->p = (const char *)q;
            return syntax_error(r, "premature end of input");
        }
        if (*q == '"') {
            *s = (const char *)begin;
            *len = (size_t)(q - begin);
            r->p = (const char *)q + 1;
            return 0;
        }
        if (*q < 0x20) {
            r->p = (const char *)q;
            return syntax_error(r, "control character in string");
        }
        if (*q == '\\')
            break;
        size_t n = utf8_seq(q, end);
        if (n == 0) {
            r->p = (const char *)q;
            return syntax_error(r, "invalid UTF-8 in string");
        }
        q += n;
    }
    /* Escapes: decode from here into the scratch buffer, which never needs
     * more bytes than the rest of the text. */
    size_t used = (size_t)(q - begin);
    if (scratch_reserve(r, used + (size_t)(end - q) + 1) < 0)
        return -1;
    char *out = r->scratch;
    memcpy(out, begin, used);
    while (q < end && *q != '"') {
        unsigned c = *q;
        if (c < 0x20) {
            r->p = (const char *)q;
            return syntax_error(r, "control character in string");
        }
        if (c >= 0x80) {
            size_t n = utf8_seq(q, end);
            if (n == 0) {
                r->p = (const char *)q;
                return syntax_error(r, "invalid UTF-8 in string");
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
        r->p = (const char *)q;
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
            return syntax_error(r, "invalid escape");
        }
        uint32_t v;
        if (end - q < 6 || hex4((const char *)q + 2, &v) < 0)
            return syntax_error(r, "invalid escape");
        q += 6;
        if (v >= 0xD800 && v <= 0xDBFF) {
            uint32_t lo;
            if (end - q < 6 || q[0] != '\\' || q[1] != 'u' || hex4((const char *)q + 2, &lo) < 0 ||
                lo < 0xDC00 || lo > 0xDFFF)
                return syntax_error(r, "invalid Unicode surrogate pair");
            v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
            q += 6;
        } else if (v >= 0xDC00 && v <= 0xDFFF) {
            return syntax_error(r, "invalid Unicode low surrogate");
        } else if (v == 0) {
            return syntax_error(r, "\\u0000 is not allowed");
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
        r->p = (const char *)q;
        return syntax_error(r, "premature end of input");
    }
    r->p = (const char *)q + 1;
    *s = out;
    *len = used;
    return 0;
}

/* ---- numbers and literals --------------------------------------------- */

static int is_digit(const char *q, const char *end)
{
    return q < end && *q >= '0' && *q <= '9';
}

/* Powers of ten that are exact doubles. */
static const double pow10_exact[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                     1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                     1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static int read_number(struct reader *r, struct val *v)
{
    const char *q = r->p, *end = r->end, *begin = q;
    int neg = 0;
    if (*q == '-') {
        neg = 1;
        q++;
    }
    if (!is_digit(q, end))
        return syntax_error(r, "invalid token");
    if (*q == '0') {
        q++;
        if (is_digit(q, end))
            return syntax_error(r, "invalid token");
    } else {
        while (is_digit(q, end))
            q++;
    }
    int real = 0;
    if (q < end && *q == '.') {
        q++;
        if (!is_digit(q, end))
            return syntax_error(r, "invalid token");
        while (is_digit(q, end))
            q++;
        real = 1;
    }
    if (q < end && (*q == 'e' || *q == 'E')) {
        q++;
        if (q < end && (*q == '+' || *q == '-'))
            q++;
        if (!is_digit(q, end))
            return syntax_error(r, "invalid token");
        while (is_digit(q, end))
            q++;
        real = 1;
    }
    if (!real) {
        /* Exactly strtoll's range, as jansson reads integers. */
        uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
        uint64_t x = 0;
        const char *d = begin + neg;
        /* 18 digits cannot overflow: check only past them. */
        for (const char *safe = q - d > 18 ? d + 18 : q; d < safe; d++)
            x = x * 10 + (unsigned)(*d - '0');
        for (; d < q; d++) {
            unsigned digit = (unsigned)(*d - '0');
            if (x > (limit - digit) / 10)
                return syntax_error(r, neg ? "too big negative integer" : "too big integer");
            x = x * 10 + digit;
        }
        v->type = V_INT;
        v->i = neg ? (x == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)x) : (int64_t)x;
        r->p = q;
        return 0;
    }
    /* Most times are short decimals: a mantissa below 2^53 and a power of
     * ten up to 10^22 are both exact doubles, so one multiplication or
     * division is correctly rounded, which is what strtod returns too. */
    {
        uint64_t m = 0;
        int digits = 0, frac = 0, seen_dot = 0, exp = 0, exp_neg = 0, ok = 1;
        const char *d = begin + neg;
        for (; d < q && *d != 'e' && *d != 'E'; d++) {
            if (*d == '.') {
                seen_dot = 1;
                continue;
            }
            if (m == 0 && *d == '0') {
                frac += seen_dot;
                continue;
            }
            if (++digits > 15) {
                ok = 0;
                break;
            }
            m = m * 10 + (uint64_t)(*d - '0');
            frac += seen_dot;
        }
        if (ok && d < q) {
            d++;
            if (*d == '+' || *d == '-')
                exp_neg = *d++ == '-';
            for (; d < q; d++) {
                if (exp > 1000) {
                    ok = 0;
                    break;
                }
                exp = exp * 10 + (*d - '0');
            }
        }
        int e = (exp_neg ? -exp : exp) - frac;
        if (ok && e >= -22 && e <= 22) {
            double x = (double)m;
            x = e >= 0 ? x * pow10_exact[e] : x / pow10_exact[-e];
            v->type = V_REAL;
            v->d = neg ? -x : x;
            r->p = q;
            return 0;
        }
    }
    /* strtod needs a NUL-terminated copy: the text need not end in one. */
    size_t len = (size_t)(q - begin);
    char small[64];
    char *copy = small;
    if (len >= sizeof small) {
        copy = malloc(len + 1);
        if (copy == NULL)
            return nomem(r);
    }
    memcpy(copy, begin, len);
    copy[len] = '\0';
    errno = 0;
    double d = strtod(copy, NULL);
    int overflow = errno == ERANGE && (d == HUGE_VAL || d == -HUGE_VAL);
    if (copy != small)
        free(copy);
    if (overflow)
        return syntax_error(r, "real number overflow");
    v->type = V_REAL;
    v->d = d;
    r->p = q;
    return 0;
}

static int literal(struct reader *r, const char *word, size_t len, enum vtype t, struct val *v)
{
    if ((size_t)(r->end - r->p) < len || memcmp(r->p, word, len) != 0)
        return syntax_error(r, "invalid token");
    r->p += len;
    v->type = t;
    return 0;
}

/* ---- duplicate keys of objects whose keys are not all known ---------- */

static uint32_t key_hash(uint64_t frame, const char *s, size_t len)
{
    uint32_t h = 2166136261u ^ (uint32_t)frame ^ (uint32_t)(frame >> 32);
    for (size_t k = 0; k < len; k++)
        h = (h ^ (unsigned char)s[k]) * 16777619u;
    return h;
}

static int dup_grow(struct reader *r)
{
    size_t cap = r->tab_cap ? r->tab_cap * 2 : 64;
    struct dupent *t = calloc(cap, sizeof *t);
    if (t == NULL)
        return nomem(r);
    for (size_t k = 0; k < r->tab_cap; k++) {
        if (!r->tab[k].used)
            continue;
        size_t j = r->tab[k].hash & (cap - 1);
        while (t[j].used)
            j = (j + 1) & (cap - 1);
        t[j] = r->tab[k];
    }
    free(r->tab);
    r->tab = t;
    r->tab_cap = cap;
    return 0;
}

/* Records key in object `frame`; a second time is jansson's duplicate error. */
static int dup_check(struct reader *r, uint64_t frame, const char *s, size_t len)
{
    if ((r->tab_count + 1) * 2 > r->tab_cap && dup_grow(r) < 0)
        return -1;
    uint32_t h = key_hash(frame, s, len);
    size_t j = h & (r->tab_cap - 1);
    while (r->tab[j].used) {
        const struct dupent *e = &r->tab[j];
        if (e->hash == h && e->frame == frame && e->len == len &&
            memcmp(r->keys + e->off, s, len) == 0)
            return syntax_error(r, "duplicate object key");
        j = (j + 1) & (r->tab_cap - 1);
    }
    if (r->keys_len + len > r->keys_cap) {
        size_t cap = r->keys_cap ? r->keys_cap : 256;
        while (cap < r->keys_len + len)
            cap *= 2;
        char *k = realloc(r->keys, cap);
        if (k == NULL)
            return nomem(r);
        r->keys = k;
        r->keys_cap = cap;
    }
    if (len > 0)
        memcpy(r->keys + r->keys_len, s, len);
    r->tab[j] =
        (struct dupent){.frame = frame, .off = r->keys_len, .len = len, .hash = h, .used = 1};
    r->keys_len += len;
    r->tab_count++;
    return 0;
}

/* ---- values ----------------------------------------------------------- */

static int enter(struct reader *r)
{
    if (++r->depth > MAX_DEPTH)
        return syntax_error(r, "maximum parsing depth reached");
    return 0;
}

static int any_value(struct reader *r, struct val *v);

/* After a member or element: ',' (1: another follows) or the closer (0). */
static int next_or_close(struct reader *r, char closer)
{
    skip_ws(r);
    if (r->p < r->end && *r->p == ',') {
        r->p++;
        return 1;
    }
    if (r->p < r->end && *r->p == closer) {
        r->p++;
        return 0;
    }
    return syntax_error(r, closer == '}' ? "'}' expected" : "']' expected");
}

/* Reads `"key" :` at r->p (after whitespace). */
static int read_key(struct reader *r, const char **k, size_t *klen)
{
    skip_ws(r);
    if (r->p >= r->end || *r->p != '"')
        return syntax_error(r, "string or '}' expected");
    if (read_string(r, k, klen) < 0)
        return -1;
    skip_ws(r);
    if (r->p >= r->end || *r->p != ':')
        return syntax_error(r, "':' expected");
    r->p++;
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

/* The members of an object opened at r->p: each known key calls member()
 * with its index, others are read and dropped. */
typedef int (*member_fn)(struct reader *r, void *ctx, int which);

static int read_object(struct reader *r, const char *const *known, const unsigned char *known_len,
                       int n_known, member_fn member, void *ctx)
{
    uint64_t frame = r->next_frame++;
    unsigned seen = 0;
    r->p++; /* '{' */
    skip_ws(r);
    if (r->p < r->end && *r->p == '}') {
        r->p++;
        return 0;
    }
    do {
        const char *k;
        size_t klen;
        if (read_key(r, &k, &klen) < 0)
            return -1;
        int which = -1;
        for (int j = 0; j < n_known; j++)
            if (known_len[j] == klen && same_key(known[j], k, klen)) {
                which = j;
                break;
            }
        if (which >= 0) {
            if (seen & (1u << which))
                return syntax_error(r, "duplicate object key");
            seen |= 1u << which;
            skip_ws(r);
            if (member(r, ctx, which) < 0)
                return -1;
        } else {
            if (memchr(k, '\0', klen) != NULL)
                return syntax_error(r, "NUL byte in object key not supported");
            if (dup_check(r, frame, k, klen) < 0)
                return -1;
            struct val v;
            if (any_value(r, &v) < 0)
                return -1;
        }
    } while (next_or_close(r, '}') == 1);
    return r->failed ? -1 : 0;
}

static int read_array_rest(struct reader *r)
{
    r->p++; /* '[' */
    skip_ws(r);
    if (r->p < r->end && *r->p == ']') {
        r->p++;
        return 0;
    }
    do {
        struct val v;
        if (any_value(r, &v) < 0)
            return -1;
    } while (next_or_close(r, ']') == 1);
    return r->failed ? -1 : 0;
}

/* Any value at r->p (after whitespace), its type and number kept. */
static int any_value(struct reader *r, struct val *v)
{
    skip_ws(r);
    if (enter(r) < 0)
        return -1;
    if (r->depth > r->max_depth)
        r->max_depth = r->depth;
    int rc;
    v->type = V_ABSENT;
    if (r->p >= r->end) {
        rc = syntax_error(r, "unexpected end of input");
    } else {
        switch (*r->p) {
        case '{':
            v->type = V_OBJ;
            rc = read_object(r, NULL, NULL, 0, NULL, NULL);
            break;
        case '[':
            v->type = V_ARR;
            rc = read_array_rest(r);
            break;
        case '"': {
            const char *s;
            size_t len;
            v->type = V_STR;
            rc = read_string(r, &s, &len);
            v->i = (int64_t)len;
            break;
        }
        case 't':
            rc = literal(r, "true", 4, V_TRUE, v);
            break;
        case 'f':
            rc = literal(r, "false", 5, V_FALSE, v);
            break;
        case 'n':
            rc = literal(r, "null", 4, V_NULL, v);
            break;
        default:
            if (*r->p == '-' || (*r->p >= '0' && *r->p <= '9'))
                rc = read_number(r, v);
            else
                rc = syntax_error(r, "invalid token");
        }
    }
    r->depth--;
    return rc;
}

/* ---- stages ----------------------------------------------------------- */

struct stage_ctx {
    size_t i;
    struct remat_stage *s; /* NULL past the stage limit */
    struct val f[N_FIELDS];
    int name_bad;    /* 1: not a string, 2: too long */
    size_t name_off; /* arena offset + 1, 0 for the empty name */
};

/* The leading decimal digits among the 8 bytes at d, at most 8 of them:
 * their count, and their value in *m.  Byte counts have 6 to 10 digits;
 * one step of arithmetic on the 8 bytes as one word reads them instead of
 * a multiplication per digit.  The word is read in memory order, so this
 * is for little-endian machines; others get 0 and the loop of the caller. */
static inline int eight_digits(const unsigned char *d, uint64_t *m)
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

/* The usual shape of a stage field, read without any_value's dispatch: an
 * integer of at most 18 digits (it cannot overflow), or digits '.' digits
 * with at most 15 significant ones and no exponent.  Returns 1 when the
 * value was read, 0 to leave everything (syntax errors, signs, exponents,
 * long numbers) to any_value from the same place: then nothing was
 * consumed.  Each value it reads is the one read_number would read, by the
 * same arithmetic. */
static int fast_number(struct reader *r, struct val *v)
{
    const unsigned char *q = (const unsigned char *)r->p;
    const unsigned char *end = (const unsigned char *)r->end;
    /* any_value would enter one level deeper: let it report the limit. */
    if (r->depth + 1 > MAX_DEPTH || q >= end)
        return 0;
    uint64_t m = 0;
    int digits = 0; /* significant ones: a lone leading zero is not */
    const unsigned char *d = q;
    if (*d == '0') {
        d++;
    } else if ((unsigned)(*d - '1') < 9) {
        const unsigned char *stop = end - d > 18 ? d + 18 : end;
        if (end - d >= 8)
            d += eight_digits(d, &m);
        while (d < stop && (unsigned)(*d - '0') < 10)
            m = m * 10 + (unsigned)(*d++ - '0');
        digits = (int)(d - q);
    } else {
        return 0;
    }
    if (d < end && (unsigned)(*d - '0') < 10)
        return 0; /* a leading zero, or past 18 digits */
    if (d < end && *d == '.') {
        /* read_number's short-decimal path: leading zeros are not
         * significant, every digit after the point is a power of ten. */
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
        if (r->depth + 1 > r->max_depth)
            r->max_depth = r->depth + 1;
        v->type = V_REAL;
        v->d = (double)m / pow10_exact[frac];
        r->p = (const char *)d;
        return 1;
    }
    if (d < end && (*d == 'e' || *d == 'E'))
        return 0;
    if (r->depth + 1 > r->max_depth)
        r->max_depth = r->depth + 1;
    v->type = V_INT;
    v->i = (int64_t)m;
    r->p = (const char *)d;
    return 1;
}

static int stage_member(struct reader *r, void *vctx, int which)
{
    struct stage_ctx *c = vctx;
    if (which < N_FIELDS) {
        if (fast_number(r, &c->f[which]))
            return 0;
        return any_value(r, &c->f[which]);
    }
    /* The name: a string goes to the arena, null is the empty name. */
    if (r->p < r->end && *r->p == '"') {
        const char *s;
        size_t len;
        /* A name of plain bytes, as names nearly always are, is read here
         * by read_string's first loop; anything else goes to it. */
        const unsigned char *q = (const unsigned char *)r->p + 1;
        const unsigned char *end = (const unsigned char *)r->end;
        while (q < end && plain[*q])
            q++;
        if (r->depth + 1 <= MAX_DEPTH && q < end && *q == '"') {
            s = r->p + 1;
            len = (size_t)((const char *)q - s);
            r->p = (const char *)q + 1;
        } else {
            if (enter(r) < 0)
                return -1;
            int rc = read_string(r, &s, &len);
            r->depth--;
            if (rc < 0)
                return -1;
        }
        if (len > REMAT_MAX_NAME) {
            c->name_bad = 2;
            return 0;
        }
        if (c->s == NULL)
            return 0;
        if (r->names_len + len + 1 > r->names_cap) {
            size_t cap = r->names_cap ? r->names_cap : 4096;
            while (cap < r->names_len + len + 1)
                cap *= 2;
            char *a = realloc(r->names, cap);
            if (a == NULL)
                return nomem(r);
            r->names = a;
            r->names_cap = cap;
        }
        memcpy(r->names + r->names_len, s, len);
        r->names[r->names_len + len] = '\0';
        c->name_off = r->names_len + 1;
        r->names_len += len + 1;
        return 0;
    }
    struct val v;
    if (any_value(r, &v) < 0)
        return -1;
    if (v.type != V_NULL)
        c->name_bad = 1;
    return 0;
}

/* parse_stage() of profile.c on the values read. */
static void check_stage(struct reader *r, struct stage_ctx *c)
{
    char ptr[128];
    size_t i = c->i;
    struct remat_stage *s = c->s;
    if (c->name_bad) {
        if (c->name_bad == 1)
            note(r, rank(R_STAGE_SHAPE, i, 0), REMAT_EINVAL,
                 stage_pointer(ptr, sizeof ptr, r->prefix, i, "name"), "name must be a string");
        else
            note(r, rank(R_STAGE_SHAPE, i, 0), REMAT_ELIMIT,
                 stage_pointer(ptr, sizeof ptr, r->prefix, i, "name"),
                 "name is longer than %d bytes", REMAT_MAX_NAME);
        return;
    }
    /* Past the first shape error nothing of the second pass can show. */
    if (r->best <= rank(R_STAGE_FIELD, i, 0))
        return;
    int64_t *bytes[5] = {&s->out_bytes, &s->saved_bytes, &s->fwd_tmp_bytes, &s->bwd_tmp_bytes,
                         &s->param_bytes};
    for (int k = 0; k < 5; k++) {
        const struct val *v = &c->f[k];
        const char *key = stage_keys[k];
        uint64_t rk = rank(R_STAGE_FIELD, i, (unsigned)k);
        if (v->type == V_ABSENT) {
            if (k == 0) {
                note(r, rk, REMAT_EINVAL, stage_pointer(ptr, sizeof ptr, r->prefix, i, key),
                     "%s is missing", key);
                return;
            }
            *bytes[k] = k == 1 ? s->out_bytes : 0;
            continue;
        }
        if (v->type != V_INT) {
            note(r, rk, REMAT_EINVAL, stage_pointer(ptr, sizeof ptr, r->prefix, i, key),
                 "%s must be an integer byte count", key);
            return;
        }
        if (v->i < 0) {
            note(r, rk, REMAT_EINVAL, stage_pointer(ptr, sizeof ptr, r->prefix, i, key),
                 "%s must not be negative", key);
            return;
        }
        if (v->i > REMAT_MAX_BYTES) {
            note(r, rk, REMAT_ELIMIT, stage_pointer(ptr, sizeof ptr, r->prefix, i, key),
                 "%s is over the limit of 2^60 bytes", key);
            return;
        }
        *bytes[k] = v->i;
    }
    double *ms[2] = {&s->fwd_ms, &s->bwd_ms};
    for (int k = 0; k < 2; k++) {
        const struct val *v = &c->f[5 + k];
        const char *key = stage_keys[5 + k];
        uint64_t rk = rank(R_STAGE_FIELD, i, (unsigned)(5 + k));
        if (v->type == V_ABSENT) {
            *ms[k] = k == 0 ? DEFAULT_FWD_MS : DEFAULT_BWD_MS;
            continue;
        }
        if (v->type != V_INT && v->type != V_REAL) {
            note(r, rk, REMAT_EINVAL, stage_pointer(ptr, sizeof ptr, r->prefix, i, key),
                 "%s must be a number", key);
            return;
        }
        double x = v->type == V_INT ? (double)v->i : v->d;
        if (!isfinite(x) || x < 0) {
            note(r, rk, REMAT_EINVAL, stage_pointer(ptr, sizeof ptr, r->prefix, i, key),
                 "%s must be finite and not negative", key);
            return;
        }
        *ms[k] = x;
    }
    if (s->saved_bytes < s->out_bytes)
        note(r, rank(R_STAGE_FIELD, i, 7), REMAT_EINVAL,
             stage_pointer(ptr, sizeof ptr, r->prefix, i, "saved_bytes"),
             "saved_bytes must be at least out_bytes (it holds the output)");
}

/* The member a stage key names (stage_keys' index, F_NAME), or -1.  The
 * length and one letter tell the candidates apart; the whole key is still
 * compared. */
static int stage_key(const char *k, size_t klen)
{
    int which;
    switch (klen) {
    case 4:
        which = F_NAME;
        break;
    case 6:
        which = k[0] == 'f' ? 5 : 6;
        break;
    case 9:
        which = 0;
        break;
    case 11:
        which = k[0] == 's' ? 1 : 4;
        break;
    case 13:
        which = k[0] == 'f' ? 2 : 3;
        break;
    default:
        return -1;
    }
    return memcmp(stage_quoted[which] + 1, k, klen) == 0 ? which : -1;
}

/* Whether the text at p holds stage_quoted[which].  Each length is a
 * constant here, so each comparison is a few loads, not a call. */
static int quoted_at(const char *p, const char *end, int which)
{
#define AT(lit) ((size_t)(end - p) >= sizeof(lit) - 1 && memcmp(p, lit, sizeof(lit) - 1) == 0)
    switch (which) {
    case 0:
        return AT("\"out_bytes\":");
    case 1:
        return AT("\"saved_bytes\":");
    case 2:
        return AT("\"fwd_tmp_bytes\":");
    case 3:
        return AT("\"bwd_tmp_bytes\":");
    case 4:
        return AT("\"param_bytes\":");
    case 5:
        return AT("\"fwd_ms\":");
    case 6:
        return AT("\"bwd_ms\":");
    default:
        return AT("\"name\":");
    }
#undef AT
}

/* read_object() for a stage object opened at r->p, with its members
 * matched by stage_key and read by stage_member: the same steps in the same
 * order, so the same answers and errors, without the generic key loop and
 * the indirect call.  Stages of one profile nearly always list their
 * members in one order, so the member that followed this one in the last
 * stage is tried first: when the text holds exactly `"key":` there, that is
 * what read_key would have read, in one comparison. */
static int read_stage_object(struct reader *r, struct stage_ctx *c)
{
    uint64_t frame = r->next_frame++;
    unsigned seen = 0;
    r->p++; /* '{' */
    skip_ws(r);
    if (r->p < r->end && *r->p == '}') {
        r->p++;
        return 0;
    }
    int prev = N_FIELDS + 1; /* the object's start in r->follow */
    for (;;) {
        int which = -1;
        skip_ws_if_any(r);
        int guess = r->follow[prev];
        if (guess >= 0 && quoted_at(r->p, r->end, guess)) {
            which = guess;
            r->p += stage_quoted_len[guess];
        }
        const char *k = NULL;
        size_t klen = 0;
        if (which < 0) {
            if (read_key(r, &k, &klen) < 0)
                return -1;
            which = stage_key(k, klen);
        }
        if (which >= 0) {
            r->follow[prev] = (signed char)which;
            prev = which;
            if (seen & (1u << which))
                return syntax_error(r, "duplicate object key");
            seen |= 1u << which;
            skip_ws_if_any(r);
            if (stage_member(r, c, which) < 0)
                return -1;
        } else {
            prev = N_FIELDS + 2; /* after an unknown key: no guess */
            if (memchr(k, '\0', klen) != NULL)
                return syntax_error(r, "NUL byte in object key not supported");
            if (dup_check(r, frame, k, klen) < 0)
                return -1;
            struct val v;
            if (any_value(r, &v) < 0)
                return -1;
        }
        /* A comma right after the value, the usual case, is what
         * next_or_close would take. */
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            continue;
        }
        if (next_or_close(r, '}') != 1)
            break;
    }
    return r->failed ? -1 : 0;
}

static int read_stages(struct reader *r)
{
    r->p++; /* '[' */
    skip_ws(r);
    if (r->p < r->end && *r->p == ']') {
        r->p++;
        return 0;
    }
    do {
        size_t i = r->n++;
        skip_ws(r);
        if (r->p < r->end && *r->p == '{') {
            /* Only what the members may leave unset: a memset of the
             * whole showed in profiles. */
            struct stage_ctx c;
            for (int k = 0; k < N_FIELDS; k++)
                c.f[k].type = V_ABSENT;
            c.s = NULL;
            c.name_bad = 0;
            c.name_off = 0;
            c.i = i;
            if (i < REMAT_MAX_STAGES) {
                if (i == r->cap) {
                    size_t cap = r->cap ? r->cap * 2 : 64;
                    if (cap > REMAT_MAX_STAGES)
                        cap = REMAT_MAX_STAGES;
                    struct remat_stage *st = realloc(r->stages, cap * sizeof *st);
                    if (st == NULL)
                        return nomem(r);
                    r->stages = st;
                    r->cap = cap;
                }
                c.s = &r->stages[i];
            }
            if (enter(r) < 0)
                return -1;
            if (r->depth > r->max_depth)
                r->max_depth = r->depth;
            int rc = read_stage_object(r, &c);
            r->depth--;
            if (rc < 0)
                return -1;
            /* Past the limit only the syntax matters: the count is the error. */
            if (c.s != NULL) {
                /* An arena offset until remat__profile_adopt makes it a pointer:
                 * the arena may move while it grows. */
                c.s->name = (const char *)(uintptr_t)c.name_off;
                check_stage(r, &c);
            }
        } else {
            struct val v;
            if (any_value(r, &v) < 0)
                return -1;
            if (i < REMAT_MAX_STAGES) {
                char ptr[128];
                snprintf(ptr, sizeof ptr, "%s/stages/%zu", r->prefix, i);
                note(r, rank(R_STAGE_SHAPE, i, 0), REMAT_EINVAL, ptr, "a stage must be an object");
                /* Keep the array dense so later indices line up. */
                if (i == r->cap) {
                    size_t cap = r->cap ? r->cap * 2 : 64;
                    if (cap > REMAT_MAX_STAGES)
                        cap = REMAT_MAX_STAGES;
                    struct remat_stage *st = realloc(r->stages, cap * sizeof *st);
                    if (st == NULL)
                        return nomem(r);
                    r->stages = st;
                    r->cap = cap;
                }
                memset(&r->stages[i], 0, sizeof r->stages[i]);
            }
        }
    } while (next_or_close(r, ']') == 1);
    return r->failed ? -1 : 0;
}

/* ---- the root --------------------------------------------------------- */

enum { K_FORMAT, K_INPUT, K_STAGES, K_BATCH, K_META };
static const char *const root_members[] = {"format", "input_bytes", "stages", "batch_size", "model",
                                           "dtype",  "device",      "driver", "libtorch"};
static const unsigned char root_member_len[] = {6, 11, 6, 10, 5, 5, 6, 6, 8};

static int root_member(struct reader *r, void *ctx, int which)
{
    (void)ctx;
    switch (which) {
    case K_FORMAT:
        if (r->p < r->end && *r->p == '"') {
            if (enter(r) < 0)
                return -1;
            const char *s;
            size_t len;
            int rc = read_string(r, &s, &len);
            r->depth--;
            if (rc < 0)
                return -1;
            r->format.type = V_STR;
            r->format_ok =
                len == strlen(REMAT_PROFILE_FORMAT) && memcmp(s, REMAT_PROFILE_FORMAT, len) == 0;
            return 0;
        }
        return any_value(r, &r->format);
    case K_INPUT:
        return any_value(r, &r->input);
    case K_STAGES:
        if (r->p < r->end && *r->p == '[') {
            r->stages_v.type = V_ARR;
            if (enter(r) < 0)
                return -1;
            if (r->depth > r->max_depth)
                r->max_depth = r->depth;
            int rc = read_stages(r);
            r->depth--;
            return rc;
        }
        return any_value(r, &r->stages_v);
    case K_BATCH:
        return any_value(r, &r->batch);
    default: {
        int m = which - K_META;
        if (r->p < r->end && *r->p == '"') {
            if (enter(r) < 0)
                return -1;
            const char *s;
            size_t len;
            int rc = read_string(r, &s, &len);
            r->depth--;
            if (rc < 0)
                return -1;
            r->meta[m].type = V_STR;
            r->meta_len[m] = len;
            if (len <= REMAT_MAX_NAME) {
                r->meta_str[m] = malloc(len + 1);
                if (r->meta_str[m] == NULL)
                    return nomem(r);
                memcpy(r->meta_str[m], s, len);
                r->meta_str[m][len] = '\0';
            }
            return 0;
        }
        return any_value(r, &r->meta[m]);
    }
    }
}

/* The top-level checks of remat_profile_from_json, in its order (their
 * ranks put them before or after the stage errors already noted). */
static void check_root(struct reader *r)
{
    char ptr[128];
    const char *pre = r->prefix;
    if (r->format.type != V_ABSENT && !(r->format.type == V_STR && r->format_ok))
        note(r, rank(R_FORMAT, 0, 0), REMAT_EINVAL, top_pointer(ptr, sizeof ptr, pre, "format"),
             "format must be \"%s\"", REMAT_PROFILE_FORMAT);
    const struct val *in = &r->input;
    uint64_t rk = rank(R_INPUT, 0, 0);
    top_pointer(ptr, sizeof ptr, pre, "input_bytes");
    if (in->type == V_ABSENT)
        note(r, rk, REMAT_EINVAL, ptr, "%s is missing", "input_bytes");
    else if (in->type != V_INT)
        note(r, rk, REMAT_EINVAL, ptr, "%s must be an integer byte count", "input_bytes");
    else if (in->i < 0)
        note(r, rk, REMAT_EINVAL, ptr, "%s must not be negative", "input_bytes");
    else if (in->i > REMAT_MAX_BYTES)
        note(r, rk, REMAT_ELIMIT, ptr, "%s is over the limit of 2^60 bytes", "input_bytes");
    rk = rank(R_STAGES, 0, 0);
    snprintf(ptr, sizeof ptr, "%s/stages", pre);
    if (r->stages_v.type == V_ABSENT)
        note(r, rk, REMAT_EINVAL, ptr, "stages is missing");
    else if (r->stages_v.type != V_ARR)
        note(r, rk, REMAT_EINVAL, ptr, "stages must be an array");
    else if (r->n == 0)
        note(r, rk, REMAT_EINVAL, ptr, "a profile needs at least one stage");
    else if (r->n > REMAT_MAX_STAGES)
        note(r, rk, REMAT_ELIMIT, ptr, "%zu stages is over the limit of %d", r->n,
             REMAT_MAX_STAGES);
    for (int m = 0; m < N_META; m++) {
        const char *key = meta_keys[m];
        enum vtype t = r->meta[m].type;
        if (t == V_ABSENT || t == V_NULL)
            continue;
        top_pointer(ptr, sizeof ptr, pre, key);
        if (t != V_STR)
            note(r, rank(R_META, 0, (unsigned)m), REMAT_EINVAL, ptr, "%s must be a string", key);
        else if (r->meta_len[m] > REMAT_MAX_NAME)
            note(r, rank(R_META, 0, (unsigned)m), REMAT_ELIMIT, ptr, "%s is longer than %d bytes",
                 key, REMAT_MAX_NAME);
    }
    if (r->batch.type != V_ABSENT && r->batch.type != V_NULL &&
        (r->batch.type != V_INT || r->batch.i < 0))
        note(r, rank(R_BATCH, 0, 0), REMAT_EINVAL, top_pointer(ptr, sizeof ptr, pre, "batch_size"),
             "batch_size must be a non-negative integer");
    if (r->best > rank(R_TOTAL, 0, 0)) {
        struct remat_profile tmp;
        memset(&tmp, 0, sizeof tmp);
        tmp.input_bytes = in->i;
        tmp.n_stages = r->n;
        tmp.stages = r->stages;
        int64_t total;
        if (remat__profile_total_bytes(&tmp, &total) < 0) {
            snprintf(ptr, sizeof ptr, "%s/stages", pre);
            note(r, rank(R_TOTAL, 0, 0), REMAT_ELIMIT, ptr,
                 "the profile's byte counts add up to more than 2^60");
        }
    }
}

static void reader_free(struct reader *r)
{
    free(r->scratch);
    free(r->tab);
    free(r->keys);
    free(r->stages);
    free(r->names);
    for (int m = 0; m < N_META; m++)
        free(r->meta_str[m]);
}

struct remat_profile *remat__profile_parse(const char *text, size_t len, const char *pointer_prefix,
                                           int *syntax, int *max_depth, size_t *consumed,
                                           struct remat_error *err)
{
    struct reader r;
    memset(&r, 0, sizeof r);
    r.start = r.p = text;
    r.end = text + len;
    r.prefix = pointer_prefix != NULL ? pointer_prefix : "";
    r.err = err;
    r.syntax = syntax;
    r.best = rank(R_NONE, 0, 0);
    memset(r.follow, -1, sizeof r.follow);
    if (syntax != NULL)
        *syntax = 0;
    struct remat_profile *p = NULL;
    skip_ws(&r);
    if (r.p >= r.end || (*r.p != '{' && *r.p != '[')) {
        syntax_error(&r, "'[' or '{' expected");
        goto out;
    }
    if (*r.p == '[') {
        struct val v;
        if (any_value(&r, &v) < 0)
            goto out;
        char ptr[128];
        snprintf(ptr, sizeof ptr, "%s", r.prefix);
        note(&r, rank(R_ROOT, 0, 0), REMAT_EINVAL, ptr, "a profile must be a JSON object");
    } else {
        r.depth = 1;
        r.max_depth = 1;
        if (read_object(&r, root_members, root_member_len, 9, root_member, NULL) < 0)
            goto out;
        r.depth = 0;
    }
    skip_ws(&r);
    if (consumed != NULL)
        *consumed = (size_t)(r.p - text);
    else if (r.p < r.end) {
        syntax_error(&r, "end of file expected");
        goto out;
    }
    if (r.best > rank(R_ROOT, 0, 0))
        check_root(&r);
    if (max_depth != NULL)
        *max_depth = r.max_depth;
    if (r.best != rank(R_NONE, 0, 0)) {
        if (err != NULL)
            *err = r.bad;
        goto out;
    }
    p = remat__profile_adopt(r.stages, r.n, r.names, err);
    r.stages = NULL; /* stolen, even on failure */
    r.names = NULL;
    if (p == NULL)
        goto out;
    p->model = r.meta_str[0];
    p->dtype = r.meta_str[1];
    p->device = r.meta_str[2];
    p->driver = r.meta_str[3];
    p->libtorch = r.meta_str[4];
    memset(r.meta_str, 0, sizeof r.meta_str);
    p->input_bytes = r.input.i;
    if (r.batch.type == V_INT)
        p->batch_size = r.batch.i;
out:
    reader_free(&r);
    return p;
}

struct remat_profile *remat_profile_parse(const char *text, size_t len, const char *pointer_prefix,
                                          struct remat_error *err)
{
    return remat__profile_parse(text, len, pointer_prefix, NULL, NULL, NULL, err);
}
