/*
 * pg/bounds.c - the age and the bytes of stored plans and Idempotency-Key
 * records on PostgreSQL (--plan-ttl, --max-store-bytes): sqlite/bounds.c
 * has the rules.  Any replica may run a pass (each one's writer thread, in
 * a quiet second, once a minute or once --plan-ttl when shorter); two at
 * once delete the same rows, and the count of records
 * (rematd__pg_idem_lock) keeps them in turn.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg.h"

/* Every plan and record: kind (0 plan, 1 record), its key, its creation
 * time in seconds since the epoch, and the bytes of its fields. */
#define ROWS                                                                                       \
    "SELECT 0 AS k, id AS a, ''::text AS b,"                                                       \
    " extract(epoch FROM created_at::timestamptz)::double precision AS t,"                         \
    " octet_length(id) + octet_length(created_at) + octet_length(algorithm) +"                     \
    " octet_length(options) + coalesce(octet_length(profile_id), 0) + octet_length(record) AS n"   \
    " FROM plans UNION ALL SELECT 1, scope, key, created_at, octet_length(scope) +"                \
    " octet_length(key) + octet_length(body_hash) + octet_length(resource_id) +"                   \
    " octet_length(body) + 8 FROM idempotency"

/* The creation time of the newest row past the bytes kept, counting from
 * the newest: it and every older row go. */
#define CUT                                                                                        \
    "WITH r AS (" ROWS "), ranked AS (SELECT t, sum(n) OVER (ORDER BY t DESC, k, a, b"             \
    " ROWS UNBOUNDED PRECEDING) AS kept FROM r)"                                                   \
    " SELECT max(t) FROM ranked WHERE kept > $1::bigint"

/* The one value sql answers, copied into out: 1, 0 when it is NULL, -1. */
static int one_value(PGconn *c, const char *sql, int n, const char *const *v, char *out, size_t cap)
{
    PGresult *res = rematd__pg_exec(c, "store bounds", sql, n, v, NULL);
    int rc = -1;
    if (res && PQntuples(res) == 1) {
        rc = !PQgetisnull(res, 0, 0);
        snprintf(out, cap, "%s", rc ? PQgetvalue(res, 0, 0) : "");
    }
    PQclear(res);
    return rc;
}

static long deleted(PGconn *c, const char *sql, const char *arg)
{
    const char *v[] = {arg};
    PGresult *res = rematd__pg_exec(c, "store bounds", sql, 1, v, NULL);
    long n = res ? atol(PQcmdTuples(res)) : -1;
    PQclear(res);
    return n;
}

void rematd__pg_bounds(struct rematd_pg *st, PGconn *c, double now)
{
    if (!rematd__bounds_due(now, st->last_bounds, st->plan_ttl, st->written, st->max_store_bytes))
        return;
    st->last_bounds = now;
    st->written = 0;
    long aged = 0, plans = 0, records = 0, before = -1;
    char total[64] = "0", keep[32], cut[64];
    int ok = rematd__pg_cmd(c, "store bounds", "BEGIN", 0, NULL, NULL) == 0 &&
             (before = rematd__pg_idem_lock(c)) >= 0;
    if (ok && st->plan_ttl > 0) {
        char t[64];
        snprintf(t, sizeof t, "%.17g", now - st->plan_ttl);
        aged = deleted(c,
                       "DELETE FROM plans WHERE created_at::timestamptz <"
                       " to_timestamp($1::double precision)",
                       t);
        ok = aged >= 0;
    }
    if (ok)
        ok = one_value(c, "SELECT coalesce(sum(n), 0)::bigint FROM (" ROWS ") r", 0, NULL, total,
                       sizeof total) > 0;
    if (ok && strtoull(total, NULL, 10) > (unsigned long long)st->max_store_bytes) {
        snprintf(keep, sizeof keep, "%zu", REMATD_STORE_KEEP(st->max_store_bytes));
        const char *v[] = {keep};
        int got = one_value(c, CUT, 1, v, cut, sizeof cut);
        ok = got >= 0;
        if (got > 0) {
            plans = deleted(c,
                            "DELETE FROM plans WHERE extract(epoch FROM"
                            " created_at::timestamptz)::double precision <= $1::double precision",
                            cut);
            records = plans < 0 ? -1
                                : deleted(c,
                                          "DELETE FROM idempotency"
                                          " WHERE created_at <= $1::double precision",
                                          cut);
            ok = plans >= 0 && records >= 0 &&
                 rematd__pg_idem_store(c, before, before - records) == 0;
        }
    }
    if (!ok || rematd__pg_cmd(c, "store bounds", "COMMIT", 0, NULL, NULL) < 0) {
        if (PQstatus(c) == CONNECTION_OK && PQtransactionStatus(c) != PQTRANS_IDLE)
            PQclear(PQexec(c, "ROLLBACK"));
        return;
    }
    if (aged > 0 || plans > 0 || records > 0)
        rematd_log("info", "store bounds: oldest rows deleted",
                   json_pack("{s:i, s:i, s:i, s:I, s:I, s:i}", "plans_past_ttl", (int)aged, "plans",
                             (int)plans, "idempotency_keys", (int)records, "bytes",
                             (json_int_t)strtoll(total, NULL, 10), "max_store_bytes",
                             (json_int_t)st->max_store_bytes, "plan_ttl", (int)st->plan_ttl));
}
