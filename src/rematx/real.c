/* real.c - reals printed as the shortest text that reads back to the same
 * double (real.h says the layout and who uses it).
 *
 * For the reals remat prints most (times in milliseconds, 1e-5 <= v <
 * 1e15) the digits come from exact 128-bit integer arithmetic, with no
 * printf and no strtod: a plan is written thousands of times a second.
 * Every other real goes through snprintf and strtod.  tests/test_real
 * holds the two to the same digits on a million doubles. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "remat.h"
#include "rematx/dynbuf.h"
#include "rematx/real.h"

/* The digits of a real: dig[0..n) without trailing zeros, dig[0] not 0,
 * and x the decimal exponent of dig[0]. */
struct digits {
    char dig[20];
    int n;
    int x;
};

static void strip_zeros(struct digits *d)
{
    while (d->n > 1 && d->dig[d->n - 1] == '0')
        d->n--;
}

#ifdef __SIZEOF_INT128__
typedef unsigned __int128 u128;

/* 10^0 to 10^19, the powers of ten a uint64_t holds. */
static const uint64_t pow10_u64[20] = {UINT64_C(1),
                                       UINT64_C(10),
                                       UINT64_C(100),
                                       UINT64_C(1000),
                                       UINT64_C(10000),
                                       UINT64_C(100000),
                                       UINT64_C(1000000),
                                       UINT64_C(10000000),
                                       UINT64_C(100000000),
                                       UINT64_C(1000000000),
                                       UINT64_C(10000000000),
                                       UINT64_C(100000000000),
                                       UINT64_C(1000000000000),
                                       UINT64_C(10000000000000),
                                       UINT64_C(100000000000000),
                                       UINT64_C(1000000000000000),
                                       UINT64_C(10000000000000000),
                                       UINT64_C(100000000000000000),
                                       UINT64_C(1000000000000000000),
                                       UINT64_C(10000000000000000000)};

/* 10^s for 0 <= s <= 38. */
static u128 pow10_u128(int s)
{
    if (s < 20)
        return pow10_u64[s];
    return (u128)pow10_u64[19] * pow10_u64[s - 19];
}

/* The shortest digits of a (1e-5 <= a < 1e15), exactly.
 *
 * With a = mant * 2^-sh (2^52 <= mant < 2^53, sh >= 1) and s decimal
 * places, A = mant * 10^s is a * 10^s * 2^sh, exact in 128 bits while
 * s <= 21.  The P-digit decimal nearest a is D / 10^s with D = A / 2^sh
 * rounded half to even, s = P - 1 - X.  It reads back as a when it lies
 * inside a's rounding interval: half an ulp either side, which scaled by
 * 10^s * 2^sh is 10^s / 2, except below a power of two, where the next
 * double down is half as far (10^s / 4); a decimal right on the edge
 * reads back as the double of even mantissa.  For a normal double no two
 * decimals of 15 or fewer digits fit in one interval, so when the nearest
 * 15-digit decimal reads back, it with its zeros dropped is the shortest;
 * otherwise 16 digits, then 17, which always do. */
static int shortest_fast(double a, struct digits *out)
{
    if (!(a >= 1e-5 && a < 1e15))
        return 0;
    uint64_t bits;
    memcpy(&bits, &a, sizeof bits);
    uint64_t mant = (bits & ((UINT64_C(1) << 52) - 1)) | (UINT64_C(1) << 52);
    int sh = 1075 - (int)((bits >> 52) & 0x7FF);
    /* X estimated from the binary exponent (log10(2) is 0.30103), then
     * moved until 10^X <= a < 10^(X+1), told by the 17-digit floor. */
    int e = 52 - sh;
    int x = (int)(e * 30103L / 100000L) - (e < 0);
    const u128 lo17 = pow10_u128(16), hi17 = pow10_u128(17);
    for (int tries = 0;; tries++) {
        int s = 16 - x;
        if (tries > 4 || s < 0 || s > 21)
            return 0;
        u128 q = (mant * pow10_u128(s)) >> sh;
        if (q >= hi17)
            x++;
        else if (q < lo17)
            x--;
        else
            break;
    }
    if (x < -5 || x > 14)
        return 0;
    int pow2 = mant == UINT64_C(1) << 52;
    for (int p = 15; p <= 17; p++) {
        int s = p - 1 - x;
        u128 ten = pow10_u128(s);
        u128 big = mant * ten;
        u128 d = big >> sh;
        u128 rem = big & (((u128)1 << sh) - 1);
        u128 half = (u128)1 << (sh - 1);
        if (rem > half || (rem == half && (d & 1)))
            d++;
        u128 c = d << sh;
        int ok;
        if (c >= big) {
            u128 diff = c - big;
            ok = 2 * diff < ten || (2 * diff == ten && !(mant & 1));
        } else {
            u128 diff = big - c;
            u128 k = pow2 ? 4 * diff : 2 * diff;
            ok = k < ten || (k == ten && !(mant & 1));
        }
        if (!ok && p < 17)
            continue;
        out->x = x;
        if (d == pow10_u128(p)) { /* 9.99... rounded up to 10 */
            d = pow10_u128(p - 1);
            out->x++;
        }
        uint64_t v = (uint64_t)d;
        for (int k = p - 1; k >= 0; k--) {
            out->dig[k] = (char)('0' + v % 10);
            v /= 10;
        }
        out->n = p;
        strip_zeros(out);
        return 1;
    }
    return 0; /* not reached: 17 digits always read back */
}
#else
static int shortest_fast(double a, struct digits *out)
{
    (void)a;
    (void)out;
    return 0;
}
#endif

