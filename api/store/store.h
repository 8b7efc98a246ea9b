/*
 * store.h - rematd's durable store: everything the routes may ask of it.
 *
 * The store keeps plans, jobs with their leases, Idempotency-Key records
 * and the records of uploaded models (their bytes are files beside it), and promises that a call
 * which reports success has committed (docs/jobs.md).  It knows nothing of HTTP: it returns data,
 * and the routes make statuses, links and Location headers of it.  Nothing here names a
 * database either: each call is passed on (store.c) to the backend the store was opened with
 * (store_backend.h): SQLite, embedded and the default (the files of api/store/sqlite/, which
 * share sqlite/sqlite.h), or PostgreSQL, for replicas sharing one database (the files of
 * api/store/pg/, sharing pg/pg.h; built when configure finds libpq).  What a call fills is
 * freed by values.c; the group commit of plans (group.c) is the same for both.
 *
 * Tenants (tenants.h): every model, job and plan row, and every
 * Idempotency-Key record (through its scope), names the tenant that made
 * it; rows written before tenants existed are "default"'s.  The store
 * reads by id whatever the tenant and returns the row's tenant (tenant[]):
 * the routes answer 404 for another tenant's row, as for no row.  Lists
 * and quotas take the tenant.
 *
 * Every call that can fail returns an enum rematd_store_result; what it
 * fills is new (the caller frees it with the matching _clear) only when it
 * returns REMATD_STORE_OK, unless its comment says otherwise.
 */
#ifndef REMATD_STORE_H
#define REMATD_STORE_H

#include <stddef.h>

#include "../rematd.h"
#include "../tenants.h"

enum rematd_store_result {
    REMATD_STORE_OK = 0,
    /* No such plan, job or key; for a lease, no queued job the worker can
     * take. */
    REMATD_STORE_NOT_FOUND = 1,
    /* Someone else holds it: a lease that is stale, expired or not the
     * job's; an Idempotency-Key already recorded (the record is returned). */
    REMATD_STORE_CONFLICT = 2,
    /* Storing it would pass a bound: the total bytes of uploaded models,
     * --max-queued-jobs for a new job, --max-idempotency-keys for a new
     * key.  Nothing was stored. */
    REMATD_STORE_FULL = 3,
    /* The store did not answer (the database failed, out of memory). */
    REMATD_STORE_ERROR = -1,
};

struct rematd_store;

/* Opens the store dir names (--store): a directory, or sqlite:DIR, for
 * the SQLite store there (created if need be); postgresql://... (or
 * postgres://..., or postgresql: and libpq's key=value words) for a
 * PostgreSQL database.  Migrates an older database to this version's
 * schema, and starts the store's threads.  Returns a new store, or NULL
 * with a message in errbuf: among others when the database comes from a
 * newer rematd than this one, when another process holds the directory
 * (<dir>/rematd.lock), when PRAGMA quick_check finds damage, when the
 * PostgreSQL server cannot be reached, or when this rematd was built
 * without libpq. */
struct rematd_store *rematd_store_open(const char *dir, const struct rematd_config *cfg,
                                       char *errbuf, size_t errlen);
/* Whether spec (a --store value) names a store shared by replicas. */
int rematd_store_is_shared(const char *spec);
/* The backend's name: "sqlite" or "postgresql".  Borrowed, static. */
const char *rematd_store_backend(struct rematd_store *st);
/* Commits what is queued, stops the threads and closes.  NULL is a no-op. */
void rematd_store_close(struct rematd_store *st);
/* REMATD_STORE_OK while the store answers, is not closing, its database
 * is where it was opened and its last write did not fail. */
enum rematd_store_result rematd_store_ready(struct rematd_store *st);

/* ------------------------------------------------------------------------
 * Idempotency-Key records.  A route that creates a plan or a job records,
 * with it and in the same transaction, (scope, key) -> (the SHA-256 of the
 * request body, the id of what it created, the answer's body), so that a
 * retry gets the first answer again.
 */

struct rematd_idem {
    char body_hash[65];
    char resource_id[REMATD_ID_LEN + 1]; /* the plan or job the key created */
    char *body;                          /* the first answer's body */
};

/* The live record of (scope, key), one younger than --idempotency-ttl:
 * OK (out filled: rematd_idem_clear), NOT_FOUND or ERROR. */
