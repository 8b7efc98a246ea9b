/*
 * pg/pg.c - the PostgreSQL store's connections and lifetime (open,
 * close, readiness), the exec helpers its files share, and plans: the
 * group commit's commit (group.c runs the queue and thread) and reads.
 *
 * Durability is PostgreSQL's: a call reports success only once its COMMIT
 * came back, so what is acknowledged is in the server's WAL (with the
 * server's synchronous_commit, on by default).  A COMMIT whose answer was
 * lost (the server went away) is reported as a failure: the client retries
 * with its Idempotency-Key, which finds the plan or job if it did commit.
 *
 * Faults: a write that fails marks the store failed (/readyz 503) until a
 * write succeeds again; the writer thread probes the server every second
 * meanwhile, so a restarted server is noticed without a request to try.
 * A connection the server closed is reset when it is next taken from the
 * pool; a read that fails on a connection that turned out closed is tried
 * once more on the reset one (reads change nothing, and writes are not
 * retried after a fault).  A batch of plans that lost a race with another
 * replica's on the same Idempotency-Keys is tried again (write_batch).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <libpq-events.h>

#include "pg.h"

#define TEXT_OID 25
#define FLOAT8_OID 701
#define BYTEA_OID 17

static void log_pg_error(const char *what, PGconn *c, PGresult *res)
{
    const char *msg = res ? PQresultErrorMessage(res) : PQerrorMessage(c);
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", msg && msg[0] ? msg : "the server did not answer");
    buf[strcspn(buf, "\n")] = '\0';
    rematd_log(
        "error", "store write failed",
        json_pack("{s:s, s:s, s:s}", "op", what, "error", buf, "sqlstate", state ? state : ""));
}

PGresult *rematd__pg_exec(PGconn *c, const char *what, const char *sql, int n,
                          const char *const *values, const Oid *types)
{
    PGresult *res =
        n || types ? PQexecParams(c, sql, n, types, values, NULL, NULL, 0) : PQexec(c, sql);
    ExecStatusType s = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK)
        return res;
    if (what)
        log_pg_error(what, c, res);
    PQclear(res);
    return NULL;
}

int rematd__pg_cmd(PGconn *c, const char *what, const char *sql, int n, const char *const *values,
                   const Oid *types)
{
    PGresult *res = rematd__pg_exec(c, what, sql, n, values, types);
    PQclear(res);
    return res ? 0 : -1;
}

void rematd__pg_write_failed(struct rematd_pg *st, PGconn *c)
{
    if (PQstatus(c) == CONNECTION_OK && PQtransactionStatus(c) != PQTRANS_IDLE)
        PQclear(PQexec(c, "ROLLBACK"));
    atomic_store(&st->failed, 1);
}

void rematd__pg_write_ok(struct rematd_pg *st)
{
    if (atomic_exchange(&st->failed, 0))
        rematd_log("info", "store writable again", NULL);
}

long rematd__pg_write_count(struct rematd_pg *st, PGconn *c, const char *what, const char *sql,
                            int n, const char *const *values, const Oid *types)
{
    PGresult *res = rematd__pg_exec(c, what, sql, n, values, types);
    if (!res) {
        rematd__pg_write_failed(st, c);
        return -1;
    }
    rematd__pg_write_ok(st);
    long count = atol(PQcmdTuples(res));
    PQclear(res);
    return count;
}

/* The writer connection's events: the SQLSTATE of its last failed
 * statement, which write_batch reads to tell a lost race from a fault. */
static int writer_events(PGEventId id, void *info, void *arg)
{
    struct rematd_pg *st = arg;
    if (id == PGEVT_RESULTCREATE) {
        const PGresult *res = ((PGEventResultCreate *)info)->result;
        const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
        if (PQresultStatus(res) == PGRES_FATAL_ERROR)
            snprintf(st->w_sqlstate, sizeof st->w_sqlstate, "%s", state ? state : "");
    }
    return 1;
}

static PGconn *connect_db(const char *conninfo)
{
    /* expand_dbname: conninfo (a URI or key=value words) is expanded, and
     * the words after it override what it says. */
    const char *const keys[] = {"dbname", "application_name", "connect_timeout", NULL};
    const char *const vals[] = {conninfo, "rematd", "5", NULL};
    return PQconnectdbParams(keys, vals, 1);
}

