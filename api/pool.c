/* pool.c - the planning threads: CPU-heavy request work off the HTTP
 * threads.
 *
 * Each of libmicrohttpd's polling threads owns the connections it
 * accepted, and a polling thread busy with one request stalls every other
 * connection it holds, health probes included.  So whatever can take long
 * runs here: POST /v1/plans with a large body to read or a slow solver
 * (min-time, acg, paper-cubic; routes/plans_create.c decides; POST /v1/fits and
 * /v1/validations use it too).  One FIFO queue is served by as many threads as there are
 * cores: whichever thread is free takes the oldest request, whatever
 * connection it came on.  Quick plans (a small body, a
 * solver of O(n log n) or less) stay on their polling thread: handing them
 * over cost more (the queue and a wakeup, ~4 us) than planning them.
 *
 * A request handed over is suspended (rematd_req_defer); the job answers through
 * the usual rematd_req_* calls, which then only record the response, and either
 * resumes the connection itself or hands it on (to the store's writer).
 * The queue holds items (rematd.h), not requests: http embeds one in each
 * request's private tail, so that this file knows nothing of requests. */
#include "config.h"

#include <stdlib.h>
#include <sys/prctl.h>

#include "pool.h"
#include "rematd.h"

struct rematd_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct rematd_pool_item *head, *tail;
    atomic_long queued; /* for /metrics */
    int stopping;
    unsigned max_queued;
    unsigned n_threads;
    pthread_t threads[];
};

static void *pool_main(void *arg)
{
    /* Named for top -H, perf and /proc/PID/task. */
    prctl(PR_SET_NAME, "rematd-plan", 0, 0, 0);
    struct rematd_pool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        struct rematd_pool_item *it = p->head;
        if (!it) {
            if (p->stopping)
                break;
            pthread_cond_wait(&p->cv, &p->mu);
            continue;
        }
        p->head = it->next;
        if (!p->head)
            p->tail = NULL;
        atomic_fetch_sub(&p->queued, 1);
        pthread_mutex_unlock(&p->mu);
        it->run(it);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

struct rematd_pool *rematd_pool_start(unsigned n_threads, unsigned max_queued)
{
    if (n_threads == 0)
        n_threads = 1;
    struct rematd_pool *p = calloc(1, sizeof *p + n_threads * sizeof p->threads[0]);
    if (!p)
        return NULL;
    p->max_queued = max_queued ? max_queued : 1024;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    for (unsigned i = 0; i < n_threads; i++) {
        if (pthread_create(&p->threads[i], NULL, pool_main, p) != 0)
            break;
        p->n_threads++;
    }
    if (p->n_threads == 0) {
        rematd_pool_stop(p);
        return NULL;
    }
    return p;
}

void rematd_pool_submit(struct rematd_pool *p, struct rematd_pool_item *it)
{
    it->next = NULL;
    pthread_mutex_lock(&p->mu);
    if (p->tail)
        p->tail->next = it;
    else
        p->head = it;
    p->tail = it;
    atomic_fetch_add(&p->queued, 1);
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

int rematd_pool_full(struct rematd_pool *p)
{
    return atomic_load(&p->queued) >= (long)p->max_queued;
}

long rematd_pool_queued(struct rematd_pool *p)
{
    return p ? atomic_load(&p->queued) : 0;
}

void rematd_pool_stop(struct rematd_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stopping = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->n_threads; i++)
        pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
