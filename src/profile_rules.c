/* profile_rules.c - the profile builder: every check of a remat.profile/v1
 * value, its message and its place in the order of checks
 * (profile_rules.h says why the order matters). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "profile_rules.h"

const char *const remat__root_key[REMAT__N_ROOT] = {
#define REMAT__X(key, kind) #key,
    REMAT__ROOT_MEMBERS(REMAT__X)
#undef REMAT__X
};

const unsigned char remat__root_key_len[REMAT__N_ROOT] = {
#define REMAT__X(key, kind) sizeof #key - 1,
    REMAT__ROOT_MEMBERS(REMAT__X)
#undef REMAT__X
};

const enum remat__root_kind remat__root_kind[REMAT__N_ROOT] = {
#define REMAT__X(key, kind) REMAT__ROOT_##kind,
    REMAT__ROOT_MEMBERS(REMAT__X)
#undef REMAT__X
};

const char *const remat__optim_key[REMAT__N_OPTIM_FIELDS] = {
#define REMAT__X(m, kind) #m,
    REMAT__OPTIM_FIELDS(REMAT__X)
#undef REMAT__X
};

const unsigned char remat__optim_key_len[REMAT__N_OPTIM_FIELDS] = {
#define REMAT__X(m, kind) sizeof #m - 1,
    REMAT__OPTIM_FIELDS(REMAT__X)
#undef REMAT__X
};

void remat__pb_optim_name(struct remat__pbuild *pb, const char *s, size_t len)
{
    char name[32];
    enum remat_optim_kind k;
    struct remat__jval v = {.type = REMAT__J_STR, .i = -1};
    if (len < sizeof name && memchr(s, '\0', len) == NULL) {
        memcpy(name, s, len);
        name[len] = '\0';
        if (remat_optim_parse(name, &k) == REMAT_OK)
            v.i = (int64_t)k;
    }
    pb->optim[REMAT__OF_name] = v;
}

void remat__pb_optim_value(struct remat__pbuild *pb, int which, const struct remat__jval *v)
{
    pb->optim[which] = *v;
}

const char *const remat__stage_key[REMAT__N_STAGE_FIELDS] = {
#define REMAT__X(m, kind, required, dflt) #m,
    REMAT__STAGE_FIELDS(REMAT__X)
#undef REMAT__X
};

/* ---- the order of errors ---------------------------------------------
 *
 * An error's rank is (major, index, minor), compared as one number; the
 * least-ranked error found is the one reported.  Majors: the root's shape,
 * then each top-level member in table order, then the total.  Within the
 * stages member, the index holds a pass and a stage: the count (pass 0),
 * then every stage's shape and name (pass 1), then every stage's numbers
 * (pass 2, minor: the field). */

#define R_ROOT 1u
#define R_MEMBER(j) (2u + (unsigned)(j))
#define R_TOTAL (2u + REMAT__N_ROOT)
#define R_NONE 255u

static uint64_t rank(unsigned major, uint64_t index, unsigned minor)
{
    return ((uint64_t)major << 56) | (index << 8) | minor;
}

static uint64_t stage_rank(unsigned pass, size_t i, unsigned minor)
{
    return rank(R_MEMBER(REMAT__RM_stages), ((uint64_t)pass << 40) | i, minor);
}

/* Keeps the error if it comes before the one kept so far. */
__attribute__((format(printf, 5, 6))) static void
note(struct remat__pbuild *pb, uint64_t rk, int code, const char *pointer, const char *fmt, ...)
{
    if (rk >= pb->best)
        return;
    pb->best = rk;
    pb->bad.code = code;
    snprintf(pb->bad.pointer, sizeof pb->bad.pointer, "%s", pointer);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pb->bad.message, sizeof pb->bad.message, fmt, ap);
    va_end(ap);
}

/* A field's JSON pointer, built only when an error needs it (a million
 * stages must not cost millions of snprintf calls). */