enum rematd_store_result rematd_store_get_idempotency(struct rematd_store *st, const char *scope,
                                                      const char *key, struct rematd_idem *out);
void rematd_idem_clear(struct rematd_idem *r);

/* ------------------------------------------------------------------------
 * Plans: written by group commit.
 */

/* A plan waiting for the next group commit.  The route fills the fields,
 * calls rematd_store_enqueue_plan and suspends its connection; once the
 * batch holding the plan has committed (or failed), the store sets result
 * and calls done().  result: OK; CONFLICT when idem_key was recorded first
 * by another request (existing then holds that record, to replay: the
 * route frees it with rematd_idem_clear); FULL when its new key would pass
 * --max-idempotency-keys or its tenant's --tenant-max-idempotency-keys;
 * ERROR. */
struct rematd_plan_write {
    char id[REMATD_ID_LEN + 1];
    char created_at[32];
    const char *algorithm;
    char *options;                      /* JSON text, owned by the route */
    char profile_id[REMATD_ID_LEN + 1]; /* "" when the profile was inline */
    unsigned char *record;              /* plan_codec.h's record, owned by the route */
    size_t record_len;
    char *body;           /* the answer's body, owned by the route */
    char body_hash[65];   /* SHA-256 of the request body, with an Idempotency-Key */
    const char *idem_key; /* NULL: none */
    const char *idem_scope;
    const char *tenant; /* NULL: "default" */
    enum rematd_store_result result;
    struct rematd_idem existing;
    void (*done)(struct rematd_plan_write *w);
    void *cls;
    struct rematd_plan_write *next; /* the store's queue */
};

/* Queues w for the next group commit.  w must stay alive until done(w). */
void rematd_store_enqueue_plan(struct rematd_store *st, struct rematd_plan_write *w);
/* Group commits of plans since start, and the plans they committed. */
void rematd_store_commit_stats(struct rematd_store *st, unsigned long *commits,
                               unsigned long *plans);

/* A stored plan.  Plans stored by this version have record (plan_codec.h),
 * created_at and profile_id ("" for an inline profile); one stored by
 * rematd 0.1.0 has legacy_body (its answer) and legacy_request (or NULL)
 * instead.  options (the normalised request options, JSON) either way. */
struct rematd_stored_plan {
    char tenant[REMATD_TENANT_MAX + 1];
    char created_at[32];
    char profile_id[REMATD_ID_LEN + 1];
    unsigned char *record;
    size_t record_len;
    char *options;
    char *legacy_body;
    char *legacy_request;
};
/* OK (out filled: rematd_stored_plan_clear), NOT_FOUND or ERROR. */
enum rematd_store_result rematd_store_get_plan(struct rematd_store *st, const char *id,
                                               struct rematd_stored_plan *out);
void rematd_stored_plan_clear(struct rematd_stored_plan *p);

/* ------------------------------------------------------------------------
 * Jobs and leases (docs/jobs.md has the state machine).
 */

/* Where a job is in its life (docs/jobs.md has the state machine).  Each
 * has one name, stored in the jobs table and answered as the job's
 * "status": rematd_job_status_name.  A new status goes last and gets its
 * name there. */
enum rematd_job_status {
    REMATD_JOB_QUEUED,
    REMATD_JOB_RUNNING,
    REMATD_JOB_DONE,
    REMATD_JOB_FAILED,
};
#define REMATD_JOB_STATUS_LAST REMATD_JOB_FAILED

/* "queued", "running", "done" or "failed": static.  A value that is not a
 * status is "unknown". */
const char *rematd_job_status_name(enum rematd_job_status s);
/* The status named name into *out: 0, or -1 when name (NULL allowed)
 * names none. */
int rematd_job_status_parse(const char *name, enum rematd_job_status *out);

/* A job as stored.  Times are seconds since the epoch. */
struct rematd_job {
    char id[REMATD_ID_LEN + 1];
    char tenant[REMATD_TENANT_MAX + 1];
    char kind[16]; /* "profile", "validation", "fits" */
    enum rematd_job_status status;
    int attempts; /* attempts that ended */
    double created_at, updated_at;
    double lease_expires_at; /* while running */
    char *spec;              /* JSON text */
    char *progress;          /* JSON text, or NULL */
    char *result;            /* JSON text once done, else NULL */
    char *reason;            /* why it failed, or NULL */
};
void rematd_job_clear(struct rematd_job *j);