static void ensure_connected(PGconn *c)
{
    if (PQstatus(c) != CONNECTION_OK)
        PQreset(c);
}

PGconn *rematd__pg_get(struct rematd_pg *st)
{
    pthread_mutex_lock(&st->pmu);
    while (st->n_free == 0)
        pthread_cond_wait(&st->pcv, &st->pmu);
    int i = st->free[--st->n_free];
    pthread_mutex_unlock(&st->pmu);
    PGconn *c = st->conns[i];
    int epoch = atomic_load(&st->epoch);
    if (st->conn_epoch[i] != epoch) {
        st->conn_epoch[i] = epoch;
        PQreset(c);
    } else {
        ensure_connected(c);
    }
    return c;
}

/* c was found closed: every connection of the pool is suspect. */
static void note_closed(struct rematd_pg *st, PGconn *c)
{
    if (PQstatus(c) != CONNECTION_OK)
        atomic_fetch_add(&st->epoch, 1);
}

void rematd__pg_put(struct rematd_pg *st, PGconn *c)
{
    note_closed(st, c);
    pthread_mutex_lock(&st->pmu);
    for (int i = 0; i < REMATD_PG_POOL; i++)
        if (st->conns[i] == c)
            st->free[st->n_free++] = i;
    pthread_cond_signal(&st->pcv);
    pthread_mutex_unlock(&st->pmu);
}

int rematd__pg_begin_locked(PGconn *c, const char *what, long long lock)
{
    char sql[96];
    snprintf(sql, sizeof sql, "SELECT pg_advisory_xact_lock(%lld)", lock);
    if (rematd__pg_cmd(c, "BEGIN", "BEGIN", 0, NULL, NULL) < 0 ||
        rematd__pg_cmd(c, what, sql, 0, NULL, NULL) < 0)
        return -1;
    return 0;
}

enum rematd_store_result rematd__pg_end_write(struct rematd_pg *st, PGconn *c,
                                              enum rematd_store_result ret)
{
    if (ret == REMATD_STORE_OK) {
        if (rematd__pg_cmd(c, "COMMIT", "COMMIT", 0, NULL, NULL) == 0)
            rematd__pg_write_ok(st);
        else
            ret = REMATD_STORE_ERROR;
    } else if (ret != REMATD_STORE_ERROR) {
        PQclear(PQexec(c, "ROLLBACK"));
    }
    if (ret == REMATD_STORE_ERROR)
        rematd__pg_write_failed(st, c);
    rematd__pg_put(st, c);
    return ret;
}

/* ------------------------------------------------------------------------
 * Plans.
 */

#define PLAN_COLS "(id, created_at, algorithm, options, profile_id, record, tenant)"
/* Plans without an Idempotency-Key go in multi-row INSERTs of at most this
 * many: one round trip for a batch instead of one per plan. */
#define ROWS_PER_INSERT 64

/* Inserts plans (each without a key, or each with one: see write_batch)
 * in one statement.  0 or -1 (logged). */
static int insert_plans(PGconn *c, struct rematd_plan_write **ws, int n)
{
    char sql[80 + ROWS_PER_INSERT * 56];
    const char *vals[ROWS_PER_INSERT * 7];
    int lens[ROWS_PER_INSERT * 7], fmts[ROWS_PER_INSERT * 7];
    Oid types[ROWS_PER_INSERT * 7];
    size_t off = (size_t)snprintf(sql, sizeof sql, "INSERT INTO plans " PLAN_COLS " VALUES ");
    for (int i = 0; i < n; i++) {
        struct rematd_plan_write *w = ws[i];
        int p = i * 7;
        off += (size_t)snprintf(sql + off, sizeof sql - off, "%s($%d,$%d,$%d,$%d,$%d,$%d,$%d)",
                                i ? "," : "", p + 1, p + 2, p + 3, p + 4, p + 5, p + 6, p + 7);
        vals[p] = w->id;
        vals[p + 1] = w->created_at;
        vals[p + 2] = w->algorithm;
        vals[p + 3] = w->options;
        vals[p + 4] = w->profile_id[0] ? w->profile_id : NULL;
        vals[p + 5] = (const char *)w->record;
        vals[p + 6] = w->tenant ? w->tenant : REMATD_TENANT_DEFAULT;
        for (int k = 0; k < 7; k++) {
            lens[p + k] = 0;
            fmts[p + k] = 0;
            types[p + k] = TEXT_OID;
        }
        lens[p + 5] = (int)w->record_len;
        fmts[p + 5] = 1;
        types[p + 5] = BYTEA_OID;
    }
    PGresult *res = PQexecParams(c, sql, n * 7, types, vals, lens, fmts, 0);
    int ok = res && PQresultStatus(res) == PGRES_COMMAND_OK;
    if (!ok)
        log_pg_error("INSERT plan", c, res);
    PQclear(res);
    return ok ? 0 : -1;
}