#define TOP SIZE_MAX
static const char *pointer_of(char *buf, size_t size, const char *prefix, size_t stage,
                              const char *key)
{
    if (stage == TOP)
        snprintf(buf, size, "%s/%s", prefix, key);
    else
        snprintf(buf, size, "%s/stages/%zu/%s", prefix, stage, key);
    return buf;
}

/* ---- the rules of one numeric field ----------------------------------- */

enum problem {
    P_OK,
    P_MISSING,
    P_NOT_INT,
    P_NEGATIVE,
    P_OVER,
    P_NOT_NUMBER,
    P_NOT_FINITE,
    P_OVER_MS
};

/* Each problem's code and what follows the field's name in its message. */
static const struct {
    int code;
    const char *text;
} problems[] = {
    [P_MISSING] = {REMAT_EINVAL, "is missing"},
    [P_NOT_INT] = {REMAT_EINVAL, "must be an integer byte count"},
    [P_NEGATIVE] = {REMAT_EINVAL, "must not be negative"},
    [P_OVER] = {REMAT_ELIMIT, "is over the limit of 2^60 bytes"},
    [P_NOT_NUMBER] = {REMAT_EINVAL, "must be a number"},
    [P_NOT_FINITE] = {REMAT_EINVAL, "must be finite and not negative"},
    [P_OVER_MS] = {REMAT_ELIMIT, "is over the limit of 1e9 ms"},
};

/* The rules by kind, named after it so that REMAT__STAGE_FIELDS can paste
 * a field's kind to its rule; each also checks the member's C type. */
static enum problem take_REMAT__FIELD_BYTES(const struct remat__jval *v, int64_t *out)
{
    if (v->type == REMAT__J_ABSENT)
        return P_MISSING;
    if (v->type != REMAT__J_INT)
        return P_NOT_INT;
    if (v->i < 0)
        return P_NEGATIVE;
    if (v->i > REMAT_MAX_BYTES)
        return P_OVER;
    *out = v->i;
    return P_OK;
}

static enum problem take_REMAT__FIELD_MS(const struct remat__jval *v, double *out)
{
    if (v->type == REMAT__J_ABSENT)
        return P_MISSING;
    if (v->type != REMAT__J_INT && v->type != REMAT__J_REAL)
        return P_NOT_NUMBER;
    double x = v->type == REMAT__J_INT ? (double)v->i : v->d;
    if (!isfinite(x) || x < 0)
        return P_NOT_FINITE;
    if (x > REMAT_MAX_MS)
        return P_OVER_MS;
    *out = x;
    return P_OK;
}

static void note_problem(struct remat__pbuild *pb, uint64_t rk, enum problem pr, size_t stage,
                         const char *key)
{
    char ptr[128];
    note(pb, rk, problems[pr].code, pointer_of(ptr, sizeof ptr, pb->prefix, stage, key), "%s %s",
         key, problems[pr].text);
}

int remat__check_bytes(int64_t v, const char *key, const char *pointer, struct remat_error *err)
{
    int64_t out;
    struct remat__jval jv = {.type = REMAT__J_INT, .i = v};
    enum problem pr = take_REMAT__FIELD_BYTES(&jv, &out);
    if (pr == P_OK)
        return REMAT_OK;
    return remat__error(err, problems[pr].code, pointer, "%s %s", key, problems[pr].text);
}

int remat__check_ms(double v, const char *key, const char *pointer, struct remat_error *err)
{
    double out;
    struct remat__jval jv = {.type = REMAT__J_REAL, .d = v};
    enum problem pr = take_REMAT__FIELD_MS(&jv, &out);
    if (pr == P_OK)
        return REMAT_OK;
    return remat__error(err, problems[pr].code, pointer, "%s %s", key, problems[pr].text);
}

/* ---- the builder ------------------------------------------------------ */

void remat__pb_init(struct remat__pbuild *pb, const char *prefix)
{
    memset(pb, 0, sizeof *pb);
    pb->prefix = prefix != NULL ? prefix : "";
    pb->best = rank(R_NONE, 0, 0);
}

