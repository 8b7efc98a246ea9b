/*
 * remat.h - libremat, the planning core of remat: the whole public API.
 *
 * A model is a chain of n stages; stage i (1..n) maps x_{i-1} to x_i and x_0
 * is the input.  A profile gives, per stage, the measured sizes and times
 * (docs/profile.md).  A plan says which stage outputs to keep during the
 * forward pass (the checkpoints) and how to recompute the rest; the memory
 * simulator replays a plan as a sequence of operations and reports its peak
 * (docs/memory-model.md).  The solvers choose plans.
 *
 * Conventions, as in jansson:
 *  - A function that can fail returns a negative enum remat_code (or NULL)
 *    and, when the caller passes one, fills a caller-owned struct remat_error
 *    naming the offending field by JSON pointer.
 *  - Each function's comment says who owns what it returns: "new" means the
 *    caller frees it with the matching *_free; "borrowed" means it lives as
 *    long as the object it came from.
 *  - No function keeps global mutable state: distinct objects may be used
 *    from distinct threads at once; one object is not locked.
 *  - Nothing prints, exits or aborts.
 *
 * Changes a program written against an earlier header should know of:
 *  - struct remat_stage gained fwd_grad_tmp_bytes (the forward with grad's
 *    transient).  remat_profile_new sets it to REMAT_SAME_AS_FWD_TMP, so a
 *    program that fills in fwd_tmp_bytes alone keeps the meaning it had;
 *    read it through remat_stage_fwd_grad_tmp_bytes.
 */
#ifndef REMAT_H
#define REMAT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

#define REMAT_PROFILE_FORMAT "remat.profile/v1"

/* Limits on what comes from outside. */
#define REMAT_MAX_STAGES 1000000           /* stages in one profile */
#define REMAT_MAX_NAME 256                 /* bytes in a stage name or metadata string */
#define REMAT_MAX_BYTES (INT64_C(1) << 60) /* any one byte count */
/* Any one time, in milliseconds (about 11.6 days): a million stages each
 * run a million times still sum to a finite double, so no total, ratio or
 * drawn coordinate becomes inf or NaN. */
#define REMAT_MAX_MS 1e9

enum remat_code {
    REMAT_OK = 0,
    REMAT_EINVAL = -1,       /* bad input: error.pointer names the field */
    REMAT_ENOMEM = -2,       /* an allocation failed */
    REMAT_ELIMIT = -3,       /* a size or count is over its limit */
    REMAT_EINFEASIBLE = -4,  /* no schedule fits the budget (see remat_plan.min_budget_bytes) */
    REMAT_EUNSUPPORTED = -5, /* the request is valid but this model or solver cannot answer it */
    REMAT_ECANCELED = -6     /* remat_options.cancel asked the solve to stop */
};

struct remat_error {
    int code;          /* one of enum remat_code */
    char pointer[128]; /* JSON pointer of the field at fault, "" when none */
    char message[256]; /* one line, no trailing newline */
};

/* A human-readable name for a code ("invalid input", ...); static storage. */
const char *remat_strerror(int code);

/* ------------------------------------------------------------------------
 * Profiles
 */

struct remat_stage {
    const char *name;           /* borrowed from the profile */
    int64_t out_bytes;          /* size of x_i */
    int64_t saved_bytes;        /* kept for backward by a grad-enabled forward, x_i included */
    int64_t fwd_tmp_bytes;      /* forward transient above what is live before and after: the
                                 * forward without grad (F_none, F_ck), and the one with grad
                                 * unless fwd_grad_tmp_bytes says otherwise */
    int64_t fwd_grad_tmp_bytes; /* the forward with grad's (F_all) transient, or
                                 * REMAT_SAME_AS_FWD_TMP (remat_profile_new's value): the
                                 * same as fwd_tmp_bytes, as an absent JSON field means (the
                                 * readers store that value itself).  Read it with
                                 * remat_stage_fwd_grad_tmp_bytes */
    int64_t bwd_tmp_bytes;      /* backward transient above inputs, saved tensors and gradients */
    int64_t bwd_freed_bytes;    /* of the saved tensors and δ_i, what the backward has freed by
                                 * its peak: that peak is bwd_tmp_bytes - bwd_freed_bytes above
                                 * them (at most saved_bytes + out_bytes; 0: nothing) */
    int64_t param_bytes;        /* weights; their gradients count the same again */
    double fwd_ms;
    double bwd_ms;
};

