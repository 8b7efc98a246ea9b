/*
 * sqlite/jobs.c - jobs and their leases: the state machine of docs/jobs.md
 * (queued -> running -> done or failed, back to queued on expiry, a
 * retryable failure or a release) as SQL.
 *
 * Job and lease changes are rare: each commits inline on the writer
 * connection under wmu, between group commits.  A lease change is one
 * UPDATE guarded by the lease (HELD), so that a worker whose lease expired
 * or was replaced changes nothing.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite.h"

static void copy_col(char *dst, size_t cap, sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    snprintf(dst, cap, "%s", t ? (const char *)t : "");
}

enum rematd_store_result rematd__sqlite_done_ids(struct rematd_store *base, const char *kind,
                                                 const char *key, size_t max,
                                                 char (*ids)[REMATD_ID_LEN + 1], size_t *n)
{
    struct rematd_sqlite *st = (struct rematd_sqlite *)base;
    sqlite3_stmt *s = NULL;
    enum rematd_store_result res = REMATD_STORE_ERROR;
    size_t got = 0;
    pthread_mutex_lock(&st->rmu);
    if (sqlite3_prepare_v2(st->r,
                           "SELECT id FROM jobs WHERE reuse_key = ? AND status = 'done' AND"
                           " kind = ? ORDER BY updated_at DESC LIMIT ?",
                           -1, &s, NULL) == SQLITE_OK) {
        sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, kind, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 3, (sqlite3_int64)max);
        int rc;
        while ((rc = sqlite3_step(s)) == SQLITE_ROW && got < max)
            copy_col(ids[got++], sizeof ids[0], s, 0);
        if (rc == SQLITE_DONE || rc == SQLITE_ROW)
            res = REMATD_STORE_OK;
    }
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->rmu);
    *n = got;
    return res;
}

enum rematd_store_result rematd__sqlite_get_job(struct rematd_store *base, const char *id,
                                                struct rematd_job *out)
{
    struct rematd_sqlite *st = (struct rematd_sqlite *)base;
    memset(out, 0, sizeof *out);
    sqlite3_stmt *s;
    pthread_mutex_lock(&st->rmu);
    enum rematd_store_result found =
        rematd__sql_row(st->r,
                        "SELECT kind, status, attempts, spec, progress, result, reason,"
                        " created_at, updated_at, lease_expires_at, tenant FROM jobs WHERE id = ?",
                        id, &s);
    if (found == REMATD_STORE_OK) {
        snprintf(out->id, sizeof out->id, "%s", id);
        copy_col(out->kind, sizeof out->kind, s, 0);
        int known =
            rematd_job_status_parse((const char *)sqlite3_column_text(s, 1), &out->status) == 0;
        out->attempts = sqlite3_column_int(s, 2);
        out->spec = rematd__sql_col_dup(s, 3);
        out->progress = rematd__sql_col_dup(s, 4);
        out->result = rematd__sql_col_dup(s, 5);
        out->reason = rematd__sql_col_dup(s, 6);
        out->created_at = sqlite3_column_double(s, 7);
        out->updated_at = sqlite3_column_double(s, 8);
        out->lease_expires_at = sqlite3_column_double(s, 9);
        copy_col(out->tenant, sizeof out->tenant, s, 10);
        /* A NULL column is NULL text; a non-NULL one that came back NULL
         * ran out of memory.  A status this rematd has no name for is a
         * database it cannot read. */
        int lost = !known || !out->spec ||
                   (!out->progress && sqlite3_column_type(s, 4) != SQLITE_NULL) ||
                   (!out->result && sqlite3_column_type(s, 5) != SQLITE_NULL) ||
                   (!out->reason && sqlite3_column_type(s, 6) != SQLITE_NULL);
        found = lost ? REMATD_STORE_ERROR : REMATD_STORE_OK;
    }
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->rmu);
    if (found != REMATD_STORE_OK)
        rematd_job_clear(out);
    return found;
}

