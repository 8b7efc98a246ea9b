/*
 * sqlite/bounds.c - the age and the bytes of stored plans and
 * Idempotency-Key records (--plan-ttl, --max-store-bytes; docs/api.md,
 * "Limits").  Both grew without end: every POST /v1/plans adds a row of
 * ~1.5 KB, and a client that sends a new key with each adds its answer too.
 *
 * A pass (when rematd__bounds_due says so, on the writer thread in a quiet
 * second) deletes the plans older than --plan-ttl, then, when the bytes
 * of the rows' fields may be past --max-store-bytes, sums them; past it,
 * it deletes the oldest rows, plans and records alike by their creation
 * time, until the rest take at most REMATD_STORE_KEEP of the bound.  A deleted plan is gone:
 * GET /v1/plans/{id} is 404, as for an id never stored.  Plans of rematd
 * 0.1.0 (plans_v1, read-only since) are left alone.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "sqlite.h"

/* The bytes of a row's fields. */
#define PLAN_BYTES                                                                                 \
    "length(CAST(id AS BLOB)) + length(CAST(created_at AS BLOB)) +"                                \
    " length(CAST(algorithm AS BLOB)) + length(CAST(options AS BLOB)) +"                           \
    " coalesce(length(CAST(profile_id AS BLOB)), 0) + length(record)"
#define RECORD_BYTES                                                                               \
    "length(CAST(scope AS BLOB)) + length(CAST(key AS BLOB)) + length(CAST(body_hash AS BLOB)) +"  \
    " length(CAST(resource_id AS BLOB)) + length(CAST(body AS BLOB)) + 8"

/* The one integer sql answers, or -1. */
static long long one_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *s = NULL;
    long long v = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
}

/* Runs sql with its ?s bound to the texts a and b (b may be NULL), or to
 * the number x when a is NULL: the rows it changed, or -1. */
static long run(sqlite3 *db, const char *sql, const char *a, const char *b, double x)
{
    sqlite3_stmt *s = NULL;
    long n = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK) {
        if (a) {
            sqlite3_bind_text(s, 1, a, -1, SQLITE_STATIC);
            if (b)
                sqlite3_bind_text(s, 2, b, -1, SQLITE_STATIC);
        } else {
            sqlite3_bind_double(s, 1, x);
        }
        if (sqlite3_step(s) == SQLITE_DONE)
            n = (long)sqlite3_changes(db);
    }
    sqlite3_finalize(s);
    return n;
}

/* Plans older than --plan-ttl: a plan id leads with its milliseconds
 * (rematd_new_ordered_id), so the primary key finds them without reading
 * the rest; created_at decides. */
static long delete_aged(sqlite3 *db, double now, unsigned ttl)
{
    char cut[32], id[16];
    double t = now - ttl;
    rematd_rfc3339(t, cut);
    snprintf(id, sizeof id, "%012llx", (unsigned long long)(t * 1000.0) & 0xffffffffffffULL);
    return run(db, "DELETE FROM plans WHERE id < ? AND julianday(created_at) < julianday(?)", id,
               cut, 0);
}

/* Deletes the oldest plans and records until need bytes are freed: the
 * plans in id order (their creation order) and the records in created_at
 * order (its index), merged by creation time; reads only what goes.  The
 * bytes freed, or -1; *plans and *records say how many rows. */