/* One plan with an Idempotency-Key, inside the batch's transaction: the
 * plan and the key's record stand or fall together (a savepoint), and a
 * key another request holds (on this replica or another: the INSERT waits
 * for its transaction) makes this plan a replay, not a failure. */
static enum rematd_store_result write_keyed(struct rematd_pg *st, struct rematd_plan_write *w,
                                            long *count, double now)
{
    PGconn *c = st->wc;
    if (rematd__pg_cmd(c, "SAVEPOINT", "SAVEPOINT p", 0, NULL, NULL) < 0)
        return REMATD_STORE_ERROR;
    if (insert_plans(c, &w, 1) < 0)
        return REMATD_STORE_ERROR;
    enum rematd_store_result r = rematd__pg_idem_insert(
        st, c, count, w->idem_scope, w->idem_key, w->body_hash, w->id, w->body, now, &w->existing);
    if (r == REMATD_STORE_ERROR)
        return r;
    if (rematd__pg_cmd(c, "SAVEPOINT",
                       r == REMATD_STORE_OK ? "RELEASE p" : "ROLLBACK TO p; RELEASE p", 0, NULL,
                       NULL) < 0) {
        if (r == REMATD_STORE_CONFLICT)
            rematd_idem_clear(&w->existing);
        return REMATD_STORE_ERROR;
    }
    return r;
}

/* Orders a batch's keyed plans by (scope, key), then by arrival. */
struct keyed {
    struct rematd_plan_write *w;
    size_t seq;
};

static int keyed_cmp(const void *a, const void *b)
{
    const struct keyed *x = a, *y = b;
    int c = strcmp(x->w->idem_scope, y->w->idem_scope);
    if (c == 0)
        c = strcmp(x->w->idem_key, y->w->idem_key);
    if (c == 0)
        c = x->seq < y->seq ? -1 : x->seq > y->seq;
    return c;
}

/* One try at the batch in one transaction: the plans without a key in
 * multi-row INSERTs, then those with one in (scope, key) order.  That
 * order is the same on every replica, so two replicas' batches holding
 * the same keys wait on each other in one direction only, never in a
 * cycle (a deadlock the server would break after deadlock_timeout by
 * aborting one of them); the count's lock (rematd__pg_idem_lock), taken
 * before any key, makes such batches take turns besides.  keyed holds nk
 * of them, sorted.  0 committed, or
 * -1 with the transaction rolled back and every result an error. */
static int try_batch(struct rematd_pg *st, struct rematd_plan_write *batch, struct keyed *keyed,
                     size_t nk, double now)
{
    PGconn *c = st->wc;
    for (struct rematd_plan_write *w = batch; w; w = w->next)
        w->result = REMATD_STORE_ERROR;
    st->w_sqlstate[0] = '\0';
    ensure_connected(c);
    if (rematd__pg_cmd(c, "BEGIN", "BEGIN", 0, NULL, NULL) < 0)
        return -1;
    struct rematd_plan_write *plain[ROWS_PER_INSERT];
    int n = 0;
    for (struct rematd_plan_write *w = batch; w; w = w->next) {
        if (w->idem_key)
            continue;
        plain[n++] = w;
        if (n == ROWS_PER_INSERT) {
            if (insert_plans(c, plain, n) < 0)
                goto failed;
            for (int i = 0; i < n; i++)
                plain[i]->result = REMATD_STORE_OK;
            n = 0;
        }
    }
    if (n > 0) {
        if (insert_plans(c, plain, n) < 0)
            goto failed;
        for (int i = 0; i < n; i++)
            plain[i]->result = REMATD_STORE_OK;
    }
    /* The count of records first (the bound's lock), then the keys. */
    long before = nk ? rematd__pg_idem_lock(c) : 0, count = before;
    if (before < 0)
        goto failed;
    for (size_t i = 0; i < nk; i++) {
        struct rematd_plan_write *w = keyed[i].w;
        w->result = write_keyed(st, w, &count, now);
        if (w->result == REMATD_STORE_ERROR)
            goto failed;
    }
    if (rematd__pg_idem_store(c, before, count) < 0 ||
        rematd__pg_cmd(c, "COMMIT", "COMMIT", 0, NULL, NULL) < 0)
        goto failed;
    return 0;
failed:
    if (PQstatus(c) == CONNECTION_OK && PQtransactionStatus(c) != PQTRANS_IDLE)
        PQclear(PQexec(c, "ROLLBACK"));
    rematd__group_fail(batch);
    return -1;
}