enum rematd_store_result rematd__sqlite_count_jobs(struct rematd_store *base,
                                                   struct rematd_job_counts *out)
{
    struct rematd_sqlite *st = (struct rematd_sqlite *)base;
    memset(out, 0, sizeof *out);
    sqlite3_stmt *s = NULL;
    int rc = SQLITE_ERROR;
    pthread_mutex_lock(&st->rmu);
    if (sqlite3_prepare_v2(st->r, "SELECT status, count(*) FROM jobs GROUP BY status", -1, &s,
                           NULL) == SQLITE_OK) {
        while ((rc = sqlite3_step(s)) == SQLITE_ROW)
            rematd__job_counts_add(out, (const char *)sqlite3_column_text(s, 0),
                                   (long)sqlite3_column_int64(s, 1));
    }
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->rmu);
    if (rc != SQLITE_DONE) {
        memset(out, 0, sizeof *out);
        return REMATD_STORE_ERROR;
    }
    return REMATD_STORE_OK;
}

enum rematd_store_result rematd__sqlite_create_job(struct rematd_store *base,
                                                   const struct rematd_job_new *job,
                                                   struct rematd_idem *existing)
{
    struct rematd_sqlite *st = (struct rematd_sqlite *)base;
    enum rematd_store_result ret = REMATD_STORE_ERROR;
    sqlite3_stmt *s = NULL;
    pthread_mutex_lock(&st->wmu);
    long idem_before = st->idem_count;
    if (rematd__store_check(st) < 0)
        goto out_unlock;
    if (sqlite3_exec(st->w, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        rematd__store_write_failed(st, "BEGIN");
        goto out_unlock;
    }
    /* The queue's bounds, the whole queue's and the tenant's share,
     * counted inside the transaction that adds to it. */
    const char *tenant = job->tenant ? job->tenant : REMATD_TENANT_DEFAULT;
    if (sqlite3_prepare_v2(st->w,
                           "SELECT count(*), coalesce(sum(tenant = ?), 0) FROM jobs"
                           " WHERE status = 'queued'",
                           -1, &s, NULL) != SQLITE_OK)
        goto out_failed;
    sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
    if (sqlite3_step(s) != SQLITE_ROW)
        goto out_failed;
    if (sqlite3_column_int64(s, 0) >= st->max_queued_jobs ||
        sqlite3_column_int64(s, 1) >= st->tenant_max_queued_jobs) {
        ret = REMATD_STORE_FULL;
        sqlite3_exec(st->w, "ROLLBACK", NULL, NULL, NULL);
        goto out_unlock;
    }
    sqlite3_finalize(s);
    s = NULL;
    if (job->model_id) {
        /* Under the same write transaction as a delete of the model: either
         * the delete sees this job, or this sees the model gone. */
        if (sqlite3_prepare_v2(st->w, "SELECT 1 FROM models WHERE id = ?", -1, &s, NULL) !=
            SQLITE_OK)
            goto out_failed;
        sqlite3_bind_text(s, 1, job->model_id, -1, SQLITE_STATIC);
        int rc = sqlite3_step(s);
        sqlite3_finalize(s);
        s = NULL;
        if (rc == SQLITE_DONE) {
            ret = REMATD_STORE_NOT_FOUND;
            sqlite3_exec(st->w, "ROLLBACK", NULL, NULL, NULL);
            goto out_unlock;
        }
        if (rc != SQLITE_ROW)
            goto out_failed;
    }
    if (sqlite3_prepare_v2(st->w,
                           "INSERT INTO jobs (id, kind, status, device, spec, created_at,"
                           " updated_at, model_id, reuse_key, tenant)"
                           " VALUES (?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?)",
                           -1, &s, NULL) != SQLITE_OK)
        goto out_failed;
    sqlite3_bind_text(s, 1, job->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, job->kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, job->device, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, job->spec, -1, SQLITE_STATIC);
    sqlite3_bind_double(s, 5, job->created_at);
    sqlite3_bind_double(s, 6, job->created_at);
    if (job->model_id)
        sqlite3_bind_text(s, 7, job->model_id, -1, SQLITE_STATIC);
    if (job->reuse_key != NULL)
        sqlite3_bind_text(s, 8, job->reuse_key, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 9, tenant, -1, SQLITE_STATIC);
    if (sqlite3_step(s) != SQLITE_DONE)
        goto out_failed;
    if (job->idem_key) {
        ret = rematd__idem_insert(st, job->idem_scope, job->idem_key, job->body_hash, job->id,
                                  job->body, job->created_at, existing);
        if (ret == REMATD_STORE_ERROR)
            goto out_failed;
        if (ret != REMATD_STORE_OK) {
            sqlite3_exec(st->w, "ROLLBACK", NULL, NULL, NULL);
            st->idem_count = idem_before;
            st->idem_stale = 1;
            goto out_unlock;
        }
        ret = REMATD_STORE_ERROR;
    }
    if (sqlite3_exec(st->w, "COMMIT", NULL, NULL, NULL) == SQLITE_OK) {
        rematd__store_write_ok(st);
        ret = REMATD_STORE_OK;
        goto out_unlock;
    }
out_failed:
    /* The real error is logged, and the transaction rolled back only if
     * SQLite has not ended it already. */
    rematd__store_write_failed(st, "INSERT job");
    st->idem_count = idem_before;
    st->idem_stale = 1;
    ret = REMATD_STORE_ERROR;
out_unlock:
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->wmu);
    return ret;
}

