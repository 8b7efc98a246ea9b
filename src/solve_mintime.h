/* solve_mintime.h - min-time schedules under a byte budget, and the frontier.
 *
 * The dynamic program is Rotor's table over persistent multi-level schedules
 * (docs/min-time.md), with the `traced` accounting of docs/memory-model.md
 * folded in exactly: a table cell (i, l, m) is the least time to back-propagate
 * stages i..l when x_{i-1} and δ_l are live and m memory units are free. */
#ifndef REMAT_SOLVE_MINTIME_H
#define REMAT_SOLVE_MINTIME_H
#include "remat_private.h"

/* Fills *plan completely (schedule, checkpoints when single-level, peak,
 * times) for the fastest persistent schedule whose traced peak is at most
 * opts->budget_bytes; REMAT_EINFEASIBLE with plan->min_budget_bytes set when
 * none fits. */
int remat__solve_min_time(const struct remat_profile *p, const struct remat_options *opts,
                          struct remat_plan *plan, struct remat_error *err);
/* The same with share = 0: no cell taken over from the one a period before
 * (remat__mt_period), as the solver was before it, on the same table (the
 * plain one where sharing would make it the solver's choice past 300
 * stages, else the runs'); for the bench and the tests, which compare
 * both. */
int remat__solve_min_time_share(const struct remat_profile *p, const struct remat_options *opts,
                                int share, struct remat_plan *plan, struct remat_error *err);
/* The solve on the plain table whatever the chain's length (where the
 * solver would take runs of stages past REMAT_MT_EXACT_STAGES, or refuse
 * the table past REMAT_MT_TABLE_MAX_STAGES), filled with prune 1 (shared
 * cells), 3 (none) or 4 (shared, as the fill was before the bound on the
 * leaves' room; remat__mt_fill): for the bench, which times a stack of
 * 160 layers each way.  A stack's table is limited by its cells
 * (remat__mt_fill). */
int remat__solve_min_time_exact(const struct remat_profile *p, const struct remat_options *opts,
                                int prune, struct remat_plan *plan, struct remat_error *err);
/* The long-chain solve (docs/min-time.md) on `groups` runs of stages
 * (remat__mt_runs), whatever the chain's length (1 <= groups <= n): for
 * the tests, which hold it to the plain solve where that can run. */
int remat__solve_min_time_groups(const struct remat_profile *p, const struct remat_options *opts,
                                 size_t groups, struct remat_plan *plan, struct remat_error *err);

/* For a nested (multi-level) plan: the nested segment description that maps
 * onto nested torch.utils.checkpoint calls, as plan JSON's "nested_segments".
 * Returns: new reference, or NULL when out of memory. */
json_t *remat__nested_segments_json(const struct remat_profile *p, const struct remat_plan *plan);

/* ------------------------------------------------------------------------
 * The table, shared by the solver, the frontier, the bench and the tests.
 */

#define REMAT__MT_DEFAULT_SLOTS 500
#define REMAT_MT_MAX_SLOTS 100000
/* The most stages min-time plans (docs/min-time.md, "Limits"). */
#define REMAT_MT_MAX_STAGES 10000
/* The most stages one table takes: its per-cell arrays grow as n^2. */
#define REMAT_MT_TABLE_MAX_STAGES 1000
/* Up to this many stages (and up to the table's on a chain of repeated
 * blocks, remat__mt_period) min-time solves on the plain table, exactly;
 * past it, on the table over runs of stages, with a bound on the gap. */
#define REMAT_MT_EXACT_STAGES 300
/* The runs the long-chain solve cuts a chain into. */
#define REMAT_MT_GROUPS 200
/* The most table memory one fill may take. */
#define REMAT_MT_MAX_TABLE_BYTES (INT64_C(512) << 20)

struct remat__mt; /* one filled table; opaque */

/* Fills the table for a profile and a budget (traced bytes, weights and the
 * input included) divided into `slots` units (0 = the default).  prune = 1
 * is the solver's fill; on a chain with a periodic stretch (repeated blocks
 * of stages) it computes each cell that is another one period before over
 * again once (remat__mt_period); prune = 3 is the same fill without that,
 * the tests' reference; prune = 4 is the sharing fill without the bound on
 * the leaves' room (src/solve_mintime_table.c, fill_pruned), as it was, for
 * the bench.  For the bench and the tests that compare them:
 * prune = 0 fills the whole table as Rotor does (every m of every cell, every
 * option checked per m); prune = 2 runs the solver's loops over every m of
 * every cell (no floors, no saturation).  On success *out is new (free with
 * remat__mt_free).  A budget below the weights and the input is
 * REMAT_EINFEASIBLE. */
int remat__mt_fill(const struct remat_profile *p, int64_t budget_bytes, size_t slots, int prune,
                   struct remat__mt **out, struct remat_error *err);
/* The same, checking cancel (may be NULL) once per cell: REMAT_ECANCELED. */
int remat__mt_fill_cancel(const struct remat_profile *p, int64_t budget_bytes, size_t slots,
                          int prune, const struct remat__cancel *cancel, struct remat__mt **out,
                          struct remat_error *err);
/* The pruned fill (prune must be 1; other values fill the whole table) of
 * only what two limits leave wanted, so faster when they leave little:
 *  - the root's values from root_lo_bytes (a budget, in traced bytes) up:
 *    remat__mt_time and remat__mt_schedule at every m from
 *    remat__mt_exact_from(t) up give what the whole table gives, and below
 *    it nothing (HUGE_VAL).  root_lo_bytes = budget_bytes wants the top
 *    only, 0 everything;
 *  - the values under cap_ms: at every m whose whole-table time is under
 *    cap_ms the time and the schedule are the whole table's; at the others
 *    the time may read higher, HUGE_VAL included.  HUGE_VAL: no cap.
 * remat__mt_fill_cancel is (HUGE_VAL, 0).  The table limit is checked on
 * the whole table, so the two limits never change whether a fill is
 * refused. */
