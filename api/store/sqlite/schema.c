/*
 * sqlite/schema.c - the tables of rematd.db and their versions.
 *
 * PRAGMA user_version is the number of the last migration the database
 * has had.  At open, the migrations after it run in order in one
 * transaction that also sets the new number, so a database is at one
 * version or at the one before, never between.  A database at a higher
 * number than REMATD_SCHEMA_VERSION was written by a newer rematd: it is
 * refused rather than read or written with a schema this version does
 * not understand.  A change of schema is a new migration at the end of
 * the table below; a migration is never edited once released.
 *
 * Version 0 (no user_version) is a new, empty database, one written by
 * rematd 0.1.0 (its plans table has a body column), or one written before
 * versions were numbered (plans as compact records): migration 1 brings
 * all three to the same tables, so its statements leave tables that exist
 * alone.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "sqlite.h"

/* A one-row, one-column query's integer; -1 on failure, 0 for no row. */
static long long query_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *s = NULL;
    long long v = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK) {
        int rc = sqlite3_step(s);
        v = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : rc == SQLITE_DONE ? 0 : -1;
    }
    sqlite3_finalize(s);
    return v;
}

/* 1: plans, jobs and idempotency as rematd wrote them before versions.
 * rematd 0.1.0 kept each plan's answer as JSON text (plans.body) and its
 * request in a `requests` table; that plans table is renamed plans_v1 and
 * still read (sqlite/plans.c), so that upgrading loses no plan.  Plans are
 * one compact record each (plan_codec.h), from which the answers are
 * rendered; WITHOUT ROWID: the id is the only key, so an insert touches
 * one b-tree, not a table and an index. */
static int migrate_1(sqlite3 *db)
{
    long long old = query_int(db, "SELECT 1 FROM pragma_table_info('plans') WHERE name = 'body'");
    if (old < 0 || (old == 1 && rematd__sql_exec(db, "ALTER TABLE plans RENAME TO plans_v1") < 0))
        return -1;
    return rematd__sql_exec(
        db,
        "CREATE TABLE IF NOT EXISTS plans (id TEXT PRIMARY KEY, created_at TEXT NOT NULL,"
        " algorithm TEXT NOT NULL, options TEXT NOT NULL, profile_id TEXT, record BLOB NOT NULL)"
        " WITHOUT ROWID;"
        "CREATE TABLE IF NOT EXISTS jobs (id TEXT PRIMARY KEY, kind TEXT NOT NULL,"
        " status TEXT NOT NULL, device TEXT NOT NULL, spec TEXT NOT NULL,"
        " attempts INTEGER NOT NULL DEFAULT 0, expiries INTEGER NOT NULL DEFAULT 0,"
        " lease_id TEXT, lease_expires_at REAL, worker_id TEXT, progress TEXT, result TEXT,"
        " reason TEXT, last_error TEXT, created_at REAL NOT NULL, updated_at REAL NOT NULL);"
        "CREATE INDEX IF NOT EXISTS jobs_status ON jobs(status);"
        "CREATE TABLE IF NOT EXISTS idempotency (scope TEXT NOT NULL, key TEXT NOT NULL,"
        " body_hash TEXT NOT NULL, status INTEGER NOT NULL, location TEXT, body TEXT NOT NULL,"
        " created_at REAL NOT NULL, PRIMARY KEY (scope, key));"
        "CREATE INDEX IF NOT EXISTS idempotency_created ON idempotency(created_at);");
}

/* 2: an Idempotency-Key record names what the key created (resource_id)
 * instead of keeping an HTTP status and Location: the route that answers
 * knows those (api/http.c, rematd_req_created).  Records kept so far had
 * Location /v1/<collection>/<id>, the id its last 32 characters. */
static int migrate_2(sqlite3 *db)
{
    return rematd__sql_exec(
        db, "CREATE TABLE idempotency_2 (scope TEXT NOT NULL, key TEXT NOT NULL,"
            " body_hash TEXT NOT NULL, resource_id TEXT NOT NULL, body TEXT NOT NULL,"
            " created_at REAL NOT NULL, PRIMARY KEY (scope, key));"
            "INSERT INTO idempotency_2 SELECT scope, key, body_hash, substr(location, -32), body,"
            " created_at FROM idempotency WHERE length(location) >= 32;"
            "DROP TABLE idempotency;"
            "ALTER TABLE idempotency_2 RENAME TO idempotency;"
            "CREATE INDEX idempotency_created ON idempotency(created_at);");
}

/* 3: uploaded models (issue 10).  A model's record; its bytes are the file
 * models/<sha256> under the data directory.  The id is the digest's first
 * 32 hex digits, so the same bytes uploaded twice are one model.  A job
 * names the model it runs in jobs.model_id, so that deleting a model a
 * queued or running job needs can be refused in one statement. */
static int migrate_3(sqlite3 *db)
{
    return rematd__sql_exec(
        db, "CREATE TABLE models (id TEXT PRIMARY KEY, sha256 TEXT NOT NULL UNIQUE,"
            " bytes INTEGER NOT NULL, created_at REAL NOT NULL, meta TEXT NOT NULL)"
            " WITHOUT ROWID;"
            "ALTER TABLE jobs ADD COLUMN model_id TEXT;"
            "CREATE INDEX jobs_model ON jobs(model_id) WHERE model_id IS NOT NULL;");
}

