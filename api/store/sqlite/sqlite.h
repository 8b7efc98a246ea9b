/*
 * sqlite/sqlite.h - what the files of the SQLite store share (private to
 * them; the rest of rematd sees store.h only).
 *
 * One database, rematd.db under the data directory, in WAL mode, on three
 * connections: w for every write, under wmu (the writer thread's group
 * commits and the inline job and lease changes); r for reads, under rmu
 * (WAL lets it read while w writes); ck for the checkpoint thread alone.
 * The calls of store.h are the rematd__sqlite_* functions below, reached
 * through the backend table (store_backend.h).
 */
#ifndef REMATD_STORE_SQLITE_H
#define REMATD_STORE_SQLITE_H

#include <pthread.h>
#include <stdatomic.h>

#include <sqlite3.h>

#include "../store_backend.h"

/* The schema version this rematd writes (PRAGMA user_version); older
 * databases are migrated up to it at open (sqlite/schema.c). */
#define REMATD_SCHEMA_VERSION 5

/* One tenant's Idempotency-Key records (--tenant-max-idempotency-keys). */
struct rematd_idem_tenant {
    char name[REMATD_TENANT_MAX + 1];
    long n;
};

struct rematd_sqlite {
    struct rematd_store base; /* ops: the SQLite table (sqlite/sqlite.c) */
    sqlite3 *w;               /* writes, under wmu */
    pthread_mutex_t wmu;
    sqlite3 *r; /* reads, under rmu */
    pthread_mutex_t rmu;
    /* The group commit's statements on w, prepared once. */
    sqlite3_stmt *ins_plan, *ins_idem, *begin, *commit;
    int has_legacy; /* a plans_v1 table from rematd 0.1.0 is there */

    /* The group commit of plans (group.h; the commit is
     * sqlite/writer.c's). */
    struct rematd_group group;

    /* Checkpoints run on their own connection and thread, so that copying
     * the WAL into the database (and its fsync) never stalls a group commit. */
    sqlite3 *ck;
    pthread_mutex_t ckmu;
    pthread_cond_t ckcv;
    int ck_stopping; /* under ckmu */
    int ck_started;
    /* Set by the checkpoint thread when a checkpoint copied every frame it
     * saw: the writer then has only the frames added meanwhile to copy. */
    atomic_int ck_caught_up;
    pthread_t ck_thread;

    unsigned lease_seconds, max_attempts, idem_ttl;
    double last_purge; /* of expired Idempotency-Key records, under wmu */

    /* Bounds (--max-queued-jobs, --max-idempotency-keys); idem_count is
     * the number of records, under wmu. */
    long max_queued_jobs, max_idem;
    long tenant_max_queued_jobs; /* one tenant's queued jobs */
    long idem_count;
    /* --tenant-max-idempotency-keys: each tenant's records, counted in
     * memory next to idem_count (sqlite/idem.c), under wmu.  Only kept
     * when the share is below the whole (more than one tenant).  After a
     * rollback or a deletion the counts are stale, and the next insert
     * counts them again from the table. */
    long tenant_max_idem;
    struct rematd_idem_tenant *idem_tenants;
    size_t idem_ntenants, idem_tenants_cap;
    int idem_stale;
    /* --max-store-bytes, --plan-ttl (sqlite/bounds.c): the last pass, and
     * the bytes of plans and records written since, under wmu. */
    size_t max_store_bytes;
    unsigned plan_ttl;
    double last_bounds;
    long long written;
    long long stored_bytes; /* at the last pass, deletions since aside; -1: not summed */

    /* Faults.  lock_fd holds the data directory's flock for the store's
     * life.  The database file is identified at open (dev, ino): when the
     * path no longer names it (the directory was removed or replaced), the
     * store is lost for good and refuses every write.  failed is set by a
     * write that failed and cleared by one that succeeded (or by the
     * writer's probe in a quiet second), and makes the store not ready. */
    int lock_fd;
    char db_path[1100];
    unsigned long long db_dev, db_ino;
    atomic_int lost;
    atomic_int failed;
    long long wal_limit; /* bytes the WAL file is cut back to in a quiet second */
};

/* 0 when the store may write; -1 when its database is gone (logged once).
 * Cheap (one stat): called before every write transaction. */
int rematd__store_check(struct rematd_sqlite *st);
/* A write on w failed: logs what (the statement or step) with SQLite's own
 * error, marks the store failed, and rolls back the open transaction if
 * there still is one (SQLite ends it by itself on some errors, such as a
 * full disk).  Under wmu. */
void rematd__store_write_failed(struct rematd_sqlite *st, const char *what);
/* A write transaction committed: the store is writable again. */
void rematd__store_write_ok(struct rematd_sqlite *st);

/* Runs sql (one or more statements) on db; logs and returns -1 on failure. */
int rematd__sql_exec(sqlite3 *db, const char *sql);
/* Steps a prepared statement once and makes it ready for the next use;
 * returns sqlite3_step's code. */
int rematd__sql_step_reset(sqlite3_stmt *s);
/* Column i as new text, or NULL (a NULL column or no memory). */
char *rematd__sql_col_dup(sqlite3_stmt *s, int i);
/* The read of one row by its key, the prologue of every get: prepares sql
 * on db (the caller holds its mutex), binds key to its one parameter and
 * steps.  OK with *s on the row, NOT_FOUND (no row) or ERROR; the caller
 * finalizes *s whatever it returns. */
enum rematd_store_result rematd__sql_row(sqlite3 *db, const char *sql, const char *key,
                                         sqlite3_stmt **s);

