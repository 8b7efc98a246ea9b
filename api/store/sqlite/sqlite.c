/*
 * sqlite/sqlite.c - the SQLite store's connections and lifetime: open (the data
 * directory, the three connections, the schema, the prepared statements,
 * the threads), close, readiness, and the small SQL helpers every store
 * file uses.
 *
 * Durability: journal_mode=WAL with synchronous=FULL, so every COMMIT has
 * fsynced the WAL before it returns; a kill -9 (or a power cut) after a
 * commit loses nothing.  --sync normal trades the power-cut half of that
 * for fewer fsyncs: a WAL commit then survives a crash of rematd (the OS
 * still holds the pages) but not of the machine.  Nothing is acknowledged
 * to a client before the transaction that holds it has committed.
 *
 * Faults fail loudly: one rematd per data directory (an flock on
 * rematd.lock, the second refuses to start); PRAGMA quick_check at open
 * (a damaged database is not served); a write that fails logs SQLite's own
 * error and makes the store not ready until a write succeeds again; and a
 * database whose path no longer names the file opened (the directory was
 * removed) is lost: every write is refused, since what it wrote into the
 * unlinked file would vanish at exit.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sqlite.h"

int rematd__sql_exec(sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        rematd_log("error", "sqlite",
                   json_pack("{s:s, s:s}", "sql", sql, "error", msg ? msg : sqlite3_errstr(rc)));
    }
    sqlite3_free(msg);
    return rc == SQLITE_OK ? 0 : -1;
}

int rematd__sql_step_reset(sqlite3_stmt *s)
{
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return rc;
}

char *rematd__sql_col_dup(sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? strdup((const char *)t) : NULL;
}

enum rematd_store_result rematd__sql_row(sqlite3 *db, const char *sql, const char *key,
                                         sqlite3_stmt **s)
{
    *s = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, s, NULL) != SQLITE_OK)
        return REMATD_STORE_ERROR;
    sqlite3_bind_text(*s, 1, key, -1, SQLITE_STATIC);
    int rc = sqlite3_step(*s);
    return rc == SQLITE_ROW    ? REMATD_STORE_OK
           : rc == SQLITE_DONE ? REMATD_STORE_NOT_FOUND
                               : REMATD_STORE_ERROR;
}

static int mkdirs(const char *dir)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0700) < 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(buf, 0700) < 0 && errno != EEXIST)
        return -1;
    return 0;
}

int rematd__store_check(struct rematd_sqlite *st)
{
    if (atomic_load(&st->lost))
        return -1;
    struct stat sb;
    if (stat(st->db_path, &sb) == 0 && (unsigned long long)sb.st_dev == st->db_dev &&
        (unsigned long long)sb.st_ino == st->db_ino)
        return 0;
    if (!atomic_exchange(&st->lost, 1))
        rematd_log("error", "data directory lost",
                   json_pack("{s:s, s:s}", "path", st->db_path, "detail",
                             "the database file was removed or replaced; every write is refused"
                             " until rematd is restarted on a data directory"));
    return -1;
}

void rematd__store_write_failed(struct rematd_sqlite *st, const char *what)
{
    int ext = sqlite3_extended_errcode(st->w);
    rematd_log(
        "error", "store write failed",
        json_pack("{s:s, s:s, s:i}", "op", what, "error", sqlite3_errmsg(st->w), "code", ext));
    if (!sqlite3_get_autocommit(st->w))
        sqlite3_exec(st->w, "ROLLBACK", NULL, NULL, NULL);
    atomic_store(&st->failed, 1);
}

void rematd__store_write_ok(struct rematd_sqlite *st)
{
    if (atomic_exchange(&st->failed, 0))
        rematd_log("info", "store writable again", NULL);
}

/* One rematd per data directory: an exclusive flock on <dir>/rematd.lock,
 * held while the store is open (the descriptor is close-on-exec, so a
 * worker never inherits it). */