/* The value of fwd_grad_tmp_bytes that means "the same as fwd_tmp_bytes":
 * one transient serving the forward with and without grad.  remat_profile_new
 * sets it, so that a program which fills in fwd_tmp_bytes alone gets the
 * peak the JSON readers give a profile without fwd_grad_tmp_bytes, never a
 * forward-with-grad transient of 0.  Every solver, the simulator,
 * remat_profile_validate and remat_profile_to_json (which writes the value
 * it stands for) take it so; any other negative value is refused. */
#define REMAT_SAME_AS_FWD_TMP INT64_C(-1)

/* The forward with grad's transient of stage s in effect: fwd_grad_tmp_bytes,
 * or fwd_tmp_bytes where it is REMAT_SAME_AS_FWD_TMP.  Inline (jansson's
 * json_incref is too): no symbol is exported for it. */
static inline int64_t remat_stage_fwd_grad_tmp_bytes(const struct remat_stage *s)
{
    return s->fwd_grad_tmp_bytes == REMAT_SAME_AS_FWD_TMP ? s->fwd_tmp_bytes
                                                          : s->fwd_grad_tmp_bytes;
}

/* The optimizer of the training step (docs/scheduling.md): what it keeps
 * between steps and what its step() allocates for a moment.  All zero (kind
 * REMAT_OPTIM_NONE) when the profile models no optimizer: the step then ends
 * with the backward, as it always did. */
enum remat_optim_kind {
    REMAT_OPTIM_NONE = 0,
    REMAT_OPTIM_SGD,          /* plain SGD: no state */
    REMAT_OPTIM_SGD_MOMENTUM, /* one momentum buffer per parameter */
    REMAT_OPTIM_ADAM,         /* exp_avg and exp_avg_sq per parameter */
    REMAT_OPTIM_ADAMW,        /* as adam; weight decay applied in place */
    REMAT_OPTIM_COUNT
};

struct remat_optimizer {
    int kind;               /* enum remat_optim_kind */
    int foreach;            /* nonzero: the multi-tensor (foreach) step */
    int64_t state_bytes;    /* optimizer state, live for the whole step */
    int64_t step_tmp_bytes; /* step()'s transient above weights, gradients and state */
    double step_ms;         /* time of step() */
};

struct remat_profile {
    int64_t input_bytes;        /* size of x_0 */
    size_t n_stages;            /* n, 1..REMAT_MAX_STAGES */
    struct remat_stage *stages; /* stages[i - 1] is stage i */
    /* Metadata: NULL when absent.  Owned by the profile. */
    char *model;
    char *dtype;
    char *device;
    char *driver;
    char *libtorch;
    int64_t batch_size; /* 0 when absent */
    void *priv;         /* owned storage (names); do not touch */
    /* The optimizer: all zero when none.  The traced model keeps its state
     * live from the first op and runs its step after the last backward. */
    struct remat_optimizer optimizer;
};

/* Parses a remat.profile/v1 object.  pointer_prefix (may be NULL or "") is
 * prepended to every JSON pointer in err, so that a service embedding the
 * profile in a request can report "/profile/stages/17/out_bytes".
 * Returns: new profile, or NULL with err filled. */
struct remat_profile *remat_profile_from_json(const json_t *root, const char *pointer_prefix,
                                              struct remat_error *err);

/* Parses JSON text (len bytes, need not be NUL-terminated).
 * Returns: new profile, or NULL with err filled (bad JSON is REMAT_EINVAL
 * with the line and column in the message). */
struct remat_profile *remat_profile_loadb(const char *text, size_t len, struct remat_error *err);

/* Parses remat.profile/v1 text (len bytes, need not be NUL-terminated) in
 * one pass without building a JSON tree: the same profile, error codes and
 * JSON pointers as remat_profile_from_json on jansson's tree of the text
 * (duplicate keys rejected), with pointer_prefix (may be NULL) as there.
 * Returns: new profile, or NULL with err filled. */
struct remat_profile *remat_profile_parse(const char *text, size_t len, const char *pointer_prefix,
                                          struct remat_error *err);

/* A profile of n stages with every field at its documented default and
 * out_bytes = 0: for programs that fill one in.  fwd_grad_tmp_bytes is
 * REMAT_SAME_AS_FWD_TMP: a program that sets fwd_tmp_bytes alone gets the
 * profile a JSON reader makes of the same stages without fwd_grad_tmp_bytes.
 * Returns: new, or NULL. */
struct remat_profile *remat_profile_new(size_t n_stages, struct remat_error *err);

/* Checks every limit and invariant that remat_profile_from_json checks.
 * Returns REMAT_OK or a negative code with err filled. */
int remat_profile_validate(const struct remat_profile *profile, struct remat_error *err);

