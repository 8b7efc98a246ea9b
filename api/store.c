/*
 * store.c - rematd's durable store: one SQLite database in WAL mode under
 * the data directory.
 *
 * Durability: journal_mode=WAL with synchronous=FULL, so every COMMIT has
 * fsynced the WAL before it returns; a kill -9 (or a power cut) after a
 * commit loses nothing.  --sync normal trades the power-cut half of that
 * for fewer fsyncs: a WAL commit then survives a crash of rematd (the OS
 * still holds the pages) but not of the machine.  Nothing is acknowledged to a client before the
 * transaction that holds it has committed.
 *
 * Writes are serialised on one connection under a mutex.  Plans, the hot
 * path, go through a writer thread that commits whatever has queued up in
 * one transaction (group commit), so one fsync covers a whole batch; the
 * handlers' connections are suspended until their batch is durable.  Job and
 * lease changes are rare and run inline under the same mutex.  Reads use a
 * second connection (WAL lets it read while the writer writes).
 *
 * A plan is one row of ~1.5 KB for 50 stages: its compact record
 * (plan_codec.h) rather than its answer's JSON and its request (~12 KB),
 * since every byte is written twice (WAL, then database) on the hot path.
 */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <sqlite3.h>

#include "rematd.h"

struct rematd_store {
    sqlite3 *w; /* writes, under wmu */
    pthread_mutex_t wmu;
    sqlite3 *r; /* reads, under rmu */
    pthread_mutex_t rmu;
    sqlite3_stmt *ins_plan, *ins_idem, *begin, *commit;
    int has_legacy;                        /* a plans_v1 table from rematd 0.1.0 is there */
    atomic_ulong commits, committed_plans; /* for /metrics */

    pthread_mutex_t qmu;
    pthread_cond_t qcv;
    struct rematd_plan_write *head, *tail;
    int stopping;
    int thread_started;
    pthread_t thread;

    /* Checkpoints run on their own connection and thread, so that copying
     * the WAL into the database (and its fsync) never stalls a group commit. */
    sqlite3 *ck;
    pthread_cond_t ckcv;
    int ck_started;
    /* Set by the checkpoint thread when a checkpoint copied every frame it
     * saw: the writer then has only the frames added meanwhile to copy. */
    atomic_int ck_caught_up;
    pthread_t ck_thread;

    unsigned lease_seconds, max_attempts, idem_ttl;
    double last_purge;
};

/* Plans are stored as one compact record each (plan_codec.h): the answers
 * are rendered from it.  WITHOUT ROWID: the id is the only key, so an
 * insert touches one b-tree, not a table and an index. */
static const char *schema =
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
    "CREATE INDEX IF NOT EXISTS idempotency_created ON idempotency(created_at);";

/* A database written by rematd 0.1.0 kept each plan's answer as JSON text
 * (plans.body) and its request in a `requests` table.  Its plans table is
 * renamed plans_v1 and still read, so that upgrading loses no plan. */
static const char *legacy_check = "SELECT 1 FROM pragma_table_info('plans') WHERE name = 'body'";

static int exec(sqlite3 *db, const char *sql)
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

static void *writer_main(void *arg);
static void *checkpoint_main(void *arg);

/* Called by SQLite after each commit on the writer connection.  The
 * checkpoint thread copies most of the WAL, but under a steady stream of
 * commits it never finds the WAL fully copied, and SQLite only starts the
 * WAL over from its beginning when a write transaction finds it so: the
 * file then grew without bound (hundreds of MB a minute), every append
 * allocating new blocks.  Here, between transactions, no frame can be added
 * while the checkpoint runs, so it copies what the checkpoint thread left
 * and the next transaction restarts the WAL.  That checkpoint ends with an
 * fsync of the database file, which under load measured 25-120 ms while the
 * 201s of the batch just committed wait: so only once the WAL holds 16384
 * frames (256 MiB of 16 KiB pages, a second or two of plans at full load),
 * right after the checkpoint thread caught up (the copy is then small), or
 * regardless past 32768 frames (512 MiB).  Below saturation the checkpoint
 * thread catches up between commits and the WAL starts over by itself; this
 * only bounds the disk a saturated rematd uses, at the price of a stall of
 * one fsync every second or two, which shows in p99 (docs/jobs.md). */
static int wal_committed(void *arg, sqlite3 *db, const char *name, int frames)
{
    struct rematd_store *st = arg;
    if (frames >= 32768 || (frames >= 16384 && atomic_exchange(&st->ck_caught_up, 0)))
        sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    return SQLITE_OK;
}

/* Renames a 0.1.0 plans table out of the way (once) and notes whether one
 * is there to read. */