int remat__mt_fill_capped(const struct remat_profile *p, int64_t budget_bytes, size_t slots,
                          int prune, double cap_ms, int64_t root_lo_bytes,
                          const struct remat__cancel *cancel, struct remat__mt **out,
                          struct remat_error *err);
/* The fill of the table over runs of stages: ends[0] = 0 < ends[1] < ...
 * < ends[g] = n, run k being stages ends[k-1]+1..ends[k], each run one
 * stage of the table whose options run its stages' ops one after the other
 * (F_all over the run, its backwards in reverse; F_ck of its first stage
 * and F_∅ of the rest).  Its schedules (remat__mt_schedule, over the
 * profile's own stages) are persistent schedules of the profile, its
 * times their exact times and its budgets bounds on their peaks, as for the
 * plain table: an upper bound on the plain table's answer.  Otherwise as
 * remat__mt_fill_capped with prune = 1. */
int remat__mt_fill_groups(const struct remat_profile *p, const size_t *ends, size_t g,
                          int64_t budget_bytes, size_t slots, double cap_ms, int64_t root_lo_bytes,
                          const struct remat__cancel *cancel, struct remat__mt **out,
                          struct remat_error *err);
size_t remat__mt_exact_from(const struct remat__mt *t);
void remat__mt_free(struct remat__mt *t);

/* The top index of the table (free units at the budget) and the unit. */
size_t remat__mt_top(const struct remat__mt *t);
int64_t remat__mt_unit(const struct remat__mt *t);
/* The budget, in traced bytes, that m free units stand for. */
int64_t remat__mt_budget_at(const struct remat__mt *t, size_t m);
/* Bytes the table's arrays take. */
size_t remat__mt_table_bytes(const struct remat__mt *t);
/* Least time to run the whole chain with m free units (m <= top); HUGE_VAL
 * when nothing fits. */
double remat__mt_time(const struct remat__mt *t, size_t m);
/* The schedule behind remat__mt_time(t, m), appended to *out (initialised by
 * the caller).  Only for tables filled with prune == 1. */
int remat__mt_schedule(const struct remat__mt *t, size_t m, struct remat_schedule *out);

/* The least traced peak of any persistent schedule (exact, in bytes, no
 * discretisation) and, when sched is not NULL, one schedule reaching it (the
 * fastest among those this recursion considers).  Returns REMAT_OK or
 * negative. */
int remat__mt_min_peak(const struct remat_profile *p, int64_t *peak_bytes,
                       struct remat_schedule *sched, struct remat_error *err);
int remat__mt_min_peak_cancel(const struct remat_profile *p, int64_t *peak_bytes,
                              struct remat_schedule *sched, const struct remat__cancel *cancel,
                              struct remat_error *err);

/* The same with share = 0: every cell computed, none taken over from the
 * cell one period before (remat__mt_period), the tests' reference. */
int remat__mt_min_peak_share(const struct remat_profile *p, int share, int64_t *peak_bytes,
                             struct remat_schedule *sched, const struct remat__cancel *cancel,
                             struct remat_error *err);

/* The runs the long-chain solve and the frontier use past
 * REMAT_MT_EXACT_STAGES: g runs (1 <= g <= n) of about equal length, each
 * cut moved to the stage of least output within a quarter run.  Returns
 * ends[0..g] (ends[0] = 0, ends[g] = n), new (free), or NULL when out of
 * memory. */
size_t *remat__mt_runs(const struct remat_profile *p, size_t g);

/* The least peak over the schedules of the runs that ends[0..g] bound
 * (remat__mt_fill_groups): an upper bound on the least peak, and a
 * schedule reaching it. */
int remat__mt_min_peak_groups(const struct remat_profile *p, const size_t *ends, size_t g,
                              int64_t *peak_bytes, struct remat_schedule *sched,
                              const struct remat__cancel *cancel, struct remat_error *err);

/* A bound from below on the time of every persistent schedule whose
 * traced peak is at most budget_bytes (solve_mintime_bound.c gives the
 * proof): every stage forwards and backwards once, and the stages that
 * forward only once keep their saved tensors live until their backward,
 * which bounds how many can.  HUGE_VAL when no schedule can fit. */
double remat__mt_time_bound(const struct remat_profile *p, int64_t budget_bytes);

/* Whether the plain table shares enough cells over a period of the chain
 * (remat__mt_find_period) to be filled past REMAT_MT_EXACT_STAGES: what
 * is left to fill weighs no more than a 300-stage chain's whole table.
 * 1 or 0, or negative on a bad profile. */
int remat__mt_profile_shares(const struct remat_profile *p, struct remat_error *err);

/* The period the fill found and shares cells over (a chain of repeated
 * blocks of stages), 0 when it shares none. */
size_t remat__mt_period(const struct remat__mt *t);

/* Fills every field of a min-time plan from a schedule, which it takes over
 * (schedule is left empty): simulates it, finds whether it is single-level
 * and its checkpoints.  Returns REMAT_OK or negative. */
int remat__mt_plan_from_schedule(const struct remat_profile *p, struct remat_schedule *schedule,
                                 int64_t budget_bytes, struct remat_plan *plan,
                                 struct remat_error *err);
#endif
