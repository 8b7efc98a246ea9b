/*
 * pg/idem.c - Idempotency-Key records on PostgreSQL (sqlite/idem.c
 * has the rules: a record is inserted in the transaction that stores what
 * the key created, and lives --idempotency-ttl seconds).
 *
 * Across replicas: two requests with one key on two replicas both find no
 * record on the read side and both insert.  INSERT ... ON CONFLICT DO
 * NOTHING makes the second wait for the first's transaction; once that
 * commits, the second inserts nothing, reads the record (a new snapshot
 * per statement, READ COMMITTED) and replays it, its own plan or job rolled
 * back with it.  One plan or job per key, whichever replica.
 *
 * The bound on records (--max-idempotency-keys) is the database's: see
 * rematd__pg_idem_lock in pg/pg.h.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg.h"

/* The live record of (scope, key) on c: OK, NOT_FOUND or ERROR. */
static enum rematd_store_result lookup(struct rematd_pg *st, PGconn *c, const char *scope,
                                       const char *key, struct rematd_idem *out)
{
    memset(out, 0, sizeof *out);
    char since[64];
    snprintf(since, sizeof since, "%.17g", rematd_now() - st->idem_ttl);
    const char *v[] = {scope, key, since};
    PGresult *res = rematd__pg_exec(c, "read idempotency",
                                    "SELECT body_hash, resource_id, body FROM idempotency"
                                    " WHERE scope = $1 AND key = $2 AND created_at >= $3",
                                    3, v, NULL);
    enum rematd_store_result found = REMATD_STORE_ERROR;
    if (res && PQntuples(res) == 0) {
        found = REMATD_STORE_NOT_FOUND;
    } else if (res) {
        snprintf(out->body_hash, sizeof out->body_hash, "%s", PQgetvalue(res, 0, 0));
        snprintf(out->resource_id, sizeof out->resource_id, "%s", PQgetvalue(res, 0, 1));
        out->body = strdup(PQgetvalue(res, 0, 2));
        found = out->body ? REMATD_STORE_OK : REMATD_STORE_ERROR;
    }
    PQclear(res);
    return found;
}

enum rematd_store_result rematd__pg_get_idempotency(struct rematd_store *base, const char *scope,
                                                    const char *key, struct rematd_idem *out)
{
    struct rematd_pg *st = (struct rematd_pg *)base;
    PGconn *c = rematd__pg_get(st);
    enum rematd_store_result rc = lookup(st, c, scope, key, out);
    rematd__pg_put(st, c);
    return rc;
}

/* Inserts the record unless (scope, key) is taken: 1 inserted, 0 taken,
 * -1 error. */
static int insert(PGconn *c, const char *scope, const char *key, const char *body_hash,
                  const char *resource_id, const char *body, double now)
{
    char t[64];
    snprintf(t, sizeof t, "%.17g", now);
    const char *v[] = {scope, key, body_hash, resource_id, body, t};
    PGresult *res = rematd__pg_exec(
        c, "INSERT idempotency",
        "INSERT INTO idempotency (scope, key, body_hash, resource_id, body, created_at)"
        " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (scope, key) DO NOTHING",
        6, v, NULL);
    if (!res)
        return -1;
    int n = atoi(PQcmdTuples(res));
    PQclear(res);
    return n > 0;
}

/* The records of the tenant that scope names ("<tenant>/<route>", or the
 * route alone for "default"), on c inside the caller's transaction, or -1
 * (logged).  Exact: every transaction that adds records holds the count's
 * lock (rematd__pg_idem_lock), and this one's own are counted. */