/* What a batch may be tried again for: the transaction lost a race with
 * another replica's on the same keys (a deadlock, a serialization failure
 * under a stricter default isolation, a unique key taken between a look
 * and an insert).  Tried again, the keys the others committed are found
 * and replayed, as one replica would have answered. */
static int retryable(const char *sqlstate)
{
    return strcmp(sqlstate, "40P01") == 0 || strcmp(sqlstate, "40001") == 0 ||
           strcmp(sqlstate, "23505") == 0;
}

#define BATCH_TRIES 3

/* The group commit's commit (group.h): the batch in one
 * transaction, tried again when it lost a race with another replica. */
static long write_batch(void *arg, struct rematd_plan_write *batch)
{
    struct rematd_pg *st = arg;
    double now = rematd_now();
    size_t nk = 0;
    for (struct rematd_plan_write *w = batch; w; w = w->next) {
        nk += w->idem_key != NULL;
        /* Near enough for when the byte bound is next checked (pg/bounds.c),
         * which counts exactly; this replica's writes only. */
        st->written += (long long)(w->record_len + strlen(w->options) +
                                   (w->body && w->idem_key ? strlen(w->body) : 0) + 100);
    }
    struct keyed one = {0}, *keyed = nk <= 1 ? &one : malloc(nk * sizeof *keyed);
    if (!keyed) {
        for (struct rematd_plan_write *w = batch; w; w = w->next)
            w->result = REMATD_STORE_ERROR;
        return -1;
    }
    nk = 0;
    for (struct rematd_plan_write *w = batch; w; w = w->next)
        if (w->idem_key) {
            keyed[nk].w = w;
            keyed[nk].seq = nk;
            nk++;
        }
    qsort(keyed, nk, sizeof *keyed, keyed_cmp);
    int rc = -1;
    for (int t = 0; t < BATCH_TRIES && rc < 0; t++) {
        rc = try_batch(st, batch, keyed, nk, now);
        if (rc < 0 && !retryable(st->w_sqlstate))
            break;
        if (rc < 0 && t + 1 < BATCH_TRIES)
            rematd_log("warn", "plan batch tried again",
                       json_pack("{s:s, s:i}", "sqlstate", st->w_sqlstate, "try", t + 1));
    }
    if (keyed != &one)
        free(keyed);
    note_closed(st, st->wc);
    if (rc < 0) {
        /* A lost race tried BATCH_TRIES times is no outage: only other
         * failures make the store not ready. */
        if (!retryable(st->w_sqlstate))
            rematd__pg_write_failed(st, st->wc);
        return -1;
    }
    rematd__pg_write_ok(st);
    long ok = 0;
    for (struct rematd_plan_write *w = batch; w; w = w->next)
        ok += w->result == REMATD_STORE_OK;
    return ok;
}

/* In a quiet second: after a failed write, a probe tells when the server
 * answers again; otherwise leases are expired (any replica may; each
 * expiry is counted once), plans and records kept within their age and
 * bytes (pg/bounds.c) and old Idempotency-Key records purged. */