/* sqlite/schema.c: brings w's database to REMATD_SCHEMA_VERSION and sets
 * has_legacy.  Returns 0, or -1 with a message in errbuf. */
int rematd__schema_migrate(struct rematd_sqlite *st, char *errbuf, size_t errlen);

/* sqlite/writer.c: sets up the group commit (st->group, st->base.group);
 * installs the WAL bound on w and starts the writer and checkpoint
 * threads; stops them (the writer commits what is queued). */
void rematd__writer_init(struct rematd_sqlite *st);
int rematd__writer_start(struct rematd_sqlite *st, char *errbuf, size_t errlen);
void rematd__writer_stop(struct rematd_sqlite *st);

/* sqlite/plans.c: inserts w's plan row on w (in the caller's transaction):
 * sqlite3_step's code. */
int rematd__plan_insert(struct rematd_sqlite *st, const struct rematd_plan_write *w);

/* sqlite/idem.c, on w under wmu inside the caller's transaction: records
 * (scope, key) for resource_id.  OK; CONFLICT when a live record holds the
 * key (existing filled); FULL at --max-idempotency-keys, or with the
 * scope's tenant at --tenant-max-idempotency-keys; ERROR.  A record past the TTL that the purge has
 * not removed yet gives way. */
enum rematd_store_result rematd__idem_insert(struct rematd_sqlite *st, const char *scope,
                                             const char *key, const char *body_hash,
                                             const char *resource_id, const char *body, double now,
                                             struct rematd_idem *existing);
/* Deletes records past the TTL, at most once a minute.  Under wmu. */
void rematd__idem_purge(struct rematd_sqlite *st, double now);
/* Counts the records again, all and per tenant, on w under wmu (at open,
 * after a purge, and when idem_stale says a rollback or an eviction left
 * the counts behind): 0, or -1 on an error (the counts are then stale). */
int rematd__idem_recount(struct rematd_sqlite *st);

/* sqlite/bounds.c: removes plans older than --plan-ttl and, past
 * --max-store-bytes, the oldest plans and Idempotency-Key records, when a
 * pass is due (rematd__bounds_due).  Under wmu, outside a transaction. */
void rematd__store_bounds(struct rematd_sqlite *st, double now);

/* sqlite/jobs.c: puts jobs whose lease expired back in the queue (or fails
 * them).  Under wmu, outside a transaction. */
void rematd__jobs_expire(struct rematd_sqlite *st);

/* The backend table's entries (store.h has their contracts), defined in
 * the file of their concern. */
void rematd__sqlite_close(struct rematd_store *base);
enum rematd_store_result rematd__sqlite_ready(struct rematd_store *base);
enum rematd_store_result rematd__sqlite_get_idempotency(struct rematd_store *base,
                                                        const char *scope, const char *key,
                                                        struct rematd_idem *out);
enum rematd_store_result rematd__sqlite_get_plan(struct rematd_store *base, const char *id,
                                                 struct rematd_stored_plan *out);
enum rematd_store_result rematd__sqlite_create_job(struct rematd_store *base,
                                                   const struct rematd_job_new *job,
                                                   struct rematd_idem *existing);
enum rematd_store_result rematd__sqlite_done_ids(struct rematd_store *base, const char *kind,
                                                 const char *key, size_t max,
                                                 char (*ids)[REMATD_ID_LEN + 1], size_t *n);
enum rematd_store_result rematd__sqlite_get_job(struct rematd_store *base, const char *id,
                                                struct rematd_job *out);
enum rematd_store_result rematd__sqlite_count_jobs(struct rematd_store *base,
                                                   struct rematd_job_counts *out);
enum rematd_store_result rematd__sqlite_lease_job(struct rematd_store *base, const char *worker_id,
                                                  const char *const *kinds,
                                                  const char *const *devices,
                                                  struct rematd_lease *out);
enum rematd_store_result rematd__sqlite_renew_lease(struct rematd_store *base, const char *id,
                                                    const char *lease_id, const char *progress,
                                                    double *lease_expires_at);
enum rematd_store_result rematd__sqlite_complete_job(struct rematd_store *base, const char *id,
                                                     const char *lease_id, const char *result);
enum rematd_store_result rematd__sqlite_advance_job(struct rematd_store *base, const char *id,
                                                    enum rematd_job_status status, const char *spec,
                                                    const char *result, const char *reason);
enum rematd_store_result rematd__sqlite_fail_job(struct rematd_store *base, const char *id,
                                                 const char *lease_id, const char *reason,
                                                 int retryable);
enum rematd_store_result rematd__sqlite_release_job(struct rematd_store *base, const char *id,
                                                    const char *lease_id);
enum rematd_store_result rematd__sqlite_add_model(struct rematd_store *base,
                                                  const struct rematd_model *m,
                                                  unsigned long long quota_bytes,
                                                  unsigned long long tenant_quota_bytes,
                                                  struct rematd_model *existing);
enum rematd_store_result rematd__sqlite_get_model(struct rematd_store *base, const char *id,
                                                  struct rematd_model *out);
enum rematd_store_result rematd__sqlite_list_models(struct rematd_store *base, const char *tenant,
                                                    size_t max, struct rematd_model **out,
                                                    size_t *n);
enum rematd_store_result rematd__sqlite_delete_model(struct rematd_store *base, const char *id);
enum rematd_store_result rematd__sqlite_models_bytes(struct rematd_store *base, const char *tenant,
                                                     unsigned long long *total);
enum rematd_store_result rematd__sqlite_model_sha_used(struct rematd_store *base,
                                                       const char *sha256);

#endif