static long long evict(sqlite3 *db, long long need, long *plans, long *records)
{
    sqlite3_stmt *p = NULL, *r = NULL;
    char last_id[REMATD_ID_LEN + 8] = "";
    double last_created = 0;
    long long freed = 0;
    long np = 0, nr = 0;
    int ok = sqlite3_prepare_v2(
                 db, "SELECT id, julianday(created_at), " PLAN_BYTES " FROM plans ORDER BY id", -1,
                 &p, NULL) == SQLITE_OK &&
             sqlite3_prepare_v2(db,
                                "SELECT created_at, created_at / 86400.0 + 2440587.5, " RECORD_BYTES
                                " FROM idempotency ORDER BY created_at",
                                -1, &r, NULL) == SQLITE_OK;
    int hp = ok ? sqlite3_step(p) : SQLITE_ERROR, hr = ok ? sqlite3_step(r) : SQLITE_ERROR;
    while (ok && freed < need && (hp == SQLITE_ROW || hr == SQLITE_ROW)) {
        int take_plan = hp == SQLITE_ROW && (hr != SQLITE_ROW || sqlite3_column_double(p, 1) <=
                                                                     sqlite3_column_double(r, 1));
        if (take_plan) {
            snprintf(last_id, sizeof last_id, "%s", (const char *)sqlite3_column_text(p, 0));
            freed += sqlite3_column_int64(p, 2);
            np++;
            hp = sqlite3_step(p);
        } else {
            last_created = sqlite3_column_double(r, 0);
            freed += sqlite3_column_int64(r, 2);
            nr++;
            hr = sqlite3_step(r);
        }
    }
    ok = ok && (hp == SQLITE_ROW || hp == SQLITE_DONE) && (hr == SQLITE_ROW || hr == SQLITE_DONE);
    sqlite3_finalize(p);
    sqlite3_finalize(r);
    /* Rows with the last one's time (or id) go with it: a few bytes more. */
    *plans = !ok || np == 0 ? 0 : run(db, "DELETE FROM plans WHERE id <= ?", last_id, NULL, 0);
    *records = !ok || nr == 0 ? 0
                              : run(db, "DELETE FROM idempotency WHERE created_at <= ?", NULL, NULL,
                                    last_created);
    return ok && *plans >= 0 && *records >= 0 ? freed : -1;
}

void rematd__store_bounds(struct rematd_sqlite *st, double now)
{
    if (!rematd__bounds_due(now, st->last_bounds, st->plan_ttl, st->written, st->max_store_bytes))
        return;
    st->last_bounds = now;
    long long written = st->written;
    st->written = 0;
    sqlite3 *db = st->w;
    long aged = 0, plans = 0, records = 0;
    if (rematd__sql_exec(db, "BEGIN IMMEDIATE") < 0)
        return;
    int ok = 1;
    if (st->plan_ttl > 0) {
        aged = delete_aged(db, now, st->plan_ttl);
        ok = aged >= 0;
    }
    /* The bytes are summed (a read of every row: about 0.5 s for 800 MB
     * of plans) only when what was written since the last sum may have
     * passed the bound; the estimate counts no deletion but the
     * bound's, so it errs high and a sum puts it right. */
    long long total = st->stored_bytes < 0 ? -1 : st->stored_bytes + written;
    if (ok && (total < 0 || total > (long long)st->max_store_bytes)) {
        total = one_int(db, "SELECT (SELECT coalesce(sum(" PLAN_BYTES "), 0) FROM plans) +"
                            " (SELECT coalesce(sum(" RECORD_BYTES "), 0) FROM idempotency)");
        ok = total >= 0;
    }
    if (ok && total > (long long)st->max_store_bytes) {
        long long freed =
            evict(db, total - (long long)REMATD_STORE_KEEP(st->max_store_bytes), &plans, &records);
        ok = freed >= 0;
        total -= freed;
    }
    if (!ok || rematd__sql_exec(db, "COMMIT") < 0) {
        rematd_log("warn", "cannot keep the store within its bounds",
                   json_pack("{s:s}", "detail", sqlite3_errmsg(db)));
        rematd__sql_exec(db, "ROLLBACK");
        st->stored_bytes = -1;
        return;
    }
    st->stored_bytes = total;
    st->idem_count -= records;
    if (st->idem_count < 0)
        st->idem_count = 0;
    if (records > 0)
        st->idem_stale = 1; /* the tenants' counts, at the next insert */
    if (aged > 0 || plans > 0 || records > 0)
        rematd_log("info", "store bounds: oldest rows deleted",
                   json_pack("{s:i, s:i, s:i, s:I, s:I, s:i}", "plans_past_ttl", (int)aged, "plans",
                             (int)plans, "idempotency_keys", (int)records, "bytes",
                             (json_int_t)total, "max_store_bytes", (json_int_t)st->max_store_bytes,
                             "plan_ttl", (int)st->plan_ttl));
}
