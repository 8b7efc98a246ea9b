/*
 * group.h - the group commit of plans, shared by the store backends
 * (private to the store; the rest of rematd sees store.h only).
 *
 * POST /v1/plans queues its plan (rematd_store_enqueue_plan) and suspends
 * its connection.  One writer thread per store takes whatever has queued
 * up since its last commit as one batch and hands it to the backend's
 * commit, which stores it in one transaction (one fsync or one COMMIT
 * round trip for the whole batch) and sets each plan's result; then each
 * plan's done() resumes its connection.  In a second with nothing queued
 * the thread calls the backend's idle instead (lease expiry, purges,
 * probes).  What is queued when the store closes is still committed.
 */
#ifndef REMATD_STORE_GROUP_H
#define REMATD_STORE_GROUP_H

#include <pthread.h>
#include <stdatomic.h>

#include "store.h"

struct rematd_group {
    /* Stores batch (a list by next) and sets each plan's result: the
     * number of plans it committed, or -1 when the batch was not
     * committed (then every result is REMATD_STORE_ERROR). */
    long (*commit)(void *arg, struct rematd_plan_write *batch);
    void (*idle)(void *arg);
    void *arg;
    const char *name; /* the thread's, for top -H and /proc/PID/task */

    /* The queue, under mu. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct rematd_plan_write *head, *tail;
    int stopping;
    int started;
    pthread_t thread;

    atomic_ulong commits, committed_plans; /* for /metrics */
};

/* Sets g up (no thread yet).  name must outlive g. */
void rematd__group_init(struct rematd_group *g, const char *name,
                        long (*commit)(void *arg, struct rematd_plan_write *batch),
                        void (*idle)(void *arg), void *arg);
/* Starts the writer thread: 0, or -1 with a message in errbuf. */
int rematd__group_start(struct rematd_group *g, char *errbuf, size_t errlen);
/* Queues w for the next batch.  w must stay alive until done(w). */
void rematd__group_enqueue(struct rematd_group *g, struct rematd_plan_write *w);
/* 1 once rematd__group_stop has begun: the store is closing. */
int rematd__group_stopping(struct rematd_group *g);
/* Commits what is queued, then ends the thread (when started). */
void rematd__group_stop(struct rematd_group *g);
/* Stops g if it is running and frees what init made. */
void rematd__group_destroy(struct rematd_group *g);
/* Every result of a batch that was not stored: REMATD_STORE_ERROR, and no
 * record to replay (a record found in this very batch was not stored). */
void rematd__group_fail(struct rematd_plan_write *batch);

#endif
