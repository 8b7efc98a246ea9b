/*
 * sqlite/models.c - the records of uploaded models (store.h).  The quota
 * and the in-use rule are checked inside the write transaction that adds
 * or removes the record, so that two uploads racing cannot both pass the
 * quota and a job queued meanwhile cannot lose its model.  They go through
 * the store's one write path (sqlite/sqlite.c): refused once the database is lost,
 * a failure logged with SQLite's own error and making the store not ready
 * until a write succeeds again, as for plans and jobs.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite.h"

#define COLS "id, sha256, bytes, created_at, meta, tenant"

/* One row of COLS into m: 0, or -1 when out of memory. */
static int read_row(sqlite3_stmt *s, struct rematd_model *m)
{
    memset(m, 0, sizeof *m);
    const unsigned char *id = sqlite3_column_text(s, 0), *sha = sqlite3_column_text(s, 1);
    snprintf(m->id, sizeof m->id, "%s", id ? (const char *)id : "");
    snprintf(m->sha256, sizeof m->sha256, "%s", sha ? (const char *)sha : "");
    m->bytes = sqlite3_column_int64(s, 2);
    m->created_at = sqlite3_column_double(s, 3);
    m->meta = rematd__sql_col_dup(s, 4);
    const unsigned char *tenant = sqlite3_column_text(s, 5);
    snprintf(m->tenant, sizeof m->tenant, "%s",
             tenant ? (const char *)tenant : REMATD_TENANT_DEFAULT);
    return m->meta ? 0 : -1;
}

/* The record of id on db (the caller holds its mutex). */
static enum rematd_store_result get_on(sqlite3 *db, const char *id, struct rematd_model *out)
{
    sqlite3_stmt *s;
    memset(out, 0, sizeof *out);
    enum rematd_store_result ret =
        rematd__sql_row(db, "SELECT " COLS " FROM models WHERE id = ?", id, &s);
    if (ret == REMATD_STORE_OK && read_row(s, out) < 0)
        ret = REMATD_STORE_ERROR;
    sqlite3_finalize(s);
    if (ret != REMATD_STORE_OK)
        rematd_model_clear(out);
    return ret;
}

enum rematd_store_result rematd__sqlite_get_model(struct rematd_store *base, const char *id,
                                                  struct rematd_model *out)
{
    struct rematd_sqlite *st = (struct rematd_sqlite *)base;
    pthread_mutex_lock(&st->rmu);
    enum rematd_store_result ret = get_on(st->r, id, out);
    pthread_mutex_unlock(&st->rmu);
    return ret;
}

/* Opens a write transaction on w: takes wmu and begins, unless the store
 * lost its database.  0, or -1 (wmu released; a failed BEGIN is logged and
 * marks the store failed, as every write does: sqlite/sqlite.c). */
static int begin_write(struct rematd_sqlite *st)
{
    pthread_mutex_lock(&st->wmu);
    if (rematd__store_check(st) < 0) {
        pthread_mutex_unlock(&st->wmu);
        return -1;
    }
    if (sqlite3_exec(st->w, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        rematd__store_write_failed(st, "BEGIN");
        pthread_mutex_unlock(&st->wmu);
        return -1;
    }
    return 0;
}

/* Ends what begin_write opened, finalizes s and releases wmu.  ret is the
 * answer so far: OK commits (a failed COMMIT turns it into ERROR); ERROR
 * means a statement failed, which is logged with SQLite's error before s
 * is finalized (so that the message survives) and marks the store failed;
 * any other answer only read, and rolls back.  Returns the final answer. */
static enum rematd_store_result end_write(struct rematd_sqlite *st, sqlite3_stmt *s,
                                          enum rematd_store_result ret, const char *what)
{
    if (ret == REMATD_STORE_ERROR)
        rematd__store_write_failed(st, what);
    sqlite3_finalize(s);
    if (ret == REMATD_STORE_OK) {
        if (sqlite3_exec(st->w, "COMMIT", NULL, NULL, NULL) == SQLITE_OK) {
            rematd__store_write_ok(st);
        } else {
            rematd__store_write_failed(st, what);
            ret = REMATD_STORE_ERROR;
        }
    } else if (ret != REMATD_STORE_ERROR) {
        sqlite3_exec(st->w, "ROLLBACK", NULL, NULL, NULL);
    }
    pthread_mutex_unlock(&st->wmu);
    return ret;
}

enum rematd_store_result rematd__sqlite_add_model(struct rematd_store *base,
                                                  const struct rematd_model *m,
                                                  unsigned long long quota_bytes,
                                                  unsigned long long tenant_quota_bytes,
                                                  struct rematd_model *existing)
{
    const char *tenant = m->tenant[0] ? m->tenant : REMATD_TENANT_DEFAULT;
    struct rematd_sqlite *st = (struct rematd_sqlite *)base;
    sqlite3_stmt *s = NULL;
    memset(existing, 0, sizeof *existing);
    if (begin_write(st) < 0)
        return REMATD_STORE_ERROR;
    enum rematd_store_result ret = get_on(st->w, m->id, existing);
    if (ret != REMATD_STORE_NOT_FOUND)
        return end_write(st, s, ret == REMATD_STORE_OK ? REMATD_STORE_CONFLICT : ret,
                         "INSERT model");
    if (sqlite3_prepare_v2(st->w,
                           "SELECT coalesce(sum(bytes), 0),"
                           " coalesce(sum(CASE WHEN tenant = ? THEN bytes END), 0) FROM models",
                           -1, &s, NULL) != SQLITE_OK)
        return end_write(st, s, REMATD_STORE_ERROR, "INSERT model");
    sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
    if (sqlite3_step(s) != SQLITE_ROW)
        return end_write(st, s, REMATD_STORE_ERROR, "INSERT model");
    unsigned long long used = (unsigned long long)sqlite3_column_int64(s, 0);
    unsigned long long mine = (unsigned long long)sqlite3_column_int64(s, 1);
    sqlite3_finalize(s);
    s = NULL;
    unsigned long long b = (unsigned long long)m->bytes;
    if (b > quota_bytes || used > quota_bytes - b || b > tenant_quota_bytes ||
        mine > tenant_quota_bytes - b)
        return end_write(st, s, REMATD_STORE_FULL, "INSERT model");
    if (sqlite3_prepare_v2(st->w, "INSERT INTO models (" COLS ") VALUES (?, ?, ?, ?, ?, ?)", -1, &s,
                           NULL) != SQLITE_OK)
        return end_write(st, s, REMATD_STORE_ERROR, "INSERT model");
    sqlite3_bind_text(s, 1, m->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, m->sha256, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, m->bytes);
    sqlite3_bind_double(s, 4, m->created_at);
    sqlite3_bind_text(s, 5, m->meta ? m->meta : "{}", -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 6, tenant, -1, SQLITE_STATIC);
    ret = sqlite3_step(s) == SQLITE_DONE ? REMATD_STORE_OK : REMATD_STORE_ERROR;
    return end_write(st, s, ret, "INSERT model");
}

enum rematd_store_result rematd__sqlite_list_models(struct rematd_store *base, const char *tenant,
                                                    size_t max, struct rematd_model **out,
                                                    size_t *n)
{
    struct rematd_sqlite *st = (struct rematd_sqlite *)base;
    *out = NULL;
    *n = 0;
    sqlite3_stmt *s = NULL;
    enum rematd_store_result ret = REMATD_STORE_ERROR;
    struct rematd_model *list = NULL;
    size_t len = 0, cap = 0;
    pthread_mutex_lock(&st->rmu);
    if (sqlite3_prepare_v2(st->r,
                           "SELECT " COLS " FROM models WHERE tenant = ?"
                           " ORDER BY created_at, id LIMIT ?",
                           -1, &s, NULL) != SQLITE_OK)
        goto out;
    sqlite3_bind_text(s, 1, tenant ? tenant : REMATD_TENANT_DEFAULT, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)max);
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (len == cap) {
            size_t nc = cap ? cap * 2 : 16;
            struct rematd_model *nl = realloc(list, nc * sizeof *nl);
            if (!nl)
                goto out;
            list = nl;
            cap = nc;
        }
        if (read_row(s, &list[len]) < 0) {
            rematd_model_clear(&list[len]);
            goto out;
        }
        len++;
    }
    if (rc == SQLITE_DONE) {
        ret = REMATD_STORE_OK;
        *out = list;
        *n = len;
        list = NULL;
        len = 0;
    }