static long tenant_records(PGconn *c, const char *scope)
{
    const char *slash = strchr(scope, '/');
    PGresult *res;
    if (!slash) {
        res = rematd__pg_exec(c, "count idempotency",
                              "SELECT count(*) FROM idempotency WHERE strpos(scope, '/') = 0", 0,
                              NULL, NULL);
    } else {
        /* The prefix "<tenant>/" compared as is: a range on the key's
         * index would depend on the database's collation (which may
         * ignore the '/'), and LIKE would read the '_' a tenant's name may
         * have as a wildcard. */
        char prefix[REMATD_TENANT_MAX + 2];
        int n = (int)(slash - scope);
        if (n > REMATD_TENANT_MAX)
            n = REMATD_TENANT_MAX;
        snprintf(prefix, sizeof prefix, "%.*s/", n, scope);
        const char *v[] = {prefix};
        res = rematd__pg_exec(c, "count idempotency",
                              "SELECT count(*) FROM idempotency"
                              " WHERE left(scope, length($1)) = $1",
                              1, v, NULL);
    }
    long n = res && PQntuples(res) == 1 ? atol(PQgetvalue(res, 0, 0)) : -1;
    PQclear(res);
    return n;
}

long rematd__pg_idem_lock(PGconn *c)
{
    PGresult *res = rematd__pg_exec(
        c, "count idempotency",
        "SELECT n FROM remat_counters WHERE name = 'idempotency' FOR UPDATE", 0, NULL, NULL);
    long n = res && PQntuples(res) == 1 ? atol(PQgetvalue(res, 0, 0)) : -1;
    PQclear(res);
    return n;
}

int rematd__pg_idem_store(PGconn *c, long before, long count)
{
    if (count == before)
        return 0;
    char n[32];
    snprintf(n, sizeof n, "%ld", count);
    const char *v[] = {n};
    return rematd__pg_cmd(c, "count idempotency",
                          "UPDATE remat_counters SET n = $1 WHERE name = 'idempotency'", 1, v,
                          NULL);
}

enum rematd_store_result rematd__pg_idem_insert(struct rematd_pg *st, PGconn *c, long *count,
                                                const char *scope, const char *key,
                                                const char *body_hash, const char *resource_id,
                                                const char *body, double now,
                                                struct rematd_idem *existing)
{
    /* As on SQLite: a key past its TTL that would give way below is
     * refused here all the same when the bound is reached. */
    if (*count >= st->max_idem)
        return REMATD_STORE_FULL;
    /* The tenant's share (more than one tenant): its records are counted
     * only once the whole could hold a full share, so a table with room
     * for every tenant costs no count. */
    if (st->tenant_max_idem < st->max_idem && *count >= st->tenant_max_idem) {
        long mine = tenant_records(c, scope);
        if (mine < 0)
            return REMATD_STORE_ERROR;
        if (mine >= st->tenant_max_idem)
            return REMATD_STORE_FULL;
    }
    int got = insert(c, scope, key, body_hash, resource_id, body, now);
    /* Taken: by a live record, or by one past its TTL that gives way.
     * Twice: another replica may put its own record in the place of the
     * expired one between this DELETE and the INSERT after it, and then
     * that record is the live one to replay. */
    int replaced = 0;
    for (int tries = 0; got == 0; tries++) {
        enum rematd_store_result r = lookup(st, c, scope, key, existing);
        if (r != REMATD_STORE_NOT_FOUND)
            return r == REMATD_STORE_OK ? REMATD_STORE_CONFLICT : REMATD_STORE_ERROR;
        if (tries == 1)
            return REMATD_STORE_ERROR;
        const char *v[] = {scope, key};
        PGresult *res =
            rematd__pg_exec(c, "DELETE idempotency",
                            "DELETE FROM idempotency WHERE scope = $1 AND key = $2", 2, v, NULL);
        if (!res)
            return REMATD_STORE_ERROR;
        replaced = atoi(PQcmdTuples(res)) > 0;
        PQclear(res);
        got = insert(c, scope, key, body_hash, resource_id, body, now);
    }
    if (got < 0)
        return REMATD_STORE_ERROR;
    /* A record that replaced an expired one leaves the count as it was. */
    *count += replaced ? 0 : 1;
    return REMATD_STORE_OK;
}
