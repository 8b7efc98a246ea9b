/* profile_rules.h - what a remat.profile/v1 holds and what it may hold: the
 * one list of fields, defaults, limits and messages every profile reader
 * uses (not installed).  docs/profile.md is the contract written out.
 *
 * Readers do not check values themselves.  They hand what they read to a
 * builder (struct remat__pbuild): the streaming reader of text
 * (profile_fast.c) member by member in the order of the text, the jansson
 * adapter (remat_profile_from_json in profile.c) in the order of the
 * tables.  The builder checks each value by these tables and keeps the
 * error that comes first in the tables' order whatever the order of the
 * text, so both readers give the same profile, or the same code, JSON
 * pointer and message.
 *
 * Adding a numeric stage field: one line in REMAT__STAGE_FIELDS, the
 * member of struct remat_stage (src/remat.h) it fills, openapi.yaml and
 * docs/profile.md.  Every reader, remat_profile_new, remat_profile_validate
 * and remat_profile_to_json follow the table. */
#ifndef REMAT_PROFILE_RULES_H
#define REMAT_PROFILE_RULES_H

#include <stdint.h>

#include "json_lex.h"

/* What a field takes, and where it lands.
 *  BYTES: a JSON integer in [0, REMAT_MAX_BYTES], into an int64_t.
 *  MS:    a finite, non-negative JSON number, into a double. */
enum remat__field_kind { REMAT__FIELD_BYTES, REMAT__FIELD_MS };

/* The numeric stage fields, in the order their checks run (so the order in
 * which the first error is chosen): X(member, kind, required, default).
 * `member` is both the JSON key and the member of struct remat_stage; the
 * default is an expression that may read `s`, the stage being built, whose
 * fields above this one are already set.  The stage's name, its one string,
 * is checked before all of them (every stage's name before any stage's
 * numbers, as jansson's tree path always did), then saved_bytes >=
 * out_bytes and bwd_freed_bytes <= saved_bytes + out_bytes after them.
 * fwd_grad_tmp_bytes and bwd_freed_bytes are optional refinements
 * (docs/profile.md): a profile without them means what it always did. */
#define REMAT__STAGE_FIELDS(X)                                                                     \
    X(out_bytes, REMAT__FIELD_BYTES, 1, 0)                                                         \
    X(saved_bytes, REMAT__FIELD_BYTES, 0, s->out_bytes)                                            \
    X(fwd_tmp_bytes, REMAT__FIELD_BYTES, 0, 0)                                                     \
    X(fwd_grad_tmp_bytes, REMAT__FIELD_BYTES, 0, s->fwd_tmp_bytes)                                 \
    X(bwd_tmp_bytes, REMAT__FIELD_BYTES, 0, 0)                                                     \
    X(bwd_freed_bytes, REMAT__FIELD_BYTES, 0, 0)                                                   \
    X(param_bytes, REMAT__FIELD_BYTES, 0, 0)                                                       \
    X(fwd_ms, REMAT__FIELD_MS, 0, 1.0)                                                             \
    X(bwd_ms, REMAT__FIELD_MS, 0, 2.0)

enum {
#define REMAT__X(m, kind, required, dflt) REMAT__SF_##m,
    REMAT__STAGE_FIELDS(REMAT__X)
#undef REMAT__X
        REMAT__N_STAGE_FIELDS
};

/* The top-level members, in the order their checks run: X(key, kind).
 *  FORMAT: "remat.profile/v1" when present.
 *  BYTES:  a required byte count, as a stage's BYTES field.
 *  STAGES: the stage array; its stages' checks come right after its own.
 *  META:   an optional string of at most REMAT_MAX_NAME bytes (null counts
 *          as absent), copied into the struct remat_profile member of the
 *          same name.
 *  COUNT:  an optional non-negative integer (null counts as absent), into
 *          the int64_t member of the same name.
 * After all of them, the total of the byte counts is checked.
 *
 * A new member: a line here (its place is its check order), and when it is
 * of a new kind (an object such as an optimizer's state), the kind's reading
 * in read_root_member (profile_fast.c) and in remat_profile_from_json
 * (profile.c), its checks in check_root (profile_rules.c) and its slot in
 * struct remat__pbuild.  An object's own fields are best a second table
 * like REMAT__STAGE_FIELDS, checked by the same field rules. */
#define REMAT__ROOT_MEMBERS(X)                                                                     \
    X(format, FORMAT)                                                                              \
    X(input_bytes, BYTES)                                                                          \
    X(stages, STAGES)                                                                              \
    X(model, META)                                                                                 \
    X(dtype, META)                                                                                 \
    X(device, META)                                                                                \
    X(driver, META)                                                                                \
    X(libtorch, META)                                                                              \
    X(batch_size, COUNT)                                                                           \
    X(optimizer, OPTIMIZER)

enum remat__root_kind {
    REMAT__ROOT_FORMAT,
    REMAT__ROOT_BYTES,
    REMAT__ROOT_STAGES,
    REMAT__ROOT_META,
    REMAT__ROOT_COUNT,
    REMAT__ROOT_OPTIMIZER /* an object: REMAT__OPTIM_FIELDS */
};

