/*
 * pg/jobs.c - jobs and their leases on PostgreSQL: the state machine
 * of docs/jobs.md, as sqlite/jobs.c has it for SQLite, made safe across
 * replicas by the database's locks.
 *
 * A lease is taken with SELECT ... FOR UPDATE SKIP LOCKED: two replicas
 * leasing at once lock different rows, so a job is leased once.  Expiry is
 * one UPDATE ... WHERE status = 'running' AND lease_expires_at < now: two
 * replicas running it at once both try the same rows, the second waits for
 * the first's row locks and then finds them no longer running (PostgreSQL
 * checks the WHERE again on the updated row), so an expiry and its attempt
 * are counted once.  A worker's call under its lease is one UPDATE guarded
 * by the lease, on whichever replica it lands.  The queue's bound is
 * counted under a transaction-scoped advisory lock, so that replicas
 * adding jobs at once cannot pass it together.
 *
 * Times are each replica's clock: replicas are expected to keep theirs
 * synchronised (NTP), as for any lease.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg.h"

#define TEXT_OID 25
#define FLOAT8_OID 701

static char *dup_or_null(PGresult *res, int col)
{
    return PQgetisnull(res, 0, col) ? NULL : strdup(PQgetvalue(res, 0, col));
}

static void fmt_time(char out[64], double t)
{
    snprintf(out, 64, "%.17g", t);
}

enum rematd_store_result rematd__pg_get_job(struct rematd_store *base, const char *id,
                                            struct rematd_job *out)
{
    struct rematd_pg *st = (struct rematd_pg *)base;
    memset(out, 0, sizeof *out);
    PGconn *c = rematd__pg_get(st);
    const char *v[] = {id};
    PGresult *res =
        rematd__pg_exec(c, NULL,
                        "SELECT kind, status, attempts, spec, progress, result, reason,"
                        " created_at, updated_at, lease_expires_at, tenant FROM jobs WHERE id = $1",
                        1, v, NULL);
    enum rematd_store_result found = REMATD_STORE_ERROR;
    if (res && PQntuples(res) == 0) {
        found = REMATD_STORE_NOT_FOUND;
    } else if (res) {
        snprintf(out->id, sizeof out->id, "%s", id);
        snprintf(out->kind, sizeof out->kind, "%s", PQgetvalue(res, 0, 0));
        out->attempts = atoi(PQgetvalue(res, 0, 2));
        out->spec = dup_or_null(res, 3);
        out->progress = dup_or_null(res, 4);
        out->result = dup_or_null(res, 5);
        out->reason = dup_or_null(res, 6);
        out->created_at = strtod(PQgetvalue(res, 0, 7), NULL);
        out->updated_at = strtod(PQgetvalue(res, 0, 8), NULL);
        out->lease_expires_at = PQgetisnull(res, 0, 9) ? 0 : strtod(PQgetvalue(res, 0, 9), NULL);
        snprintf(out->tenant, sizeof out->tenant, "%s", PQgetvalue(res, 0, 10));
        /* A status this rematd has no name for is a database it cannot
         * read. */
        int lost = rematd_job_status_parse(PQgetvalue(res, 0, 1), &out->status) < 0 || !out->spec ||
                   (!out->progress && !PQgetisnull(res, 0, 4)) ||
                   (!out->result && !PQgetisnull(res, 0, 5)) ||
                   (!out->reason && !PQgetisnull(res, 0, 6));
        found = lost ? REMATD_STORE_ERROR : REMATD_STORE_OK;
    }
    PQclear(res);
    rematd__pg_put(st, c);
    if (found != REMATD_STORE_OK)
        rematd_job_clear(out);
    return found;
}

