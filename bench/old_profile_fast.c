/* old_profile_fast.c - the streaming profile reader (src/profile_fast.c) as
 * it was before the change that bench/solve_bench measures against it
 * (commit bc3f384), kept callable so that `make bench` prints the old path
 * beside the new one in the same run.  It shares the lexer and the builder
 * with libremat, which that change left as they were.  Not part of
 * libremat: the bench alone links it.  Its only entry point is
 * bench_old_profile_parse (bench/solve_old.h). */
#include <stdint.h>
#include <stdio.h>

#include "profile_rules.h"
#include "solve_old.h"

#define N_FIELDS REMAT__N_STAGE_FIELDS
#define F_NAME N_FIELDS /* the stage member after the numeric ones */

struct reader {
    struct remat__lex lx;
    struct remat__pbuild pb;
    /* The stage member that last followed member k (N_FIELDS + 1: the
     * start of a stage, N_FIELDS + 2: an unknown key), -1 for none yet. */
    signed char follow[N_FIELDS + 3];
};

static int nomem(struct reader *r)
{
    return remat__lex_nomem(&r->lx);
}

/* A string value at lx->p, read one level deeper as remat__lex_value
 * reads it. */
static int read_string(struct remat__lex *lx, const char **s, size_t *len)
{
    if (remat__lex_enter(lx) < 0)
        return -1;
    int rc = remat__lex_string(lx, s, len);
    lx->depth--;
    return rc;
}

/* ---- stages ----------------------------------------------------------- */

/* The stage members as they appear in compact text, quotes and colon
 * included ("out_bytes": and so on, then "name":), and their lengths. */
#define QUOTED(key) "\"" #key "\":"
static const unsigned char stage_quoted_len[N_FIELDS + 1] = {
#define REMAT__X(m, kind, required, dflt) sizeof QUOTED(m) - 1,
    REMAT__STAGE_FIELDS(REMAT__X)
#undef REMAT__X
        sizeof QUOTED(name) -
    1};

/* Whether the n bytes at p hold the literal: with its length a constant,
 * a few loads, not a call. */
#define AT(p, end, lit)                                                                            \
    ((size_t)((end) - (p)) >= sizeof(lit) - 1 && memcmp(p, lit, sizeof(lit) - 1) == 0)

