/*
 * sandbox_private.h - what the two sides of the sandbox agree on:
 * sandbox.c, the worker's side that starts the child and reads its result,
 * and confine.c, the child's side that confines itself and runs the job.
 * Private to those two files (and tests/worker/test_sandbox.c links both).
 */
#ifndef REMAT_WORKER_SANDBOX_PRIVATE_H
#define REMAT_WORKER_SANDBOX_PRIVATE_H

/* The child's descriptors: the worker's posix_spawn puts them there, the
 * child reads the job from one and writes its lines to another. */
enum { FD_JOB = 3, FD_ARCHIVE = 4, FD_RESULT = 5 };

/* The archive as the child opens it: its own descriptor, through /proc
 * (FD_ARCHIVE).  The child never learns where the worker keeps its cache. */
#define CHILD_MODEL_PATH "/proc/self/fd/4"

/* The kernel's Landlock ABI, 0 when it has none (errno says why).  The
 * worker asks it to know whether it has a sandbox at all; the child, which
 * rules it may write. */
int rw_sandbox_landlock_abi(void);

#endif