out:
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->rmu);
    rematd_models_free(list, len);
    return ret;
}

enum rematd_store_result rematd__sqlite_delete_model(struct rematd_store *base, const char *id)
{
    struct rematd_sqlite *st = (struct rematd_sqlite *)base;
    sqlite3_stmt *s = NULL;
    if (begin_write(st) < 0)
        return REMATD_STORE_ERROR;
    if (sqlite3_prepare_v2(st->w,
                           "SELECT (SELECT count(*) FROM models WHERE id = ?1),"
                           " (SELECT count(*) FROM jobs WHERE model_id = ?1"
                           "  AND status IN ('queued', 'running'))",
                           -1, &s, NULL) != SQLITE_OK)
        return end_write(st, s, REMATD_STORE_ERROR, "DELETE model");
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    if (sqlite3_step(s) != SQLITE_ROW)
        return end_write(st, s, REMATD_STORE_ERROR, "DELETE model");
    long long have = sqlite3_column_int64(s, 0), users = sqlite3_column_int64(s, 1);
    sqlite3_finalize(s);
    s = NULL;
    if (have == 0 || users > 0)
        return end_write(st, s, have == 0 ? REMATD_STORE_NOT_FOUND : REMATD_STORE_CONFLICT,
                         "DELETE model");
    if (sqlite3_prepare_v2(st->w, "DELETE FROM models WHERE id = ?", -1, &s, NULL) != SQLITE_OK)
        return end_write(st, s, REMATD_STORE_ERROR, "DELETE model");
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    return end_write(st, s, sqlite3_step(s) == SQLITE_DONE ? REMATD_STORE_OK : REMATD_STORE_ERROR,
                     "DELETE model");
}

enum rematd_store_result rematd__sqlite_models_bytes(struct rematd_store *base, const char *tenant,
                                                     unsigned long long *total)
{
    struct rematd_sqlite *st = (struct rematd_sqlite *)base;
    sqlite3_stmt *s = NULL;
    enum rematd_store_result ret = REMATD_STORE_ERROR;
    *total = 0;
    pthread_mutex_lock(&st->rmu);
    if (sqlite3_prepare_v2(st->r,
                           "SELECT coalesce(sum(bytes), 0) FROM models"
                           " WHERE ?1 IS NULL OR tenant = ?1",
                           -1, &s, NULL) == SQLITE_OK &&
        sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW) {
        *total = (unsigned long long)sqlite3_column_int64(s, 0);
        ret = REMATD_STORE_OK;
    }
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->rmu);
    return ret;
}

enum rematd_store_result rematd__sqlite_model_sha_used(struct rematd_store *base,
                                                       const char *sha256)
{
    struct rematd_sqlite *st = (struct rematd_sqlite *)base;
    sqlite3_stmt *s;
    pthread_mutex_lock(&st->rmu);
    enum rematd_store_result ret =
        rematd__sql_row(st->r, "SELECT 1 FROM models WHERE sha256 = ? LIMIT 1", sha256, &s);
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->rmu);
    return ret;
}