void remat__pb_free(struct remat__pbuild *pb)
{
    free(pb->stages);
    free(pb->names);
    for (int j = 0; j < REMAT__N_ROOT; j++)
        free(pb->meta[j]);
    pb->stages = NULL;
    pb->names = NULL;
    memset(pb->meta, 0, sizeof pb->meta);
}

int remat__pb_reserve(struct remat__pbuild *pb, size_t n)
{
    if (n > REMAT_MAX_STAGES)
        n = REMAT_MAX_STAGES;
    if (n <= pb->cap)
        return REMAT_OK;
    struct remat_stage *st = remat__big_grow(pb->stages, pb->cap * sizeof *st, n * sizeof *st);
    if (st == NULL)
        return REMAT_ENOMEM;
    pb->stages = st;
    pb->cap = n;
    return REMAT_OK;
}

/* Counts a stage and makes room for it below the limit: its slot, or NULL
 * past the limit.  REMAT_OK or ENOMEM. */
static int next_stage(struct remat__pbuild *pb, struct remat_stage **slot)
{
    size_t i = pb->n++;
    *slot = NULL;
    if (i >= REMAT_MAX_STAGES)
        return REMAT_OK;
    if (i == pb->cap && remat__pb_reserve(pb, pb->cap ? pb->cap * 2 : 64) < 0)
        return REMAT_ENOMEM;
    *slot = &pb->stages[i];
    return REMAT_OK;
}

int remat__pb_stage_begin(struct remat__pbuild *pb, struct remat__pstage *c)
{
    /* Only what the members may leave unset: a memset of the whole
     * showed in profiles. */
    for (int k = 0; k < REMAT__N_STAGE_FIELDS; k++)
        c->f[k].type = REMAT__J_ABSENT;
    c->name_bad = 0;
    c->name_off = 0;
    c->i = pb->n;
    return next_stage(pb, &c->s);
}

int remat__pb_stage_name(struct remat__pbuild *pb, struct remat__pstage *c, const char *s,
                         size_t len)
{
    if (len > REMAT_MAX_NAME) {
        c->name_bad = 2;
        return REMAT_OK;
    }
    if (c->s == NULL)
        return REMAT_OK;
    if (pb->names_len + len + 1 > pb->names_cap) {
        size_t cap = pb->names_cap ? pb->names_cap : 4096;
        while (cap < pb->names_len + len + 1)
            cap *= 2;
        char *a = remat__big_grow(pb->names, pb->names_len, cap);
        if (a == NULL)
            return REMAT_ENOMEM;
        pb->names = a;
        pb->names_cap = cap;
    }
    memcpy(pb->names + pb->names_len, s, len);
    pb->names[pb->names_len + len] = '\0';
    c->name_off = pb->names_len + 1;
    pb->names_len += len + 1;
    return REMAT_OK;
}

void remat__pb_stage_name_other(struct remat__pstage *c, enum remat__jtype t)
{
    if (t != REMAT__J_NULL)
        c->name_bad = 1;
}

int remat__pb_stage_not_object(struct remat__pbuild *pb)
{
    size_t i = pb->n;
    struct remat_stage *s;
    if (next_stage(pb, &s) < 0)
        return REMAT_ENOMEM;
    if (s == NULL)
        return REMAT_OK; /* past the limit only the count matters */
    char ptr[128];
    snprintf(ptr, sizeof ptr, "%s/stages/%zu", pb->prefix, i);
    note(pb, stage_rank(1, i, 0), REMAT_EINVAL, ptr, "a stage must be an object");
    /* Keep the array dense so later indices line up. */
    memset(s, 0, sizeof *s);
    return REMAT_OK;
}

/* Every field of a stage by REMAT__STAGE_FIELDS, then saved >= out, then
 * freed <= saved + out. */
