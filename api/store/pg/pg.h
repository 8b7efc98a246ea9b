/*
 * pg/pg.h - what the files of the PostgreSQL store share (private to
 * them; the rest of rematd sees store.h only).
 *
 * Any number of rematd replicas share one PostgreSQL database.  Each
 * replica holds a small pool of connections for reads and the inline job,
 * lease and model writes, and one connection for its writer thread, which
 * group-commits plans as the SQLite store's does.  What makes the promises
 * hold across replicas is in the database, never in a replica's memory:
 * row locks (a lease is taken with SELECT ... FOR UPDATE SKIP LOCKED; a
 * lease change is one guarded UPDATE), unique keys (an Idempotency-Key's
 * INSERT ... ON CONFLICT waits for the replica that holds it to commit),
 * transaction-scoped advisory locks (the queue's bound, the models' quota,
 * the migrations) and a locked counter row (the Idempotency-Keys' bound).
 * docs/deploy.md says when to choose which store.
 */
#ifndef REMATD_STORE_PG_H
#define REMATD_STORE_PG_H

#include <pthread.h>
#include <stdatomic.h>

#include <libpq-fe.h>

#include "../store_backend.h"

/* The schema version this rematd writes (remat_schema.version); older
 * databases are migrated up to it at open (pg/schema.c). */
#define REMATD_PG_SCHEMA_VERSION 3

/* Advisory lock keys: "remat" and a number, so that they do not collide
 * with an application sharing the database. */
#define REMATD_PG_LOCK_MIGRATE 0x72656d6174000001LL
#define REMATD_PG_LOCK_QUEUE 0x72656d6174000002LL
#define REMATD_PG_LOCK_MODELS 0x72656d6174000003LL

/* Connections in the pool: the routes' store calls are short, and each
 * holds one for one statement or one small transaction. */
#define REMATD_PG_POOL 8

struct rematd_pg {
    struct rematd_store base;
    char models_dir[1100]; /* this replica's copies of uploaded archives */
    double lease_seconds;
    unsigned max_attempts;
    double idem_ttl;
    long max_queued_jobs;
    long tenant_max_queued_jobs; /* one tenant's queued jobs */
    long max_idem;
    long tenant_max_idem; /* one tenant's records (pg/idem.c) */

    /* The pool, under pmu: free[i] when conns[i] is not lent.  epoch
     * counts the times a connection was found closed (a server restart
     * closes them all): one connected before the last count is reset
     * before it is lent, not found closed by a request's statement. */
    PGconn *conns[REMATD_PG_POOL];
    int conn_epoch[REMATD_PG_POOL];
    atomic_int epoch;
    int free[REMATD_PG_POOL];
    int n_free;
    pthread_mutex_t pmu;
    pthread_cond_t pcv;

    /* The group commit of plans (group.h; the commit is
     * pg/pg.c's) and its thread's own connection. */
    struct rematd_group group;
    PGconn *wc;
    double last_purge;
    /* --max-store-bytes, --plan-ttl (pg/bounds.c): its last pass, and the
     * bytes of plans this replica wrote since (the writer thread's). */
    size_t max_store_bytes;
    unsigned plan_ttl;
    double last_bounds;
    long long written;
    /* The SQLSTATE of the writer connection's last failed statement. */
    char w_sqlstate[6];

    /* A write failed and none has succeeded since: not ready. */
    atomic_int failed;
};

/* A pooled connection, reset first when the server closed it (a restart):
 * never NULL; put it back with rematd__pg_put. */
PGconn *rematd__pg_get(struct rematd_pg *st);
void rematd__pg_put(struct rematd_pg *st, PGconn *c);

/* Runs sql with n text parameters (types, or NULL to let the server infer
 * them) on c.  Returns the result (PQclear it), or NULL after logging the
 * error when the status is neither COMMAND_OK nor TUPLES_OK. */
PGresult *rematd__pg_exec(PGconn *c, const char *what, const char *sql, int n,
                          const char *const *values, const Oid *types);
/* The same for a statement that changes nothing it reports: 0 or -1. */
int rematd__pg_cmd(PGconn *c, const char *what, const char *sql, int n, const char *const *values,
                   const Oid *types);
/* A write on c failed (logged by the exec helpers): rolls back what is
 * open and marks the store failed until a write succeeds. */
void rematd__pg_write_failed(struct rematd_pg *st, PGconn *c);
void rematd__pg_write_ok(struct rematd_pg *st);
/* One write on c: the count of rows it changed (the store marked
 * writable), or -1 after rematd__pg_write_failed (c is still the
 * caller's to put back). */
long rematd__pg_write_count(struct rematd_pg *st, PGconn *c, const char *what, const char *sql,
                            int n, const char *const *values, const Oid *types);
/* Locks model id's row in c's open transaction: FOR UPDATE when
 * for_update (a delete), else FOR SHARE (a job naming the model), so that
 * a delete and a new job naming the model see each other.  OK when the
 * model is there, NOT_FOUND, or ERROR (logged under what). */
enum rematd_store_result rematd__pg_lock_model(PGconn *c, const char *what, const char *id,
                                               int for_update);
/* Begins a write transaction on c holding the advisory lock lock (one of
 * REMATD_PG_LOCK_*) until it ends, so that replicas take turns at what the
 * lock guards.  0, or -1 (logged under what; end it with
 * rematd__pg_end_write and ERROR). */