static void housekeeping(void *arg)
{
    struct rematd_pg *st = arg;
    PGconn *c = st->wc;
    ensure_connected(c);
    if (atomic_load(&st->failed)) {
        if (rematd__pg_cmd(c, NULL, "SELECT 1", 0, NULL, NULL) == 0)
            rematd__pg_write_ok(st);
        note_closed(st, c);
        return;
    }
    if (rematd__pg_jobs_expire(st, c) < 0) {
        /* The server went away (or refuses writes): not ready until the
         * probe above finds it back. */
        note_closed(st, c);
        rematd__pg_write_failed(st, c);
        return;
    }
    double now = rematd_now();
    rematd__pg_bounds(st, c, now);
    if (!rematd__idem_purge_due(now, st->last_purge, st->idem_ttl))
        return;
    st->last_purge = now;
    /* Under the count's lock, taken first as every writer of keys does,
     * the count going down by what was deleted. */
    char cut[64];
    snprintf(cut, sizeof cut, "%.17g", now - st->idem_ttl);
    const char *v[] = {cut};
    long before = -1;
    PGresult *res = NULL;
    if (rematd__pg_cmd(c, "purge idempotency", "BEGIN", 0, NULL, NULL) == 0 &&
        (before = rematd__pg_idem_lock(c)) >= 0)
        res = rematd__pg_exec(c, "purge idempotency",
                              "WITH d AS (DELETE FROM idempotency WHERE created_at < $1"
                              " RETURNING 1) SELECT count(*) FROM d",
                              1, v, NULL);
    long gone = res && PQntuples(res) == 1 ? atol(PQgetvalue(res, 0, 0)) : -1;
    PQclear(res);
    if (gone < 0 || rematd__pg_idem_store(c, before, before - gone) < 0 ||
        rematd__pg_cmd(c, "purge idempotency", "COMMIT", 0, NULL, NULL) < 0) {
        if (PQstatus(c) == CONNECTION_OK && PQtransactionStatus(c) != PQTRANS_IDLE)
            PQclear(PQexec(c, "ROLLBACK"));
    }
}

/* Reads c's one-row answer to sql; retried once on a reset connection
 * when the first try found it closed.  The result, or NULL. */
static PGresult *read_query(struct rematd_pg *st, PGconn **cp, const char *sql, int n,
                            const char *const *values, int binary)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        PGresult *res = PQexecParams(*cp, sql, n, NULL, values, NULL, NULL, binary);
        if (res && PQresultStatus(res) == PGRES_TUPLES_OK)
            return res;
        if (attempt == 0 && PQstatus(*cp) != CONNECTION_OK) {
            PQclear(res);
            PQreset(*cp);
            continue;
        }
        if (res)
            rematd_log("warn", "store read failed",
                       json_pack("{s:s}", "error", PQresultErrorMessage(res)));
        PQclear(res);
        return NULL;
    }
    return NULL;
}

static enum rematd_store_result pg_get_plan(struct rematd_store *base, const char *id,
                                            struct rematd_stored_plan *out)
{
    struct rematd_pg *st = (struct rematd_pg *)base;
    memset(out, 0, sizeof *out);
    PGconn *c = rematd__pg_get(st);
    const char *v[] = {id};
    /* Binary: the record's bytes as they are, text columns as text. */
    PGresult *res = read_query(
        st, &c, "SELECT created_at, options, profile_id, record, tenant FROM plans WHERE id = $1",
        1, v, 1);
    enum rematd_store_result found = REMATD_STORE_ERROR;
    if (res && PQntuples(res) == 0) {
        found = REMATD_STORE_NOT_FOUND;
    } else if (res) {
        snprintf(out->created_at, sizeof out->created_at, "%s", PQgetvalue(res, 0, 0));
        snprintf(out->tenant, sizeof out->tenant, "%s", PQgetvalue(res, 0, 4));
        if (!PQgetisnull(res, 0, 2))
            snprintf(out->profile_id, sizeof out->profile_id, "%s", PQgetvalue(res, 0, 2));
        out->options = strdup(PQgetvalue(res, 0, 1));
        int len = PQgetlength(res, 0, 3);
        out->record = len > 0 ? malloc((size_t)len) : NULL;
        if (out->record && out->options) {
            memcpy(out->record, PQgetvalue(res, 0, 3), (size_t)len);
            out->record_len = (size_t)len;
            found = REMATD_STORE_OK;
        }
    }
    PQclear(res);
    rematd__pg_put(st, c);
    if (found != REMATD_STORE_OK)
        rematd_stored_plan_clear(out);
    return found;
}

/* ------------------------------------------------------------------------
 * Lifetime.
 */

