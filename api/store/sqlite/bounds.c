/*
 * sqlite/bounds.c - the age and the bytes of stored plans and
 * Idempotency-Key records (--plan-ttl, --max-store-bytes; docs/api.md,
 * "Limits").  Both grew without end: every POST /v1/plans adds a row of
 * ~1.5 KB, and a client that sends a new key with each adds its answer too.
 *
 * A pass (when rematd__bounds_due says so, on the writer thread in a quiet
 * second) deletes the plans older than --plan-ttl, then sums the bytes of
 * the rows' fields; past --max-store-bytes it deletes the oldest rows,
 * plans and records alike by their creation time, until the newest left
 * take at most REMATD_STORE_KEEP of the bound.  A deleted plan is gone:
 * GET /v1/plans/{id} is 404, as for an id never stored.  Plans of rematd
 * 0.1.0 (plans_v1, read-only since) are left alone.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "sqlite.h"

/* Every plan and record: kind (0 plan, 1 record), its key, its creation
 * time as a Julian day, and the bytes of its fields. */
#define ROWS                                                                                       \
    "SELECT 0 AS k, id AS a, '' AS b, julianday(created_at) AS t,"                                 \
    " length(CAST(id AS BLOB)) + length(CAST(created_at AS BLOB)) +"                               \
    " length(CAST(algorithm AS BLOB)) + length(CAST(options AS BLOB)) +"                           \
    " coalesce(length(CAST(profile_id AS BLOB)), 0) + length(record) AS n FROM plans"              \
    " UNION ALL SELECT 1, scope, key, created_at / 86400.0 + 2440587.5,"                           \
    " length(CAST(scope AS BLOB)) + length(CAST(key AS BLOB)) +"                                   \
    " length(CAST(body_hash AS BLOB)) + length(CAST(resource_id AS BLOB)) +"                       \
    " length(CAST(body AS BLOB)) + 8 FROM idempotency"

/* The creation time of the newest row past the bytes kept, counting from
 * the newest: it and every older row go (rows created in the same
 * instant alike). */
#define CUT                                                                                        \
    "WITH r AS (" ROWS "), ranked AS (SELECT t, sum(n) OVER (ORDER BY t DESC, k, a, b"             \
    " ROWS UNBOUNDED PRECEDING) AS kept FROM r)"                                                   \
    " SELECT max(t) FROM ranked WHERE kept > ?"

/* The one number sql (with ? bound to arg when arg >= 0) answers, into
 * *out: 1, 0 when it is NULL, -1 on failure. */
static int one_number(sqlite3 *db, const char *sql, long long arg, double *out)
{
    sqlite3_stmt *s = NULL;
    int rc = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK) {
        if (arg >= 0)
            sqlite3_bind_int64(s, 1, arg);
        if (sqlite3_step(s) == SQLITE_ROW) {
            rc = sqlite3_column_type(s, 0) != SQLITE_NULL;
            *out = sqlite3_column_double(s, 0);
        }
    }
    sqlite3_finalize(s);
    return rc;
}

/* Runs sql with ? bound to the text, or else the number, given: the rows
 * it changed, or -1. */
static long run(sqlite3 *db, const char *sql, const char *text, double num)
{
    sqlite3_stmt *s = NULL;
    long n = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK) {
        if (text)
            sqlite3_bind_text(s, 1, text, -1, SQLITE_STATIC);
        else
            sqlite3_bind_double(s, 1, num);
        if (sqlite3_step(s) == SQLITE_DONE)
            n = (long)sqlite3_changes(db);
    }
    sqlite3_finalize(s);
    return n;
}

void rematd__store_bounds(struct rematd_sqlite *st, double now)
{
    if (!rematd__bounds_due(now, st->last_bounds, st->plan_ttl, st->written, st->max_store_bytes))
        return;
    st->last_bounds = now;
    st->written = 0;
    sqlite3 *db = st->w;
    long aged = 0, plans = 0, records = 0;
    long long total = -1;
    if (rematd__sql_exec(db, "BEGIN IMMEDIATE") < 0)
        return;
    int ok = 1;
    if (st->plan_ttl > 0) {
        char cut[32];
        rematd_rfc3339(now - st->plan_ttl, cut);
        aged = run(db, "DELETE FROM plans WHERE julianday(created_at) < julianday(?)", cut, 0);
        ok = aged >= 0;
    }
    double sum = 0, cut_t = 0;
    if (ok) {
        ok = one_number(db, "SELECT coalesce(sum(n), 0) FROM (" ROWS ")", -1, &sum) > 0;
        total = ok ? (long long)sum : -1;
    }
    if (ok && total > (long long)st->max_store_bytes) {
        long long keep = (long long)REMATD_STORE_KEEP(st->max_store_bytes);
        int got = one_number(db, CUT, keep, &cut_t);
        ok = got >= 0;
        if (got > 0) {
            plans = run(db, "DELETE FROM plans WHERE julianday(created_at) <= ?", NULL, cut_t);
            records = plans < 0 ? -1
                                : run(db,
                                      "DELETE FROM idempotency"
                                      " WHERE created_at / 86400.0 + 2440587.5 <= ?",
                                      NULL, cut_t);
            ok = plans >= 0 && records >= 0;
        }
    }
    if (!ok || rematd__sql_exec(db, "COMMIT") < 0) {
        rematd_log("warn", "cannot keep the store within its bounds",
                   json_pack("{s:s}", "detail", sqlite3_errmsg(db)));
        rematd__sql_exec(db, "ROLLBACK");
        return;
    }
    st->idem_count -= records;
    if (st->idem_count < 0)
        st->idem_count = 0;
    if (aged > 0 || plans > 0 || records > 0)
        rematd_log("info", "store bounds: oldest rows deleted",
                   json_pack("{s:i, s:i, s:i, s:I, s:I, s:i}", "plans_past_ttl", (int)aged, "plans",
                             (int)plans, "idempotency_keys", (int)records, "bytes",
                             (json_int_t)total, "max_store_bytes", (json_int_t)st->max_store_bytes,
                             "plan_ttl", (int)st->plan_ttl));
}