int rematd__pg_begin_locked(PGconn *c, const char *what, long long lock);
/* Ends a write transaction on c and puts c back: ret OK commits (a failed
 * COMMIT makes it ERROR), ERROR marks the store failed (the statement's
 * error was logged), anything else (NOT_FOUND, CONFLICT, FULL) rolls back
 * what was only read.  Returns ret, or ERROR when the COMMIT failed. */
enum rematd_store_result rematd__pg_end_write(struct rematd_pg *st, PGconn *c,
                                              enum rematd_store_result ret);

/* pg/bounds.c: removes plans older than --plan-ttl and, past
 * --max-store-bytes, the oldest plans and records, when a pass is due
 * (rematd__bounds_due), on the writer's connection c outside a
 * transaction. */
void rematd__pg_bounds(struct rematd_pg *st, PGconn *c, double now);

/* pg/schema.c: brings the database to REMATD_PG_SCHEMA_VERSION
 * under an advisory lock.  0, or -1 with a message in errbuf. */
int rematd__pg_migrate(PGconn *c, char *errbuf, size_t errlen);

/* pg/idem.c, on c inside the caller's transaction.
 *
 * --max-idempotency-keys is exact across replicas: the number of records
 * is a row of remat_counters, which a transaction that may add records
 * locks (rematd__pg_idem_lock, before any record, so that transactions
 * wait on each other in one order), counts in *count as it adds, and
 * writes back before its COMMIT (rematd__pg_idem_store).  Transactions
 * adding keys thus take turns across replicas, for the time of a commit;
 * plans and jobs without a key never touch the row. */
/* The locked count of records, or -1 (logged). */
long rematd__pg_idem_lock(PGconn *c);
/* Writes count back when it moved from before: 0, or -1 (logged). */
int rematd__pg_idem_store(PGconn *c, long before, long count);
/* Records (scope, key) for resource_id unless a live record holds it:
 * OK (*count + 1), CONFLICT (existing filled), FULL (*count at the bound,
 * or the scope's tenant at --tenant-max-idempotency-keys) or ERROR. */
enum rematd_store_result rematd__pg_idem_insert(struct rematd_pg *st, PGconn *c, long *count,
                                                const char *scope, const char *key,
                                                const char *body_hash, const char *resource_id,
                                                const char *body, double now,
                                                struct rematd_idem *existing);
enum rematd_store_result rematd__pg_get_idempotency(struct rematd_store *base, const char *scope,
                                                    const char *key, struct rematd_idem *out);

/* pg/jobs.c: the job and lease calls of the table. */
enum rematd_store_result rematd__pg_create_job(struct rematd_store *base,
                                               const struct rematd_job_new *job,
                                               struct rematd_idem *existing);
enum rematd_store_result rematd__pg_done_ids(struct rematd_store *base, const char *kind,
                                             const char *key, size_t max,
                                             char (*ids)[REMATD_ID_LEN + 1], size_t *n);
enum rematd_store_result rematd__pg_get_job(struct rematd_store *base, const char *id,
                                            struct rematd_job *out);
enum rematd_store_result rematd__pg_count_jobs(struct rematd_store *base,
                                               struct rematd_job_counts *out);
enum rematd_store_result rematd__pg_lease_job(struct rematd_store *base, const char *worker_id,
                                              const char *const *kinds, const char *const *devices,
                                              struct rematd_lease *out);
enum rematd_store_result rematd__pg_renew_lease(struct rematd_store *base, const char *id,
                                                const char *lease_id, const char *progress,
                                                double *lease_expires_at);
enum rematd_store_result rematd__pg_complete_job(struct rematd_store *base, const char *id,
                                                 const char *lease_id, const char *result);
enum rematd_store_result rematd__pg_advance_job(struct rematd_store *base, const char *id,
                                                enum rematd_job_status status, const char *spec,
                                                const char *result, const char *reason);
enum rematd_store_result rematd__pg_fail_job(struct rematd_store *base, const char *id,
                                             const char *lease_id, const char *reason,
                                             int retryable);
enum rematd_store_result rematd__pg_release_job(struct rematd_store *base, const char *id,
                                                const char *lease_id);
/* Puts jobs whose lease expired back in the queue (or fails them), each
 * counted once whichever replica runs it.  0, or -1 (logged). */
int rematd__pg_jobs_expire(struct rematd_pg *st, PGconn *c);

/* pg/models.c: the model calls of the table. */
enum rematd_store_result rematd__pg_add_model(struct rematd_store *base,
                                              const struct rematd_model *m,
                                              unsigned long long quota_bytes,
                                              unsigned long long tenant_quota_bytes,
                                              struct rematd_model *existing);
enum rematd_store_result rematd__pg_get_model(struct rematd_store *base, const char *id,
                                              struct rematd_model *out);
enum rematd_store_result rematd__pg_list_models(struct rematd_store *base, const char *tenant,
                                                size_t max, struct rematd_model **out, size_t *n);
enum rematd_store_result rematd__pg_delete_model(struct rematd_store *base, const char *id);
enum rematd_store_result rematd__pg_models_bytes(struct rematd_store *base, const char *tenant,
                                                 unsigned long long *total);
enum rematd_store_result rematd__pg_model_sha_used(struct rematd_store *base, const char *sha256);
enum rematd_store_result rematd__pg_model_file(struct rematd_store *base,
                                               const struct rematd_model *m, const char *path);

#endif