enum rematd_store_result rematd__pg_done_ids(struct rematd_store *base, const char *kind,
                                             const char *key, size_t max,
                                             char (*ids)[REMATD_ID_LEN + 1], size_t *n)
{
    struct rematd_pg *st = (struct rematd_pg *)base;
    *n = 0;
    char lim[24];
    snprintf(lim, sizeof lim, "%zu", max);
    PGconn *c = rematd__pg_get(st);
    const char *v[] = {key, kind, lim};
    PGresult *res = rematd__pg_exec(c, NULL,
                                    "SELECT id FROM jobs WHERE reuse_key = $1 AND status = 'done'"
                                    " AND kind = $2 ORDER BY updated_at DESC LIMIT $3::bigint",
                                    3, v, NULL);
    enum rematd_store_result found = REMATD_STORE_ERROR;
    if (res) {
        size_t got = (size_t)PQntuples(res);
        for (size_t k = 0; k < got && k < max; k++)
            snprintf(ids[k], REMATD_ID_LEN + 1, "%s", PQgetvalue(res, (int)k, 0));
        *n = got < max ? got : max;
        found = REMATD_STORE_OK;
    }
    PQclear(res);
    rematd__pg_put(st, c);
    return found;
}

enum rematd_store_result rematd__pg_count_jobs(struct rematd_store *base,
                                               struct rematd_job_counts *out)
{
    struct rematd_pg *st = (struct rematd_pg *)base;
    memset(out, 0, sizeof *out);
    PGconn *c = rematd__pg_get(st);
    PGresult *res = rematd__pg_exec(c, NULL, "SELECT status, count(*) FROM jobs GROUP BY status", 0,
                                    NULL, NULL);
    rematd__pg_put(st, c);
    if (!res)
        return REMATD_STORE_ERROR;
    for (int i = 0; i < PQntuples(res); i++)
        rematd__job_counts_add(out, PQgetvalue(res, i, 0), atol(PQgetvalue(res, i, 1)));
    PQclear(res);
    return REMATD_STORE_OK;
}

enum rematd_store_result rematd__pg_create_job(struct rematd_store *base,
                                               const struct rematd_job_new *job,
                                               struct rematd_idem *existing)
{
    struct rematd_pg *st = (struct rematd_pg *)base;
    PGconn *c = rematd__pg_get(st);
    if (rematd__pg_begin_locked(c, "INSERT job", REMATD_PG_LOCK_QUEUE) < 0)
        return rematd__pg_end_write(st, c, REMATD_STORE_ERROR);
    /* The whole queue's bound and the tenant's share. */
    const char *tenant = job->tenant ? job->tenant : REMATD_TENANT_DEFAULT;
    const char *tv[] = {tenant};
    PGresult *res = rematd__pg_exec(c, "INSERT job",
                                    "SELECT count(*), count(*) FILTER (WHERE tenant = $1)"
                                    " FROM jobs WHERE status = 'queued'",
                                    1, tv, NULL);
    if (!res)
        return rematd__pg_end_write(st, c, REMATD_STORE_ERROR);
    long queued = atol(PQgetvalue(res, 0, 0)), mine = atol(PQgetvalue(res, 0, 1));
    PQclear(res);
    if (queued >= st->max_queued_jobs || mine >= st->tenant_max_queued_jobs)
        return rematd__pg_end_write(st, c, REMATD_STORE_FULL);
    if (job->model_id) {
        /* FOR SHARE: a delete of the model (FOR UPDATE on its row) either
         * waits for this job and sees it, or this waits for the delete and
         * finds the model gone. */
        enum rematd_store_result locked = rematd__pg_lock_model(c, "INSERT job", job->model_id, 0);
        if (locked != REMATD_STORE_OK)
            return rematd__pg_end_write(st, c, locked);
    }
    char t[64];
    fmt_time(t, job->created_at);
    const char *v[] = {job->id, job->kind,     job->device,    job->spec,
                       t,       job->model_id, job->reuse_key, tenant};
    if (rematd__pg_cmd(c, "INSERT job",
                       "INSERT INTO jobs (id, kind, status, device, spec, created_at, updated_at,"
                       " model_id, reuse_key, tenant)"
                       " VALUES ($1, $2, 'queued', $3, $4, $5, $5, $6, $7, $8)",
                       8, v, NULL) < 0)
        return rematd__pg_end_write(st, c, REMATD_STORE_ERROR);
    if (job->idem_key) {
        long before = rematd__pg_idem_lock(c), count = before;
        if (before < 0)
            return rematd__pg_end_write(st, c, REMATD_STORE_ERROR);
        enum rematd_store_result r =
            rematd__pg_idem_insert(st, c, &count, job->idem_scope, job->idem_key, job->body_hash,
                                   job->id, job->body, job->created_at, existing);
        if (r == REMATD_STORE_OK && rematd__pg_idem_store(c, before, count) < 0)
            r = REMATD_STORE_ERROR;
        if (r != REMATD_STORE_OK)
            return rematd__pg_end_write(st, c, r);
    }
    enum rematd_store_result r = rematd__pg_end_write(st, c, REMATD_STORE_OK);
    return r;
}