static int migrate_legacy(struct rematd_store *st)
{
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(st->w, legacy_check, -1, &s, NULL) != SQLITE_OK)
        return -1;
    int old = sqlite3_step(s) == SQLITE_ROW;
    sqlite3_finalize(s);
    if (old && exec(st->w, "ALTER TABLE plans RENAME TO plans_v1") < 0)
        return -1;
    if (sqlite3_prepare_v2(st->w,
                           "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'plans_v1'",
                           -1, &s, NULL) != SQLITE_OK)
        return -1;
    st->has_legacy = sqlite3_step(s) == SQLITE_ROW;
    sqlite3_finalize(s);
    return 0;
}

struct rematd_store *rematd_store_open(const char *dir, const struct rematd_config *cfg,
                                       char *errbuf, size_t errlen)
{
    if (mkdirs(dir) < 0) {
        snprintf(errbuf, errlen, "cannot create data directory %s: %s", dir, strerror(errno));
        return NULL;
    }
    char path[1100];
    snprintf(path, sizeof path, "%s/rematd.db", dir);
    struct rematd_store *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(errbuf, errlen, "out of memory");
        return NULL;
    }
    st->lease_seconds = cfg->lease_seconds;
    st->max_attempts = cfg->max_attempts;
    st->idem_ttl = cfg->idempotency_ttl;
    pthread_mutex_init(&st->wmu, NULL);
    pthread_mutex_init(&st->rmu, NULL);
    pthread_mutex_init(&st->qmu, NULL);
    pthread_cond_init(&st->qcv, NULL);
    pthread_cond_init(&st->ckcv, NULL);
    st->w = open_db(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, errbuf, errlen);
    if (!st->w)
        goto fail;
    /* FULL by default: see the comment at the top and docs/jobs.md.  16 KiB
     * pages (new databases only; an existing file keeps its page size): a
     * plan's rows (an ~8 KB request, a ~4 KB answer) then take one or two
     * WAL frames instead of four or five, each frame two write calls, which
     * measured ~12 us less writer and checkpoint CPU per plan than 4 KiB. */
    if (exec(st->w, strcmp(cfg->sync, "normal") == 0
                        ? "PRAGMA page_size=16384; PRAGMA journal_mode=WAL;"
                          " PRAGMA synchronous=NORMAL;"
                        : "PRAGMA page_size=16384; PRAGMA journal_mode=WAL;"
                          " PRAGMA synchronous=FULL;") < 0 ||
        migrate_legacy(st) < 0 || exec(st->w, schema) < 0) {
        snprintf(errbuf, errlen, "%s: cannot set up the schema: %s", path, sqlite3_errmsg(st->w));
        goto fail;
    }
    st->r = open_db(path, SQLITE_OPEN_READONLY, errbuf, errlen);
    if (!st->r)
        goto fail;
    st->ck = open_db(path, SQLITE_OPEN_READWRITE, errbuf, errlen);
    /* The SELECT makes the checkpoint connection read the database once:
     * until then it does not know the file is in WAL mode, and each
     * checkpoint it runs silently does nothing (the WAL then grew without
     * bound under load). */
    if (!st->ck || exec(st->ck, "SELECT count(*) FROM sqlite_master") < 0 ||
        exec(st->w, "PRAGMA wal_autocheckpoint=0") < 0)
        goto fail;
    sqlite3_wal_hook(st->w, wal_committed, st);
    if (sqlite3_prepare_v2(st->w,
                           "INSERT INTO plans (id, created_at, algorithm, options, profile_id,"
                           " record) VALUES (?, ?, ?, ?, ?, ?)",
                           -1, &st->ins_plan, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(st->w, "BEGIN IMMEDIATE", -1, &st->begin, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(st->w, "COMMIT", -1, &st->commit, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(st->w,
                           "INSERT INTO idempotency (scope, key, body_hash, status, location,"
                           " body, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                           -1, &st->ins_idem, NULL) != SQLITE_OK) {
        snprintf(errbuf, errlen, "prepare: %s", sqlite3_errmsg(st->w));
        goto fail;
    }
    if (pthread_create(&st->thread, NULL, writer_main, st) != 0) {
        snprintf(errbuf, errlen, "cannot start the writer thread");
        goto fail;
    }
    st->thread_started = 1;
    if (pthread_create(&st->ck_thread, NULL, checkpoint_main, st) != 0) {
        snprintf(errbuf, errlen, "cannot start the checkpoint thread");
        goto fail;
    }
    st->ck_started = 1;
    return st;
fail:
    rematd_store_close(st);
    return NULL;
}

void rematd_store_close(struct rematd_store *st)
{
    if (!st)
        return;
    if (st->thread_started) {
        pthread_mutex_lock(&st->qmu);
        st->stopping = 1;
        pthread_cond_signal(&st->qcv);
        pthread_mutex_unlock(&st->qmu);
        pthread_join(st->thread, NULL);
    }
    if (st->ck_started) {
        pthread_mutex_lock(&st->qmu);
        st->stopping = 1;
        pthread_cond_signal(&st->ckcv);
        pthread_mutex_unlock(&st->qmu);
        pthread_join(st->ck_thread, NULL);
    }
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
    pthread_mutex_destroy(&st->qmu);
    pthread_cond_destroy(&st->qcv);
    pthread_cond_destroy(&st->ckcv);
    free(st);
}

int rematd_store_ready(struct rematd_store *st)
{
    pthread_mutex_lock(&st->rmu);
    int ok =
        sqlite3_exec(st->r, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL) == SQLITE_OK;
    pthread_mutex_unlock(&st->rmu);
    pthread_mutex_lock(&st->qmu);
    ok = ok && !st->stopping;
    pthread_mutex_unlock(&st->qmu);
    return ok;
}

/* ------------------------------------------------------------------------
 * Plans: group commit
 */

void rematd_store_enqueue_plan(struct rematd_store *st, struct rematd_plan_write *w)
{
    w->next = NULL;
    pthread_mutex_lock(&st->qmu);
    if (st->tail)
        st->tail->next = w;
    else
        st->head = w;
    st->tail = w;
    pthread_cond_signal(&st->qcv);
    pthread_mutex_unlock(&st->qmu);
}

void rematd_store_commit_stats(struct rematd_store *st, unsigned long *commits,
                               unsigned long *plans)
{
    *commits = atomic_load(&st->commits);
    *plans = atomic_load(&st->committed_plans);
}

static int step_done(sqlite3_stmt *s)
{
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return rc;
}

static void write_batch(struct rematd_store *st, struct rematd_plan_write *batch)
{
    double now = rematd_now();
    pthread_mutex_lock(&st->wmu);
    int ok = step_done(st->begin) == SQLITE_DONE;
    for (struct rematd_plan_write *w = batch; w; w = w->next) {
        w->result = -1;
        if (!ok)
            continue;
        /* A savepoint only when an Idempotency-Key row must stand or fall
         * with the plan: otherwise a failed insert undoes itself (statement
         * atomicity), and parsing two more statements per plan is
         * measurable on the hot path. */
        if (w->idem_key)
            exec(st->w, "SAVEPOINT p");
        sqlite3_bind_text(st->ins_plan, 1, w->id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st->ins_plan, 2, w->created_at, -1, SQLITE_STATIC);
        sqlite3_bind_text(st->ins_plan, 3, w->algorithm, -1, SQLITE_STATIC);
        sqlite3_bind_text(st->ins_plan, 4, w->options, -1, SQLITE_STATIC);
        if (w->profile_id[0])
            sqlite3_bind_text(st->ins_plan, 5, w->profile_id, -1, SQLITE_STATIC);
        sqlite3_bind_blob(st->ins_plan, 6, w->record, (int)w->record_len, SQLITE_STATIC);
        int rc = step_done(st->ins_plan);
        int taken = 0;
        if (rc == SQLITE_DONE && w->idem_key) {
            char loc[64];
            snprintf(loc, sizeof loc, "/v1/plans/%s", w->id);
            sqlite3_bind_text(st->ins_idem, 1, w->idem_scope, -1, SQLITE_STATIC);
            sqlite3_bind_text(st->ins_idem, 2, w->idem_key, -1, SQLITE_STATIC);
            sqlite3_bind_text(st->ins_idem, 3, w->body_hash, -1, SQLITE_STATIC);
            sqlite3_bind_int(st->ins_idem, 4, 201);
            sqlite3_bind_text(st->ins_idem, 5, loc, -1, SQLITE_TRANSIENT);
            sqlite3_bind_text(st->ins_idem, 6, w->body, -1, SQLITE_STATIC);
            sqlite3_bind_double(st->ins_idem, 7, now);
            rc = step_done(st->ins_idem);
            taken = rc == SQLITE_CONSTRAINT;
        }
        if (rc == SQLITE_DONE) {
            if (w->idem_key)
                exec(st->w, "RELEASE p");
            w->result = 0;
        } else {
            if (w->idem_key)
                exec(st->w, "ROLLBACK TO p; RELEASE p");
            w->result = taken ? 1 : -1;
        }
    }
    if (ok && step_done(st->commit) != SQLITE_DONE) {
        exec(st->w, "ROLLBACK");
        for (struct rematd_plan_write *w = batch; w; w = w->next)
            w->result = -1;
    } else if (ok) {
        unsigned long n = 0;
        for (struct rematd_plan_write *w = batch; w; w = w->next)
            n += w->result == 0;
        atomic_fetch_add(&st->commits, 1);
        atomic_fetch_add(&st->committed_plans, n);
    }
    pthread_mutex_unlock(&st->wmu);
}

static void *writer_main(void *arg)
{
    /* Named for top -H, perf and /proc/PID/task. */
    prctl(PR_SET_NAME, "rematd-writer", 0, 0, 0);
    struct rematd_store *st = arg;
    pthread_mutex_lock(&st->qmu);
    for (;;) {
        if (!st->head) {
            if (st->stopping)
                break;
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            int rc = pthread_cond_timedwait(&st->qcv, &st->qmu, &ts);
            if (rc != 0 && !st->head) {
                /* A quiet second: expire leases so that GET shows a job whose
                 * worker vanished as queued again without waiting for a lease. */
                pthread_mutex_unlock(&st->qmu);
                rematd_store_expire(st);
                pthread_mutex_lock(&st->qmu);
            }
            continue;
        }
        struct rematd_plan_write *batch = st->head;
        st->head = st->tail = NULL;
        pthread_mutex_unlock(&st->qmu);
        write_batch(st, batch);
        while (batch) {
            /* done() may free the item: read next first. */
            struct rematd_plan_write *next = batch->next;
            batch->done(batch);
            batch = next;
        }
        pthread_mutex_lock(&st->qmu);
    }
    pthread_mutex_unlock(&st->qmu);
    return NULL;
}

/* Every 100 ms, a PASSIVE checkpoint: it copies what it can without
 * blocking the writer or readers; the WAL restarts from its start once all
 * of it is in the database. */
static void *checkpoint_main(void *arg)
{
    /* Named for top -H, perf and /proc/PID/task. */
    prctl(PR_SET_NAME, "rematd-ckpt", 0, 0, 0);
    struct rematd_store *st = arg;
    pthread_mutex_lock(&st->qmu);
    while (!st->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&st->ckcv, &st->qmu, &ts);
        if (st->stopping)
            break;
        pthread_mutex_unlock(&st->qmu);
        int log = 0, copied = 0;
        if (sqlite3_wal_checkpoint_v2(st->ck, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &copied) ==
                SQLITE_OK &&
            log > 0 && copied == log)
            atomic_store(&st->ck_caught_up, 1);
        pthread_mutex_lock(&st->qmu);
    }
    pthread_mutex_unlock(&st->qmu);
    return NULL;
}

static char *col_dup(sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? strdup((const char *)t) : NULL;
}

static int get_plan_v1(struct rematd_store *st, const char *id, struct rematd_stored_plan *out)
{
    sqlite3_stmt *s = NULL;
    int found = -1;
    if (sqlite3_prepare_v2(st->r,
                           "SELECT p.body, p.options, r.body FROM plans_v1 p LEFT JOIN requests r"
                           " ON r.hash = p.request_hash WHERE p.id = ?",
                           -1, &s, NULL) == SQLITE_OK) {
        sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
            out->legacy_body = col_dup(s, 0);
            out->options = col_dup(s, 1);
            out->legacy_request = col_dup(s, 2);
            found = out->legacy_body && out->options ? 1 : -1;
        } else if (rc == SQLITE_DONE) {
            found = 0;
        }
    }
    sqlite3_finalize(s);
    return found;
}

int rematd_store_get_plan(struct rematd_store *st, const char *id, struct rematd_stored_plan *out)
{
    memset(out, 0, sizeof *out);
    sqlite3_stmt *s = NULL;
    int found = -1;
    pthread_mutex_lock(&st->rmu);
    if (sqlite3_prepare_v2(st->r,
                           "SELECT created_at, options, profile_id, record FROM plans WHERE id = ?",
                           -1, &s, NULL) == SQLITE_OK) {
        sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
            const unsigned char *created = sqlite3_column_text(s, 0);
            const unsigned char *pid = sqlite3_column_text(s, 2);
            const void *rec = sqlite3_column_blob(s, 3);
            int n = sqlite3_column_bytes(s, 3);
            snprintf(out->created_at, sizeof out->created_at, "%s",
                     created ? (const char *)created : "");
            snprintf(out->profile_id, sizeof out->profile_id, "%s", pid ? (const char *)pid : "");
            out->options = col_dup(s, 1);
            out->record = n > 0 ? malloc((size_t)n) : NULL;
            if (out->record && out->options) {
                memcpy(out->record, rec, (size_t)n);
                out->record_len = (size_t)n;
                found = 1;
            }
        } else if (rc == SQLITE_DONE) {
            found = 0;
        }
    }
    sqlite3_finalize(s);
    if (found == 0 && st->has_legacy)
        found = get_plan_v1(st, id, out);
    pthread_mutex_unlock(&st->rmu);
    if (found < 0)
        rematd_stored_plan_clear(out);
    return found;
}

