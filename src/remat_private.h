/* remat_private.h - declarations shared by libremat's files, not installed.
 * Internal names start with remat__ (libuv's rule). */
#ifndef REMAT_PRIVATE_H
#define REMAT_PRIVATE_H

#include <stdlib.h>
#include <string.h>

#include "remat.h"

/* Fills err (when not NULL) with code, pointer and a printf-style message,
 * and returns code, so that a failing path is `return remat__error(...)`. */
int remat__error(struct remat_error *err, int code, const char *pointer, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The op names, in kind order: X(kind, "name") for each op kind.  The one
 * table every writer and reader of op names is made from. */
#define REMAT__FOR_EACH_OP(X)                                                                      \
    X(REMAT_OP_F_NONE, "F_none")                                                                   \
    X(REMAT_OP_F_CK, "F_ck")                                                                       \
    X(REMAT_OP_F_ALL, "F_all")                                                                     \
    X(REMAT_OP_LOSS, "loss")                                                                       \
    X(REMAT_OP_B, "B")
#define REMAT__N_OP_KINDS 5

/* The most ops one schedule may hold (curl's dynbuf rule: a growable buffer
 * has a maximum).  A single-level schedule of REMAT_MAX_STAGES stages needs
 * at most 3n + 1; nested min-time schedules need more, but not 2^28. */
#define REMAT__MAX_OPS ((size_t)1 << 28)

/* Makes room for at least `more` further ops.  REMAT_OK, ENOMEM or ELIMIT. */
int remat__schedule_reserve(struct remat_schedule *s, size_t more);

/* Plan JSON's "exports" (src/exports.c): the plan as framework knobs, each
 * present only when it runs exactly the schedule.  Derived from the schedule
 * and sizes only.  New reference, or NULL when out of memory. */
json_t *remat__plan_exports_json(const struct remat_profile *p, const struct remat_plan *plan);
/* The same object's text appended to b (remat_plan_dumps' fast writer).
 * REMAT_OK, or ENOMEM / ELIMIT (b's sticky error). */
struct rematx_dynbuf;
int remat__plan_exports_text(const struct remat_profile *p, const struct remat_plan *plan,
                             struct rematx_dynbuf *b);

/* Sum of the byte fields of a profile: validate() bounds it by
 * REMAT_MAX_BYTES, which is what keeps every sum the simulator and the
 * solvers form (at most four times this total) inside int64_t. */
int remat__profile_total_bytes(const struct remat_profile *p, int64_t *out);

/* Checks profile->optimizer (optimizer.c): REMAT_OK or negative, err filled. */
int remat__optimizer_validate(const struct remat_profile *p, struct remat_error *err);

/* malloc for the arrays a long chain needs (big_alloc.c): from
 * REMAT__BIG_BYTES up it asks the kernel for huge pages, which fault in
 * a block 512 times faster.  Freed with free. */
#define REMAT__BIG_BYTES ((size_t)4 << 20)
void *remat__big_alloc(size_t bytes);
/* realloc(p, bytes) for such arrays, old_bytes of p kept: from
 * REMAT__BIG_BYTES up a new block from remat__big_alloc and a copy (a
 * realloc would fault the copy in 4 KiB pages).  NULL, p untouched, when
 * out of memory. */
void *remat__big_grow(void *p, size_t old_bytes, size_t bytes);

/* d_i of the paper's models: d_0 = input_bytes, d_i = out_bytes of stage i. */
static inline int64_t remat__d(const struct remat_profile *p, size_t i)
{
    return i == 0 ? p->input_bytes : p->stages[i - 1].out_bytes;
}

/* The paper's objectives of a checkpoint set, straight from their
 * definitions (paper-notes.md §8): A(C) for sum, B(C) for prefix.  O(n). */
int64_t remat__sum_value(const struct remat_profile *p, const size_t *ck, size_t m);
int64_t remat__prefix_value(const struct remat_profile *p, const size_t *ck, size_t m);

/* The recompute time of a single-level plan whose last checkpoint is
 * `last` (0 for none): sum of fwd_ms over stages 1..last, added in stage
 * order, the one summation every tie-break uses. */
double remat__recompute_ms(const struct remat_profile *p, size_t last);

/* Compares two checkpoint sets under the documented tie order once their
 * objective values are equal: recompute time, then count, then
 * lexicographic.  Negative when a comes first. */
int remat__tie_cmp(const struct remat_profile *p, const size_t *a, size_t na, const size_t *b,
                   size_t nb);

/* A solve's cancellation hook (remat_options.cancel), handed to the slow
 * solvers; NULL or a NULL fn never cancels. */
struct remat__cancel {
    int (*fn)(void *arg);
    void *arg;
};
static inline int remat__cancelled(const struct remat__cancel *c)
{
    return c != NULL && c->fn != NULL && c->fn(c->arg) != 0;
}

/* The solvers of one checkpoint set.  Each fills plan->checkpoints,
 * plan->n_checkpoints and plan->objective_value (in its own model) and
 * nothing else; solve.c completes the plan.  REMAT_OK or negative. */
int remat__solve_store_all(const struct remat_profile *p, struct remat_plan *plan,
                           struct remat_error *err);
int remat__solve_sqrt(const struct remat_profile *p, struct remat_plan *plan,
                      struct remat_error *err);
int remat__solve_uniform(const struct remat_profile *p, size_t segments, struct remat_plan *plan,
                         struct remat_error *err);
int remat__solve_acg(const struct remat_profile *p, struct remat_plan *plan,
                     struct remat_error *err);
int remat__solve_paper_cubic(const struct remat_profile *p, struct remat_plan *plan,
                             struct remat_error *err);
int remat__solve_paper_linear(const struct remat_profile *p, struct remat_plan *plan,
                              struct remat_error *err);
/* The O(n^2) suffix DP of paper-notes §3.3: the reference paper-linear is
 * tested against.  Same contract as the solvers. */
int remat__prefix_ref(const struct remat_profile *p, struct remat_plan *plan,
                      struct remat_error *err);

/* What acg and paper-cubic take: their cost grows as n^4 and n^3 in the
 * worst case, and a service must not spend minutes on one request.  Longer
 * chains are REMAT_ELIMIT at once; a chain whose search passes
 * REMAT__SUM_MAX_STEPS inner steps (a few seconds; the count, not a clock,
 * so the answer is the same on every machine) is REMAT_ELIMIT when it does.
 * paper-linear and min-peak take any chain. */
#define REMAT__ACG_MAX_STAGES 2000
#define REMAT__CUBIC_MAX_STAGES 3000
#define REMAT__SUM_MAX_STEPS ((size_t)1000000000)

/* acg (cubic = 0) or paper-cubic (cubic = 1) with another step budget, so
 * the tests can reach it quickly. */
int remat__solve_sum_steps(const struct remat_profile *p, struct remat_plan *plan, int cubic,
                           size_t max_steps, struct remat_error *err);
/* acg or paper-cubic, cancellable between candidate bounds. */
int remat__solve_sum_cancel(const struct remat_profile *p, struct remat_plan *plan, int cubic,
                            const struct remat__cancel *cancel, struct remat_error *err);

/* Copies a checkpoint list into plan (allocating it).  REMAT_OK or ENOMEM. */
int remat__plan_set_checkpoints(struct remat_plan *plan, const size_t *ck, size_t m,
                                struct remat_error *err);

/* The streaming profile reader (profile_fast.c): remat_profile_parse, and
 * for a caller that must tell bad JSON from a bad profile, *syntax is set to
 * 1 on a JSON syntax error (0 otherwise) and *max_depth to the deepest
 * nesting of values seen (the root object is 1, its members' values 2).
 * With consumed not NULL the profile may be followed by more text (the
 * rest of a request): *consumed is set to the bytes read, the profile and
 * the whitespace after it.  Any of the three may be NULL. */
struct remat_profile *remat__profile_parse(const char *text, size_t len, const char *pointer_prefix,
                                           int *syntax, int *max_depth, size_t *consumed,
                                           struct remat_error *err);

/* A profile owning stages[0..n) (n >= 1) and the name arena `names` (may be
 * NULL), both malloc'd and stolen even on failure.  Each stage's name holds
 * an arena offset plus one, or 0 for the empty name, cast to a pointer: it
 * is made a real pointer here.  Returns: new, or NULL (ENOMEM). */
struct remat_profile *remat__profile_adopt(struct remat_stage *stages, size_t n, char *names,
                                           struct remat_error *err);

#endif
