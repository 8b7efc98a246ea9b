/*
 * sandbox.h - uploaded models run in a child process of remat-worker that
 * can do little besides load and run them (docs/security.md).
 *
 * An uploaded TorchScript archive is code: its forward may call any
 * TorchScript builtin (torch.from_file opens files) and its archive may
 * crash libtorch's parser.  So every profile and validation of an uploaded
 * model runs in a fresh remat-worker started as `remat-worker
 * --sandbox-child` (exec, never a bare fork of a process whose libtorch
 * thread pools, heartbeat thread and libcurl already run).  Before it loads
 * the model the child applies, in this order: rlimits (memory, core, file
 * size), no_new_privs, a Landlock ruleset (files: its scratch folder, its
 * own archive, the libraries, the device), and a seccomp filter (no
 * sockets, no processes, no new limits).  It gets a clean environment, the
 * job on one descriptor, its archive on another, and writes its progress
 * and its result on a third.  The worker kills it at --job-timeout.
 *
 * Zoo models (no model_path in the spec) keep running in the worker's own
 * process: their code is remat's.
 */
#ifndef REMAT_WORKER_SANDBOX_H
#define REMAT_WORKER_SANDBOX_H

#include <stddef.h>

#include <jansson.h>

#include "shim.h"

/* How uploaded models run. */
enum rw_sandbox_mode {
    RW_SANDBOX_ON = 0,  /* in the sandboxed child (the default) */
    RW_SANDBOX_UNSAFE,  /* --unsafe-no-sandbox: in the worker's process, unconfined */
    RW_SANDBOX_MISSING, /* no sandbox here and no --unsafe-no-sandbox: refused */
};

struct rw_sandbox {
    enum rw_sandbox_mode mode;
    char missing[256];      /* RW_SANDBOX_MISSING: why there is none */
    const char *device;     /* "cpu" or "cuda:N", as rw_open got it */
    long long memory_bytes; /* the child's memory beyond what libtorch has at start; 0: none */
    int job_timeout_s;      /* wall-clock limit of one job, > 0 */
    int landlock_abi;       /* the kernel's Landlock ABI (0: none) */
    int no_op_check;        /* a local run's --unsafe-no-op-check: the child skips rw's op check */
};

/* The default of --job-timeout and REMAT_JOB_TIMEOUT, in seconds. */
#define RW_JOB_TIMEOUT_DEFAULT_S 900

/* Fills sb for device: mode RW_SANDBOX_ON when this build has seccomp and
 * the kernel has Landlock, else RW_SANDBOX_UNSAFE when unsafe is nonzero,
 * else RW_SANDBOX_MISSING with the reason.  Never fails. */
void rw_sandbox_init(struct rw_sandbox *sb, const char *device, long long memory_bytes,
                     int job_timeout_s, int unsafe);

/* Runs a job of kind "profile" or "validation" whose spec names an
 * uploaded archive (model_path, in the spec or its model_spec).  attempt is
 * the lease's (1 for the first try): a child killed by a signal fails the
 * job as retryable on the first attempt only.  progress is called as the
 * child reports its stages, and at least every quarter second; nonzero
 * from it kills the child and the call fails abandoned.  Returns the
 * result (new), or NULL with why filled. */
json_t *rw_sandbox_run(const struct rw_sandbox *sb, const char *kind, const json_t *spec,
                       int attempt, rw_progress_fn progress, void *ctx, struct rw_failure *why);

/* Whether spec (of kind) names an uploaded archive: 1 or 0. */
int rw_sandbox_wants(const char *kind, const json_t *spec);

/* Confines the calling process as the child confines itself before it
 * loads a model: memory limit (memory_bytes beyond its address space now;
 * 0: none), no_new_privs, Landlock (scratch read-write, archive_fd
 * readable when >= 0, the libraries and device read-only) and seccomp.
 * Irreversible.  Returns 0, or -1 with why filled.  Exposed for
 * tests/worker/test_sandbox.c. */
int rw_sandbox_confine(const char *device, const char *scratch, int archive_fd,
                       long long memory_bytes, char *why, size_t cap);

/* The child's main: argv[1] is "--sandbox-child".  Returns the exit
 * status (the result itself goes to the result descriptor). */
int rw_sandbox_child_main(int argc, char **argv);

#endif