void rematd_stored_plan_clear(struct rematd_stored_plan *p)
{
    free(p->record);
    free(p->options);
    free(p->legacy_body);
    free(p->legacy_request);
    memset(p, 0, sizeof *p);
}

/* ------------------------------------------------------------------------
 * Idempotency keys
 */

static int idem_lookup(struct rematd_store *st, sqlite3 *db, const char *scope, const char *key,
                       struct rematd_idem *out)
{
    memset(out, 0, sizeof *out);
    sqlite3_stmt *s = NULL;
    int found = -1;
    if (sqlite3_prepare_v2(db,
                           "SELECT body_hash, status, location, body FROM idempotency"
                           " WHERE scope = ? AND key = ? AND created_at >= ?",
                           -1, &s, NULL) == SQLITE_OK) {
        sqlite3_bind_text(s, 1, scope, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, key, -1, SQLITE_STATIC);
        sqlite3_bind_double(s, 3, rematd_now() - st->idem_ttl);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
            snprintf(out->body_hash, sizeof out->body_hash, "%s",
                     (const char *)sqlite3_column_text(s, 0));
            out->status = sqlite3_column_int(s, 1);
            out->location = col_dup(s, 2);
            out->body = col_dup(s, 3);
            found = out->body ? 1 : -1;
        } else if (rc == SQLITE_DONE) {
            found = 0;
        }
    }
    sqlite3_finalize(s);
    return found;
}