/* The profile as a remat.profile/v1 object.  Returns: new reference, or NULL. */
json_t *remat_profile_to_json(const struct remat_profile *profile);

void remat_profile_free(struct remat_profile *profile);

/* ------------------------------------------------------------------------
 * Optimizers (optimizer.c, docs/scheduling.md)
 */

/* "none", "sgd", "sgd-momentum", "adam", "adamw"; "?" otherwise.  Static. */
const char *remat_optim_name(int kind);
/* Parses one of those names.  Returns REMAT_OK and sets *out, or REMAT_EINVAL. */
int remat_optim_parse(const char *name, enum remat_optim_kind *out);

/* What the optimizer's model needs besides the weights. */
struct remat_optim_spec {
    enum remat_optim_kind kind;
    int foreach;          /* nonzero: the multi-tensor step (temporaries over all tensors) */
    int param_elem_bytes; /* bytes per weight element; 0 = 4 (fp32) */
    int state_elem_bytes; /* bytes per state element; 0 = as the weights */
    int master_weights;   /* nonzero: an fp32 copy of the weights sits in the state */
    int weight_decay;     /* nonzero: L2 weight decay (adam and sgd make a temporary for it) */
    double step_ms;       /* copied into the result; 0 when unknown */
};

void remat_optim_spec_init(struct remat_optim_spec *spec); /* none, fp32, no decay */

/* The state and step transient an optimizer of `spec` needs for the weights
 * of `profile` (the sum of its stages' param_bytes), by the rules of
 * docs/scheduling.md: a model for when the worker has not measured them.
 * Returns REMAT_OK and fills *out, or a negative code with err filled. */
int remat_optim_estimate(const struct remat_profile *profile, const struct remat_optim_spec *spec,
                         struct remat_optimizer *out, struct remat_error *err);

/* The live bytes during the optimizer step, a floor under every plan's
 * peak: input, weights, their gradients, state and step transient.  0 when
 * the profile has no optimizer. */
int64_t remat_optim_step_peak_bytes(const struct remat_profile *profile);

/* ------------------------------------------------------------------------
 * Schedules: what the simulator replays
 */

enum remat_op_kind {
    REMAT_OP_F_NONE = 0, /* F_∅: forward without grad; a transient input is freed */
    REMAT_OP_F_CK = 1,   /* F_ck: forward without grad, the input kept as a checkpoint */
    REMAT_OP_F_ALL = 2,  /* F_all: forward with grad, keeping x̄_i (saved tensors) and the input */
    REMAT_OP_LOSS = 3,   /* the loss: allocates δ_n; stage is n */
    REMAT_OP_B = 4       /* backward of a stage: frees x̄_i and δ_i, makes δ_{i-1} and ∂W_i */
};

/* An op's name as plans spell it: "F_none", "F_ck", "F_all", "loss", "B";
 * "?" for any other kind.  Static storage. */
const char *remat_op_name(int kind);
/* Parses exactly one of those names.  Returns REMAT_OK and sets *out, or
 * REMAT_EINVAL (out untouched). */
int remat_op_parse(const char *name, enum remat_op_kind *out);

struct remat_op {
    uint32_t stage; /* 1..n */
    uint8_t kind;   /* enum remat_op_kind */
};

struct remat_schedule {
    size_t n_ops;
    size_t cap;
    struct remat_op *ops; /* owned */
};

void remat_schedule_init(struct remat_schedule *s);
/* Appends one op.  Returns REMAT_OK, REMAT_ENOMEM or REMAT_ELIMIT. */
int remat_schedule_push(struct remat_schedule *s, enum remat_op_kind kind, uint32_t stage);
void remat_schedule_clear(struct remat_schedule *s); /* frees ops, back to empty */

/* The single-level schedule of a checkpoint set: every segment but the last
 * runs F_ck then F_∅ forward; the last runs F_all; the loss; then backward
 * segment by segment, each non-last one recomputed with F_all first.
 * checkpoints: ascending, each in 1..n-1.  Returns REMAT_OK or negative. */
int remat_schedule_from_checkpoints(const struct remat_profile *profile, const size_t *checkpoints,
                                    size_t n_checkpoints, struct remat_schedule *out,
                                    struct remat_error *err);

/* ------------------------------------------------------------------------
 * The memory simulator
 */

enum remat_model {
    REMAT_MODEL_SUM = 0,    /* the paper's first objective (ACG's convention) */
    REMAT_MODEL_PREFIX = 1, /* the paper's revised objective */
    REMAT_MODEL_TRACED = 2  /* the full accounting; the default of every answer */
};

