/*
 * sqlite/idem.c - Idempotency-Key records: (scope, key) -> (SHA-256 of the
 * request body, the id of what the key created, the answer's body).
 *
 * A record is inserted in the transaction that stores the plan or job, so
 * a key is never recorded for something that was not stored, nor the other
 * way round.  Records live --idempotency-ttl seconds: reads ignore older
 * ones, and the writer thread deletes them once a minute.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite.h"

/* The live record of (scope, key) read on db: OK, NOT_FOUND or ERROR. */
static enum rematd_store_result lookup(struct rematd_sqlite *st, sqlite3 *db, const char *scope,
                                       const char *key, struct rematd_idem *out)
{
    memset(out, 0, sizeof *out);
    sqlite3_stmt *s = NULL;
    enum rematd_store_result found = REMATD_STORE_ERROR;
    if (sqlite3_prepare_v2(db,
                           "SELECT body_hash, resource_id, body FROM idempotency"
                           " WHERE scope = ? AND key = ? AND created_at >= ?",
                           -1, &s, NULL) == SQLITE_OK) {
        sqlite3_bind_text(s, 1, scope, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, key, -1, SQLITE_STATIC);
        sqlite3_bind_double(s, 3, rematd_now() - st->idem_ttl);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
            snprintf(out->body_hash, sizeof out->body_hash, "%s",
                     (const char *)sqlite3_column_text(s, 0));
            snprintf(out->resource_id, sizeof out->resource_id, "%s",
                     (const char *)sqlite3_column_text(s, 1));
            out->body = rematd__sql_col_dup(s, 2);
            found = out->body ? REMATD_STORE_OK : REMATD_STORE_ERROR;
        } else if (rc == SQLITE_DONE) {
            found = REMATD_STORE_NOT_FOUND;
        }
    }
    sqlite3_finalize(s);
    return found;
}

enum rematd_store_result rematd__sqlite_get_idempotency(struct rematd_store *base,
                                                        const char *scope, const char *key,
                                                        struct rematd_idem *out)
{
    struct rematd_sqlite *st = (struct rematd_sqlite *)base;
    pthread_mutex_lock(&st->rmu);
    enum rematd_store_result rc = lookup(st, st->r, scope, key, out);
    pthread_mutex_unlock(&st->rmu);
    return rc;
}

static int insert(struct rematd_sqlite *st, const char *scope, const char *key,
                  const char *body_hash, const char *resource_id, const char *body, double now)
{
    sqlite3_stmt *s = st->ins_idem;
    sqlite3_bind_text(s, 1, scope, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, body_hash, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, resource_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 5, body, -1, SQLITE_STATIC);
    sqlite3_bind_double(s, 6, now);
    return rematd__sql_step_reset(s);
}

enum rematd_store_result rematd__idem_insert(struct rematd_sqlite *st, const char *scope,
                                             const char *key, const char *body_hash,
                                             const char *resource_id, const char *body, double now,
                                             struct rematd_idem *existing)
{
    /* The bound on records, counted in memory (a count(*) per plan would
     * cost the hot path); a key past its TTL that gives way below does not
     * add one, but is refused here all the same when the bound is reached. */
    if (st->idem_count >= st->max_idem)
        return REMATD_STORE_FULL;
    int rc = insert(st, scope, key, body_hash, resource_id, body, now);
    if (rc == SQLITE_DONE) {
        st->idem_count++;
        st->written += (long long)(strlen(body) + strlen(key) + 200);
        return REMATD_STORE_OK;
    }
    if (rc != SQLITE_CONSTRAINT)
        return REMATD_STORE_ERROR;
    /* Taken: by a live record (checked again here, on the writer
     * connection inside the transaction, since two requests with one key
     * can both have found none on the read side) or by one past its TTL,
     * which gives way. */
    enum rematd_store_result got = lookup(st, st->w, scope, key, existing);
    if (got != REMATD_STORE_NOT_FOUND)
        return got == REMATD_STORE_OK ? REMATD_STORE_CONFLICT : REMATD_STORE_ERROR;
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(st->w, "DELETE FROM idempotency WHERE scope = ? AND key = ?", -1, &s,
                           NULL) != SQLITE_OK)
        return REMATD_STORE_ERROR;
    sqlite3_bind_text(s, 1, scope, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, key, -1, SQLITE_STATIC);
    rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE)
        return REMATD_STORE_ERROR;
    return insert(st, scope, key, body_hash, resource_id, body, now) == SQLITE_DONE
               ? REMATD_STORE_OK
               : REMATD_STORE_ERROR;
}

void rematd__idem_purge(struct rematd_sqlite *st, double now)
{
    if (!rematd__idem_purge_due(now, st->last_purge, st->idem_ttl))
        return;
    st->last_purge = now;
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(st->w, "DELETE FROM idempotency WHERE created_at < ?", -1, &s, NULL) ==
        SQLITE_OK) {
        sqlite3_bind_double(s, 1, now - st->idem_ttl);
        if (sqlite3_step(s) == SQLITE_DONE)
            st->idem_count -= sqlite3_changes(st->w);
        if (st->idem_count < 0)
            st->idem_count = 0;
    }
    sqlite3_finalize(s);
}