int rematd_store_idem_get(struct rematd_store *st, const char *scope, const char *key,
                          struct rematd_idem *out)
{
    pthread_mutex_lock(&st->rmu);
    int rc = idem_lookup(st, st->r, scope, key, out);
    pthread_mutex_unlock(&st->rmu);
    return rc;
}

void rematd_idem_clear(struct rematd_idem *r)
{
    free(r->location);
    free(r->body);
    r->location = r->body = NULL;
}

static void purge_idempotency(struct rematd_store *st)
{
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(st->w, "DELETE FROM idempotency WHERE created_at < ?", -1, &s, NULL) ==
        SQLITE_OK) {
        sqlite3_bind_double(s, 1, rematd_now() - st->idem_ttl);
        sqlite3_step(s);
    }
    sqlite3_finalize(s);
}

/* ------------------------------------------------------------------------
 * Jobs
 */

static json_t *parse_text(const unsigned char *t)
{
    return t ? json_loads((const char *)t, 0, NULL) : NULL;
}

static json_t *job_view(sqlite3 *db, const char *id, const char *kind)
{
    sqlite3_stmt *s = NULL;
    json_t *j = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT kind, status, attempts, spec, progress, result, reason,"
                           " created_at, updated_at, lease_expires_at FROM jobs WHERE id = ?",
                           -1, &s, NULL) != SQLITE_OK)
        return NULL;
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    if (sqlite3_step(s) == SQLITE_ROW &&
        (!kind || strcmp((const char *)sqlite3_column_text(s, 0), kind) == 0)) {
        const char *k = (const char *)sqlite3_column_text(s, 0);
        const char *status = (const char *)sqlite3_column_text(s, 1);
        char created[32], updated[32], self[64];
        rematd_rfc3339(sqlite3_column_double(s, 7), created);
        rematd_rfc3339(sqlite3_column_double(s, 8), updated);
        snprintf(self, sizeof self, "/v1/%s/%s",
                 strcmp(k, "profile") == 0 ? "profiles" : "validations", id);
        j = json_pack(
            "{s:s, s:s, s:s, s:i, s:s, s:s, s:o*, s:o, s:{s:s}}", "id", id, "kind", k, "status",
            status, "attempts", sqlite3_column_int(s, 2), "created_at", created, "updated_at",
            updated, "spec", parse_text(sqlite3_column_text(s, 3)), "progress",
            sqlite3_column_type(s, 4) == SQLITE_NULL ? json_null()
                                                     : parse_text(sqlite3_column_text(s, 4)),
            "links", "self", self);
        if (j && strcmp(status, "done") == 0) {
            json_t *res = parse_text(sqlite3_column_text(s, 5));
            json_object_set_new(j, strcmp(k, "profile") == 0 ? "profile" : "result",
                                res ? res : json_null());
        }
        if (j && strcmp(status, "failed") == 0 && sqlite3_column_text(s, 6))
            json_object_set_new(j, "error", json_string((const char *)sqlite3_column_text(s, 6)));
        if (j && strcmp(status, "running") == 0) {
            char le[32];
            rematd_rfc3339(sqlite3_column_double(s, 9), le);
            json_object_set_new(j, "lease_expires_at", json_string(le));
        }
    }
    sqlite3_finalize(s);
    return j;
}

