/*
 * store_backend.h - what a store backend implements (private to the
 * store; the rest of rematd sees store.h only).
 *
 * store.c dispatches every store.h call through the backend's table: the
 * SQLite one (sqlite/sqlite.c and the files sharing sqlite/sqlite.h), the
 * embedded default, and, when configure found libpq, the PostgreSQL one
 * (the files of pg/) for replicas sharing a database.  Each backend's own
 * struct begins with struct rematd_store, so that it is one pointer for
 * the callers and the backend's own for its functions.  The entries have
 * the contracts written in store.h for the call of the same name.
 */
#ifndef REMATD_STORE_BACKEND_H
#define REMATD_STORE_BACKEND_H

#include "store.h"
#include "group.h"

struct rematd_store_ops {
    const char *name; /* "sqlite", "postgresql": /metrics and the log */
    void (*close)(struct rematd_store *st);
    enum rematd_store_result (*ready)(struct rematd_store *st);
    enum rematd_store_result (*get_idempotency)(struct rematd_store *st, const char *scope,
                                                const char *key, struct rematd_idem *out);
    enum rematd_store_result (*get_plan)(struct rematd_store *st, const char *id,
                                         struct rematd_stored_plan *out);
    enum rematd_store_result (*create_job)(struct rematd_store *st,
                                           const struct rematd_job_new *job,
                                           struct rematd_idem *existing);
    enum rematd_store_result (*get_job)(struct rematd_store *st, const char *id,
                                        struct rematd_job *out);
    /* The ids (at most max, newest first) of the done jobs of this kind and
     * reuse key: store.c's rematd_store_list_done and
     * rematd_store_find_reusable (max 1) read each with get_job. */
    enum rematd_store_result (*done_ids)(struct rematd_store *st, const char *kind, const char *key,
                                         size_t max, char (*ids)[REMATD_ID_LEN + 1], size_t *n);
    enum rematd_store_result (*count_jobs)(struct rematd_store *st, struct rematd_job_counts *out);
    enum rematd_store_result (*lease_job)(struct rematd_store *st, const char *worker_id,
                                          const char *const *kinds, const char *const *devices,
                                          struct rematd_lease *out);
    enum rematd_store_result (*renew_lease)(struct rematd_store *st, const char *id,
                                            const char *lease_id, const char *progress,
                                            double *lease_expires_at);
    enum rematd_store_result (*complete_job)(struct rematd_store *st, const char *id,
                                             const char *lease_id, const char *result);
    enum rematd_store_result (*fail_job)(struct rematd_store *st, const char *id,
                                         const char *lease_id, const char *reason, int retryable);
    enum rematd_store_result (*release_job)(struct rematd_store *st, const char *id,
                                            const char *lease_id);
    enum rematd_store_result (*advance_job)(struct rematd_store *st, const char *id,
                                            enum rematd_job_status status, const char *spec,
                                            const char *result, const char *reason);
    enum rematd_store_result (*add_model)(struct rematd_store *st, const struct rematd_model *m,
                                          unsigned long long quota_bytes,
                                          unsigned long long tenant_quota_bytes,
                                          struct rematd_model *existing);
    enum rematd_store_result (*get_model)(struct rematd_store *st, const char *id,
                                          struct rematd_model *out);
    enum rematd_store_result (*list_models)(struct rematd_store *st, const char *tenant, size_t max,
                                            struct rematd_model **out, size_t *n);
    enum rematd_store_result (*delete_model)(struct rematd_store *st, const char *id);
    enum rematd_store_result (*models_bytes)(struct rematd_store *st, const char *tenant,
                                             unsigned long long *total);
    enum rematd_store_result (*model_sha_used)(struct rematd_store *st, const char *sha256);
    /* NULL: the archive is always in its file (the store is on the same
     * disk).  See rematd_store_model_file. */
    enum rematd_store_result (*model_file)(struct rematd_store *st, const struct rematd_model *m,
                                           const char *path);
};

/* Plans are queued for the backend's group commit (group.h), which
 * store.c reaches directly: the queue and its thread are the same code
 * for every backend, only the commit differs. */
struct rematd_store {
    const struct rematd_store_ops *ops;
    struct rematd_group *group;
};

/* Whether a housekeeping pass at `now` purges expired Idempotency-Key
 * records: once a minute, or once a TTL when that is shorter (a record
 * then leaves within about a TTL of expiring, and its slot under
 * --max-idempotency-keys is free again). */
static inline int rematd__idem_purge_due(double now, double last_purge, double ttl)
{
    return now - last_purge >= (ttl < 60 ? ttl : 60);
}

/* The bounds of stored plans and Idempotency-Key records (--plan-ttl,
 * --max-store-bytes; sqlite/bounds.c, pg/bounds.c): whether a housekeeping
 * pass at `now` enforces them.  Once a minute, or once --plan-ttl when
 * that is shorter, and sooner once the bytes this process wrote since the
 * last pass reach a sixteenth of the bound (a burst).  The bytes of a row
 * are those of its fields (the database's own overhead is not counted);
 * past the bound the oldest rows go, plans and records alike, until the
 * rest take at most REMATD_STORE_KEEP of it, so that one more plan does
 * not start a pass again. */
static inline int rematd__bounds_due(double now, double last, unsigned plan_ttl, long long written,
                                     size_t max_bytes)
{
    double period = plan_ttl > 0 && plan_ttl < 60 ? (double)plan_ttl : 60.0;
    return now - last >= period || written >= (long long)(max_bytes / 16);
}
#define REMATD_STORE_KEEP(max_bytes) ((max_bytes) / 8 * 7)

/* Adds n jobs of the status named name (a row of the backends' GROUP BY
 * status) to c; a name that is no status counts nowhere. */
void rematd__job_counts_add(struct rematd_job_counts *c, const char *name, long n);

/* The backends' opens: a new store or NULL with a message in errbuf. */
struct rematd_store *rematd__sqlite_open(const char *dir, const struct rematd_config *cfg,
                                         char *errbuf, size_t errlen);
#ifdef HAVE_LIBPQ
struct rematd_store *rematd__pg_open(const char *conninfo, const struct rematd_config *cfg,
                                     char *errbuf, size_t errlen);
#endif

#endif