int rematd__pg_jobs_expire(struct rematd_pg *st, PGconn *c)
{
    char max[32], now[64];
    snprintf(max, sizeof max, "%u", st->max_attempts);
    fmt_time(now, rematd_now());
    const char *v[] = {max, now};
    const Oid types[] = {23, FLOAT8_OID};
    PGresult *res = rematd__pg_exec(
        c, "expire leases",
        "UPDATE jobs SET"
        " status = CASE WHEN attempts + 1 >= $1 THEN 'failed' ELSE 'queued' END,"
        " reason = CASE WHEN attempts + 1 >= $1 THEN 'lease expired ' || (expiries + 1) ||"
        "  ' times' ELSE reason END,"
        " last_error = 'lease expired', attempts = attempts + 1, expiries = expiries + 1,"
        " lease_id = NULL, lease_expires_at = NULL, worker_id = NULL, updated_at = $2"
        " WHERE status = 'running' AND lease_expires_at < $2",
        2, v, types);
    if (!res)
        return -1;
    int n = atoi(PQcmdTuples(res));
    PQclear(res);
    if (n > 0)
        rematd_log("warn", "leases expired", json_pack("{s:i}", "jobs", n));
    return 0;
}

/* A text[] literal of list (NULL-terminated): each element quoted, so that
 * no worker-given name can change the array.  New, or NULL. */
static char *array_literal(const char *const *list)
{
    size_t cap = 3;
    for (const char *const *p = list; *p; p++)
        cap += 2 * strlen(*p) + 3;
    char *out = malloc(cap), *o = out;
    if (!out)
        return NULL;
    *o++ = '{';
    for (const char *const *p = list; *p; p++) {
        if (p != list)
            *o++ = ',';
        *o++ = '"';
        for (const char *s = *p; *s; s++) {
            if (*s == '"' || *s == '\\')
                *o++ = '\\';
            *o++ = *s;
        }
        *o++ = '"';
    }
    *o++ = '}';
    *o = '\0';
    return out;
}