json_t *rematd_store_get_job(struct rematd_store *st, const char *id, const char *kind)
{
    pthread_mutex_lock(&st->rmu);
    json_t *j = job_view(st->r, id, kind);
    pthread_mutex_unlock(&st->rmu);
    return j;
}

int rematd_store_job_result(struct rematd_store *st, const char *id, const char *kind,
                            char status[16], json_t **spec, json_t **result)
{
    *spec = *result = NULL;
    status[0] = '\0';
    sqlite3_stmt *s = NULL;
    int found = -1;
    pthread_mutex_lock(&st->rmu);
    if (sqlite3_prepare_v2(st->r, "SELECT status, spec, result FROM jobs WHERE id = ? AND kind = ?",
                           -1, &s, NULL) == SQLITE_OK) {
        sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, kind, -1, SQLITE_STATIC);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
            snprintf(status, 16, "%s", (const char *)sqlite3_column_text(s, 0));
            *spec = parse_text(sqlite3_column_text(s, 1));
            *result = parse_text(sqlite3_column_text(s, 2));
            found = 1;
        } else if (rc == SQLITE_DONE) {
            found = 0;
        }
    }
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->rmu);
    return found;
}

int rematd_store_create_job(struct rematd_store *st, const struct rematd_job_new *job,
                            char id_out[REMATD_ID_LEN + 1], json_t **response_out)
{
    *response_out = NULL;
    int ret = -1;
    sqlite3_stmt *s = NULL;
    pthread_mutex_lock(&st->wmu);
    if (exec(st->w, "BEGIN IMMEDIATE") < 0)
        goto out_unlock;
    if (job->idem_key) {
        /* Checked again inside the write transaction: two requests with one
         * key can both pass the read-side check, only one may insert. */
        struct rematd_idem rec;
        int got = idem_lookup(st, st->w, job->idem_scope, job->idem_key, &rec);
        if (got != 0) {
            if (got == 1) {
                *response_out =
                    json_pack("{s:s, s:i, s:s?, s:s}", "body_hash", rec.body_hash, "status",
                              rec.status, "location", rec.location, "body", rec.body);
                ret = 1;
            }
            rematd_idem_clear(&rec);
            exec(st->w, "ROLLBACK");
            goto out_unlock;
        }
    }
    rematd_new_id(id_out);
    double now = rematd_now();
    if (sqlite3_prepare_v2(st->w,
                           "INSERT INTO jobs (id, kind, status, device, spec, created_at,"
                           " updated_at) VALUES (?, ?, 'queued', ?, ?, ?, ?)",
                           -1, &s, NULL) != SQLITE_OK)
        goto out_rollback;
    sqlite3_bind_text(s, 1, id_out, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, job->kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, job->device, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, job->spec, -1, SQLITE_STATIC);
    sqlite3_bind_double(s, 5, now);
    sqlite3_bind_double(s, 6, now);
    if (sqlite3_step(s) != SQLITE_DONE)
        goto out_rollback;
    sqlite3_finalize(s);
    s = NULL;
    json_t *view = job_view(st->w, id_out, NULL);
    if (!view)
        goto out_rollback;
    if (job->idem_key) {
        char loc[96];
        snprintf(loc, sizeof loc, job->location_fmt, id_out);
        char *text = json_dumps(view, JSON_COMPACT);
        int ok = text && sqlite3_prepare_v2(st->w,
                                            "INSERT INTO idempotency (scope, key, body_hash,"
                                            " status, location, body, created_at)"
                                            " VALUES (?, ?, ?, 202, ?, ?, ?)",
                                            -1, &s, NULL) == SQLITE_OK;
        if (ok) {
            sqlite3_bind_text(s, 1, job->idem_scope, -1, SQLITE_STATIC);
            sqlite3_bind_text(s, 2, job->idem_key, -1, SQLITE_STATIC);
            sqlite3_bind_text(s, 3, job->body_hash, -1, SQLITE_STATIC);
            sqlite3_bind_text(s, 4, loc, -1, SQLITE_STATIC);
            sqlite3_bind_text(s, 5, text, -1, SQLITE_STATIC);
            sqlite3_bind_double(s, 6, now);
            ok = sqlite3_step(s) == SQLITE_DONE;
        }
        free(text);
        if (!ok) {
            json_decref(view);
            goto out_rollback;
        }
    }
    if (exec(st->w, "COMMIT") < 0) {
        json_decref(view);
        goto out_rollback;
    }
    *response_out = view;
    ret = 0;
    goto out_unlock;
out_rollback:
    exec(st->w, "ROLLBACK");
out_unlock:
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->wmu);
    return ret;
}