static void check_stage(struct remat__pbuild *pb, struct remat__pstage *c)
{
    size_t i = c->i;
    struct remat_stage *s = c->s;
    if (c->name_bad) {
        char ptr[128];
        pointer_of(ptr, sizeof ptr, pb->prefix, i, "name");
        if (c->name_bad == 1)
            note(pb, stage_rank(1, i, 0), REMAT_EINVAL, ptr, "name must be a string");
        else
            note(pb, stage_rank(1, i, 0), REMAT_ELIMIT, ptr, "name is longer than %d bytes",
                 REMAT_MAX_NAME);
        return;
    }
    /* Past the first shape error nothing of the second pass can show. */
    if (pb->best <= stage_rank(2, i, 0))
        return;
    enum problem pr;
#define REMAT__X(m, kind, required, dflt)                                                          \
    if (c->f[REMAT__SF_##m].type == REMAT__J_ABSENT && !(required)) {                              \
        s->m = (dflt);                                                                             \
    } else if ((pr = take_##kind(&c->f[REMAT__SF_##m], &s->m)) != P_OK) {                          \
        note_problem(pb, stage_rank(2, i, REMAT__SF_##m), pr, i, #m);                              \
        return;                                                                                    \
    }
    REMAT__STAGE_FIELDS(REMAT__X)
#undef REMAT__X
    if (s->saved_bytes < s->out_bytes) {
        char ptr[128];
        note(pb, stage_rank(2, i, REMAT__N_STAGE_FIELDS), REMAT_EINVAL,
             pointer_of(ptr, sizeof ptr, pb->prefix, i, "saved_bytes"),
             "saved_bytes must be at least out_bytes (it holds the output)");
    } else if (s->bwd_freed_bytes > s->saved_bytes + s->out_bytes) {
        char ptr[128];
        note(pb, stage_rank(2, i, REMAT__N_STAGE_FIELDS + 1), REMAT_EINVAL,
             pointer_of(ptr, sizeof ptr, pb->prefix, i, "bwd_freed_bytes"),
             "bwd_freed_bytes must be at most saved_bytes + out_bytes (what the backward holds)");
    }
}

void remat__pb_stage_end(struct remat__pbuild *pb, struct remat__pstage *c)
{
    /* Past the limit only the syntax matters: the count is the error. */
    if (c->s == NULL)
        return;
    /* An arena offset until remat__profile_adopt makes it a pointer: the
     * arena may move while it grows. */
    c->s->name = (const char *)(uintptr_t)c->name_off;
    check_stage(pb, c);
}

int remat__pb_root_string(struct remat__pbuild *pb, int which, const char *s, size_t len)
{
    pb->root[which].type = REMAT__J_STR;
    pb->root[which].i = (int64_t)len;
    if (remat__root_kind[which] == REMAT__ROOT_FORMAT) {
        pb->format_ok =
            len == strlen(REMAT_PROFILE_FORMAT) && memcmp(s, REMAT_PROFILE_FORMAT, len) == 0;
        return REMAT_OK;
    }
    if (remat__root_kind[which] != REMAT__ROOT_META || len > REMAT_MAX_NAME)
        return REMAT_OK;
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return REMAT_ENOMEM;
    memcpy(copy, s, len);
    copy[len] = '\0';
    free(pb->meta[which]);
    pb->meta[which] = copy;
    return REMAT_OK;
}

void remat__pb_root_value(struct remat__pbuild *pb, int which, const struct remat__jval *v)
{
    pb->root[which] = *v;
}

void remat__pb_root_not_object(struct remat__pbuild *pb)
{
    note(pb, rank(R_ROOT, 0, 0), REMAT_EINVAL, pb->prefix, "a profile must be a JSON object");
}

/* The optimizer object's checks, in REMAT__OPTIM_FIELDS order; fills
 * *out (may be NULL) from what passes. */
static void check_optimizer_into(struct remat__pbuild *pb, uint64_t rk, const struct remat__jval *v,
                                 struct remat_optimizer *out)
{
    char ptr[128];
    const char *pre = pb->prefix;
    struct remat_optimizer o;
    memset(&o, 0, sizeof o);
    if (v->type == REMAT__J_ABSENT || v->type == REMAT__J_NULL)
        goto done;
    if (v->type != REMAT__J_OBJ) {
        note(pb, rk, REMAT_EINVAL, pointer_of(ptr, sizeof ptr, pre, TOP, "optimizer"),
             "optimizer must be an object");
        goto done;
    }
    const struct remat__jval *f = pb->optim;
    if (f[REMAT__OF_name].type != REMAT__J_STR || f[REMAT__OF_name].i < 0) {
        note(pb, rk, REMAT_EINVAL, pointer_of(ptr, sizeof ptr, pre, TOP, "optimizer/name"),
             "optimizer/name must be none, sgd, sgd-momentum, adam or adamw");
        goto done;
    }
    o.kind = (int)f[REMAT__OF_name].i;
#define TAKE_NAME(m)
#define TAKE_FLAG(m)                                                                               \
    if (f[REMAT__OF_##m].type == REMAT__J_TRUE)                                                    \
        o.m = 1;                                                                                   \
    else if (f[REMAT__OF_##m].type != REMAT__J_ABSENT &&                                           \
             f[REMAT__OF_##m].type != REMAT__J_FALSE) {                                            \
        note(pb, rk, REMAT_EINVAL, pointer_of(ptr, sizeof ptr, pre, TOP, "optimizer/" #m),         \
             "optimizer/" #m " must be true or false");                                            \
        goto done;                                                                                 \
    }
#define TAKE_REMAT__FIELD_BYTES(m) TAKE_NUMBER(m, REMAT__FIELD_BYTES)
#define TAKE_REMAT__FIELD_MS(m) TAKE_NUMBER(m, REMAT__FIELD_MS)
#define TAKE_NUMBER(m, kind)                                                                       \
    if (f[REMAT__OF_##m].type != REMAT__J_ABSENT) {                                                \
        enum problem pr = take_##kind(&f[REMAT__OF_##m], &o.m);                                    \
        if (pr != P_OK) {                                                                          \
            note_problem(pb, rk, pr, TOP, "optimizer/" #m);                                        \
            goto done;                                                                             \
        }                                                                                          \
    }
#define REMAT__X(m, kind) TAKE_##kind(m)
    REMAT__OPTIM_FIELDS(REMAT__X)
#undef REMAT__X
    if (o.kind == REMAT_OPTIM_NONE && (o.state_bytes != 0 || o.step_tmp_bytes != 0)) {
        note(pb, rk, REMAT_EINVAL, pointer_of(ptr, sizeof ptr, pre, TOP, "optimizer/name"),
             "optimizer \"none\" has no state and no step");
        goto done;
    }
done:
    if (out != NULL)
        *out = o;
}

static void check_optimizer(struct remat__pbuild *pb, uint64_t rk, const struct remat__jval *v)
{
    check_optimizer_into(pb, rk, v, NULL);
}

/* The top-level checks by REMAT__ROOT_MEMBERS, then the total. */
static void check_root(struct remat__pbuild *pb)
{
    char ptr[128];
    const char *pre = pb->prefix;
    for (int j = 0; j < REMAT__N_ROOT; j++) {
        const struct remat__jval *v = &pb->root[j];
        const char *key = remat__root_key[j];
        uint64_t rk = rank(R_MEMBER(j), 0, 0);
        switch (remat__root_kind[j]) {
        case REMAT__ROOT_FORMAT:
            if (v->type != REMAT__J_ABSENT && !(v->type == REMAT__J_STR && pb->format_ok))
                note(pb, rk, REMAT_EINVAL, pointer_of(ptr, sizeof ptr, pre, TOP, key),
                     "%s must be \"%s\"", key, REMAT_PROFILE_FORMAT);
            break;
        case REMAT__ROOT_BYTES: {
            int64_t x;
            enum problem pr = take_REMAT__FIELD_BYTES(v, &x);
            if (pr != P_OK)
                note_problem(pb, rk, pr, TOP, key);
            break;
        }
        case REMAT__ROOT_STAGES:
            pointer_of(ptr, sizeof ptr, pre, TOP, key);
            if (v->type == REMAT__J_ABSENT)
                note(pb, rk, REMAT_EINVAL, ptr, "%s is missing", key);
            else if (v->type != REMAT__J_ARR)
                note(pb, rk, REMAT_EINVAL, ptr, "%s must be an array", key);
            else if (pb->n == 0)
                note(pb, rk, REMAT_EINVAL, ptr, "a profile needs at least one stage");
            else if (pb->n > REMAT_MAX_STAGES)
                note(pb, rk, REMAT_ELIMIT, ptr, "%zu stages is over the limit of %d", pb->n,
                     REMAT_MAX_STAGES);
            break;
        case REMAT__ROOT_META:
            if (v->type == REMAT__J_ABSENT || v->type == REMAT__J_NULL)
                break;
            pointer_of(ptr, sizeof ptr, pre, TOP, key);
            if (v->type != REMAT__J_STR)
                note(pb, rk, REMAT_EINVAL, ptr, "%s must be a string", key);
            else if (v->i > REMAT_MAX_NAME)
                note(pb, rk, REMAT_ELIMIT, ptr, "%s is longer than %d bytes", key, REMAT_MAX_NAME);
            break;
        case REMAT__ROOT_COUNT:
            if (v->type != REMAT__J_ABSENT && v->type != REMAT__J_NULL &&
                (v->type != REMAT__J_INT || v->i < 0))
                note(pb, rk, REMAT_EINVAL, pointer_of(ptr, sizeof ptr, pre, TOP, key),
                     "%s must be a non-negative integer", key);
            break;
        case REMAT__ROOT_OPTIMIZER:
            check_optimizer(pb, rk, v);
            break;
        }
    }
    if (pb->best > rank(R_TOTAL, 0, 0)) {
        struct remat_profile tmp;
        memset(&tmp, 0, sizeof tmp);
        tmp.input_bytes = pb->root[REMAT__RM_input_bytes].i;
        tmp.n_stages = pb->n;
        tmp.stages = pb->stages;
        check_optimizer_into(pb, UINT64_MAX, &pb->root[REMAT__RM_optimizer], &tmp.optimizer);
        int64_t total;
        if (remat__profile_total_bytes(&tmp, &total) < 0)
            note(pb, rank(R_TOTAL, 0, 0), REMAT_ELIMIT,
                 pointer_of(ptr, sizeof ptr, pre, TOP, "stages"),
                 "the profile's byte counts add up to more than 2^60");
    }
}

/* Where each kind of top-level member lands in the profile. */
#define LAND_FORMAT(key)
#define LAND_STAGES(key)
#define LAND_BYTES(key) p->key = pb->root[REMAT__RM_##key].i;
#define LAND_META(key)                                                                             \
    p->key = pb->meta[REMAT__RM_##key];                                                            \
    pb->meta[REMAT__RM_##key] = NULL;
#define LAND_COUNT(key)                                                                            \
    if (pb->root[REMAT__RM_##key].type == REMAT__J_INT)                                            \
        p->key = pb->root[REMAT__RM_##key].i;
#define LAND_OPTIMIZER(key)                                                                        \
    check_optimizer_into(pb, UINT64_MAX, &pb->root[REMAT__RM_##key], &p->key);

struct remat_profile *remat__pb_finish(struct remat__pbuild *pb, struct remat_error *err)
{
    struct remat_profile *p = NULL;
    if (pb->best > rank(R_ROOT, 0, 0))
        check_root(pb);
    if (pb->best != rank(R_NONE, 0, 0)) {
        if (err != NULL)
            *err = pb->bad;
        goto out;
    }
    p = remat__profile_adopt(pb->stages, pb->n, pb->names, err);
    pb->stages = NULL; /* stolen, even on failure */
    pb->names = NULL;
    if (p == NULL)
        goto out;
#define REMAT__X(key, kind) LAND_##kind(key)
    REMAT__ROOT_MEMBERS(REMAT__X)
#undef REMAT__X
out:
    remat__pb_free(pb);
    return p;
}