/* The shortest digits of a (finite, > 0) by printf and strtod: the least
 * precision whose correctly rounded text reads back.  For a normal double
 * that is never below 15 digits unless the 15-digit text, zeros dropped,
 * is it (shortest_fast says why); subnormals start at 1. */
static void shortest_slow(double a, struct digits *out)
{
    char buf[64];
    for (int p = a >= DBL_MIN ? 15 : 1; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, a);
        if (p < 17 && strtod(buf, NULL) != a)
            continue;
        /* d.ddde[+-]XX */
        int n = 0;
        const char *q = buf;
        for (; *q != 'e'; q++)
            if (*q != '.')
                out->dig[n++] = *q;
        out->n = n;
        out->x = atoi(q + 1);
        strip_zeros(out);
        return;
    }
}

size_t rematx_real_text(double v, char *out)
{
    if (!isfinite(v)) {
        int n = snprintf(out, REMATX_REAL_MAX, "%g", v);
        return n > 0 ? (size_t)n : 0;
    }
    size_t n = 0;
    if (signbit(v)) {
        out[n++] = '-';
        v = -v;
    }
    if (v == 0) {
        memcpy(out + n, "0.0", 4);
        return n + 3;
    }
    struct digits d;
    if (!shortest_fast(v, &d))
        shortest_slow(v, &d);
    if (d.x >= -4 && d.x < 17) {
        if (d.x >= 0) {
            for (int k = 0; k <= d.x; k++)
                out[n++] = k < d.n ? d.dig[k] : '0';
            out[n++] = '.';
            if (d.n > d.x + 1) {
                memcpy(out + n, d.dig + d.x + 1, (size_t)(d.n - d.x - 1));
                n += (size_t)(d.n - d.x - 1);
            } else {
                out[n++] = '0';
            }
        } else {
            out[n++] = '0';
            out[n++] = '.';
            for (int k = 0; k < -d.x - 1; k++)
                out[n++] = '0';
            memcpy(out + n, d.dig, (size_t)d.n);
            n += (size_t)d.n;
        }
    } else {
        out[n++] = d.dig[0];
        if (d.n > 1) {
            out[n++] = '.';
            memcpy(out + n, d.dig + 1, (size_t)(d.n - 1));
            n += (size_t)(d.n - 1);
        }
        out[n++] = 'e';
        int x = d.x;
        if (x < 0) {
            out[n++] = '-';
            x = -x;
        }
        char t[8];
        int k = 0;
        do {
            t[k++] = (char)('0' + x % 10);
            x /= 10;
        } while (x > 0);
        while (k > 0)
            out[n++] = t[--k];
    }
    out[n] = '\0';
    return n;
}

static int is_num_byte(char c)
{
    return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

char *rematx_json_reals(const char *text, size_t len, size_t *len_out)
{
    /* A real's text here is at most REMATX_REAL_MAX - 1 bytes and at least
     * 3 in the input ("1e5"), so 8 times the input bounds the output. */
    struct rematx_dynbuf b;
    rematx_dyn_init(&b, len < SIZE_MAX / 16 ? 8 * len + 64 : SIZE_MAX / 2);
    size_t i = 0, start = 0;
    while (i < len) {
        char c = text[i];
        if (c == '"') {
            for (i++; i < len && text[i] != '"'; i++)
                if (text[i] == '\\')
                    i++;
            i++;
            continue;
        }
        if (c != '-' && (c < '0' || c > '9')) {
            i++;
            continue;
        }
        size_t j = i;
        int real = 0;
        while (j < len && is_num_byte(text[j])) {
            real |= text[j] == '.' || text[j] == 'e' || text[j] == 'E';
            j++;
        }
        if (real && j - i < 64) {
            char num[64], out[REMATX_REAL_MAX];
            memcpy(num, text + i, j - i);
            num[j - i] = '\0';
            size_t n = rematx_real_text(strtod(num, NULL), out);
            rematx_dyn_addn(&b, text + start, i - start);
            rematx_dyn_addn(&b, out, n);
            start = j;
        }
        i = j;
    }
    rematx_dyn_addn(&b, text + start, len - start);
    return rematx_dyn_take(&b, len_out);
}

char *rematx_json_dumps(const json_t *v, size_t flags)
{
    char *t = json_dumps(v, flags);
    if (t == NULL)
        return NULL;
    char *r = rematx_json_reals(t, strlen(t), NULL);
    free(t);
    return r;
}

int rematx_json_dumpf(const json_t *v, FILE *f, size_t flags)
{
    char *t = rematx_json_dumps(v, flags);
    if (t == NULL)
        return -1;
    int rc = fputs(t, f) == EOF ? -1 : 0;
    free(t);
    return rc;
}