void rematd__jobs_expire(struct rematd_sqlite *st)
{
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(
            st->w,
            "UPDATE jobs SET"
            " status = CASE WHEN attempts + 1 >= ?1 THEN 'failed' ELSE 'queued' END,"
            " reason = CASE WHEN attempts + 1 >= ?1 THEN 'lease expired ' || (expiries + 1) ||"
            "  ' times' ELSE reason END,"
            " last_error = 'lease expired', attempts = attempts + 1, expiries = expiries + 1,"
            " lease_id = NULL, lease_expires_at = NULL, worker_id = NULL, updated_at = ?2"
            " WHERE status = 'running' AND lease_expires_at < ?2",
            -1, &s, NULL) != SQLITE_OK)
        return;
    sqlite3_bind_int(s, 1, (int)st->max_attempts);
    sqlite3_bind_double(s, 2, rematd_now());
    sqlite3_step(s);
    int n = sqlite3_changes(st->w);
    sqlite3_finalize(s);
    if (n > 0)
        rematd_log("warn", "leases expired", json_pack("{s:i}", "jobs", n));
}

static int listed(const char *const *list, const char *s)
{
    for (; *list; list++)
        if (strcmp(*list, s) == 0)
            return 1;
    return 0;
}

/* A job for "cuda" is served by any "cuda:N"; "cuda:N" and "cpu" only by
 * themselves (docs/jobs.md). */
static int device_served(const char *job, const char *const *devices)
{
    for (; *devices; devices++) {
        if (strcmp(job, *devices) == 0)
            return 1;
        if (strcmp(job, "cuda") == 0 && strncmp(*devices, "cuda:", 5) == 0)
            return 1;
    }
    return 0;
}