/* A job to queue.  The route chooses the id and the time, so that it can
 * make the answer (recorded with an Idempotency-Key) before storing. */
struct rematd_job_new {
    const char *id;
    double created_at;
    const char *kind;
    const char *device;
    const char *spec;     /* JSON text */
    const char *idem_key; /* NULL: none */
    const char *idem_scope;
    const char *body_hash;
    const char *body; /* with a key: the answer to record */
    /* The uploaded model the job runs, or NULL: while the job is queued or
     * running the model cannot be deleted. */
    const char *model_id;
    const char *reuse_key; /* NULL: never reused (docs/api.md, "Profile reuse") */
    const char *tenant;    /* NULL: "default" */
};
/* Stores the job queued, and its Idempotency-Key record in the same
 * transaction.  OK; CONFLICT when the key was recorded first (existing
 * filled: rematd_idem_clear); NOT_FOUND when model_id names no model (it
 * was deleted since the route looked); FULL when --max-queued-jobs jobs are
 * queued, or the job's tenant has --tenant-max-queued-jobs queued, or the
 * key would pass --max-idempotency-keys or the tenant's
 * --tenant-max-idempotency-keys; ERROR. */
enum rematd_store_result rematd_store_create_job(struct rematd_store *st,
                                                 const struct rematd_job_new *job,
                                                 struct rematd_idem *existing);
/* The newest done job of this kind and reuse key: OK (out filled:
 * rematd_job_clear), NOT_FOUND or ERROR. */
enum rematd_store_result rematd_store_find_reusable(struct rematd_store *st, const char *kind,
                                                    const char *reuse_key, struct rematd_job *out);
/* The newest done jobs (at most max, newest first) of this kind and key:
 * OK with *out a new array of *n jobs (each rematd_job_clear, then free;
 * NULL when none), or ERROR (*out NULL).  A validation's key is
 * "profile:<profile id>" (it is never reused), so that the pictures find
 * the validations of a profile through the key's index. */
enum rematd_store_result rematd_store_list_done(struct rematd_store *st, const char *kind,
                                                const char *key, size_t max,
                                                struct rematd_job **out, size_t *n);
/* OK (out filled: rematd_job_clear), NOT_FOUND or ERROR. */
enum rematd_store_result rematd_store_get_job(struct rematd_store *st, const char *id,
                                              struct rematd_job *out);
/* A job no worker leases (kind "fits": rematd advances it when it is
 * read, docs/scheduling.md): its status, spec (NULL keeps it) and result
 * or reason (NULL clears them) replaced, when it is still queued.  OK,
 * NOT_FOUND (no such queued job) or ERROR. */
enum rematd_store_result rematd_store_advance_job(struct rematd_store *st, const char *id,
                                                  enum rematd_job_status status, const char *spec,
                                                  const char *result, const char *reason);
struct rematd_job_counts {
    long queued, running, done, failed;
};
/* Jobs by status: OK or ERROR (out then all zero). */
enum rematd_store_result rematd_store_count_jobs(struct rematd_store *st,
                                                 struct rematd_job_counts *out);

/* A lease handed to a worker. */
struct rematd_lease {
    char job_id[REMATD_ID_LEN + 1];
    char lease_id[REMATD_ID_LEN + 1];
    char kind[16];
    int attempt; /* the number of the attempt starting, from 1 */
    double lease_expires_at;
    char *spec; /* the job's spec, JSON text */
};
void rematd_lease_clear(struct rematd_lease *l);

/* Leases the oldest queued job whose kind is in kinds and whose device one
 * of devices serves ("cuda" is served by any "cuda:N"; "cuda:N" and "cpu"
 * only by themselves); both lists end with NULL.  Expired leases are put
 * back first.  OK (out filled: rematd_lease_clear), NOT_FOUND (none), or
 * ERROR. */
enum rematd_store_result rematd_store_lease_job(struct rematd_store *st, const char *worker_id,
                                                const char *const *kinds,
                                                const char *const *devices,
                                                struct rematd_lease *out);
