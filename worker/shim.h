/*
 * shim.h - the worker's C view of its libtorch shim (worker/shim.cpp and
 * the C++ files behind it, listed in worker/shim_private.h).
 *
 * The C main loop (worker/main.c) speaks HTTP and JSON; everything that
 * touches libtorch sits behind these few calls, so that no C++ type and no
 * exception crosses into C.  JSON goes in and out as jansson values.
 *
 * A call that fails returns NULL and fills struct rw_failure: a one-line
 * reason for the job's "reason" field, and whether trying again elsewhere
 * could help (an out-of-memory on this device could; a shape error could not).
 */
#ifndef REMAT_WORKER_SHIM_H
#define REMAT_WORKER_SHIM_H

#include <stddef.h>

#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rw_failure {
    int retryable;    /* nonzero: another attempt (elsewhere, later) might succeed */
    int abandoned;    /* nonzero: stopped because the progress callback asked it to */
    char reason[512]; /* one line, no newline */
};

/* Called between steps with the stage being worked on (1..stages) and the
 * activity ("building", "measuring", "validating"; static storage).
 * Returns nonzero to make the running call stop at once (lease lost,
 * SIGTERM): the call then fails with rw_failure.abandoned set. */
typedef int (*rw_progress_fn)(void *ctx, int stage, int stages, const char *activity);

/* Opens a device: "cpu" or "cuda:N".  On cpu it installs the counting
 * allocator that every CPU measurement reads; cpu_limit_bytes (0 = none)
 * makes any allocation past that many live bytes fail as an out-of-memory.
 * Returns 0, or -1 with why filled.  Call once per process. */
int rw_open(const char *device, long long cpu_limit_bytes, struct rw_failure *why);

/* Whether an uploaded model's operators are checked against remat's
 * allow-list before it runs (docs/security.md, "Operators"): on unless
 * on is 0, which only a local run's --unsafe-no-op-check asks for, to see
 * what the sandbox alone stops.  Call before the job. */
void rw_set_op_check(int on);

/* Measures every stage of the model a profile job's spec describes
 * (docs/worker.md).  Returns: new remat.profile/v1 object, or NULL. */
json_t *rw_profile(const json_t *spec, rw_progress_fn progress, void *ctx, struct rw_failure *why);

/* Runs a plan for real: a validation job's spec {model_spec, plan,
 * profile, repeats, warmup, timeline} (docs/worker.md, "How a plan is
 * run").  The plan's op list is checked against the profile (when the spec
 * has none, against the model's stage count) before anything runs.
 * Returns: new result object (docs/jobs.md), or NULL. */
json_t *rw_validate(const json_t *spec, rw_progress_fn progress, void *ctx, struct rw_failure *why);

#ifdef __cplusplus
}
#endif

#endif /* REMAT_WORKER_SHIM_H */
