/* plan_dump.c - a plan's JSON text written directly, without jansson's tree.
 *
 * The service answers thousands of plans a second; building the tree of
 * remat_plan_to_json and printing it cost more than solving.  This writes
 * the very bytes json_dumps(remat_plan_to_json(...), JSON_COMPACT) writes:
 * the same keys in the same order, integers in decimal, and reals as
 * jansson prints them ("%.17g", then ".0" when neither '.' nor 'e' is
 * there, then no '+' and no leading zeros in the exponent).  test_plan_dump
 * compares the two byte for byte.  Nested min-time plans describe their
 * segments with remat__nested_segments_json, printed by jansson: that tree
 * is small and only those plans have it. */
#include <math.h>
#include <stdio.h>

#include "mintime.h"

/* curl's dynbuf rule: the buffer has a maximum.  A plan of REMAT_MAX_STAGES
 * stages is at most a few hundred megabytes of text. */
#define MAX_TEXT ((size_t)1 << 31)

struct buf {
    char *s;
    size_t len, cap;
    int bad; /* out of memory or over MAX_TEXT: the text is abandoned */
};

/* Makes room for `more` bytes and the final NUL past b->len: the slow
 * part of reserve(). */
static int grow(struct buf *b, size_t more)
{
    if (b->bad)
        return -1;
    if (b->len + more + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + more + 1)
        cap *= 2;
    if (cap > MAX_TEXT) {
        if (b->len + more + 1 > MAX_TEXT) {
            b->bad = 1;
            return -1;
        }
        cap = MAX_TEXT;
    }
    char *s = realloc(b->s, cap);
    if (s == NULL) {
        b->bad = 1;
        return -1;
    }
    b->s = s;
    b->cap = cap;
    return 0;
}

/* Room for `more` bytes: nearly always there, checked inline.  After a
 * failure the text is abandoned (b->bad), so what is written to room that
 * was there anyway does not matter. */
static inline int reserve(struct buf *b, size_t more)
{
    if (b->len + more + 1 <= b->cap)
        return 0;
    return grow(b, more);
}

static void put(struct buf *b, const char *s, size_t n)
{
    if (reserve(b, n) < 0)
        return;
    memcpy(b->s + b->len, s, n);
    b->len += n;
}

#define PUT_LIT(b, lit) put((b), (lit), sizeof(lit) - 1)

/* Appends without a check: the caller reserved the room. */
#define RAW_LIT(b, lit)                                                                            \
    (memcpy((b)->s + (b)->len, (lit), sizeof(lit) - 1), (b)->len += sizeof(lit) - 1)

static void put_str(struct buf *b, const char *s)
{
    put(b, s, strlen(s));
}

/* Decimal digits of u. */
static inline int digits_of(uint64_t u)
{
    int d = 1;
    for (uint64_t p = 10; d < 20 && u >= p; p *= 10)
        d++;
    return d;
}

/* Bytes put_int writes for v. */
static inline size_t int_len(int64_t v)
{
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    return (size_t)digits_of(u) + (v < 0);
}

/* Writes v as "%lld" does at q, into room the caller reserved (int_len(v)
 * bytes), two digits a step; returns the end. */
static inline char *write_int(char *q, int64_t v)
{
    static const char pairs[] =
        "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
        "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
        "8081828384858687888990919293949596979899";
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    if (v < 0)
        *q++ = '-';
    char *end = q + digits_of(u), *e = end;
    while (u >= 100) {
        unsigned r = (unsigned)(u % 100);
        u /= 100;
        e -= 2;
        e[0] = pairs[2 * r];
        e[1] = pairs[2 * r + 1];
    }
    if (u >= 10) {
        e[-2] = pairs[2 * u];
        e[-1] = pairs[2 * u + 1];
    } else {
        e[-1] = (char)('0' + u);
    }
    return end;
}

static inline void raw_int(struct buf *b, int64_t v)
{
    b->len = (size_t)(write_int(b->s + b->len, v) - b->s);
}