const char *remat_model_name(enum remat_model m);
/* Returns 0 and sets *out, or REMAT_EINVAL for an unknown name. */
int remat_model_parse(const char *name, enum remat_model *out);

struct remat_sim {
    int64_t peak_bytes;
    size_t peak_phase;   /* index of the op during which the peak occurs; n_phases
                          * when it is the optimizer step after the last op */
    double total_ms;     /* every forward (first pass and recomputation) and backward,
                          * and the optimizer step (traced) */
    double recompute_ms; /* total_ms minus one forward and one backward of every stage */
    size_t n_phases;     /* = ops replayed; timeline has this many entries when asked */
    int64_t *timeline;   /* bytes live after each op; owned, NULL unless asked for */
};

/* Replays a schedule under a model (REMAT_MODEL_SUM needs a checkpoint set,
 * so it is REMAT_EUNSUPPORTED here: use remat_simulate_checkpoints).
 * A schedule that uses a value it has not computed, computes one twice or
 * ends with anything still to do is REMAT_EINVAL naming the op.
 * want_timeline: nonzero to fill out->timeline.
 * Returns REMAT_OK or negative; out is owned by the caller (remat_sim_clear). */
int remat_simulate(const struct remat_profile *profile, enum remat_model model,
                   const struct remat_schedule *schedule, int want_timeline, struct remat_sim *out,
                   struct remat_error *err);

/* The single-level plan of a checkpoint set under any model. */
int remat_simulate_checkpoints(const struct remat_profile *profile, enum remat_model model,
                               const size_t *checkpoints, size_t n_checkpoints, int want_timeline,
                               struct remat_sim *out, struct remat_error *err);

void remat_sim_clear(struct remat_sim *sim);

/* ------------------------------------------------------------------------
 * Solvers and plans
 */

enum remat_algorithm {
    REMAT_ALG_STORE_ALL = 0,
    REMAT_ALG_SQRT,
    REMAT_ALG_UNIFORM,
    REMAT_ALG_ACG,
    REMAT_ALG_PAPER_CUBIC,
    REMAT_ALG_PAPER_LINEAR,
    REMAT_ALG_MIN_PEAK,
    REMAT_ALG_MIN_TIME,
    REMAT_ALG_COUNT
};

const char *remat_algorithm_name(enum remat_algorithm a); /* "store-all", "min-peak", ... */
int remat_algorithm_parse(const char *name, enum remat_algorithm *out);
/* The model in which an algorithm is exact (store-all/sqrt/uniform: traced). */
enum remat_model remat_algorithm_model(enum remat_algorithm a);

struct remat_options {
    enum remat_algorithm algorithm;
    int has_model; /* nonzero: report the objective in `model` instead */
    enum remat_model model;
    size_t segments;      /* uniform: K; 0 = unset */
    int64_t budget_bytes; /* min-time: the traced peak allowed, weights included; 0 = unset */
    size_t mem_slots;     /* min-time: memory discretisation; 0 = the default (500) */
    /* Cancellation, for deadlines and callers that went away: when not
     * NULL, the solvers whose work grows faster than n log n (acg,
     * paper-cubic, min-time) call cancel(cancel_arg) between units of work
     * of at most a few milliseconds, and remat_solve calls it once before
     * solving; a nonzero answer stops the solve with REMAT_ECANCELED.  It
     * runs on the solving thread, never after remat_solve returns. */
    int (*cancel)(void *cancel_arg);
    void *cancel_arg;
};

void remat_options_init(struct remat_options *o); /* min-peak, no budget */

struct remat_plan {
    enum remat_algorithm algorithm;
    size_t n_stages;
    size_t n_checkpoints;
    size_t *checkpoints; /* ascending, 1..n-1; owned.  Single-level plans only */
    int single_level;    /* 1 unless a nested min-time schedule */
    enum remat_model objective_model;
    int64_t objective_value;      /* in objective_model, bytes */
    int64_t peak_bytes;           /* traced simulation of the schedule */
    int64_t store_all_peak_bytes; /* traced, for comparison */
    double recompute_ms;
    double total_ms;
    int64_t budget_bytes;           /* min-time: the budget asked for; else 0 */
    int64_t min_budget_bytes;       /* min-time when infeasible: the least budget that fits */
    struct remat_schedule schedule; /* owned; always filled */
    /* min-time: a bound on (total_ms - optimum) / optimum, the optimum
     * being the least time of any persistent schedule within the budget;
     * 0 when the plan is the table's own answer (docs/min-time.md). */
    double optimality_gap;
};