/* The member a stage key names (its field, F_NAME), or -1. */
static int stage_key(const char *k, size_t klen)
{
#define REMAT__X(m, kind, required, dflt)                                                          \
    if (klen == sizeof #m - 1 && memcmp(k, #m, sizeof #m - 1) == 0)                                \
        return REMAT__SF_##m;
    REMAT__STAGE_FIELDS(REMAT__X)
#undef REMAT__X
    if (klen == 4 && memcmp(k, "name", 4) == 0)
        return F_NAME;
    return -1;
}

/* Whether the text at p holds stage_quoted[which]. */
static inline int quoted_at(const char *p, const char *end, int which)
{
    switch (which) {
#define REMAT__X(m, kind, required, dflt)                                                          \
    case REMAT__SF_##m:                                                                            \
        return AT(p, end, QUOTED(m));
        REMAT__STAGE_FIELDS(REMAT__X)
#undef REMAT__X
    default:
        return AT(p, end, QUOTED(name));
    }
}

static int stage_member(struct reader *r, struct remat__pstage *c, int which)
{
    struct remat__lex *lx = &r->lx;
    if (which < N_FIELDS) {
        if (remat__lex_fast_number(lx, &c->f[which]))
            return 0;
        return remat__lex_value(lx, &c->f[which]);
    }
    /* The name: a string goes to the arena, null is the empty name. */
    if (lx->p < lx->end && *lx->p == '"') {
        const char *s;
        size_t len;
        /* A name of plain bytes, as names nearly always are, is read here
         * by the lexer's first loop; anything else goes to it. */
        const unsigned char *q = (const unsigned char *)lx->p + 1;
        const unsigned char *end = (const unsigned char *)lx->end;
        while (q < end && remat__lex_plain[*q])
            q++;
        if (lx->depth + 1 <= JSON_PARSER_MAX_DEPTH && q < end && *q == '"') {
            s = lx->p + 1;
            len = (size_t)((const char *)q - s);
            lx->p = (const char *)q + 1;
        } else {
            if (read_string(lx, &s, &len) < 0)
                return -1;
        }
        if (remat__pb_stage_name(&r->pb, c, s, len) < 0)
            return nomem(r);
        return 0;
    }
    struct remat__jval v;
    if (remat__lex_value(lx, &v) < 0)
        return -1;
    remat__pb_stage_name_other(c, v.type);
    return 0;
}

/* remat__lex_object() for a stage object opened at lx->p, with its members
 * matched by stage_key and read by stage_member: the same steps in the same
 * order, so the same answers and errors, without the generic key loop and
 * the indirect call.  Stages of one profile nearly always list their
 * members in one order, so the member that followed this one in the last
 * stage is tried first: when the text holds exactly `"key":` there, that is
 * what remat__lex_key would have read, in one comparison. */
static int read_stage_object(struct reader *r, struct remat__pstage *c)
{
    struct remat__lex *lx = &r->lx;
    uint64_t frame = lx->next_frame++;
    unsigned seen = 0;
    if (remat__lex_open(lx, '}'))
        return 0;
    int prev = N_FIELDS + 1; /* the object's start in r->follow */
    for (;;) {
        int which = -1;
        remat__lex_skip_ws_if_any(lx);
        int guess = r->follow[prev];
        if (guess >= 0 && quoted_at(lx->p, lx->end, guess)) {
            which = guess;
            lx->p += stage_quoted_len[guess];
        }
        const char *k = NULL;
        size_t klen = 0;
        if (which < 0) {
            if (remat__lex_key(lx, &k, &klen) < 0)
                return -1;
            which = stage_key(k, klen);
        }
        if (which >= 0) {
            r->follow[prev] = (signed char)which;
            prev = which;
            if (seen & (1u << which))
                return remat__lex_syntax_error(lx, "duplicate object key");
            seen |= 1u << which;
            remat__lex_skip_ws_if_any(lx);
            if (stage_member(r, c, which) < 0)
                return -1;
        } else {
            prev = N_FIELDS + 2; /* after an unknown key: no guess */
            if (remat__lex_unknown_member(lx, frame, k, klen) < 0)
                return -1;
        }
        /* A comma right after the value, the usual case, is what
         * remat__lex_next_or_close would take. */
        if (lx->p < lx->end && *lx->p == ',') {
            lx->p++;
            continue;
        }
        if (remat__lex_next_or_close(lx, '}') != 1)
            break;
    }
    return lx->failed ? -1 : 0;
}

static int read_stages(struct reader *r)
{
    struct remat__lex *lx = &r->lx;
    if (remat__lex_open(lx, ']'))
        return 0;
    do {
        remat__lex_skip_ws(lx);
        if (lx->p < lx->end && *lx->p == '{') {
            struct remat__pstage c;
            if (remat__pb_stage_begin(&r->pb, &c) < 0)
                return nomem(r);
            if (remat__lex_enter(lx) < 0)
                return -1;
            int rc = read_stage_object(r, &c);
            lx->depth--;
            if (rc < 0)
                return -1;
            remat__pb_stage_end(&r->pb, &c);
        } else {
            struct remat__jval v;
            if (remat__lex_value(lx, &v) < 0)
                return -1;
            if (remat__pb_stage_not_object(&r->pb) < 0)
                return nomem(r);
        }
    } while (remat__lex_next_or_close(lx, ']') == 1);
    return lx->failed ? -1 : 0;
}

/* ---- the root --------------------------------------------------------- */

/* A top-level member's value at lx->p, read as its kind wants. */
/* A member of the optimizer object. */
static int read_optim_member(struct remat__lex *lx, void *ctx, int which)
{
    struct reader *r = ctx;
    if (which == REMAT__OF_name && lx->p < lx->end && *lx->p == '"') {
        const char *s;
        size_t len;
        if (read_string(lx, &s, &len) < 0)
            return -1;
        remat__pb_optim_name(&r->pb, s, len);
        return 0;
    }
    struct remat__jval v;
    if (remat__lex_value(lx, &v) < 0)
        return -1;
    remat__pb_optim_value(&r->pb, which, &v);
    return 0;
}

static int read_root_member(struct remat__lex *lx, void *ctx, int which)
{
    struct reader *r = ctx;
    enum remat__root_kind kind = remat__root_kind[which];
    if ((kind == REMAT__ROOT_FORMAT || kind == REMAT__ROOT_META) && lx->p < lx->end &&
        *lx->p == '"') {
        const char *s;
        size_t len;
        if (read_string(lx, &s, &len) < 0)
            return -1;
        if (remat__pb_root_string(&r->pb, which, s, len) < 0)
            return nomem(r);
        return 0;
    }
    if (kind == REMAT__ROOT_STAGES && lx->p < lx->end && *lx->p == '[') {
        struct remat__jval v = {.type = REMAT__J_ARR};
        remat__pb_root_value(&r->pb, which, &v);
        if (remat__lex_enter(lx) < 0)
            return -1;
        int rc = read_stages(r);
        lx->depth--;
        return rc;
    }
    if (kind == REMAT__ROOT_OPTIMIZER && lx->p < lx->end && *lx->p == '{') {
        struct remat__jval v = {.type = REMAT__J_OBJ};
        remat__pb_root_value(&r->pb, which, &v);
        if (remat__lex_enter(lx) < 0)
            return -1;
        int rc = remat__lex_object(lx, remat__optim_key, remat__optim_key_len,
                                   REMAT__N_OPTIM_FIELDS, read_optim_member, r);
        lx->depth--;
        return rc;
    }
    struct remat__jval v;
    if (remat__lex_value(lx, &v) < 0)
        return -1;
    remat__pb_root_value(&r->pb, which, &v);
    return 0;
}

struct remat_profile *bench_old_profile_parse(const char *text, size_t len,
                                              const char *pointer_prefix, int *syntax,
                                              int *max_depth, size_t *consumed,
                                              struct remat_error *err)
{
    struct reader r;
    remat__lex_init(&r.lx, text, len, err, syntax);
    remat__pb_init(&r.pb, pointer_prefix);
    memset(r.follow, -1, sizeof r.follow);
    struct remat__lex *lx = &r.lx;
    struct remat_profile *p = NULL;
    remat__lex_skip_ws(lx);
    if (lx->p >= lx->end || (*lx->p != '{' && *lx->p != '[')) {
        remat__lex_syntax_error(lx, "'[' or '{' expected");
        goto out;
    }
    if (*lx->p == '[') {
        struct remat__jval v;
        if (remat__lex_value(lx, &v) < 0)
            goto out;
        remat__pb_root_not_object(&r.pb);
    } else {
        lx->depth = 1;
        lx->max_depth = 1;
        if (remat__lex_object(lx, remat__root_key, remat__root_key_len, REMAT__N_ROOT,
                              read_root_member, &r) < 0)
            goto out;
        lx->depth = 0;
    }
    remat__lex_skip_ws(lx);
    if (consumed != NULL) {
        *consumed = (size_t)(lx->p - text);
    } else if (lx->p < lx->end) {
        remat__lex_syntax_error(lx, "end of file expected");
        goto out;
    }
    if (max_depth != NULL)
        *max_depth = lx->max_depth;
    p = remat__pb_finish(&r.pb, err);
out:
    remat__pb_free(&r.pb);
    remat__lex_free(lx);
    return p;
}