/* Expiry under wmu, outside any transaction (it is one statement). */
static void expire_locked(struct rematd_store *st)
{
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(
            st->w,
            "UPDATE jobs SET"
            " status = CASE WHEN attempts + 1 >= ?1 THEN 'failed' ELSE 'queued' END,"
            " reason = CASE WHEN attempts + 1 >= ?1 THEN 'lease expired ' || (expiries + 1) ||"
            "  ' times' ELSE reason END,"
            " last_error = 'lease expired', attempts = attempts + 1, expiries = expiries + 1,"
            " lease_id = NULL, lease_expires_at = NULL, worker_id = NULL, updated_at = ?2"
            " WHERE status = 'running' AND lease_expires_at < ?2",
            -1, &s, NULL) != SQLITE_OK)
        return;
    sqlite3_bind_int(s, 1, (int)st->max_attempts);
    sqlite3_bind_double(s, 2, rematd_now());
    sqlite3_step(s);
    int n = sqlite3_changes(st->w);
    sqlite3_finalize(s);
    if (n > 0)
        rematd_log("warn", "leases expired", json_pack("{s:i}", "jobs", n));
}

void rematd_store_expire(struct rematd_store *st)
{
    pthread_mutex_lock(&st->wmu);
    expire_locked(st);
    double now = rematd_now();
    if (now - st->last_purge > 60) {
        purge_idempotency(st);
        st->last_purge = now;
    }
    pthread_mutex_unlock(&st->wmu);
}