/* Solves.  Returns REMAT_OK and fills *plan (caller owns: remat_plan_clear),
 * or a negative code with err filled; on REMAT_EINFEASIBLE plan->min_budget_bytes
 * is set and the rest of *plan is empty. */
int remat_solve(const struct remat_profile *profile, const struct remat_options *opts,
                struct remat_plan *plan, struct remat_error *err);

void remat_plan_clear(struct remat_plan *plan);

/* An upper bound, in bytes, on the memory remat_solve takes for this
 * profile and these options beyond the profile itself, computed in O(1)
 * without allocating: what a service checks against its memory before
 * solving (min-time's table dominates: up to n(n+1)/2 cells of
 * mem_slots + 1 doubles, at most 512 MiB).  Returns REMAT_OK with *bytes
 * set, or a negative code with err filled (opts or profile invalid). */
int remat_solve_memory_bound(const struct remat_profile *profile, const struct remat_options *opts,
                             int64_t *bytes, struct remat_error *err);

/* The plan as `remat plan` prints it: algorithm, checkpoints, segments,
 * objective {model, value}, peak_bytes, store_all_peak_bytes, recompute_ms,
 * torch_segments, and for min-time schedule, total_ms and budget_bytes.
 * Returns: new reference, or NULL when out of memory. */
json_t *remat_plan_to_json(const struct remat_profile *profile, const struct remat_plan *plan);

/* The plan's compact JSON text: byte for byte what json_dumps(
 * remat_plan_to_json(profile, plan), JSON_COMPACT) gives, written without
 * building the tree.  *len_out (may be NULL) gets its length.
 * Returns: new NUL-terminated string (free it), or NULL when out of memory
 * or when remat_plan_to_json would fail. */
char *remat_plan_dumps(const struct remat_profile *profile, const struct remat_plan *plan,
                       size_t *len_out);

/* ------------------------------------------------------------------------
 * The memory/time frontier (min-time's table, read at every budget)
 */

struct remat_frontier_point {
    int64_t peak_bytes; /* traced simulation of the schedule */
    double total_ms;
    struct remat_plan plan; /* owned */
};

struct remat_frontier {
    size_t n_points; /* ascending peak, strictly descending time */
    struct remat_frontier_point *points;
};

/* Every Pareto point from the least-memory schedule to store-all, from one
 * table fill.  mem_slots 0 = the default.  Returns REMAT_OK or negative. */
int remat_frontier_compute(const struct remat_profile *profile, size_t mem_slots,
                           struct remat_frontier *out, struct remat_error *err);
/* The same, calling cancel(cancel_arg) (may be NULL) between units of
 * the table fill, as remat_options.cancel: nonzero stops it with
 * REMAT_ECANCELED (out empty). */
int remat_frontier_compute_cancel(const struct remat_profile *profile, size_t mem_slots,
                                  int (*cancel)(void *cancel_arg), void *cancel_arg,
                                  struct remat_frontier *out, struct remat_error *err);
void remat_frontier_clear(struct remat_frontier *f);
json_t *remat_frontier_to_json(const struct remat_profile *profile, const struct remat_frontier *f);

/* ------------------------------------------------------------------------
 * Batch scaling and fits: what a cluster scheduler asks (fits.c,
 * docs/scheduling.md)
 */

#define REMAT_FITS_MAX_PROFILES 32              /* measured batches one answer uses */
#define REMAT_FITS_MAX_MEMORIES 64              /* memory sizes one answer covers */
#define REMAT_FITS_MAX_BATCH (INT64_C(1) << 24) /* the largest batch searched */

/* The profile at `batch`, predicted from profiles of the same model measured
 * at other batch sizes (each with batch_size > 0, all distinct, the same
 * stages and weights).  Each field of each stage (and input_bytes) is taken
 * as non-decreasing in the batch (a running maximum over the measured
 * batches) and linear between measured batches, extended by the nearest
 * segment outside them; a single profile scales in proportion to the batch.
 * Bytes round up.  Weights and optimizer are the measured ones.  Sets
 * *extrapolated (may be NULL) to 1 when batch is outside the measured range.
 * Stage names are borrowed from profiles[0]: free the result first.
 * Returns: new profile, or NULL with err filled (pointers "/profiles/k/..."). */
struct remat_profile *remat_profile_at_batch(const struct remat_profile *const *profiles,
                                             size_t n_profiles, int64_t batch, int *extrapolated,
                                             struct remat_error *err);

/* How good the batch model is: each measured batch strictly inside the
 * range predicted from the others, per field the largest error over the
 * stages relative to that field's largest measured value. */
