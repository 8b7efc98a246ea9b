/*
 * sqlite/plans.c - plan rows: the insert each group commit makes, and reads.
 *
 * A plan is one row of ~1.5 KB for 50 stages: its compact record
 * (plan_codec.h) rather than its answer's JSON and its request (~12 KB),
 * since every byte is written twice (WAL, then database) on the hot path.
 * Plans from rematd 0.1.0 are read from plans_v1 (sqlite/schema.c).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite.h"

int rematd__plan_insert(struct rematd_sqlite *st, const struct rematd_plan_write *w)
{
    sqlite3_stmt *s = st->ins_plan;
    sqlite3_bind_text(s, 1, w->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, w->created_at, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, w->algorithm, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, w->options, -1, SQLITE_STATIC);
    if (w->profile_id[0])
        sqlite3_bind_text(s, 5, w->profile_id, -1, SQLITE_STATIC);
    sqlite3_bind_blob(s, 6, w->record, (int)w->record_len, SQLITE_STATIC);
    sqlite3_bind_text(s, 7, w->tenant ? w->tenant : REMATD_TENANT_DEFAULT, -1, SQLITE_STATIC);
    /* Near enough for when the byte bound is next checked (bounds.c),
     * which counts exactly. */
    st->written += (long long)(w->record_len + strlen(w->options) + 100);
    return rematd__sql_step_reset(s);
}

static enum rematd_store_result get_plan_v1(struct rematd_sqlite *st, const char *id,
                                            struct rematd_stored_plan *out)
{
    sqlite3_stmt *s;
    enum rematd_store_result found =
        rematd__sql_row(st->r,
                        "SELECT p.body, p.options, r.body FROM plans_v1 p LEFT JOIN requests r"
                        " ON r.hash = p.request_hash WHERE p.id = ?",
                        id, &s);
    if (found == REMATD_STORE_OK) {
        out->legacy_body = rematd__sql_col_dup(s, 0);
        out->options = rematd__sql_col_dup(s, 1);
        out->legacy_request = rematd__sql_col_dup(s, 2);
        if (!out->legacy_body || !out->options)
            found = REMATD_STORE_ERROR;
    }
    sqlite3_finalize(s);
    return found;
}

enum rematd_store_result rematd__sqlite_get_plan(struct rematd_store *base, const char *id,
                                                 struct rematd_stored_plan *out)
{
    struct rematd_sqlite *st = (struct rematd_sqlite *)base;
    memset(out, 0, sizeof *out);
    sqlite3_stmt *s;
    pthread_mutex_lock(&st->rmu);
    enum rematd_store_result found = rematd__sql_row(
        st->r, "SELECT created_at, options, profile_id, record, tenant FROM plans WHERE id = ?", id,
        &s);
    if (found == REMATD_STORE_OK) {
        const unsigned char *created = sqlite3_column_text(s, 0);
        const unsigned char *pid = sqlite3_column_text(s, 2);
        const void *rec = sqlite3_column_blob(s, 3);
        int n = sqlite3_column_bytes(s, 3);
        snprintf(out->created_at, sizeof out->created_at, "%s",
                 created ? (const char *)created : "");
        snprintf(out->profile_id, sizeof out->profile_id, "%s", pid ? (const char *)pid : "");
        const unsigned char *tenant = sqlite3_column_text(s, 4);
        snprintf(out->tenant, sizeof out->tenant, "%s",
                 tenant ? (const char *)tenant : REMATD_TENANT_DEFAULT);
        out->options = rematd__sql_col_dup(s, 1);
        out->record = n > 0 ? malloc((size_t)n) : NULL;
        if (out->record && out->options) {
            memcpy(out->record, rec, (size_t)n);
            out->record_len = (size_t)n;
        } else {
            found = REMATD_STORE_ERROR;
        }
    }
    sqlite3_finalize(s);
    if (found == REMATD_STORE_NOT_FOUND && st->has_legacy) {
        found = get_plan_v1(st, id, out);
        snprintf(out->tenant, sizeof out->tenant, "%s", REMATD_TENANT_DEFAULT);
    }
    pthread_mutex_unlock(&st->rmu);
    if (found != REMATD_STORE_OK)
        rematd_stored_plan_clear(out);
    return found;
}