static int lock_dir(struct rematd_sqlite *st, const char *dir, char *errbuf, size_t errlen)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/rematd.lock", dir);
    st->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (st->lock_fd < 0) {
        snprintf(errbuf, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (flock(st->lock_fd, LOCK_EX | LOCK_NB) < 0) {
        char pid[32] = "";
        ssize_t n = pread(st->lock_fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        snprintf(errbuf, errlen,
                 "data directory %s is in use by another rematd (pid %s): one rematd per data"
                 " directory",
                 dir, pid[0] ? pid : "unknown");
        return -1;
    }
    char txt[32];
    int len = snprintf(txt, sizeof txt, "%ld\n", (long)getpid());
    if (ftruncate(st->lock_fd, 0) < 0 || pwrite(st->lock_fd, txt, (size_t)len, 0) != len) {
        snprintf(errbuf, errlen, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* PRAGMA quick_check: a database damaged mid-file would otherwise start and
 * answer 404 for the rows it lost, with nothing logged.  O(pages), about a
 * second per GB. */
static int integrity(sqlite3 *db, const char *path, char *errbuf, size_t errlen)
{
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db, "PRAGMA quick_check(5)", -1, &s, NULL);
    const char *first = NULL;
    int ok = 0;
    if (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        first = (const char *)sqlite3_column_text(s, 0);
        ok = first && strcmp(first, "ok") == 0;
    }
    if (!ok)
        snprintf(errbuf, errlen,
                 "%s is damaged (PRAGMA quick_check: %s); restore it from a backup or move it"
                 " away",
                 path, first ? first : sqlite3_errmsg(db));
    sqlite3_finalize(s);
    return ok ? 0 : -1;
}

static sqlite3 *open_db(const char *path, int flags, char *errbuf, size_t errlen)
{
    sqlite3 *db = NULL;
    /* NOMUTEX: each connection is only used under its own mutex. */
    int rc = sqlite3_open_v2(path, &db, flags | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        snprintf(errbuf, errlen, "%s: %s", path, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_busy_timeout(db, 5000);
    return db;
}

static const struct rematd_store_ops sqlite_ops = {
    .name = "sqlite",
    .close = rematd__sqlite_close,
    .ready = rematd__sqlite_ready,
    .get_idempotency = rematd__sqlite_get_idempotency,
    .get_plan = rematd__sqlite_get_plan,
    .create_job = rematd__sqlite_create_job,
    .done_ids = rematd__sqlite_done_ids,
    .get_job = rematd__sqlite_get_job,
    .count_jobs = rematd__sqlite_count_jobs,
    .lease_job = rematd__sqlite_lease_job,
    .renew_lease = rematd__sqlite_renew_lease,
    .complete_job = rematd__sqlite_complete_job,
    .fail_job = rematd__sqlite_fail_job,
    .release_job = rematd__sqlite_release_job,
    .advance_job = rematd__sqlite_advance_job,
    .add_model = rematd__sqlite_add_model,
    .get_model = rematd__sqlite_get_model,
    .list_models = rematd__sqlite_list_models,
    .delete_model = rematd__sqlite_delete_model,
    .models_bytes = rematd__sqlite_models_bytes,
    .model_sha_used = rematd__sqlite_model_sha_used,
    /* The archives are files beside the database: nothing to fetch. */
    .model_file = NULL,
};

struct rematd_store *rematd__sqlite_open(const char *dir, const struct rematd_config *cfg,
                                         char *errbuf, size_t errlen)
{
    if (mkdirs(dir) < 0) {
        snprintf(errbuf, errlen, "cannot create data directory %s: %s", dir, strerror(errno));
        return NULL;
    }
    char path[1100];
    snprintf(path, sizeof path, "%s/rematd.db", dir);
    struct rematd_sqlite *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(errbuf, errlen, "out of memory");
        return NULL;
    }
    st->base.ops = &sqlite_ops;
    st->lease_seconds = cfg->lease_seconds;
    st->max_attempts = cfg->max_attempts;
    st->idem_ttl = cfg->idempotency_ttl;
    st->max_queued_jobs = cfg->max_queued_jobs ? (long)cfg->max_queued_jobs : 10000;
    st->tenant_max_queued_jobs =
        cfg->tenant_max_queued_jobs ? (long)cfg->tenant_max_queued_jobs : st->max_queued_jobs;
    st->max_idem = cfg->max_idempotency_keys ? (long)cfg->max_idempotency_keys : 1000000;
    st->tenant_max_idem =
        cfg->tenant_max_idempotency_keys ? (long)cfg->tenant_max_idempotency_keys : st->max_idem;
    st->max_store_bytes = cfg->max_store_bytes ? cfg->max_store_bytes : (size_t)1 << 30;
    st->plan_ttl = cfg->plan_ttl;
    st->stored_bytes = -1;
    st->wal_limit = cfg->wal_limit_bytes ? (long long)cfg->wal_limit_bytes : 64LL << 20;
    snprintf(st->db_path, sizeof st->db_path, "%s", path);
    pthread_mutex_init(&st->wmu, NULL);
    pthread_mutex_init(&st->rmu, NULL);
    rematd__writer_init(st);
    pthread_mutex_init(&st->ckmu, NULL);
    pthread_cond_init(&st->ckcv, NULL);
    st->lock_fd = -1;
    if (lock_dir(st, dir, errbuf, errlen) < 0)
        goto fail;
    st->w = open_db(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, errbuf, errlen);
    if (!st->w)
        goto fail;
    struct stat sb;
    if (stat(path, &sb) < 0) {
        snprintf(errbuf, errlen, "%s: %s", path, strerror(errno));
        goto fail;
    }
    st->db_dev = (unsigned long long)sb.st_dev;
    st->db_ino = (unsigned long long)sb.st_ino;
    /* FULL by default: see the comment at the top and docs/jobs.md.  16 KiB
     * pages (new databases only; an existing file keeps its page size): a
     * plan's rows (an ~8 KB request, a ~4 KB answer) then take one or two
     * WAL frames instead of four or five, each frame two write calls, which
     * measured ~12 us less writer and checkpoint CPU per plan than 4 KiB. */
    if (rematd__sql_exec(st->w, strcmp(cfg->sync, "normal") == 0
                                    ? "PRAGMA page_size=16384; PRAGMA journal_mode=WAL;"
                                      " PRAGMA synchronous=NORMAL;"
                                    : "PRAGMA page_size=16384; PRAGMA journal_mode=WAL;"
                                      " PRAGMA synchronous=FULL;") < 0) {
        snprintf(errbuf, errlen, "%s: %s", path, sqlite3_errmsg(st->w));
        goto fail;
    }
    if (integrity(st->w, path, errbuf, errlen) < 0 ||
        rematd__schema_migrate(st, errbuf, errlen) < 0)
        goto fail;
    {
        /* journal_size_limit: SQLite itself cuts the WAL back to this when
         * it starts the WAL over (the writer's quiet-second checkpoint does
         * it too, sqlite/writer.c). */
        char sql[64];
        snprintf(sql, sizeof sql, "PRAGMA journal_size_limit=%lld", st->wal_limit);
        sqlite3_stmt *q = NULL;
        if (sqlite3_prepare_v2(st->w, sql, -1, &q, NULL) == SQLITE_OK)
            sqlite3_step(q);
        sqlite3_finalize(q);
        /* The records, all and each tenant's: one GROUP BY. */
        if (rematd__idem_recount(st) < 0) {
            snprintf(errbuf, errlen, "%s: cannot count the Idempotency-Key records: %s", path,
                     sqlite3_errmsg(st->w));
            goto fail;
        }
    }
    st->r = open_db(path, SQLITE_OPEN_READONLY, errbuf, errlen);
    if (!st->r)
        goto fail;
    st->ck = open_db(path, SQLITE_OPEN_READWRITE, errbuf, errlen);
    /* The SELECT makes the checkpoint connection read the database once:
     * until then it does not know the file is in WAL mode, and each
     * checkpoint it runs silently does nothing (the WAL then grew without
     * bound under load). */
    if (!st->ck || rematd__sql_exec(st->ck, "SELECT count(*) FROM sqlite_master") < 0 ||
        rematd__sql_exec(st->w, "PRAGMA wal_autocheckpoint=0") < 0)
        goto fail;
    if (sqlite3_prepare_v2(st->w,
                           "INSERT INTO plans (id, created_at, algorithm, options, profile_id,"
                           " record, tenant) VALUES (?, ?, ?, ?, ?, ?, ?)",
                           -1, &st->ins_plan, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(st->w, "BEGIN IMMEDIATE", -1, &st->begin, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(st->w, "COMMIT", -1, &st->commit, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(st->w,
                           "INSERT INTO idempotency (scope, key, body_hash, resource_id, body,"
                           " created_at) VALUES (?, ?, ?, ?, ?, ?)",
                           -1, &st->ins_idem, NULL) != SQLITE_OK) {
        snprintf(errbuf, errlen, "prepare: %s", sqlite3_errmsg(st->w));
        goto fail;
    }
    if (rematd__writer_start(st, errbuf, errlen) < 0)
        goto fail;
    return &st->base;
fail:
    rematd__sqlite_close(&st->base);
    return NULL;
}

void rematd__sqlite_close(struct rematd_store *base)
{
    struct rematd_sqlite *st = (struct rematd_sqlite *)base;
    if (!st)
        return;
    rematd__writer_stop(st);
    sqlite3_close(st->ck);
    sqlite3_finalize(st->ins_plan);
    sqlite3_finalize(st->begin);
    sqlite3_finalize(st->commit);
    sqlite3_finalize(st->ins_idem);
    sqlite3_close(st->r);
    if (st->w) {
        /* Fold the WAL back into the database so a clean stop leaves one file. */
        sqlite3_wal_checkpoint_v2(st->w, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
        sqlite3_close(st->w);
    }
    pthread_mutex_destroy(&st->wmu);
    pthread_mutex_destroy(&st->rmu);
    rematd__group_destroy(&st->group);
    pthread_mutex_destroy(&st->ckmu);
    pthread_cond_destroy(&st->ckcv);
    if (st->lock_fd >= 0)
        close(st->lock_fd); /* releases the flock */
    free(st->idem_tenants);
    free(st);
}

enum rematd_store_result rematd__sqlite_ready(struct rematd_store *base)
{
    struct rematd_sqlite *st = (struct rematd_sqlite *)base;
    pthread_mutex_lock(&st->rmu);
    int ok =
        sqlite3_exec(st->r, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL) == SQLITE_OK;
    pthread_mutex_unlock(&st->rmu);
    ok = ok && !rematd__group_stopping(&st->group);
    ok = ok && rematd__store_check(st) == 0 && !atomic_load(&st->failed);
    return ok ? REMATD_STORE_OK : REMATD_STORE_ERROR;
}