enum remat_fit_field {
    REMAT_FIT_INPUT_BYTES = 0,
    REMAT_FIT_OUT_BYTES,
    REMAT_FIT_SAVED_BYTES,
    REMAT_FIT_FWD_TMP_BYTES,
    REMAT_FIT_BWD_TMP_BYTES,
    REMAT_FIT_FWD_MS,
    REMAT_FIT_BWD_MS,
    REMAT_FIT_N_FIELDS
};
const char *remat_fit_field_name(int field); /* "out_bytes", ...; static */

struct remat_fit_check {
    int64_t batch;                      /* the measured batch left out */
    double rel_err[REMAT_FIT_N_FIELDS]; /* |predicted - measured| / largest measured */
};

/* Fills out[0..*n_out) (caller's array of n_profiles entries) with one check
 * per interior batch; *n_out = 0 with fewer than three profiles.
 * Returns REMAT_OK or negative with err filled. */
int remat_batch_fit_check(const struct remat_profile *const *profiles, size_t n_profiles,
                          struct remat_fit_check *out, size_t *n_out, struct remat_error *err);

struct remat_fits_options {
    int64_t margin_bytes;   /* kept free on the device */
    double margin_fraction; /* and this fraction of it (0..0.9) */
    int64_t max_batch;      /* the search's upper end; 0 = REMAT_FITS_MAX_BATCH */
    size_t mem_slots;       /* min-time's discretisation; 0 = its default */
    int want_throughput;    /* nonzero: also the throughput-best batch (min-time) */
    /* Cancellation, as remat_options.cancel: called before each batch is
     * evaluated and passed to every solve; nonzero stops remat_fits with
     * REMAT_ECANCELED. */
    int (*cancel)(void *cancel_arg);
    void *cancel_arg;
};

void remat_fits_options_init(struct remat_fits_options *o); /* no margin, throughput on */

struct remat_fits_answer {
    int64_t memory_bytes;
    int64_t usable_bytes;               /* memory less the margins */
    int64_t batch;                      /* largest batch whose min-peak plan fits; 0: none */
    struct remat_profile *profile;      /* predicted at batch (at 1 when none); owned */
    struct remat_plan plan;             /* min-peak at batch; empty when batch is 0 */
    int64_t next_peak_bytes;            /* min-peak's peak at batch + 1 (> usable_bytes) */
    int64_t store_all_batch;            /* largest batch store-all fits; 0: none */
    int64_t store_all_peak_bytes;       /* store-all's peak there */
    int64_t store_all_next_peak_bytes;  /* and at store_all_batch + 1 */
    int64_t best_batch;                 /* most samples per second under usable_bytes; 0: none */
    struct remat_profile *best_profile; /* predicted at best_batch; owned; NULL when none */
    struct remat_plan best_plan;        /* min-time at best_batch */
    double best_samples_per_s;          /* best_batch * 1000 / best_plan.total_ms */
    size_t best_candidates;             /* batches whose min-time plan was compared */
    int extrapolated;                   /* an answer's batch or batch + 1 is outside the measured */
    int capped;                         /* batch is max_batch: a larger one may fit */
};

/* For each memory size, the largest batch that fits (min-peak and store-all,
 * each with the peak at the next batch, which does not fit) and, when asked,
 * the throughput-best batch with its min-time plan.  Peaks are non-decreasing
 * in the batch under the batch model above, so the largest batch is found by
 * bisection, and is checked at the answer (batch fits, batch + 1 does not).
 * out: caller's array of n_memories, each cleared with
 * remat_fits_answer_clear, also on failure.  Returns REMAT_OK or negative. */
int remat_fits(const struct remat_profile *const *profiles, size_t n_profiles,
               const int64_t *memory_bytes, size_t n_memories,
               const struct remat_fits_options *opts, struct remat_fits_answer *out,
               struct remat_error *err);

void remat_fits_answer_clear(struct remat_fits_answer *a);

/* An upper bound, in bytes, on the memory remat_fits takes for these
 * profiles, memory count and options beyond the profiles themselves, in
 * O(1) without allocating (what a service reserves before answering, as
 * remat_solve_memory_bound for one solve): the largest single solve (one
 * runs at a time) plus the predicted profiles and plans the answers keep.
 * Returns REMAT_OK with *bytes set, or negative with err filled. */
int remat_fits_memory_bound(const struct remat_profile *const *profiles, size_t n_profiles,
                            size_t n_memories, const struct remat_fits_options *opts,
                            int64_t *bytes, struct remat_error *err);

