/* pool.h - the planning threads (pool.c): one FIFO queue, n threads, for
 * the request work that can take long (http/'s rematd_req_defer). */
#ifndef REMATD_POOL_H
#define REMATD_POOL_H

struct rematd_pool;
struct rematd_pool *rematd_pool_start(unsigned n_threads, unsigned max_queued);
/* Whether max_queued requests wait already (a soft bound: each polling
 * thread may add one past it between this check and its submit). */
int rematd_pool_full(struct rematd_pool *p);
/* One job in the queue: run(item) is called once on a planning thread.
 * The item is the caller's (http/ embeds one in each request it defers). */
struct rematd_pool_item {
    struct rematd_pool_item *next;
    void (*run)(struct rematd_pool_item *it);
};
void rematd_pool_submit(struct rematd_pool *p, struct rematd_pool_item *it);
/* Runs what is queued, then joins the threads. */
void rematd_pool_stop(struct rematd_pool *p);
/* Requests waiting for a planning thread now. */
long rematd_pool_queued(struct rematd_pool *p);

#endif