static int json_array_has(json_t *a, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(a, i,
                       v) if (json_is_string(v) && strcmp(json_string_value(v), s) == 0) return 1;
    return 0;
}

/* jobs-protocol.md: "cuda" matches any "cuda:N"; "cuda:N" and "cpu" match
 * exactly. */
static int device_matches(const char *job, json_t *devices)
{
    size_t i;
    json_t *v;
    json_array_foreach(devices, i, v)
    {
        const char *d = json_string_value(v);
        if (!d)
            continue;
        if (strcmp(job, d) == 0)
            return 1;
        if (strcmp(job, "cuda") == 0 && strncmp(d, "cuda:", 5) == 0)
            return 1;
    }
    return 0;
}

int rematd_store_lease(struct rematd_store *st, const char *worker_id, json_t *kinds,
                       json_t *devices, json_t **lease_out)
{
    *lease_out = NULL;
    int ret = -1;
    sqlite3_stmt *s = NULL;
    pthread_mutex_lock(&st->wmu);
    expire_locked(st);
    if (exec(st->w, "BEGIN IMMEDIATE") < 0)
        goto out;
    if (sqlite3_prepare_v2(st->w,
                           "SELECT id, kind, device, spec, attempts FROM jobs"
                           " WHERE status = 'queued' ORDER BY rowid",
                           -1, &s, NULL) != SQLITE_OK)
        goto rollback;
    char id[REMATD_ID_LEN + 1] = "";
    char kind[16] = "";
    json_t *spec = NULL;
    int attempts = 0;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        const char *k = (const char *)sqlite3_column_text(s, 1);
        const char *d = (const char *)sqlite3_column_text(s, 2);
        if (!json_array_has(kinds, k) || !device_matches(d, devices))
            continue;
        snprintf(id, sizeof id, "%s", (const char *)sqlite3_column_text(s, 0));
        snprintf(kind, sizeof kind, "%s", k);
        spec = parse_text(sqlite3_column_text(s, 3));
        attempts = sqlite3_column_int(s, 4);
        break;
    }
    sqlite3_finalize(s);
    s = NULL;
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        goto rollback;
    if (!id[0]) {
        exec(st->w, "ROLLBACK");
        ret = 1;
        goto out;
    }
    char lease_id[REMATD_ID_LEN + 1];
    rematd_new_id(lease_id);
    double now = rematd_now(), until = now + st->lease_seconds;
    if (sqlite3_prepare_v2(st->w,
                           "UPDATE jobs SET status = 'running', lease_id = ?, lease_expires_at = ?,"
                           " worker_id = ?, progress = NULL, updated_at = ? WHERE id = ?",
                           -1, &s, NULL) != SQLITE_OK) {
        json_decref(spec);
        goto rollback;
    }
    sqlite3_bind_text(s, 1, lease_id, -1, SQLITE_STATIC);
    sqlite3_bind_double(s, 2, until);
    sqlite3_bind_text(s, 3, worker_id, -1, SQLITE_STATIC);
    sqlite3_bind_double(s, 4, now);
    sqlite3_bind_text(s, 5, id, -1, SQLITE_STATIC);
    if (sqlite3_step(s) != SQLITE_DONE || exec(st->w, "COMMIT") < 0) {
        json_decref(spec);
        goto rollback;
    }
    char exp[32];
    rematd_rfc3339(until, exp);
    *lease_out =
        json_pack("{s:s, s:s, s:s, s:i, s:i, s:s, s:o}", "job_id", id, "lease_id", lease_id, "kind",
                  kind, "attempt", attempts + 1, "lease_seconds", (int)st->lease_seconds,
                  "lease_expires_at", exp, "spec", spec ? spec : json_object());
    ret = *lease_out ? 0 : -1;
    goto out;
rollback:
    exec(st->w, "ROLLBACK");
out:
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->wmu);
    return ret;
}

/* Runs one UPDATE guarded by the lease; when it changes nothing, tells a
 * stale lease (1) from an unknown job (2).  Under wmu. */
static int lease_update(struct rematd_store *st, const char *sql, const char *id,
                        const char *lease_id, const char *text, double now, int extra)
{
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(st->w, sql, -1, &s, NULL) != SQLITE_OK)
        return -1;
    /* ?1 id, ?2 lease_id, ?3 now, ?4 text, ?5 lease end / max attempts */
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, lease_id, -1, SQLITE_STATIC);
    sqlite3_bind_double(s, 3, now);
    if (text)
        sqlite3_bind_text(s, 4, text, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(s, 4);
    sqlite3_bind_double(s, 5, extra == 0 ? now + st->lease_seconds : (double)st->max_attempts);
    int rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE)
        return -1;
    if (sqlite3_changes(st->w) > 0)
        return 0;
    s = NULL;
    int found = 0;
    if (sqlite3_prepare_v2(st->w, "SELECT 1 FROM jobs WHERE id = ?", -1, &s, NULL) == SQLITE_OK) {
        sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
        found = sqlite3_step(s) == SQLITE_ROW;
    }
    sqlite3_finalize(s);
    return found ? 1 : 2;
}