/* The usable memory of a common GPU by name ("a100-40gb", "h100-80gb", ...;
 * the table is in docs/scheduling.md): what CUDA reports as the card's
 * total, less 1 GiB for the CUDA context and libraries.  Approximate: pass
 * bytes measured on the card for an exact answer.
 * Returns REMAT_OK and sets *bytes, or REMAT_EINVAL for an unknown name. */
int remat_gpu_memory_bytes(const char *name, int64_t *bytes);
/* The i-th name of that table, or NULL past its end; static storage. */
const char *remat_gpu_name(size_t i);
/* SkyPilot's accelerator name of a card of that table ("A100-80GB"), or
 * NULL for a name not in it; static storage. */
const char *remat_gpu_skypilot(const char *name);

/* ------------------------------------------------------------------------
 * Sharded jobs: the memory of one data-parallel rank (sharded.c,
 * docs/scheduling.md "Sharded jobs")
 */

enum remat_shard_strategy {
    REMAT_SHARD_DDP = 0, /* every rank holds everything */
    REMAT_SHARD_ZERO1,   /* optimizer state sharded (ZeroRedundancyOptimizer) */
    REMAT_SHARD_ZERO2,   /* and gradients */
    REMAT_SHARD_ZERO3,   /* and weights, gathered a unit at a time */
    REMAT_SHARD_FSDP,    /* FULL_SHARD: as zero3 */
    REMAT_SHARD_HSDP,    /* as fsdp within a shard group, replicated across groups */
    REMAT_SHARD_COUNT
};

#define REMAT_SHARD_MAX_RANKS (INT64_C(1) << 20)
#define REMAT_SHARD_MAX_PARAMS (INT64_C(1) << 50)
#define REMAT_SHARD_DEFAULT_BUCKET (INT64_C(25) << 20) /* DDP's bucket_cap_mb=25 */

const char *remat_shard_name(int strategy); /* "ddp", ...; static */
/* Returns REMAT_OK and sets *out, or REMAT_EINVAL for an unknown name. */
int remat_shard_parse(const char *name, enum remat_shard_strategy *out);

struct remat_shard_spec {
    enum remat_shard_strategy strategy;
    int64_t data;            /* N, the data-parallel ranks: 1..2^20 */
    int64_t shard_group;     /* hsdp: the ranks one copy is sharded over (divides data) */
    int64_t params;          /* Ψ, parameter elements: 0..2^50 */
    int64_t largest_unit;    /* elements of the largest unit zero3/fsdp gathers (<= params) */
    int param_bytes;         /* bytes per element of the weights the forward uses (bf16: 2) */
    int grad_bytes;          /* of the gradients reduced (reduce_dtype) */
    int64_t optim_bytes;     /* K: optimizer bytes per parameter, master copy included: 0..64 */
    int64_t bucket_bytes;    /* one gradient bucket (default 25 MiB) */
    int bucket_view;         /* ddp/zero1: gradients are views of the buckets */
    int64_t activations;     /* the plan's peak, weights and optimizer left out */
    int64_t step_tmp;        /* the optimizer step's transient for the whole model */
    int step_tmp_per_tensor; /* nonzero: step_tmp is one tensor's (single-tensor loop) */
};

void remat_shard_spec_init(struct remat_shard_spec *s); /* ddp, 1 rank, fp32, 25 MiB */

/* One rank's bytes, each term as docs/scheduling.md derives it; peak is
 * their sum. */
struct remat_shard_breakdown {
    int64_t weights, gradients, optimizer, gathered, buckets, activations, step_tmp, peak;
};

/* Fills out from s.  Returns REMAT_OK, or negative with err filled (the
 * pointer names the request member: "/parallel/data", ...) and out zeroed. */
int remat_shard_memory(const struct remat_shard_spec *s, struct remat_shard_breakdown *out,
                       struct remat_error *err);

/* Bytes per element of a dtype name ("float32", "bfloat16", "float16",
 * "float64" and the worker's "fp32", "bf16", "fp16", "fp64"); 0 for any
 * other. */
int remat_dtype_bytes(const char *name);

/* A data-parallel job as POST /v1/fits's "parallel" and mixed precision
 * say it; the sizes come from the profiles (remat_fits_sharded). */
struct remat_shard_job {
    enum remat_shard_strategy strategy;
    int64_t data, shard_group; /* as remat_shard_spec */
    int param_bytes;           /* 0: the profiles' dtype's (fp32 when they name none) */
    int grad_bytes;            /* 0: param_bytes */
    int state_bytes;           /* the optimizer state's element; 0: 4 */
    int master_weights;        /* 1, 0; -1: an fp32 copy when param_bytes < 4 */
    int64_t bucket_bytes;      /* 0: 25 MiB */
    int bucket_view;
};
void remat_shard_job_init(struct remat_shard_job *j); /* ddp, 1 rank, defaults */

