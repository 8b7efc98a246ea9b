/*
 * group.c - the group commit's queue and writer thread, shared by
 * the SQLite and PostgreSQL stores (group.h has the contract; the
 * backends' commit and idle are in sqlite/writer.c and pg/pg.c).
 */
#include "config.h"

#include <stdio.h>
#include <sys/prctl.h>
#include <time.h>

#include "group.h"

void rematd__group_init(struct rematd_group *g, const char *name,
                        long (*commit)(void *arg, struct rematd_plan_write *batch),
                        void (*idle)(void *arg), void *arg)
{
    g->commit = commit;
    g->idle = idle;
    g->arg = arg;
    g->name = name;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->head = g->tail = NULL;
    g->stopping = 0;
    g->started = 0;
    atomic_store(&g->commits, 0);
    atomic_store(&g->committed_plans, 0);
}

void rematd__group_enqueue(struct rematd_group *g, struct rematd_plan_write *w)
{
    w->next = NULL;
    pthread_mutex_lock(&g->mu);
    if (g->tail)
        g->tail->next = w;
    else
        g->head = w;
    g->tail = w;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

void rematd__group_fail(struct rematd_plan_write *batch)
{
    for (struct rematd_plan_write *w = batch; w; w = w->next) {
        /* A replay of a record in this very batch would replay what was
         * not stored. */
        if (w->result == REMATD_STORE_CONFLICT)
            rematd_idem_clear(&w->existing);
        w->result = REMATD_STORE_ERROR;
    }
}

static void *writer_main(void *arg)
{
    struct rematd_group *g = arg;
    prctl(PR_SET_NAME, g->name, 0, 0, 0);
    pthread_mutex_lock(&g->mu);
    for (;;) {
        if (!g->head) {
            if (g->stopping)
                break;
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            int rc = pthread_cond_timedwait(&g->cv, &g->mu, &ts);
            if (rc != 0 && !g->head) {
                pthread_mutex_unlock(&g->mu);
                g->idle(g->arg);
                pthread_mutex_lock(&g->mu);
            }
            continue;
        }
        struct rematd_plan_write *batch = g->head;
        g->head = g->tail = NULL;
        pthread_mutex_unlock(&g->mu);
        long n = g->commit(g->arg, batch);
        if (n >= 0) {
            atomic_fetch_add(&g->commits, 1);
            atomic_fetch_add(&g->committed_plans, (unsigned long)n);
        }
        while (batch) {
            /* done() may free the item: read next first. */
            struct rematd_plan_write *next = batch->next;
            batch->done(batch);
            batch = next;
        }
        pthread_mutex_lock(&g->mu);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

int rematd__group_start(struct rematd_group *g, char *errbuf, size_t errlen)
{
    if (pthread_create(&g->thread, NULL, writer_main, g) != 0) {
        snprintf(errbuf, errlen, "cannot start the writer thread");
        return -1;
    }
    g->started = 1;
    return 0;
}

int rematd__group_stopping(struct rematd_group *g)
{
    pthread_mutex_lock(&g->mu);
    int stopping = g->stopping;
    pthread_mutex_unlock(&g->mu);
    return stopping;
}

void rematd__group_stop(struct rematd_group *g)
{
    pthread_mutex_lock(&g->mu);
    g->stopping = 1;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
    if (g->started) {
        pthread_join(g->thread, NULL);
        g->started = 0;
    }
}

void rematd__group_destroy(struct rematd_group *g)
{
    rematd__group_stop(g);
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
}