enum rematd_store_result rematd__sqlite_lease_job(struct rematd_store *base, const char *worker_id,
                                                  const char *const *kinds,
                                                  const char *const *devices,
                                                  struct rematd_lease *out)
{
    struct rematd_sqlite *st = (struct rematd_sqlite *)base;
    memset(out, 0, sizeof *out);
    enum rematd_store_result ret = REMATD_STORE_ERROR;
    sqlite3_stmt *s = NULL;
    pthread_mutex_lock(&st->wmu);
    if (rematd__store_check(st) < 0)
        goto out;
    rematd__jobs_expire(st);
    if (sqlite3_exec(st->w, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        rematd__store_write_failed(st, "BEGIN");
        goto out;
    }
    if (sqlite3_prepare_v2(st->w,
                           "SELECT id, kind, device, spec, attempts FROM jobs"
                           " WHERE status = 'queued' ORDER BY rowid",
                           -1, &s, NULL) != SQLITE_OK)
        goto rollback;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        const char *k = (const char *)sqlite3_column_text(s, 1);
        const char *d = (const char *)sqlite3_column_text(s, 2);
        if (!k || !d || !listed(kinds, k) || !device_served(d, devices))
            continue;
        copy_col(out->job_id, sizeof out->job_id, s, 0);
        copy_col(out->kind, sizeof out->kind, s, 1);
        out->spec = rematd__sql_col_dup(s, 3);
        out->attempt = sqlite3_column_int(s, 4) + 1;
        break;
    }
    sqlite3_finalize(s);
    s = NULL;
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        goto rollback;
    if (!out->job_id[0]) {
        sqlite3_exec(st->w, "ROLLBACK", NULL, NULL, NULL);
        ret = REMATD_STORE_NOT_FOUND;
        goto out;
    }
    if (!out->spec)
        goto rollback;
    rematd_new_id(out->lease_id);
    double now = rematd_now();
    out->lease_expires_at = now + st->lease_seconds;
    if (sqlite3_prepare_v2(st->w,
                           "UPDATE jobs SET status = 'running', lease_id = ?, lease_expires_at = ?,"
                           " worker_id = ?, progress = NULL, updated_at = ? WHERE id = ?",
                           -1, &s, NULL) != SQLITE_OK)
        goto rollback;
    sqlite3_bind_text(s, 1, out->lease_id, -1, SQLITE_STATIC);
    sqlite3_bind_double(s, 2, out->lease_expires_at);
    sqlite3_bind_text(s, 3, worker_id, -1, SQLITE_STATIC);
    sqlite3_bind_double(s, 4, now);
    sqlite3_bind_text(s, 5, out->job_id, -1, SQLITE_STATIC);
    if (sqlite3_step(s) != SQLITE_DONE ||
        sqlite3_exec(st->w, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        goto rollback;
    rematd__store_write_ok(st);
    ret = REMATD_STORE_OK;
    goto out;
rollback:
    rematd__store_write_failed(st, "lease job");
out:
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->wmu);
    if (ret != REMATD_STORE_OK) {
        rematd_lease_clear(out);
        memset(out, 0, sizeof *out);
    }
    return ret;
}

/* Runs one UPDATE guarded by the lease; when it changes nothing, tells a
 * stale lease (CONFLICT) from an unknown job (NOT_FOUND).  Under wmu. */
static enum rematd_store_result lease_update(struct rematd_sqlite *st, const char *sql,
                                             const char *id, const char *lease_id, const char *text,
                                             double now, double extra)
{
    sqlite3_stmt *s = NULL;
    if (rematd__store_check(st) < 0)
        return REMATD_STORE_ERROR;
    if (sqlite3_prepare_v2(st->w, sql, -1, &s, NULL) != SQLITE_OK)
        return REMATD_STORE_ERROR;
    /* ?1 id, ?2 lease_id, ?3 now, ?4 text, ?5 extra: the lease's new end
     * or the most attempts, where the statement uses one */
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, lease_id, -1, SQLITE_STATIC);
    sqlite3_bind_double(s, 3, now);
    if (text)
        sqlite3_bind_text(s, 4, text, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(s, 4);
    sqlite3_bind_double(s, 5, extra);
    int rc = sqlite3_step(s);
    if (rc != SQLITE_DONE) {
        rematd__store_write_failed(st, "UPDATE job");
        sqlite3_finalize(s);
        return REMATD_STORE_ERROR;
    }
    sqlite3_finalize(s);
    rematd__store_write_ok(st);
    if (sqlite3_changes(st->w) > 0)
        return REMATD_STORE_OK;
    s = NULL;
    enum rematd_store_result found = REMATD_STORE_ERROR;
    if (sqlite3_prepare_v2(st->w, "SELECT 1 FROM jobs WHERE id = ?", -1, &s, NULL) == SQLITE_OK) {
        sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
        rc = sqlite3_step(s);
        found = rc == SQLITE_ROW    ? REMATD_STORE_CONFLICT
                : rc == SQLITE_DONE ? REMATD_STORE_NOT_FOUND
                                    : REMATD_STORE_ERROR;
    }
    sqlite3_finalize(s);
    return found;
}

/* lease_update under wmu, now: what completing, failing and releasing a
 * lease each did in the same few lines. */
static enum rematd_store_result lease_update_locked(struct rematd_sqlite *st, const char *sql,
                                                    const char *id, const char *lease_id,
                                                    const char *text, double extra)
{
    pthread_mutex_lock(&st->wmu);
    enum rematd_store_result rc = lease_update(st, sql, id, lease_id, text, rematd_now(), extra);
    pthread_mutex_unlock(&st->wmu);
    return rc;
}

#define HELD " WHERE id = ?1 AND lease_id = ?2 AND status = 'running' AND lease_expires_at >= ?3"

enum rematd_store_result rematd__sqlite_renew_lease(struct rematd_store *base, const char *id,
                                                    const char *lease_id, const char *progress,
                                                    double *lease_expires_at)
{
    struct rematd_sqlite *st = (struct rematd_sqlite *)base;
    pthread_mutex_lock(&st->wmu);
    double now = rematd_now(), until = now + st->lease_seconds;
    enum rematd_store_result rc = lease_update(st,
                                               "UPDATE jobs SET progress = coalesce(?4, progress),"
                                               " lease_expires_at = ?5, updated_at = ?3" HELD,
                                               id, lease_id, progress, now, until);
    pthread_mutex_unlock(&st->wmu);
    *lease_expires_at = until;
    return rc;
}

enum rematd_store_result rematd__sqlite_complete_job(struct rematd_store *base, const char *id,
                                                     const char *lease_id, const char *result)
{
    return lease_update_locked((struct rematd_sqlite *)base,
                               "UPDATE jobs SET status = 'done', result = ?4, lease_id = NULL,"
                               " lease_expires_at = NULL, updated_at = ?3, attempts = attempts + 1,"
                               " reason = NULL" HELD,
                               id, lease_id, result, 0);
}

enum rematd_store_result rematd__sqlite_fail_job(struct rematd_store *base, const char *id,
                                                 const char *lease_id, const char *reason,
                                                 int retryable)
{
    struct rematd_sqlite *st = (struct rematd_sqlite *)base;
    if (retryable)
        return lease_update_locked(
            st,
            "UPDATE jobs SET"
            " status = CASE WHEN attempts + 1 >= ?5 THEN 'failed' ELSE 'queued' END,"
            " reason = CASE WHEN attempts + 1 >= ?5 THEN ?4 ELSE reason END,"
            " last_error = ?4, attempts = attempts + 1, lease_id = NULL,"
            " lease_expires_at = NULL, worker_id = NULL, updated_at = ?3" HELD,
            id, lease_id, reason, (double)st->max_attempts);
    return lease_update_locked(st,
                               "UPDATE jobs SET status = 'failed', reason = ?4, last_error = ?4,"
                               " attempts = attempts + 1, lease_id = NULL, lease_expires_at = NULL,"
                               " updated_at = ?3" HELD,
                               id, lease_id, reason, (double)st->max_attempts);
}

enum rematd_store_result rematd__sqlite_release_job(struct rematd_store *base, const char *id,
                                                    const char *lease_id)
{
    return lease_update_locked((struct rematd_sqlite *)base,
                               "UPDATE jobs SET status = 'queued', lease_id = NULL,"
                               " lease_expires_at = NULL, worker_id = NULL,"
                               " updated_at = ?3, progress = coalesce(?4, progress)" HELD,
                               id, lease_id, NULL, 0);
}

enum rematd_store_result rematd__sqlite_advance_job(struct rematd_store *base, const char *id,
                                                    enum rematd_job_status status, const char *spec,
                                                    const char *result, const char *reason)
{
    struct rematd_sqlite *st = (struct rematd_sqlite *)base;
    pthread_mutex_lock(&st->wmu);
    enum rematd_store_result ret = REMATD_STORE_ERROR;
    sqlite3_stmt *s = NULL;
    if (rematd__store_check(st) < 0 ||
        sqlite3_prepare_v2(st->w,
                           "UPDATE jobs SET status = ?2, spec = coalesce(?3, spec), result = ?4,"
                           " reason = ?5, updated_at = ?6"
                           " WHERE id = ?1 AND kind = 'fits' AND status = 'queued'",
                           -1, &s, NULL) != SQLITE_OK)
        goto out;
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, rematd_job_status_name(status), -1, SQLITE_STATIC);
    const char *texts[] = {spec, result, reason};
    for (int k = 0; k < 3; k++)
        if (texts[k])
            sqlite3_bind_text(s, 3 + k, texts[k], -1, SQLITE_STATIC);
        else
            sqlite3_bind_null(s, 3 + k);
    sqlite3_bind_double(s, 6, rematd_now());
    if (sqlite3_step(s) != SQLITE_DONE) {
        rematd__store_write_failed(st, "UPDATE job");
        goto out;
    }
    rematd__store_write_ok(st);
    ret = sqlite3_changes(st->w) > 0 ? REMATD_STORE_OK : REMATD_STORE_NOT_FOUND;
out:
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->wmu);
    return ret;
}