/* The calls a worker makes under its lease: each succeeds only while the
 * job is running under lease_id and the lease has not expired.  OK;
 * CONFLICT (stale lease, or the job is not running); NOT_FOUND (no such
 * job); ERROR. */
/* Renews the lease and records progress (JSON text, or NULL to keep the
 * last); *lease_expires_at is the new end. */
enum rematd_store_result rematd_store_renew_lease(struct rematd_store *st, const char *id,
                                                  const char *lease_id, const char *progress,
                                                  double *lease_expires_at);
/* Done, with result (JSON text). */
enum rematd_store_result rematd_store_complete_job(struct rematd_store *st, const char *id,
                                                   const char *lease_id, const char *result);
/* An attempt failed: retryable puts the job back in the queue until the
 * attempts are used up; otherwise it fails now with reason. */
enum rematd_store_result rematd_store_fail_job(struct rematd_store *st, const char *id,
                                               const char *lease_id, const char *reason,
                                               int retryable);
/* Back to the queue, the attempt not counted. */
enum rematd_store_result rematd_store_release_job(struct rematd_store *st, const char *id,
                                                  const char *lease_id);

/* ------------------------------------------------------------------------
 * Uploaded models (sqlite/models.c, pg/models.c).  The store keeps the record; the
 * archive is a file named by its SHA-256 under the data directory
 * (api/models_common.c), written and renamed there before the record is
 * added, so that a record always has its file.  The PostgreSQL store also
 * copies the archive into the database with the record, so that every
 * replica can serve it (pg/models.c).
 */

struct rematd_model {
    /* The first 32 hex digits of sha256 for the tenant "default"; for
     * another, of the SHA-256 of "<sha256>/<tenant>" (models_upload.c), so
     * that two tenants' uploads of the same bytes are two models, and the
     * id says nothing about what other tenants uploaded. */
    char id[REMATD_ID_LEN + 1];
    char tenant[REMATD_TENANT_MAX + 1];
    char sha256[65];
    long long bytes;
    double created_at;
    char *meta; /* JSON text: what the archive check found (root, entries, ...) */
};
void rematd_model_clear(struct rematd_model *m);

/* Adds m (m->tenant's), unless a model with its id is there, and unless
 * the total bytes of all models would pass quota_bytes or those of its
 * tenant's tenant_quota_bytes.  OK (added); CONFLICT (it was there:
 * existing filled, rematd_model_clear); FULL; ERROR. */
enum rematd_store_result rematd_store_add_model(struct rematd_store *st,
                                                const struct rematd_model *m,
                                                unsigned long long quota_bytes,
                                                unsigned long long tenant_quota_bytes,
                                                struct rematd_model *existing);
/* OK (out filled: rematd_model_clear), NOT_FOUND or ERROR. */
enum rematd_store_result rematd_store_get_model(struct rematd_store *st, const char *id,
                                                struct rematd_model *out);
/* Up to max models of tenant, oldest first: OK with *out a new array of
 * *n (rematd_models_free; NULL when *n is 0), or ERROR. */
enum rematd_store_result rematd_store_list_models(struct rematd_store *st, const char *tenant,
                                                  size_t max, struct rematd_model **out, size_t *n);
void rematd_models_free(struct rematd_model *list, size_t n);
/* Removes the record: OK; NOT_FOUND; CONFLICT while a queued or running
 * job names the model (nothing removed); ERROR. */
enum rematd_store_result rematd_store_delete_model(struct rematd_store *st, const char *id);
/* The total bytes of tenant's models (NULL: of all): OK or ERROR. */
enum rematd_store_result rematd_store_models_bytes(struct rematd_store *st, const char *tenant,
                                                   unsigned long long *total);
/* Whether a model record (any tenant's) names the archive sha256, whose
 * file tenants share: OK (one does), NOT_FOUND (none: the file may go) or
 * ERROR. */
enum rematd_store_result rematd_store_model_sha_used(struct rematd_store *st, const char *sha256);
/* Makes sure path (rematd_model_path's) holds m's archive: with SQLite it
 * always does; another replica's upload is fetched from the PostgreSQL
 * store into path, checked against m->sha256.  OK or ERROR. */
enum rematd_store_result rematd_store_model_file(struct rematd_store *st,
                                                 const struct rematd_model *m, const char *path);

#endif
