/* plan_dump.c - a plan's JSON text written directly, without jansson's tree.
 *
 * The service answers thousands of plans a second; building the tree of
 * remat_plan_to_json and printing it cost more than solving.  This writes
 * the very bytes rematx_json_dumps(remat_plan_to_json(...), JSON_COMPACT)
 * writes: the same keys in the same order, integers in decimal, and reals
 * as rematx_real_text prints them (the shortest text that reads back, in
 * jansson's layout).  test_plan_dump compares the two byte for byte.  Nested min-time plans
 * describe their segments with remat__nested_segments_json, printed by jansson: that tree is small
 * and only those plans have it. */
#include <math.h>
#include <stdio.h>

#include "solve_mintime.h"
#include "rematx/dynbuf.h"
#include "rematx/real.h"

/* curl's dynbuf rule: the buffer has a maximum.  A plan of REMAT_MAX_STAGES
 * stages is at most a few hundred megabytes of text. */
#define MAX_TEXT ((size_t)1 << 31)

/* The text is built in rematx's one bounded buffer (curl's dynbuf rule):
 * after a failure (out of memory, over MAX_TEXT) it is abandoned, so what
 * is written to room that was there anyway does not matter. */
/* Room for `more` bytes and the final NUL: nearly always there, checked
 * inline. */
static inline int reserve(struct rematx_dynbuf *b, size_t more)
{
    return rematx_dyn_room(b, more) ? 0 : -1;
}

static void put(struct rematx_dynbuf *b, const char *s, size_t n)
{
    if (reserve(b, n) < 0)
        return;
    memcpy(b->buf + b->len, s, n);
    b->len += n;
}

#define PUT_LIT(b, lit) put((b), (lit), sizeof(lit) - 1)

/* Appends without a check: the caller reserved the room. */
#define RAW_LIT(b, lit)                                                                            \
    (memcpy((b)->buf + (b)->len, (lit), sizeof(lit) - 1), (b)->len += sizeof(lit) - 1)

static void put_str(struct rematx_dynbuf *b, const char *s)
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

static inline void raw_int(struct rematx_dynbuf *b, int64_t v)
{
    b->len = (size_t)(write_int(b->buf + b->len, v) - b->buf);
}

/* An integer as json_dumps prints a json_int_t ("%lld").  It asks for
 * room for the longest one (20 bytes): the text's one limit, MAX_TEXT, is
 * then met or missed exactly where it always was, and so are the reserves
 * below, which ask for the same room as the puts they stand for. */
static void put_int(struct rematx_dynbuf *b, int64_t v)
{
    if (reserve(b, 20) < 0)
        return;
    raw_int(b, v);
}

/* A real as rematx_real_text prints it: the shortest text that reads back
 * to the same double, in jansson's layout. */
static void put_real(struct rematx_dynbuf *b, double v)
{
    char tmp[REMATX_REAL_MAX];
    put(b, tmp, rematx_real_text(v, tmp));
}

/* "[x,y]", or "," then that. */
static void put_pair(struct rematx_dynbuf *b, int comma, int64_t x, int64_t y)
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
    if (!isfinite(plan->recompute_ms) || !isfinite(plan->total_ms) ||
        !isfinite(plan->optimality_gap))
        return NULL;
    struct rematx_dynbuf b;
    rematx_dyn_init(&b, MAX_TEXT);
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
        char *text = nested != NULL ? rematx_json_dumps(nested, JSON_COMPACT) : NULL;
        json_decref(nested);
        if (text == NULL) {
            rematx_dyn_free(&b);
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
        PUT_LIT(&b, ",\"optimality_gap\":");
        put_real(&b, plan->optimality_gap);
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
        char *q = b.buf + b.len;
        for (; k < s->n_ops; k++) {
            uint8_t kind = s->ops[k].kind < REMAT__N_OP_KINDS ? s->ops[k].kind : REMAT__N_OP_KINDS;
            if (k > 0)
                *q++ = ',';
            memcpy(q, ops[kind].text, sizeof ops[kind].text);
            q = write_int(q + ops[kind].len, (int64_t)s->ops[k].stage);
            *q++ = '}';
        }
        b.len = (size_t)(q - b.buf);
    }
    for (; k < s->n_ops; k++) {
        uint8_t kind = s->ops[k].kind < REMAT__N_OP_KINDS ? s->ops[k].kind : REMAT__N_OP_KINDS;
        size_t len = ops[kind].len;
        if (reserve(&b, (k > 0) + len + 20) < 0)
            break;
        char *q = b.buf + b.len;
        if (k > 0)
            *q++ = ',';
        memcpy(q, ops[kind].text, sizeof ops[kind].text);
        q = write_int(q + len, (int64_t)s->ops[k].stage);
        *q++ = '}';
        b.len = (size_t)(q - b.buf);
    }
    /* The exports: their one writer appends the object's text. */
    PUT_LIT(&b, "],\"exports\":");
    if (remat__plan_exports_text(profile, plan, &b) != REMAT_OK) {
        rematx_dyn_free(&b);
        return NULL;
    }
    PUT_LIT(&b, "}");
    if (rematx_dyn_error(&b)) {
        rematx_dyn_free(&b);
        return NULL;
    }
    rematx_dyn_setlen(&b, b.len);
    return rematx_dyn_take(&b, len_out);
}
