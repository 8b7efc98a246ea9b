/*
 * sqlite/writer.c - the group commit of plans, and checkpoints.
 *
 * Plans, the hot path, are queued for the writer thread of group.c,
 * which hands whatever has queued up to write_batch: one transaction
 * (group commit), so one fsync covers a whole batch; the routes'
 * connections stay suspended until their batch is durable.  In a quiet
 * second the same thread runs housekeeping (lease expiry, purges).
 * A checkpoint thread copies the WAL into the database on its own
 * connection, and the writer bounds the WAL's size (wal_committed).
 */
#include "config.h"

#include <stdatomic.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

#include "sqlite.h"

/* One plan of a batch, inside its transaction: the plan row and, with an
 * Idempotency-Key, the key's record.  A savepoint only when the key's
 * record must stand or fall with the plan: otherwise a failed insert
 * undoes itself (statement atomicity), and parsing two more statements per
 * plan is measurable on the hot path. */
static void write_one(struct rematd_sqlite *st, struct rematd_plan_write *w, double now)
{
    if (!w->idem_key) {
        w->result =
            rematd__plan_insert(st, w) == SQLITE_DONE ? REMATD_STORE_OK : REMATD_STORE_ERROR;
        return;
    }
    rematd__sql_exec(st->w, "SAVEPOINT p");
    w->result = rematd__plan_insert(st, w) == SQLITE_DONE
                    ? rematd__idem_insert(st, w->idem_scope, w->idem_key, w->body_hash, w->id,
                                          w->body, now, &w->existing)
                    : REMATD_STORE_ERROR;
    /* On an error the batch is rolled back whole (write_batch), and the
     * error message must survive for the log. */
    if (w->result != REMATD_STORE_ERROR)
        rematd__sql_exec(st->w,
                         w->result == REMATD_STORE_OK ? "RELEASE p" : "ROLLBACK TO p; RELEASE p");
}

/* The group commit's commit (group.h): the batch in one
 * transaction, one fsync. */
static long write_batch(void *arg, struct rematd_plan_write *batch)
{
    struct rematd_sqlite *st = arg;
    double now = rematd_now();
    pthread_mutex_lock(&st->wmu);
    for (struct rematd_plan_write *w = batch; w; w = w->next)
        w->result = REMATD_STORE_ERROR;
    if (rematd__store_check(st) < 0) {
        pthread_mutex_unlock(&st->wmu);
        return -1;
    }
    if (rematd__sql_step_reset(st->begin) != SQLITE_DONE) {
        rematd__store_write_failed(st, "BEGIN");
        pthread_mutex_unlock(&st->wmu);
        return -1;
    }
    long idem_before = st->idem_count;
    for (struct rematd_plan_write *w = batch; w; w = w->next) {
        write_one(st, w, now);
        /* A statement that failed (a full disk, an I/O error) may have
         * ended the whole transaction: the batch is lost, and what SQLite
         * said is what the log says. */
        if (w->result == REMATD_STORE_ERROR) {
            rematd__store_write_failed(st, "INSERT plan");
            st->idem_count = idem_before;
            st->idem_stale = 1;
            rematd__group_fail(batch);
            pthread_mutex_unlock(&st->wmu);
            return -1;
        }
    }
    long n = -1;
    if (rematd__sql_step_reset(st->commit) != SQLITE_DONE) {
        rematd__store_write_failed(st, "COMMIT");
        st->idem_count = idem_before;
        st->idem_stale = 1;
        rematd__group_fail(batch);
    } else {
        rematd__store_write_ok(st);
        n = 0;
        for (struct rematd_plan_write *w = batch; w; w = w->next)
            n += w->result == REMATD_STORE_OK;
    }
    pthread_mutex_unlock(&st->wmu);
    return n;
}