/* The members of the optimizer object (docs/scheduling.md), in check
 * order: X(member, kind) with kind NAME (one of remat_optim_name's), FLAG
 * (true or false, default false), or a stage field's kind (optional,
 * default 0).  `member` is also the struct remat_optimizer member; name
 * lands in its kind. */
#define REMAT__OPTIM_FIELDS(X)                                                                     \
    X(name, NAME)                                                                                  \
    X(foreach, FLAG)                                                                               \
    X(state_bytes, REMAT__FIELD_BYTES)                                                             \
    X(step_tmp_bytes, REMAT__FIELD_BYTES)                                                          \
    X(step_ms, REMAT__FIELD_MS)

enum {
#define REMAT__X(m, kind) REMAT__OF_##m,
    REMAT__OPTIM_FIELDS(REMAT__X)
#undef REMAT__X
        REMAT__N_OPTIM_FIELDS
};
extern const char *const remat__optim_key[REMAT__N_OPTIM_FIELDS];
extern const unsigned char remat__optim_key_len[REMAT__N_OPTIM_FIELDS];

enum {
#define REMAT__X(key, kind) REMAT__RM_##key,
    REMAT__ROOT_MEMBERS(REMAT__X)
#undef REMAT__X
        REMAT__N_ROOT
};

/* Each member's key and kind, in table order. */
extern const char *const remat__root_key[REMAT__N_ROOT];
extern const unsigned char remat__root_key_len[REMAT__N_ROOT];
extern const enum remat__root_kind remat__root_kind[REMAT__N_ROOT];
/* Each stage field's key, in table order. */
extern const char *const remat__stage_key[REMAT__N_STAGE_FIELDS];

/* A stage as a reader fills it in: the raw values of its fields (ABSENT
 * when the text has none), and its name. */
struct remat__pstage {
    size_t i;
    struct remat_stage *s; /* NULL past REMAT_MAX_STAGES */
    struct remat__jval f[REMAT__N_STAGE_FIELDS];
    int name_bad;    /* 1: not a string, 2: too long */
    size_t name_off; /* arena offset + 1, 0 for the empty name */
};

/* A profile being read: the stages so far (grown geometrically, to at most
 * REMAT_MAX_STAGES; n counts past the limit too), the name arena, what the
 * top-level members held, and the first error in table order. */
struct remat__pbuild {
    const char *prefix; /* the caller's JSON pointer prefix, never NULL */
    uint64_t best;      /* the rank of `bad`, or none */
    struct remat_error bad;
    struct remat_stage *stages;
    size_t n, cap;
    char *names;
    size_t names_len, names_cap;
    struct remat__jval root[REMAT__N_ROOT];
    int format_ok;
    char *meta[REMAT__N_ROOT]; /* copies of META strings */
    /* The optimizer object's members as read; a name string is kept as
     * type STR with i its enum remat_optim_kind, or -1 when unknown. */
    struct remat__jval optim[REMAT__N_OPTIM_FIELDS];
};

/* A member of the optimizer object: the name as a string, anything else
 * as a value. */
void remat__pb_optim_name(struct remat__pbuild *pb, const char *s, size_t len);
void remat__pb_optim_value(struct remat__pbuild *pb, int which, const struct remat__jval *v);

void remat__pb_init(struct remat__pbuild *pb, const char *prefix);
void remat__pb_free(struct remat__pbuild *pb);

/* Room for n stages at once (a reader that knows the count).  REMAT_OK or
 * REMAT_ENOMEM. */
int remat__pb_reserve(struct remat__pbuild *pb, size_t n);

/* Opens stage pb->n (counting it) into c, with every field absent.
 * REMAT_OK or REMAT_ENOMEM. */
int remat__pb_stage_begin(struct remat__pbuild *pb, struct remat__pstage *c);
/* The stage's name: a string of len bytes (NUL-free or not, as read), or
 * another value of type t (null is the empty name).  REMAT_OK or ENOMEM. */
int remat__pb_stage_name(struct remat__pbuild *pb, struct remat__pstage *c, const char *s,
                         size_t len);
void remat__pb_stage_name_other(struct remat__pstage *c, enum remat__jtype t);
/* Closes the stage: every field checked by the table. */
void remat__pb_stage_end(struct remat__pbuild *pb, struct remat__pstage *c);
/* A stage that is not an object (counted).  REMAT_OK or ENOMEM. */
int remat__pb_stage_not_object(struct remat__pbuild *pb);

/* A top-level member's value.  FORMAT and META strings go through
 * remat__pb_root_string; other values, and other kinds, as jvals. */
int remat__pb_root_string(struct remat__pbuild *pb, int which, const char *s, size_t len);
void remat__pb_root_value(struct remat__pbuild *pb, int which, const struct remat__jval *v);
/* The root is not an object. */
void remat__pb_root_not_object(struct remat__pbuild *pb);

/* The profile, or NULL with err filled by the first error.  The builder is
 * freed either way. */
struct remat_profile *remat__pb_finish(struct remat__pbuild *pb, struct remat_error *err);

/* The rules for one numeric field, for code that has values rather than
 * text (remat_profile_validate): REMAT_OK, or the error with `pointer`
 * and the same message a reader gives. */
int remat__check_bytes(int64_t v, const char *key, const char *pointer, struct remat_error *err);
int remat__check_ms(double v, const char *key, const char *pointer, struct remat_error *err);

#endif