/* An integer as json_dumps prints a json_int_t ("%lld").  It asks for
 * room for the longest one (20 bytes): the text's one limit, MAX_TEXT, is
 * then met or missed exactly where it always was, and so are the reserves
 * below, which ask for the same room as the puts they stand for. */
static void put_int(struct buf *b, int64_t v)
{
    if (reserve(b, 20) < 0)
        return;
    raw_int(b, v);
}

/* "%.17g" of v written without printf, for the reals a plan usually
 * reports (times in milliseconds, printed without an exponent: 1e-4 <=
 * v < 1e17).  Returns the length written to out, or 0 for any other v,
 * which then goes to snprintf.
 *
 * %.17g is v's 17 significant decimal digits, correctly rounded (ties to
 * even, as glibc rounds in the default mode), then trailing zeros and a
 * bare point dropped.  With v = M * 2^E exactly (M < 2^53) and X the
 * decimal exponent of v, the digits are round(M * 10^(16-X) * 2^E): for
 * X >= -5 that product is at most 2^53 * 10^21 < 2^124, so it is exact in
 * 128 bits, and the shift by -E (at most 70 here) leaves the remainder
 * that decides the rounding.  tests/test_plan_dump_reals compares the two
 * on a million values, ties included. */
static size_t fmt_17g(double v, char *out)
{
#ifndef __SIZEOF_INT128__
    /* No 128-bit integers here: every real goes to snprintf. */
    (void)v;
    (void)out;
    return 0;
#else
    if (!(v >= 1e-5 && v < 1e18))
        return 0;
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    uint64_t mant = (bits & (((uint64_t)1 << 52) - 1)) | ((uint64_t)1 << 52);
    int e2 = (int)((bits >> 52) & 0x7FF) - 1075;
    const uint64_t lo = UINT64_C(10000000000000000), hi = UINT64_C(100000000000000000);
    /* X estimated from the binary exponent (log10(2) is 0.30103), then
     * moved until the floor of the scaled value has 17 digits. */
    int x = (int)((e2 + 52) * 30103L / 100000L) - ((e2 + 52) < 0);
    unsigned __int128 q = 0, rem = 0, half = 0;
    for (int tries = 0;; tries++) {
        int s = 16 - x;
        if (tries > 4 || s < 0 || s > 21)
            return 0;
        unsigned __int128 a = mant;
        for (int k = 0; k < s; k++)
            a *= 10;
        if (e2 >= 0) {
            q = a << e2;
            rem = half = 0;
        } else {
            int sh = -e2;
            q = a >> sh;
            rem = a & ((((unsigned __int128)1) << sh) - 1);
            half = ((unsigned __int128)1) << (sh - 1);
        }
        if (q >= hi)
            x++;
        else if (q < lo)
            x--;
        else
            break;
    }
    uint64_t d = (uint64_t)q;
    if (rem > half || (rem == half && half != 0 && (d & 1)))
        d++;
    if (d == hi) {
        d = lo;
        x++;
    }
    if (x < -4 || x > 16)
        return 0;
    char dig[17];
    for (int k = 16; k >= 0; k--) {
        dig[k] = (char)('0' + d % 10);
        d /= 10;
    }
    int last = 16; /* the last digit kept: trailing zeros go */
    while (last > 0 && dig[last] == '0')
        last--;
    size_t n = 0;
    if (x >= 0) {
        memcpy(out, dig, (size_t)x + 1);
        n = (size_t)x + 1;
        if (last > x) {
            out[n++] = '.';
            memcpy(out + n, dig + x + 1, (size_t)(last - x));
            n += (size_t)(last - x);
        }
    } else {
        out[n++] = '0';
        out[n++] = '.';
        for (int k = 0; k < -x - 1; k++)
            out[n++] = '0';
        memcpy(out + n, dig, (size_t)last + 1);
        n += (size_t)last + 1;
    }
    return n;
#endif
}

