/* Plans through the store's group commit, for the store's unit tests
 * (test_store.c, test_store_pg.c): queued with rematd_store_enqueue_plan
 * and waited for until the writer thread has called every done(). */
#ifndef REMAT_TESTS_STORE_PLANS_H
#define REMAT_TESTS_STORE_PLANS_H

#include <pthread.h>
#include <stdlib.h>

#include "store.h"

struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
};

static void plan_done(struct rematd_plan_write *w)
{
    struct waiter *wt = w->cls;
    pthread_mutex_lock(&wt->mu);
    wt->done++;
    pthread_cond_signal(&wt->cv);
    pthread_mutex_unlock(&wt->mu);
}

/* Frees what plan_init allocated (options, record, body) and any record
 * handed back. */
static void plan_free(struct rematd_plan_write *w)
{
    free(w->options);
    free(w->record);
    free(w->body);
    rematd_idem_clear(&w->existing);
}

/* Queues the n plans at once and waits until all are done. */
static void write_plans(struct rematd_store *st, struct rematd_plan_write *ws, int n)
{
    struct waiter wt = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    for (int i = 0; i < n; i++) {
        ws[i].done = plan_done;
        ws[i].cls = &wt;
        rematd_store_enqueue_plan(st, &ws[i]);
    }
    pthread_mutex_lock(&wt.mu);
    while (wt.done < n)
        pthread_cond_wait(&wt.cv, &wt.mu);
    pthread_mutex_unlock(&wt.mu);
}

#endif