#define HELD " WHERE id = ?1 AND lease_id = ?2 AND status = 'running' AND lease_expires_at >= ?3"

int rematd_store_heartbeat(struct rematd_store *st, const char *id, const char *lease_id,
                           const char *progress, json_t **out)
{
    *out = NULL;
    pthread_mutex_lock(&st->wmu);
    double now = rematd_now();
    int rc = lease_update(st,
                          "UPDATE jobs SET progress = coalesce(?4, progress),"
                          " lease_expires_at = ?5, updated_at = ?3" HELD,
                          id, lease_id, progress, now, 0);
    pthread_mutex_unlock(&st->wmu);
    if (rc == 0) {
        char exp[32];
        rematd_rfc3339(now + st->lease_seconds, exp);
        *out = json_pack("{s:s, s:i}", "lease_expires_at", exp, "lease_seconds",
                         (int)st->lease_seconds);
    }
    return rc;
}

int rematd_store_complete(struct rematd_store *st, const char *id, const char *lease_id,
                          const char *result)
{
    pthread_mutex_lock(&st->wmu);
    int rc = lease_update(st,
                          "UPDATE jobs SET status = 'done', result = ?4, lease_id = NULL,"
                          " lease_expires_at = NULL, updated_at = ?3, attempts = attempts + 1,"
                          " reason = NULL" HELD,
                          id, lease_id, result, rematd_now(), 0);
    pthread_mutex_unlock(&st->wmu);
    return rc;
}

int rematd_store_fail(struct rematd_store *st, const char *id, const char *lease_id,
                      const char *reason, int retryable)
{
    pthread_mutex_lock(&st->wmu);
    int rc;
    if (retryable)
        rc = lease_update(st,
                          "UPDATE jobs SET"
                          " status = CASE WHEN attempts + 1 >= ?5 THEN 'failed' ELSE 'queued' END,"
                          " reason = CASE WHEN attempts + 1 >= ?5 THEN ?4 ELSE reason END,"
                          " last_error = ?4, attempts = attempts + 1, lease_id = NULL,"
                          " lease_expires_at = NULL, worker_id = NULL, updated_at = ?3" HELD,
                          id, lease_id, reason, rematd_now(), 1);
    else
        rc = lease_update(st,
                          "UPDATE jobs SET status = 'failed', reason = ?4, last_error = ?4,"
                          " attempts = attempts + 1, lease_id = NULL, lease_expires_at = NULL,"
                          " updated_at = ?3" HELD,
                          id, lease_id, reason, rematd_now(), 1);
    pthread_mutex_unlock(&st->wmu);
    return rc;
}

int rematd_store_release(struct rematd_store *st, const char *id, const char *lease_id)
{
    pthread_mutex_lock(&st->wmu);
    int rc = lease_update(st,
                          "UPDATE jobs SET status = 'queued', lease_id = NULL,"
                          " lease_expires_at = NULL, worker_id = NULL, updated_at = ?3,"
                          " progress = coalesce(?4, progress)" HELD,
                          id, lease_id, NULL, rematd_now(), 0);
    pthread_mutex_unlock(&st->wmu);
    return rc;
}

json_t *rematd_store_job_counts(struct rematd_store *st)
{
    json_t *o =
        json_pack("{s:i, s:i, s:i, s:i}", "queued", 0, "running", 0, "done", 0, "failed", 0);
    sqlite3_stmt *s = NULL;
    pthread_mutex_lock(&st->rmu);
    if (sqlite3_prepare_v2(st->r, "SELECT status, count(*) FROM jobs GROUP BY status", -1, &s,
                           NULL) == SQLITE_OK) {
        while (sqlite3_step(s) == SQLITE_ROW)
            json_object_set_new(o, (const char *)sqlite3_column_text(s, 0),
                                json_integer(sqlite3_column_int64(s, 1)));
    }
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->rmu);
    return o;
}

const char *rematd_store_job_kind(struct rematd_store *st, const char *id, char buf[16])
{
    sqlite3_stmt *s = NULL;
    const char *ret = NULL;
    pthread_mutex_lock(&st->rmu);
    if (sqlite3_prepare_v2(st->r, "SELECT kind FROM jobs WHERE id = ?", -1, &s, NULL) ==
        SQLITE_OK) {
        sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
        if (sqlite3_step(s) == SQLITE_ROW) {
            snprintf(buf, 16, "%s", (const char *)sqlite3_column_text(s, 0));
            ret = buf;
        }
    }
    sqlite3_finalize(s);
    pthread_mutex_unlock(&st->rmu);
    return ret;
}