/* remat_fits for one rank of `job`: Ψ and the largest unit from profile
 * 0's weights and dtype, K from its optimizer (kind and foreach: estimate
 * a missing one first, remat_optim_estimate); each memory less the
 * margins and less the rank's weights, gradients, optimizer, gathered and
 * buckets is the activations' room, in which remat_fits finds the largest
 * batch of the profiles without their weights and optimizer; the step's
 * transient must fit beside the rest.  out[k] as remat_fits's, with
 * memory_bytes and usable_bytes the caller's; per_rank[k] the breakdown at
 * out[k].batch (activations 0 when no batch fits), whose peak is at most
 * usable_bytes when one does; *spec the rank's spec used.  out is cleared
 * (remat_fits_answer_clear) also on failure.  REMAT_OK or negative. */
int remat_fits_sharded(const struct remat_profile *const *profiles, size_t n_profiles,
                       const int64_t *memory_bytes, size_t n_memories,
                       const struct remat_fits_options *opts, const struct remat_shard_job *job,
                       struct remat_fits_answer *out, struct remat_shard_breakdown *per_rank,
                       struct remat_shard_spec *spec, struct remat_error *err);

/* The least number of data-parallel ranks, at most max_data (1..2^20), at
 * which batch 1 of job fits memory_bytes (job.data is ignored; hsdp counts
 * whole shard groups); *least = 0 when none does.  REMAT_OK or negative. */
int remat_fits_least_data(const struct remat_profile *const *profiles, size_t n_profiles,
                          int64_t memory_bytes, const struct remat_fits_options *opts,
                          const struct remat_shard_job *job, int64_t max_data, int64_t *least,
                          struct remat_error *err);

/* One rank's breakdown of job at `batch` (1..2^24) with that batch's
 * min-peak plan: what a rank running a micro-batch below the largest
 * needs.  REMAT_OK or negative with err (out zeroed). */
int remat_fits_sharded_at(const struct remat_profile *const *profiles, size_t n_profiles,
                          const struct remat_shard_job *job, int64_t batch,
                          struct remat_shard_breakdown *out, struct remat_error *err);

#define REMAT_FITS_MAX_GLOBAL_BATCH (INT64_C(1) << 40)

/* What a scheduler places for one memory (docs/scheduling.md, "Per GPU
 * kind"). */
struct remat_fits_schedule {
    int64_t global_batch;
    int64_t ranks;               /* the job's data */
    int64_t least_data;          /* fewest ranks at which batch 1 fits; 0: none */
    int64_t micro_batch;         /* per rank: min(batch, ceil(global / ranks)); 0: none fits */
    int64_t accumulation_steps;  /* ceil(ceil(global / ranks) / micro_batch) */
    int64_t samples_per_step;    /* micro_batch * ranks * accumulation_steps >= global */
    int64_t micro_peak_bytes;    /* the rank's peak at micro_batch (its min-peak plan) */
    int64_t device_memory_bytes; /* that peak + the margins + 1 GiB of CUDA context */
};

/* The schedule of answer a (with breakdown b, from remat_fits_sharded of
 * the same profiles, options and job) for global_batch samples per step.
 * REMAT_OK or negative with err (out zeroed). */
int remat_fits_schedule(const struct remat_profile *const *profiles, size_t n_profiles,
                        const struct remat_fits_options *opts, const struct remat_shard_job *job,
                        int64_t global_batch, const struct remat_fits_answer *a,
                        const struct remat_shard_breakdown *b, struct remat_fits_schedule *out,
                        struct remat_error *err);

/* s as POST /v1/fits's "schedule", with the requests schedulers take:
 * nvidia.com/gpu, a DRA CEL selector, SkyPilot accelerators by memory and,
 * when gpu (may be NULL) names a card of the GPU table, by name.  New
 * reference, or NULL (memory). */
json_t *remat_fits_schedule_to_json(const struct remat_fits_schedule *s, const char *gpu);

/* per_rank as POST /v1/fits answers it.  New reference, or NULL (memory). */
json_t *remat_shard_breakdown_to_json(const struct remat_shard_spec *s,
                                      const struct remat_shard_breakdown *b);

/* An answer as POST /v1/fits and `remat fits` print it (docs/api.md).
 * Returns: new reference, or NULL when out of memory. */
json_t *remat_fits_answer_to_json(const struct remat_fits_answer *a);

#ifdef __cplusplus
}
#endif

#endif /* REMAT_H */
