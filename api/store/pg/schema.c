/*
 * pg/schema.c - the PostgreSQL store's tables and their versions.
 *
 * remat_schema holds the number of the last migration the database has
 * had.  Replicas starting together all call rematd__pg_migrate: the first
 * to take the session advisory lock REMATD_PG_LOCK_MIGRATE migrates, each
 * migration in one transaction with its new number, and the others wait
 * for the lock, then find nothing left to do.  A database at a higher
 * number was migrated by a newer rematd and is refused.  A migration is
 * never edited once released; a change is a new one at the end.
 *
 * The tables are the SQLite store's (sqlite/schema.c at version 4), with
 * PostgreSQL's types: JSON kept as text (answers are replayed byte for
 * byte), times as double precision seconds since the epoch (read back
 * exactly: PostgreSQL prints the shortest text that reads back the same
 * double), and a plan's record as bytea.  jobs.seq orders the queue (the
 * SQLite rowid's role).  model_chunks holds uploaded archives
 * (pg/models.c says why in the database).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg.h"

static const char *const migrations[] = {
    /* 1: plans, jobs, Idempotency-Key records and uploaded models. */
    "CREATE TABLE plans (id text PRIMARY KEY, created_at text NOT NULL,"
    " algorithm text NOT NULL, options text NOT NULL, profile_id text, record bytea NOT NULL);"
    "CREATE TABLE jobs (seq bigserial NOT NULL, id text PRIMARY KEY, kind text NOT NULL,"
    " status text NOT NULL, device text NOT NULL, spec text NOT NULL,"
    " attempts integer NOT NULL DEFAULT 0, expiries integer NOT NULL DEFAULT 0,"
    " lease_id text, lease_expires_at double precision, worker_id text, progress text,"
    " result text, reason text, last_error text, created_at double precision NOT NULL,"
    " updated_at double precision NOT NULL, model_id text, reuse_key text);"
    "CREATE INDEX jobs_queued ON jobs(seq) WHERE status = 'queued';"
    "CREATE INDEX jobs_running ON jobs(lease_expires_at) WHERE status = 'running';"
    "CREATE INDEX jobs_status ON jobs(status);"
    "CREATE INDEX jobs_model ON jobs(model_id) WHERE model_id IS NOT NULL;"
    "CREATE INDEX jobs_reuse ON jobs(reuse_key, status, updated_at)"
    " WHERE reuse_key IS NOT NULL;"
    "CREATE TABLE idempotency (scope text NOT NULL, key text NOT NULL,"
    " body_hash text NOT NULL, resource_id text NOT NULL, body text NOT NULL,"
    " created_at double precision NOT NULL, PRIMARY KEY (scope, key));"
    "CREATE INDEX idempotency_created ON idempotency(created_at);"
    "CREATE TABLE models (id text PRIMARY KEY, sha256 text NOT NULL UNIQUE,"
    " bytes bigint NOT NULL, created_at double precision NOT NULL, meta text NOT NULL);"
    "CREATE TABLE model_chunks (model_id text NOT NULL REFERENCES models(id)"
    " ON DELETE CASCADE, seq integer NOT NULL, data bytea NOT NULL,"
    " PRIMARY KEY (model_id, seq));",
    /* 2: the number of Idempotency-Key records, kept in the transactions
     * that change it (pg/idem.c), for --max-idempotency-keys. */
    "CREATE TABLE remat_counters (name text PRIMARY KEY, n bigint NOT NULL);"
    "INSERT INTO remat_counters SELECT 'idempotency', count(*) FROM idempotency;",
    /* 3: tenants, as SQLite's migration 5 (sqlite/schema.c says why): the
     * rows already there are "default"'s, and two tenants may each have a
     * model of the same bytes.  Written to run again on what it made (a
     * database whose version rows were lost): IF [NOT] EXISTS throughout. */
    "ALTER TABLE models DROP CONSTRAINT IF EXISTS models_sha256_key;"
    "ALTER TABLE models ADD COLUMN IF NOT EXISTS tenant text NOT NULL DEFAULT 'default';"
    "CREATE INDEX IF NOT EXISTS models_sha256 ON models(sha256);"
    "CREATE INDEX IF NOT EXISTS models_tenant ON models(tenant, created_at);"
    "ALTER TABLE jobs ADD COLUMN IF NOT EXISTS tenant text NOT NULL DEFAULT 'default';"
    "CREATE INDEX IF NOT EXISTS jobs_tenant_queued ON jobs(tenant) WHERE status = 'queued';"
    "ALTER TABLE plans ADD COLUMN IF NOT EXISTS tenant text NOT NULL DEFAULT 'default';",
};