/* A real as jansson's jsonp_dtostr prints it at its default precision. */
static void put_real(struct buf *b, double v)
{
    char tmp[64];
    size_t fast = fmt_17g(v, tmp);
    if (fast > 0) {
        /* No exponent here: only a missing point needs jansson's ".0". */
        if (memchr(tmp, '.', fast) == NULL) {
            tmp[fast++] = '.';
            tmp[fast++] = '0';
        }
        put(b, tmp, fast);
        return;
    }
    int n = snprintf(tmp, sizeof tmp, "%.17g", v);
    if (n < 0 || (size_t)n >= sizeof tmp - 3) {
        b->bad = 1;
        return;
    }
    size_t len = (size_t)n;
    if (strchr(tmp, '.') == NULL && strchr(tmp, 'e') == NULL) {
        tmp[len++] = '.';
        tmp[len++] = '0';
        tmp[len] = '\0';
    }
    char *start = strchr(tmp, 'e');
    if (start != NULL) {
        start++;
        char *end = start + 1;
        if (*start == '-')
            start++;
        while (*end == '0')
            end++;
        if (end != start) {
            memmove(start, end, len - (size_t)(end - tmp) + 1);
            len -= (size_t)(end - start);
        }
    }
    put(b, tmp, len);
}

/* "[x,y]", or "," then that. */
static void put_pair(struct buf *b, int comma, int64_t x, int64_t y)
{
    if (reserve(b, (size_t)comma + 2 + int_len(x) + 20) < 0)
        return;
    if (comma)
        RAW_LIT(b, ",");
    RAW_LIT(b, "[");
    raw_int(b, x);
    RAW_LIT(b, ",");
    raw_int(b, y);
    RAW_LIT(b, "]");
}