enum rematd_store_result rematd__pg_lease_job(struct rematd_store *base, const char *worker_id,
                                              const char *const *kinds, const char *const *devices,
                                              struct rematd_lease *out)
{
    struct rematd_pg *st = (struct rematd_pg *)base;
    memset(out, 0, sizeof *out);
    /* "cuda" jobs are served by any "cuda:N" (docs/jobs.md). */
    int any_cuda = 0;
    for (const char *const *d = devices; *d; d++)
        any_cuda |= strncmp(*d, "cuda:", 5) == 0;
    char *kind_arr = array_literal(kinds), *dev_arr = array_literal(devices);
    if (!kind_arr || !dev_arr) {
        free(kind_arr);
        free(dev_arr);
        return REMATD_STORE_ERROR;
    }
    PGconn *c = rematd__pg_get(st);
    enum rematd_store_result ret = REMATD_STORE_ERROR;
    if (rematd__pg_jobs_expire(st, c) < 0 ||
        rematd__pg_cmd(c, "BEGIN", "BEGIN", 0, NULL, NULL) < 0) {
        ret = rematd__pg_end_write(st, c, REMATD_STORE_ERROR);
        goto out;
    }
    const char *v[] = {kind_arr, dev_arr, any_cuda ? "true" : "false"};
    PGresult *res = rematd__pg_exec(
        c, "lease job",
        "SELECT id, kind, spec, attempts FROM jobs WHERE status = 'queued'"
        " AND kind = ANY($1::text[]) AND (device = ANY($2::text[]) OR (device = 'cuda' AND $3))"
        " ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED",
        3, v, NULL);
    if (!res) {
        ret = rematd__pg_end_write(st, c, REMATD_STORE_ERROR);
        goto out;
    }
    if (PQntuples(res) == 0) {
        PQclear(res);
        ret = rematd__pg_end_write(st, c, REMATD_STORE_NOT_FOUND);
        goto out;
    }
    snprintf(out->job_id, sizeof out->job_id, "%s", PQgetvalue(res, 0, 0));
    snprintf(out->kind, sizeof out->kind, "%s", PQgetvalue(res, 0, 1));
    out->spec = strdup(PQgetvalue(res, 0, 2));
    out->attempt = atoi(PQgetvalue(res, 0, 3)) + 1;
    PQclear(res);
    if (!out->spec) {
        ret = rematd__pg_end_write(st, c, REMATD_STORE_ERROR);
        goto out;
    }
    rematd_new_id(out->lease_id);
    double now = rematd_now();
    out->lease_expires_at = now + st->lease_seconds;
    char until[64], t[64];
    fmt_time(until, out->lease_expires_at);
    fmt_time(t, now);
    const char *u[] = {out->lease_id, until, worker_id, t, out->job_id};
    if (rematd__pg_cmd(c, "lease job",
                       "UPDATE jobs SET status = 'running', lease_id = $1, lease_expires_at = $2,"
                       " worker_id = $3, progress = NULL, updated_at = $4 WHERE id = $5",
                       5, u, NULL) < 0) {
        ret = rematd__pg_end_write(st, c, REMATD_STORE_ERROR);
        goto out;
    }
    ret = rematd__pg_end_write(st, c, REMATD_STORE_OK);
out:
    free(kind_arr);
    free(dev_arr);
    if (ret != REMATD_STORE_OK) {
        rematd_lease_clear(out);
        memset(out, 0, sizeof *out);
    }
    return ret;
}

/* Runs one UPDATE guarded by the lease ($1 id, $2 lease_id, $3 now, $4
 * text, $5 extra); when it changes nothing, tells a stale lease (CONFLICT)
 * from an unknown job (NOT_FOUND). */
static enum rematd_store_result lease_update(struct rematd_pg *st, const char *sql, const char *id,
                                             const char *lease_id, const char *text, double now,
                                             double extra)
{
    char t[64], x[64];
    fmt_time(t, now);
    fmt_time(x, extra);
    const char *v[] = {id, lease_id, t, text, x};
    const Oid types[] = {TEXT_OID, TEXT_OID, FLOAT8_OID, TEXT_OID, FLOAT8_OID};
    PGconn *c = rematd__pg_get(st);
    long n = rematd__pg_write_count(st, c, "UPDATE job", sql, 5, v, types);
    if (n < 0) {
        rematd__pg_put(st, c);
        return REMATD_STORE_ERROR;
    }
    enum rematd_store_result found = REMATD_STORE_OK;
    if (n == 0) {
        const char *w[] = {id};
        PGresult *res = rematd__pg_exec(c, NULL, "SELECT 1 FROM jobs WHERE id = $1", 1, w, NULL);
        found = !res                 ? REMATD_STORE_ERROR
                : PQntuples(res) > 0 ? REMATD_STORE_CONFLICT
                                     : REMATD_STORE_NOT_FOUND;
        PQclear(res);
    }
    rematd__pg_put(st, c);
    return found;
}