_Static_assert(sizeof migrations / sizeof migrations[0] == REMATD_PG_SCHEMA_VERSION,
               "one migration per schema version");

static long long version(PGconn *c)
{
    PGresult *res =
        rematd__pg_exec(c, "read schema version",
                        "SELECT coalesce(max(version), 0) FROM remat_schema", 0, NULL, NULL);
    long long v = res && PQntuples(res) == 1 ? atoll(PQgetvalue(res, 0, 0)) : -1;
    PQclear(res);
    return v;
}

static int migrate_locked(PGconn *c, char *errbuf, size_t errlen)
{
    if (rematd__pg_cmd(c, "create remat_schema",
                       "SET client_min_messages = warning;"
                       " CREATE TABLE IF NOT EXISTS remat_schema (version integer NOT NULL)",
                       0, NULL, NULL) < 0) {
        snprintf(errbuf, errlen, "PostgreSQL: cannot create remat_schema: %s", PQerrorMessage(c));
        return -1;
    }
    long long v = version(c), from = v;
    if (v < 0) {
        snprintf(errbuf, errlen, "PostgreSQL: cannot read the schema version: %s",
                 PQerrorMessage(c));
        return -1;
    }
    if (v > REMATD_PG_SCHEMA_VERSION) {
        snprintf(errbuf, errlen,
                 "the database is at schema version %lld, newer than this rematd knows (%d): it"
                 " was migrated by a newer rematd, which is the one to run on it",
                 v, REMATD_PG_SCHEMA_VERSION);
        return -1;
    }
    for (; v < REMATD_PG_SCHEMA_VERSION; v++) {
        char set[96];
        snprintf(set, sizeof set, "INSERT INTO remat_schema (version) VALUES (%lld)", v + 1);
        if (rematd__pg_cmd(c, "migrate", "BEGIN", 0, NULL, NULL) < 0 ||
            rematd__pg_cmd(c, "migrate", migrations[v], 0, NULL, NULL) < 0 ||
            rematd__pg_cmd(c, "migrate", set, 0, NULL, NULL) < 0 ||
            rematd__pg_cmd(c, "migrate", "COMMIT", 0, NULL, NULL) < 0) {
            snprintf(errbuf, errlen, "PostgreSQL: migration %lld failed: %s", v + 1,
                     PQerrorMessage(c));
            errbuf[strcspn(errbuf, "\n")] = '\0';
            PQclear(PQexec(c, "ROLLBACK"));
            return -1;
        }
    }
    if (from < REMATD_PG_SCHEMA_VERSION)
        rematd_log("info", from == 0 ? "store created" : "store migrated",
                   json_pack("{s:s, s:I, s:i}", "store", "postgresql", "from_version",
                             (json_int_t)from, "to_version", REMATD_PG_SCHEMA_VERSION));
    return 0;
}

int rematd__pg_migrate(PGconn *c, char *errbuf, size_t errlen)
{
    char lock[96], unlock[96];
    snprintf(lock, sizeof lock, "SELECT pg_advisory_lock(%lld)", REMATD_PG_LOCK_MIGRATE);
    snprintf(unlock, sizeof unlock, "SELECT pg_advisory_unlock(%lld)", REMATD_PG_LOCK_MIGRATE);
    if (rematd__pg_cmd(c, "migrate lock", lock, 0, NULL, NULL) < 0) {
        snprintf(errbuf, errlen, "PostgreSQL: cannot take the migration lock: %s",
                 PQerrorMessage(c));
        return -1;
    }
    int rc = migrate_locked(c, errbuf, errlen);
    rematd__pg_cmd(c, "migrate unlock", unlock, 0, NULL, NULL);
    return rc;
}