char *remat_plan_dumps(const struct remat_profile *profile, const struct remat_plan *plan,
                       size_t *len_out)
{
    /* json_real refuses what JSON cannot say, so remat_plan_to_json fails. */
    if (!isfinite(plan->recompute_ms) || !isfinite(plan->total_ms))
        return NULL;
    struct buf b = {NULL, 0, 0, 0};
    size_t guess = 512 + 40 * plan->schedule.n_ops + 48 * (plan->n_checkpoints + 1);
    if (reserve(&b, guess < MAX_TEXT / 2 ? guess : MAX_TEXT / 2) < 0)
        return NULL;
    PUT_LIT(&b, "{\"algorithm\":\"");
    put_str(&b, remat_algorithm_name(plan->algorithm));
    PUT_LIT(&b, "\"");
    if (plan->single_level) {
        PUT_LIT(&b, ",\"checkpoints\":[");
        for (size_t k = 0; k < plan->n_checkpoints; k++) {
            int64_t c = (int64_t)plan->checkpoints[k];
            if (reserve(&b, (k > 0) + 20) < 0)
                break;
            if (k > 0)
                RAW_LIT(&b, ",");
            raw_int(&b, c);
        }
        /* Segment (prev, end] of stages is stages prev+1..end, modules
         * prev..end-1 of an nn.Sequential (as in remat_plan_to_json). */
        PUT_LIT(&b, "],\"segments\":[");
        size_t prev = 0;
        for (size_t k = 0; k <= plan->n_checkpoints; k++) {
            size_t end = k < plan->n_checkpoints ? plan->checkpoints[k] : plan->n_stages;
            put_pair(&b, k > 0, (int64_t)prev + 1, (int64_t)end);
            prev = end;
        }
        PUT_LIT(&b, "],\"torch_segments\":[");
        prev = 0;
        for (size_t k = 0; k <= plan->n_checkpoints; k++) {
            size_t end = k < plan->n_checkpoints ? plan->checkpoints[k] : plan->n_stages;
            put_pair(&b, k > 0, (int64_t)prev, (int64_t)end);
            prev = end;
        }
        PUT_LIT(&b, "]");
    } else {
        json_t *nested = remat__nested_segments_json(profile, plan);
        char *text = nested != NULL ? json_dumps(nested, JSON_COMPACT) : NULL;
        json_decref(nested);
        if (text == NULL) {
            free(b.s);
            return NULL;
        }
        PUT_LIT(&b, ",\"nested_segments\":");
        put_str(&b, text);
        free(text);
    }
    PUT_LIT(&b, ",\"objective\":{\"model\":\"");
    put_str(&b, remat_model_name(plan->objective_model));
    PUT_LIT(&b, "\",\"value\":");
    put_int(&b, plan->objective_value);
    PUT_LIT(&b, "},\"peak_bytes\":");
    put_int(&b, plan->peak_bytes);
    PUT_LIT(&b, ",\"store_all_peak_bytes\":");
    put_int(&b, plan->store_all_peak_bytes);
    PUT_LIT(&b, ",\"recompute_ms\":");
    put_real(&b, plan->recompute_ms);
    PUT_LIT(&b, ",\"total_ms\":");
    put_real(&b, plan->total_ms);
    if (plan->algorithm == REMAT_ALG_MIN_TIME) {
        PUT_LIT(&b, ",\"budget_bytes\":");
        put_int(&b, plan->budget_bytes);
    }
    PUT_LIT(&b, ",\"schedule\":[");
    /* Each op's opening, padded to one size so that it is copied in one
     * fixed-size move (the reserve below always covers 24 bytes). */
#define OP(kind, name)                                                                             \
    {"{\"op\":\"" name "\",\"stage\":", sizeof("{\"op\":\"" name "\",\"stage\":") - 1},
    static const struct {
        char text[24];
        size_t len;
    } ops[REMAT__N_OP_KINDS + 1] = {REMAT__FOR_EACH_OP(OP) OP(-1, "?")};
#undef OP
    /* Each op asks for the room its puts asked for (a 20-byte integer, the
     * brace within it).  When all of them fit under MAX_TEXT at once, none
     * can miss it, so the room is reserved once and the ops are written
     * unchecked; else each asks in turn. */
    const struct remat_schedule *s = &plan->schedule;
    const size_t per_op = 1 + 23 + 20;
    size_t k = 0;
    if (s->n_ops < MAX_TEXT / per_op && b.len + s->n_ops * per_op + 1 <= MAX_TEXT &&
        reserve(&b, s->n_ops * per_op) == 0) {
        char *q = b.s + b.len;
        for (; k < s->n_ops; k++) {
            uint8_t kind = s->ops[k].kind < REMAT__N_OP_KINDS ? s->ops[k].kind : REMAT__N_OP_KINDS;
            if (k > 0)
                *q++ = ',';
            memcpy(q, ops[kind].text, sizeof ops[kind].text);
            q = write_int(q + ops[kind].len, (int64_t)s->ops[k].stage);
            *q++ = '}';
        }
        b.len = (size_t)(q - b.s);
    }
    for (; k < s->n_ops; k++) {
        uint8_t kind = s->ops[k].kind < REMAT__N_OP_KINDS ? s->ops[k].kind : REMAT__N_OP_KINDS;
        size_t len = ops[kind].len;
        if (reserve(&b, (k > 0) + len + 20) < 0)
            break;
        char *q = b.s + b.len;
        if (k > 0)
            *q++ = ',';
        memcpy(q, ops[kind].text, sizeof ops[kind].text);
        q = write_int(q + len, (int64_t)s->ops[k].stage);
        *q++ = '}';
        b.len = (size_t)(q - b.s);
    }
    /* The exports: a small object, printed by jansson like nested_segments. */
    json_t *ex = remat__plan_exports_json(profile, plan);
    char *ex_text = ex != NULL ? json_dumps(ex, JSON_COMPACT) : NULL;
    json_decref(ex);
    if (ex_text == NULL) {
        free(b.s);
        return NULL;
    }
    PUT_LIT(&b, "],\"exports\":");
    put_str(&b, ex_text);
    free(ex_text);
    PUT_LIT(&b, "}");
    if (b.bad) {
        free(b.s);
        return NULL;
    }
    b.s[b.len] = '\0';
    if (len_out != NULL)
        *len_out = b.len;
    return b.s;
}