static enum rematd_store_result pg_ready(struct rematd_store *base)
{
    struct rematd_pg *st = (struct rematd_pg *)base;
    if (rematd__group_stopping(&st->group) || atomic_load(&st->failed))
        return REMATD_STORE_ERROR;
    PGconn *c = rematd__pg_get(st);
    PGresult *res = read_query(st, &c, "SELECT 1", 0, NULL, 0);
    int ok = res != NULL;
    PQclear(res);
    rematd__pg_put(st, c);
    return ok ? REMATD_STORE_OK : REMATD_STORE_ERROR;
}

static void pg_close(struct rematd_store *base)
{
    struct rematd_pg *st = (struct rematd_pg *)base;
    rematd__group_stop(&st->group);
    for (int i = 0; i < REMATD_PG_POOL; i++)
        if (st->conns[i])
            PQfinish(st->conns[i]);
    if (st->wc)
        PQfinish(st->wc);
    pthread_mutex_destroy(&st->pmu);
    pthread_cond_destroy(&st->pcv);
    rematd__group_destroy(&st->group);
    free(st);
}

static const struct rematd_store_ops pg_ops = {
    .name = "postgresql",
    .close = pg_close,
    .ready = pg_ready,
    .get_idempotency = rematd__pg_get_idempotency,
    .get_plan = pg_get_plan,
    .create_job = rematd__pg_create_job,
    .done_ids = rematd__pg_done_ids,
    .get_job = rematd__pg_get_job,
    .count_jobs = rematd__pg_count_jobs,
    .lease_job = rematd__pg_lease_job,
    .renew_lease = rematd__pg_renew_lease,
    .complete_job = rematd__pg_complete_job,
    .fail_job = rematd__pg_fail_job,
    .release_job = rematd__pg_release_job,
    .advance_job = rematd__pg_advance_job,
    .add_model = rematd__pg_add_model,
    .get_model = rematd__pg_get_model,
    .list_models = rematd__pg_list_models,
    .delete_model = rematd__pg_delete_model,
    .models_bytes = rematd__pg_models_bytes,
    .model_sha_used = rematd__pg_model_sha_used,
    .model_file = rematd__pg_model_file,
};

static PGconn *open_conn(const char *conninfo, char *errbuf, size_t errlen)
{
    PGconn *c = connect_db(conninfo);
    if (!c) {
        snprintf(errbuf, errlen, "PostgreSQL: out of memory");
        return NULL;
    }
    if (PQstatus(c) != CONNECTION_OK) {
        snprintf(errbuf, errlen, "cannot connect to PostgreSQL: %s", PQerrorMessage(c));
        errbuf[strcspn(errbuf, "\n")] = '\0';
        PQfinish(c);
        return NULL;
    }
    return c;
}

struct rematd_store *rematd__pg_open(const char *conninfo, const struct rematd_config *cfg,
                                     char *errbuf, size_t errlen)
{
    struct rematd_pg *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(errbuf, errlen, "out of memory");
        return NULL;
    }
    st->base.ops = &pg_ops;
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
    snprintf(st->models_dir, sizeof st->models_dir, "%s/models", cfg->data_dir);
    pthread_mutex_init(&st->pmu, NULL);
    pthread_cond_init(&st->pcv, NULL);
    rematd__group_init(&st->group, "rematd-writer", write_batch, housekeeping, st);
    st->base.group = &st->group;
    /* The data directory holds this replica's copies of uploaded models
     * (the database holds the archives: pg/models.c). */
    if (mkdir(cfg->data_dir, 0700) < 0 && errno != EEXIST) {
        snprintf(errbuf, errlen, "cannot create data directory %s: %s", cfg->data_dir,
                 strerror(errno));
        goto fail;
    }
    st->wc = open_conn(conninfo, errbuf, errlen);
    if (!st->wc || rematd__pg_migrate(st->wc, errbuf, errlen) < 0)
        goto fail;
    if (!PQregisterEventProc(st->wc, writer_events, "rematd writer", st)) {
        snprintf(errbuf, errlen, "PostgreSQL: cannot watch the writer connection");
        goto fail;
    }
    for (int i = 0; i < REMATD_PG_POOL; i++) {
        st->conns[i] = open_conn(conninfo, errbuf, errlen);
        if (!st->conns[i])
            goto fail;
        st->free[st->n_free++] = i;
    }
    if (rematd__group_start(&st->group, errbuf, errlen) < 0)
        goto fail;
    return &st->base;
fail:
    pg_close(&st->base);
    return NULL;
}