/* 4: profile reuse (docs/api.md, "Profile reuse").  A job's reuse_key is
 * the SHA-256 of what changes a profile's numbers (its normalised spec);
 * a profile request with the key of a done profile is answered from it.
 * The index serves exactly that lookup: the newest done job of a key. */
static int migrate_4(sqlite3 *db)
{
    return rematd__sql_exec(db, "ALTER TABLE jobs ADD COLUMN reuse_key TEXT;"
                                "CREATE INDEX jobs_reuse ON jobs(reuse_key, status, updated_at)"
                                " WHERE reuse_key IS NOT NULL;");
}

/* 5: tenants (docs/security.md, "Tenants").  Every model, job and plan
 * names its tenant; the rows already there are "default"'s, the tenant of
 * REMAT_TOKEN and of an anonymous rematd, so an upgrade changes no answer.
 * Two tenants may upload the same bytes, each a model of its own sharing
 * the archive's file: sha256 is no longer unique (SQLite drops a
 * constraint only by copying the table).  The indexes serve a tenant's
 * list of models, the sum of its bytes and the count of its queued jobs. */
static int migrate_5(sqlite3 *db)
{
    return rematd__sql_exec(
        db, "CREATE TABLE models_5 (id TEXT PRIMARY KEY, sha256 TEXT NOT NULL,"
            " bytes INTEGER NOT NULL, created_at REAL NOT NULL, meta TEXT NOT NULL,"
            " tenant TEXT NOT NULL DEFAULT 'default') WITHOUT ROWID;"
            "INSERT INTO models_5 (id, sha256, bytes, created_at, meta)"
            " SELECT id, sha256, bytes, created_at, meta FROM models;"
            "DROP TABLE models;"
            "ALTER TABLE models_5 RENAME TO models;"
            "CREATE INDEX models_sha256 ON models(sha256);"
            "CREATE INDEX models_tenant ON models(tenant, created_at);"
            "ALTER TABLE jobs ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';"
            "CREATE INDEX jobs_tenant_queued ON jobs(tenant) WHERE status = 'queued';"
            "ALTER TABLE plans ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';");
}

/* The migrations in order: migrations[i] brings version i to i + 1. */
static int (*const migrations[])(sqlite3 *db) = {migrate_1, migrate_2, migrate_3, migrate_4,
                                                 migrate_5};

_Static_assert(sizeof migrations / sizeof migrations[0] == REMATD_SCHEMA_VERSION,
               "one migration per schema version");

static int too_new(long long v, char *errbuf, size_t errlen)
{
    snprintf(errbuf, errlen,
             "rematd.db is at schema version %lld, newer than this rematd knows (%d): it was"
             " written by a newer rematd, which is the one to run on it",
             v, REMATD_SCHEMA_VERSION);
    return -1;
}

int rematd__schema_migrate(struct rematd_sqlite *st, char *errbuf, size_t errlen)
{
    sqlite3 *db = st->w;
    long long v = query_int(db, "PRAGMA user_version");
    if (v > REMATD_SCHEMA_VERSION)
        return too_new(v, errbuf, errlen);
    if (v >= 0 && v < REMATD_SCHEMA_VERSION) {
        if (rematd__sql_exec(db, "BEGIN IMMEDIATE") < 0)
            goto fail;
        /* Read again under the write lock: another rematd on the same
         * directory may have migrated meanwhile. */
        v = query_int(db, "PRAGMA user_version");
        if (v < 0 || v > REMATD_SCHEMA_VERSION) {
            rematd__sql_exec(db, "ROLLBACK");
            if (v < 0)
                goto fail;
            return too_new(v, errbuf, errlen);
        }
        long long from = v;
        long long tables = query_int(db, "SELECT count(*) FROM sqlite_master");
        for (; v < REMATD_SCHEMA_VERSION; v++)
            if (migrations[v](db) < 0)
                break;
        char set[64];
        snprintf(set, sizeof set, "PRAGMA user_version = %d", REMATD_SCHEMA_VERSION);
        if (v != REMATD_SCHEMA_VERSION || rematd__sql_exec(db, set) < 0 ||
            rematd__sql_exec(db, "COMMIT") < 0) {
            if (v != REMATD_SCHEMA_VERSION)
                snprintf(errbuf, errlen, "rematd.db: migration %lld failed: %s", v + 1,
                         sqlite3_errmsg(db));
            else
                snprintf(errbuf, errlen, "rematd.db: cannot commit the migrations: %s",
                         sqlite3_errmsg(db));
            rematd__sql_exec(db, "ROLLBACK");
            return -1;
        }
        if (tables == 0)
            rematd_log("info", "store created",
                       json_pack("{s:i}", "schema_version", REMATD_SCHEMA_VERSION));
        else if (from < REMATD_SCHEMA_VERSION)
            rematd_log("info", "store migrated",
                       json_pack("{s:I, s:i}", "from_version", (json_int_t)from, "to_version",
                                 REMATD_SCHEMA_VERSION));
    }
    if (v < 0)
        goto fail;
    long long legacy =
        query_int(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'plans_v1'");
    if (legacy < 0)
        goto fail;
    st->has_legacy = legacy == 1;
    return 0;
fail:
    snprintf(errbuf, errlen, "rematd.db: cannot read the schema: %s", sqlite3_errmsg(db));
    return -1;
}