#define HELD " WHERE id = $1 AND lease_id = $2 AND status = 'running' AND lease_expires_at >= $3"

enum rematd_store_result rematd__pg_renew_lease(struct rematd_store *base, const char *id,
                                                const char *lease_id, const char *progress,
                                                double *lease_expires_at)
{
    struct rematd_pg *st = (struct rematd_pg *)base;
    double now = rematd_now(), until = now + st->lease_seconds;
    enum rematd_store_result rc = lease_update(st,
                                               "UPDATE jobs SET progress = coalesce($4, progress),"
                                               " lease_expires_at = $5, updated_at = $3" HELD,
                                               id, lease_id, progress, now, until);
    *lease_expires_at = until;
    return rc;
}

enum rematd_store_result rematd__pg_complete_job(struct rematd_store *base, const char *id,
                                                 const char *lease_id, const char *result)
{
    return lease_update((struct rematd_pg *)base,
                        "UPDATE jobs SET status = 'done', result = $4, lease_id = NULL,"
                        " lease_expires_at = NULL, updated_at = $3, attempts = attempts + 1,"
                        " reason = NULL" HELD,
                        id, lease_id, result, rematd_now(), 0);
}

enum rematd_store_result rematd__pg_fail_job(struct rematd_store *base, const char *id,
                                             const char *lease_id, const char *reason,
                                             int retryable)
{
    struct rematd_pg *st = (struct rematd_pg *)base;
    if (retryable)
        return lease_update(st,
                            "UPDATE jobs SET"
                            " status = CASE WHEN attempts + 1 >= $5 THEN 'failed' ELSE 'queued'"
                            " END, reason = CASE WHEN attempts + 1 >= $5 THEN $4 ELSE reason END,"
                            " last_error = $4, attempts = attempts + 1, lease_id = NULL,"
                            " lease_expires_at = NULL, worker_id = NULL, updated_at = $3" HELD,
                            id, lease_id, reason, rematd_now(), (double)st->max_attempts);
    return lease_update(st,
                        "UPDATE jobs SET status = 'failed', reason = $4, last_error = $4,"
                        " attempts = attempts + 1, lease_id = NULL, lease_expires_at = NULL,"
                        " updated_at = $3" HELD,
                        id, lease_id, reason, rematd_now(), (double)st->max_attempts);
}

enum rematd_store_result rematd__pg_release_job(struct rematd_store *base, const char *id,
                                                const char *lease_id)
{
    return lease_update((struct rematd_pg *)base,
                        "UPDATE jobs SET status = 'queued', lease_id = NULL,"
                        " lease_expires_at = NULL, worker_id = NULL,"
                        " updated_at = $3, progress = coalesce($4, progress)" HELD,
                        id, lease_id, NULL, rematd_now(), 0);
}

enum rematd_store_result rematd__pg_advance_job(struct rematd_store *base, const char *id,
                                                enum rematd_job_status status, const char *spec,
                                                const char *result, const char *reason)
{
    struct rematd_pg *st = (struct rematd_pg *)base;
    char t[64];
    fmt_time(t, rematd_now());
    const char *v[] = {id, rematd_job_status_name(status), spec, result, reason, t};
    const Oid types[] = {TEXT_OID, TEXT_OID, TEXT_OID, TEXT_OID, TEXT_OID, FLOAT8_OID};
    PGconn *c = rematd__pg_get(st);
    long n = rematd__pg_write_count(st, c, "UPDATE job",
                                    "UPDATE jobs SET status = $2, spec = coalesce($3, spec),"
                                    " result = $4, reason = $5, updated_at = $6"
                                    " WHERE id = $1 AND kind = 'fits' AND status = 'queued'",
                                    6, v, types);
    rematd__pg_put(st, c);
    return n < 0 ? REMATD_STORE_ERROR : n > 0 ? REMATD_STORE_OK : REMATD_STORE_NOT_FOUND;
}