static int probe_space(struct rematd_sqlite *st)
{
    char path[1200];
    snprintf(path, sizeof path, "%s.probe", st->db_path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    static const char zeros[64 * 1024];
    int rc = 0;
    for (int i = 0; i < 16 && rc == 0; i++)
        rc = write(fd, zeros, sizeof zeros) == (ssize_t)sizeof zeros ? 0 : -1;
    if (rc == 0)
        rc = fsync(fd);
    close(fd);
    unlink(path);
    return rc;
}

/* In a quiet second: expire leases so that GET shows a job whose worker
 * vanished as queued again without waiting for a lease request, purge
 * old Idempotency-Key records, and keep plans and records within their
 * age and bytes. */
static void housekeeping(void *arg)
{
    struct rematd_sqlite *st = arg;
    pthread_mutex_lock(&st->wmu);
    if (rematd__store_check(st) < 0) {
        pthread_mutex_unlock(&st->wmu);
        return;
    }
    if (atomic_load(&st->failed)) {
        /* After a failed write, a probe tells when the disk takes writes
         * again, so that /readyz does not stay 503 for want of a request
         * to try: a transaction on the database (the header's user_version,
         * to the value it has), and 1 MiB written and synced beside it,
         * since the transaction alone may fit in WAL space already there
         * while any larger write still fails. */
        char sql[64];
        snprintf(sql, sizeof sql, "PRAGMA user_version = %d", REMATD_SCHEMA_VERSION);
        if (probe_space(st) == 0 && sqlite3_exec(st->w, sql, NULL, NULL, NULL) == SQLITE_OK)
            rematd__store_write_ok(st);
        pthread_mutex_unlock(&st->wmu);
        return;
    }
    rematd__jobs_expire(st);
    rematd__idem_purge(st, rematd_now());
    rematd__store_bounds(st, rematd_now());
    pthread_mutex_unlock(&st->wmu);
    /* After a burst the WAL file keeps the size it grew to (SQLite starts
     * it over from its beginning but does not shrink it): hundreds of MB
     * after ten thousand jobs.  In a quiet second, past --wal-limit-bytes,
     * a TRUNCATE checkpoint on the checkpoint connection copies it back
     * and empties it. */
    char wal[1200];
    snprintf(wal, sizeof wal, "%s-wal", st->db_path);
    struct stat sb;
    if (stat(wal, &sb) == 0 && (long long)sb.st_size > st->wal_limit) {
        int rc = sqlite3_wal_checkpoint_v2(st->ck, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
        rematd_log(rc == SQLITE_OK ? "info" : "warn", "wal truncated",
                   json_pack("{s:I, s:s}", "wal_bytes", (json_int_t)sb.st_size, "result",
                             rc == SQLITE_OK ? "ok" : sqlite3_errmsg(st->ck)));
    }
}

/* Every 100 ms, a PASSIVE checkpoint: it copies what it can without
 * blocking the writer or readers; the WAL restarts from its start once all
 * of it is in the database. */
static void *checkpoint_main(void *arg)
{
    /* Named for top -H, perf and /proc/PID/task. */
    prctl(PR_SET_NAME, "rematd-ckpt", 0, 0, 0);
    struct rematd_sqlite *st = arg;
    pthread_mutex_lock(&st->ckmu);
    while (!st->ck_stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&st->ckcv, &st->ckmu, &ts);
        if (st->ck_stopping)
            break;
        pthread_mutex_unlock(&st->ckmu);
        int log = 0, copied = 0;
        if (sqlite3_wal_checkpoint_v2(st->ck, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &copied) ==
                SQLITE_OK &&
            log > 0 && copied == log)
            atomic_store(&st->ck_caught_up, 1);
        pthread_mutex_lock(&st->ckmu);
    }
    pthread_mutex_unlock(&st->ckmu);
    return NULL;
}

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
    struct rematd_sqlite *st = arg;
    if (frames >= 32768 || (frames >= 16384 && atomic_exchange(&st->ck_caught_up, 0)))
        sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    return SQLITE_OK;
}

void rematd__writer_init(struct rematd_sqlite *st)
{
    rematd__group_init(&st->group, "rematd-writer", write_batch, housekeeping, st);
    st->base.group = &st->group;
}

int rematd__writer_start(struct rematd_sqlite *st, char *errbuf, size_t errlen)
{
    sqlite3_wal_hook(st->w, wal_committed, st);
    if (rematd__group_start(&st->group, errbuf, errlen) < 0)
        return -1;
    if (pthread_create(&st->ck_thread, NULL, checkpoint_main, st) != 0) {
        snprintf(errbuf, errlen, "cannot start the checkpoint thread");
        return -1;
    }
    st->ck_started = 1;
    return 0;
}

void rematd__writer_stop(struct rematd_sqlite *st)
{
    rematd__group_stop(&st->group);
    if (st->ck_started) {
        pthread_mutex_lock(&st->ckmu);
        st->ck_stopping = 1;
        pthread_cond_signal(&st->ckcv);
        pthread_mutex_unlock(&st->ckmu);
        pthread_join(st->ck_thread, NULL);
        st->ck_started = 0;
    }
}
