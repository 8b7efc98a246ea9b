/* Unit tests of the PostgreSQL store through its interface (api/store.h),
 * with two store handles on one database standing for two replicas: the
 * migrations run once when both open at once (the advisory lock), a plan
 * is read back byte for byte by the other handle, an Idempotency-Key taken
 * on one hands back the existing plan or job on the other, a job is
 * leased exactly once by two handles leasing at once, a lease that
 * expires is counted once however many handles see it expire, and
 * --max-idempotency-keys bounds the database, not each handle (also after
 * the migration that began counting).
 *
 * REMAT_TEST_PG is the URI of a server's maintenance database (make
 * check-postgresql, through tests/api/postgresql.sh, starts a server and
 * sets it); each test makes a database of its own there and drops it.
 * Without it the program exits 77 (skipped). */
#include "config.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <libpq-fe.h>

#include "store.h"
#include "store_plans.h"

struct fixture {
    char dir[64];
    char db[64];
    char uri[1024];
    struct rematd_config cfg;
    struct rematd_store *a, *b; /* two replicas */
};

static const char *maintenance_uri(void)
{
    return getenv("REMAT_TEST_PG");
}

static PGconn *connect_to(const char *uri)
{
    PGconn *c = PQconnectdb(uri);
    if (PQstatus(c) != CONNECTION_OK)
        fail_msg("connect %s: %s", uri, PQerrorMessage(c));
    return c;
}

static void exec_on(const char *uri, const char *sql)
{
    PGconn *c = connect_to(uri);
    PGresult *res = PQexec(c, sql);
    if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(c));
    PQclear(res);
    PQfinish(c);
}

static long long db_int(struct fixture *f, const char *sql)
{
    PGconn *c = connect_to(f->uri);
    PGresult *res = PQexec(c, sql);
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
        fail_msg("%s: %s", sql, PQerrorMessage(c));
    long long v = atoll(PQgetvalue(res, 0, 0));
    PQclear(res);
    PQfinish(c);
    return v;
}

static int setup_lease(void **state, unsigned lease_seconds)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    const char *tmp = getenv("TMPDIR");
    snprintf(f->dir, sizeof f->dir, "%.40s/remat-store.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    assert_non_null(mkdtemp(f->dir));
    char id[REMATD_ID_LEN + 1];
    rematd_new_id(id);
    snprintf(f->db, sizeof f->db, "remat_unit_%.16s", id);
    char sql[128];
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", f->db);
    exec_on(maintenance_uri(), sql);
    /* The maintenance URI with this test's database instead: the path of
     * a postgresql://host:port/db URI. */
    const char *m = maintenance_uri();
    const char *slash = strrchr(m, '/');
    assert_non_null(slash);
    assert_true(slash - m > 13);
    snprintf(f->uri, sizeof f->uri, "%.*s/%s", (int)(slash - m), m, f->db);
    f->cfg.lease_seconds = lease_seconds;
    f->cfg.max_attempts = 3;
    f->cfg.idempotency_ttl = 3600;
    snprintf(f->cfg.data_dir, sizeof f->cfg.data_dir, "%s", f->dir);
    snprintf(f->cfg.sync, sizeof f->cfg.sync, "full");
    *state = f;
    return 0;
}

static int setup(void **state)
{
    return setup_lease(state, 30);
}

static int setup_short_lease(void **state)
{
    return setup_lease(state, 1);
}

static struct rematd_store *open_one(struct fixture *f)
{
    char err[512] = "";
    struct rematd_store *st = rematd_store_open(f->uri, &f->cfg, err, sizeof err);
    if (!st)
        fail_msg("open %s: %s", f->uri, err);
    return st;
}

static void open_both(struct fixture *f)
{
    f->a = open_one(f);
    f->b = open_one(f);
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    rematd_store_close(f->a);
    rematd_store_close(f->b);
    char sql[128];
    snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s WITH (FORCE)", f->db);
    exec_on(maintenance_uri(), sql);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

/* ---- migrations: two opens at once ---- */

struct opener {
    struct fixture *f;
    pthread_barrier_t *go;
    struct rematd_store *st;
    char err[512];
};

static void *open_main(void *arg)
{
    struct opener *o = arg;
    pthread_barrier_wait(o->go);
    o->st = rematd_store_open(o->f->uri, &o->f->cfg, o->err, sizeof o->err);
    return NULL;
}

static void test_migrate_once(void **state)
{
    struct fixture *f = *state;
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 2);
    struct opener o[2] = {{.f = f, .go = &go}, {.f = f, .go = &go}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, open_main, &o[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&go);
    f->a = o[0].st;
    f->b = o[1].st;
    if (!f->a || !f->b)
        fail_msg("opens at once: \"%s\" \"%s\"", o[0].err, o[1].err);
    assert_string_equal(rematd_store_backend(f->a), "postgresql");
    assert_int_equal(rematd_store_ready(f->a), REMATD_STORE_OK);
    assert_int_equal(rematd_store_ready(f->b), REMATD_STORE_OK);
    /* Each migration once: one row per version, none twice. */
    long long versions = db_int(f, "SELECT count(*) FROM remat_schema");
    assert_true(versions >= 1);
    assert_int_equal(db_int(f, "SELECT count(DISTINCT version) FROM remat_schema"), versions);
    assert_int_equal(db_int(f, "SELECT max(version) FROM remat_schema"), versions);
    /* A third open later migrates nothing. */
    struct rematd_store *c = open_one(f);
    rematd_store_close(c);
    assert_int_equal(db_int(f, "SELECT count(*) FROM remat_schema"), versions);
}

/* ---- plans ---- */

static void plan_init(struct rematd_plan_write *w, const char *key, const char *body)
{
    memset(w, 0, sizeof *w);
    rematd_new_ordered_id(w->id);
    rematd_rfc3339(rematd_now(), w->created_at);
    w->algorithm = "sqrt";
    w->options = strdup("{\"algorithm\":\"sqrt\"}");
    w->record_len = 512;
    w->record = malloc(w->record_len);
    assert_non_null(w->record);
    for (size_t i = 0; i < w->record_len; i++)
        w->record[i] = (unsigned char)(i * 7 + 3);
    w->record[0] = 0;
    w->body = strdup(body);
    w->idem_key = key;
    w->idem_scope = "plans_create";
    rematd_sha256_hex("request", 7, w->body_hash);
}

static void test_plan_bytes(void **state)
{
    struct fixture *f = *state;
    open_both(f);
    struct rematd_plan_write w;
    plan_init(&w, NULL, "{\"a\":1}");
    write_plans(f->a, &w, 1);
    assert_int_equal(w.result, REMATD_STORE_OK);
    struct rematd_stored_plan sp;
    assert_int_equal(rematd_store_get_plan(f->b, w.id, &sp), REMATD_STORE_OK);
    assert_int_equal(sp.record_len, w.record_len);
    assert_memory_equal(sp.record, w.record, w.record_len);
    assert_string_equal(sp.created_at, w.created_at);
    assert_string_equal(sp.options, w.options);
    assert_string_equal(sp.profile_id, "");
    rematd_stored_plan_clear(&sp);
    assert_int_equal(rematd_store_get_plan(f->b, "0123456789abcdef0123456789abcdef", &sp),
                     REMATD_STORE_NOT_FOUND);
    unsigned long commits, plans;
    rematd_store_commit_stats(f->a, &commits, &plans);
    assert_int_equal(commits, 1);
    assert_int_equal(plans, 1);
    plan_free(&w);
}

/* ---- Idempotency-Keys across the two ---- */

static void new_job(struct rematd_job_new *j, char id[REMATD_ID_LEN + 1], const char *key,
                    const char *body)
{
    rematd_new_id(id);
    *j = (struct rematd_job_new){.id = id,
                                 .created_at = rematd_now(),
                                 .kind = "profile",
                                 .device = "cpu",
                                 .spec = "{\"model\":\"vgg11\"}",
                                 .idem_key = key,
                                 .idem_scope = "profiles_create",
                                 .body_hash = "hash",
                                 .body = body};
}

static void test_idem_conflict(void **state)
{
    struct fixture *f = *state;
    open_both(f);
    struct rematd_plan_write first, again;
    plan_init(&first, "key-1", "{\"first\":1}");
    write_plans(f->a, &first, 1);
    assert_int_equal(first.result, REMATD_STORE_OK);
    /* The same key on the other replica: the first plan's record, and the
     * second plan is not stored. */
    plan_init(&again, "key-1", "{\"again\":1}");
    write_plans(f->b, &again, 1);
    assert_int_equal(again.result, REMATD_STORE_CONFLICT);
    assert_string_equal(again.existing.resource_id, first.id);
    assert_string_equal(again.existing.body, "{\"first\":1}");
    assert_string_equal(again.existing.body_hash, first.body_hash);
    struct rematd_stored_plan sp;
    assert_int_equal(rematd_store_get_plan(f->a, again.id, &sp), REMATD_STORE_NOT_FOUND);
    struct rematd_idem rec;
    assert_int_equal(rematd_store_get_idempotency(f->b, "plans_create", "key-1", &rec),
                     REMATD_STORE_OK);
    assert_string_equal(rec.resource_id, first.id);
    rematd_idem_clear(&rec);
    plan_free(&first);
    plan_free(&again);

    /* Jobs: the same. */
    char ja_id[REMATD_ID_LEN + 1], jb_id[REMATD_ID_LEN + 1];
    struct rematd_job_new ja, jb;
    struct rematd_idem existing;
    new_job(&ja, ja_id, "k", "{\"job\":1}");
    assert_int_equal(rematd_store_create_job(f->a, &ja, &existing), REMATD_STORE_OK);
    new_job(&jb, jb_id, "k", "{\"job\":2}");
    assert_int_equal(rematd_store_create_job(f->b, &jb, &existing), REMATD_STORE_CONFLICT);
    assert_string_equal(existing.resource_id, ja_id);
    assert_string_equal(existing.body, "{\"job\":1}");
    rematd_idem_clear(&existing);
    struct rematd_job job;
    assert_int_equal(rematd_store_get_job(f->a, jb_id, &job), REMATD_STORE_NOT_FOUND);
    assert_int_equal(db_int(f, "SELECT count(*) FROM jobs"), 1);
    assert_int_equal(db_int(f, "SELECT count(*) FROM idempotency"), 2);
}

/* ---- leases ---- */

static const char *const kinds[] = {"profile", NULL};
static const char *const cpu[] = {"cpu", NULL};

#define JOBS 40

struct leaser {
    struct rematd_store *st;
    pthread_barrier_t *go;
    char ids[JOBS][REMATD_ID_LEN + 1];
    int n, errors;
};

static void *lease_main(void *arg)
{
    struct leaser *l = arg;
    pthread_barrier_wait(l->go);
    for (;;) {
        struct rematd_lease lease;
        enum rematd_store_result r = rematd_store_lease_job(l->st, "w", kinds, cpu, &lease);
        if (r == REMATD_STORE_NOT_FOUND)
            break;
        if (r != REMATD_STORE_OK || l->n == JOBS) {
            l->errors++;
            break;
        }
        snprintf(l->ids[l->n++], REMATD_ID_LEN + 1, "%s", lease.job_id);
        rematd_lease_clear(&lease);
    }
    return NULL;
}

static void test_lease_once(void **state)
{
    struct fixture *f = *state;
    open_both(f);
    char ids[JOBS][REMATD_ID_LEN + 1];
    for (int i = 0; i < JOBS; i++) {
        struct rematd_job_new j;
        struct rematd_idem existing;
        new_job(&j, ids[i], NULL, NULL);
        assert_int_equal(rematd_store_create_job(i % 2 ? f->a : f->b, &j, &existing),
                         REMATD_STORE_OK);
    }
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 4);
    static struct leaser l[4];
    memset(l, 0, sizeof l);
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        l[i].st = i % 2 ? f->a : f->b;
        l[i].go = &go;
        assert_int_equal(pthread_create(&t[i], NULL, lease_main, &l[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&go);
    /* Every job leased, each once. */
    int total = 0;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(l[i].errors, 0);
        total += l[i].n;
    }
    assert_int_equal(total, JOBS);
    for (int i = 0; i < JOBS; i++) {
        int seen = 0;
        for (int k = 0; k < 4; k++)
            for (int m = 0; m < l[k].n; m++)
                seen += strcmp(l[k].ids[m], ids[i]) == 0;
        assert_int_equal(seen, 1);
    }
    assert_int_equal(db_int(f, "SELECT count(*) FROM jobs WHERE status = 'running'"
                               " AND attempts = 0"),
                     JOBS);
}

/* ---- lease expiry, counted once ---- */

static void test_expiry_once(void **state)
{
    struct fixture *f = *state;
    open_both(f);
    char id[REMATD_ID_LEN + 1];
    struct rematd_job_new j;
    struct rematd_idem existing;
    new_job(&j, id, NULL, NULL);
    assert_int_equal(rematd_store_create_job(f->a, &j, &existing), REMATD_STORE_OK);
    struct rematd_lease lease;
    assert_int_equal(rematd_store_lease_job(f->a, "w", kinds, cpu, &lease), REMATD_STORE_OK);
    assert_int_equal(lease.attempt, 1);
    /* The lease runs out; both handles' writer threads expire leases in
     * their quiet seconds, and both look now as well (a lease request
     * expires first).  Polled, up to the lease and a margin for a loaded
     * machine. */
    double deadline = lease.lease_expires_at + f->cfg.lease_seconds * 10 + 30;
    struct rematd_job job;
    for (;;) {
        assert_int_equal(rematd_store_get_job(f->b, id, &job), REMATD_STORE_OK);
        int queued = job.status == REMATD_JOB_QUEUED;
        rematd_job_clear(&job);
        if (queued)
            break;
        if (rematd_now() > deadline)
            fail_msg("lease not expired %.1f s after its end",
                     rematd_now() - lease.lease_expires_at);
        usleep(50 * 1000);
    }
    /* Both replicas look again: nothing more to count. */
    static const char *const none[] = {"validation", NULL};
    struct rematd_lease other;
    assert_int_equal(rematd_store_lease_job(f->a, "w", none, cpu, &other), REMATD_STORE_NOT_FOUND);
    assert_int_equal(rematd_store_lease_job(f->b, "w", none, cpu, &other), REMATD_STORE_NOT_FOUND);
    /* Past two more housekeeping seconds of both writer threads. */
    usleep(2500 * 1000);
    assert_int_equal(rematd_store_get_job(f->a, id, &job), REMATD_STORE_OK);
    assert_int_equal(job.status, REMATD_JOB_QUEUED);
    assert_int_equal(job.attempts, 1);
    rematd_job_clear(&job);
    assert_int_equal(db_int(f, "SELECT expiries FROM jobs"), 1);
    /* The stale lease is refused on either replica. */
    double until;
    assert_int_equal(rematd_store_renew_lease(f->b, id, lease.lease_id, NULL, &until),
                     REMATD_STORE_CONFLICT);
    assert_int_equal(rematd_store_complete_job(f->a, id, lease.lease_id, "{}"),
                     REMATD_STORE_CONFLICT);
    /* Leased again: the second attempt. */
    struct rematd_lease second;
    assert_int_equal(rematd_store_lease_job(f->b, "w", kinds, cpu, &second), REMATD_STORE_OK);
    assert_string_equal(second.job_id, id);
    assert_int_equal(second.attempt, 2);
    rematd_lease_clear(&second);
    rematd_lease_clear(&lease);
}

/* ---- --max-idempotency-keys across the two ---- */

#define BOUND 10

struct adder {
    struct fixture *f;
    struct rematd_store *st;
    pthread_barrier_t *go;
    int plans; /* plans with keys, else jobs with keys */
    int ok, full, other;
};

static void *add_main(void *arg)
{
    struct adder *a = arg;
    pthread_barrier_wait(a->go);
    for (int i = 0; i < BOUND; i++) {
        char key[32];
        snprintf(key, sizeof key, "%s-%d", a->plans ? "plan" : "job", i);
        enum rematd_store_result r;
        if (a->plans) {
            struct rematd_plan_write w;
            plan_init(&w, key, "{}");
            write_plans(a->st, &w, 1);
            r = w.result;
            plan_free(&w);
        } else {
            char id[REMATD_ID_LEN + 1];
            struct rematd_job_new j;
            struct rematd_idem existing;
            new_job(&j, id, key, "{}");
            r = rematd_store_create_job(a->st, &j, &existing);
        }
        a->ok += r == REMATD_STORE_OK;
        a->full += r == REMATD_STORE_FULL;
        a->other += r != REMATD_STORE_OK && r != REMATD_STORE_FULL;
    }
    return NULL;
}

/* Two replicas adding keys at once: the bound holds for the database, not
 * for each replica. */
static void test_idem_bound(void **state)
{
    struct fixture *f = *state;
    f->cfg.max_idempotency_keys = BOUND;
    open_both(f);
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 2);
    struct adder a[2] = {{.f = f, .st = f->a, .go = &go, .plans = 1},
                         {.f = f, .st = f->b, .go = &go, .plans = 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, add_main, &a[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&go);
    assert_int_equal(a[0].other + a[1].other, 0);
    assert_int_equal(a[0].ok + a[1].ok, BOUND);
    assert_int_equal(a[0].full + a[1].full, BOUND);
    assert_int_equal(db_int(f, "SELECT count(*) FROM idempotency"), BOUND);
    /* A replica opened later starts from the database's count. */
    struct rematd_store *c = open_one(f);
    char id[REMATD_ID_LEN + 1];
    struct rematd_job_new j;
    struct rematd_idem existing;
    new_job(&j, id, "one-more", "{}");
    assert_int_equal(rematd_store_create_job(c, &j, &existing), REMATD_STORE_FULL);
    /* A known key still replays: the routes read its record first. */
    struct rematd_idem rec;
    assert_int_equal(rematd_store_get_idempotency(c, a[0].ok ? "plans_create" : "profiles_create",
                                                  a[0].ok ? "plan-0" : "job-0", &rec),
                     REMATD_STORE_OK);
    rematd_idem_clear(&rec);
    rematd_store_close(c);
}

/* A TTL of 1 s and two replicas, each purging in its quiet seconds: the
 * count under --max-idempotency-keys goes down by exactly what was
 * deleted (once, whichever replica deleted it), so new keys fit again,
 * as many as the bound allows, round after round. */
static void test_purge_frees_the_bound(void **state)
{
    struct fixture *f = *state;
    f->cfg.max_idempotency_keys = 2;
    f->cfg.idempotency_ttl = 1;
    open_both(f);
    char id[REMATD_ID_LEN + 1];
    struct rematd_job_new j;
    struct rematd_idem existing;
    /* Each round's two records share one created_at, so that no purge
     * can fall between them. */
    double t = rematd_now();
    const char *keys[] = {"k1", "k2", "k3", "k4", "k5", "k6", "k7"};
    new_job(&j, id, keys[0], "{}");
    j.created_at = t;
    assert_int_equal(rematd_store_create_job(f->a, &j, &existing), REMATD_STORE_OK);
    new_job(&j, id, keys[1], "{}");
    j.created_at = t;
    assert_int_equal(rematd_store_create_job(f->b, &j, &existing), REMATD_STORE_OK);
    for (int round = 0; round < 2; round++) {
        const char *next = keys[2 + 2 * round], *then = keys[3 + 2 * round];
        new_job(&j, id, next, "{}");
        assert_int_equal(rematd_store_create_job(f->a, &j, &existing), REMATD_STORE_FULL);
        double t0 = t;
        enum rematd_store_result r = REMATD_STORE_FULL;
        while (r == REMATD_STORE_FULL && rematd_now() - t0 < 10) {
            usleep(100 * 1000);
            new_job(&j, id, next, "{}");
            t = j.created_at;
            r = rematd_store_create_job(round ? f->b : f->a, &j, &existing);
        }
        assert_int_equal(r, REMATD_STORE_OK);
        assert_true(t - t0 >= 1.0);
        new_job(&j, id, then, "{}");
        j.created_at = t;
        assert_int_equal(rematd_store_create_job(round ? f->a : f->b, &j, &existing),
                         REMATD_STORE_OK);
        assert_int_equal(db_int(f, "SELECT n FROM remat_counters WHERE name = 'idempotency'"), 2);
    }
    new_job(&j, id, keys[6], "{}");
    assert_int_equal(rematd_store_create_job(f->b, &j, &existing), REMATD_STORE_FULL);
    assert_int_equal(db_int(f, "SELECT count(*) FROM idempotency"), 2);
}

/* --tenant-max-idempotency-keys across two replicas: a tenant at its
 * share of the records is FULL on either replica, the job rolled back
 * with it, while another tenant ("blue_x", whose '_' is no wildcard, and
 * "default", whose scopes have no '/') still records new keys up to its
 * own share. */
static void test_tenant_idem_share(void **state)
{
    struct fixture *f = *state;
    f->cfg.max_idempotency_keys = 6;
    f->cfg.tenant_max_idempotency_keys = 2;
    open_both(f);
    char id[REMATD_ID_LEN + 1];
    struct rematd_job_new j;
    struct rematd_idem existing;
    const char *keys[] = {"k1", "k2", "k3"};
    for (int i = 0; i < 3; i++) {
        new_job(&j, id, keys[i], "{}");
        j.tenant = "blue";
        j.idem_scope = "blue/profiles_create";
        assert_int_equal(rematd_store_create_job(i % 2 ? f->a : f->b, &j, &existing),
                         i < 2 ? REMATD_STORE_OK : REMATD_STORE_FULL);
    }
    assert_int_equal(db_int(f, "SELECT count(*) FROM jobs WHERE tenant = 'blue'"), 2);
    new_job(&j, id, "k1", "{}");
    j.tenant = "blue_x";
    j.idem_scope = "blue_x/profiles_create";
    assert_int_equal(rematd_store_create_job(f->a, &j, &existing), REMATD_STORE_OK);
    for (int i = 0; i < 3; i++) {
        new_job(&j, id, keys[i], "{}");
        assert_int_equal(rematd_store_create_job(i % 2 ? f->a : f->b, &j, &existing),
                         i < 2 ? REMATD_STORE_OK : REMATD_STORE_FULL);
    }
    new_job(&j, id, "k2", "{}");
    j.tenant = "blue_x";
    j.idem_scope = "blue_x/profiles_create";
    assert_int_equal(rematd_store_create_job(f->b, &j, &existing), REMATD_STORE_OK);
    assert_int_equal(db_int(f, "SELECT n FROM remat_counters WHERE name = 'idempotency'"), 6);
    assert_int_equal(db_int(f, "SELECT count(*) FROM idempotency"), 6);
}

/* A database of schema 1 (before the count of records) with records in
 * it: migration 2 counts them, and the bound holds from there. */
static void test_upgrade_counts(void **state)
{
    struct fixture *f = *state;
    f->cfg.max_idempotency_keys = 3;
    f->a = open_one(f);
    for (int i = 0; i < 2; i++) {
        char id[REMATD_ID_LEN + 1], key[16];
        snprintf(key, sizeof key, "old-%d", i);
        struct rematd_job_new j;
        struct rematd_idem existing;
        new_job(&j, id, key, "{}");
        assert_int_equal(rematd_store_create_job(f->a, &j, &existing), REMATD_STORE_OK);
    }
    rematd_store_close(f->a);
    f->a = NULL;
    exec_on(f->uri, "DROP TABLE remat_counters; DELETE FROM remat_schema WHERE version >= 2");
    f->a = open_one(f);
    assert_int_equal(db_int(f, "SELECT n FROM remat_counters WHERE name = 'idempotency'"), 2);
    char id[REMATD_ID_LEN + 1];
    struct rematd_job_new j;
    struct rematd_idem existing;
    new_job(&j, id, "new-1", "{}");
    assert_int_equal(rematd_store_create_job(f->a, &j, &existing), REMATD_STORE_OK);
    new_job(&j, id, "new-2", "{}");
    assert_int_equal(rematd_store_create_job(f->a, &j, &existing), REMATD_STORE_FULL);
    assert_int_equal(db_int(f, "SELECT n FROM remat_counters WHERE name = 'idempotency'"), 3);
    /* Jobs from before the tenant column are "default"'s. */
    assert_int_equal(db_int(f, "SELECT count(*) FROM jobs WHERE tenant = 'default'"), 3);
}

/* ---- tenants (tenants.h) ---- */

/* Writes bytes of 'x' as the archive sha under the fixture's models/. */
static void archive(struct fixture *f, const char *sha, size_t bytes)
{
    char path[256];
    snprintf(path, sizeof path, "%s/models", f->dir);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/models/%s", f->dir, sha);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    for (size_t i = 0; i < bytes; i++)
        fputc('x', fp);
    assert_int_equal(fclose(fp), 0);
}

static void model_init(struct rematd_model *m, const char *sha, const char *id_prefix,
                       const char *tenant, long long bytes)
{
    memset(m, 0, sizeof *m);
    snprintf(m->sha256, sizeof m->sha256, "%s", sha);
    memcpy(m->id, sha, REMATD_ID_LEN);
    memcpy(m->id, id_prefix, strlen(id_prefix));
    m->id[REMATD_ID_LEN] = '\0';
    snprintf(m->tenant, sizeof m->tenant, "%s", tenant);
    m->bytes = bytes;
    m->created_at = rematd_now();
    m->meta = (char *)"{}";
}

/* Each model, job and plan keeps its tenant, read back on the other
 * replica; two tenants may have a model of the same bytes; lists and
 * totals are a tenant's; a tenant's shares of the models' bytes and of
 * the queue are its own, under the global bounds. */
static void test_tenants(void **state)
{
    struct fixture *f = *state;
    f->cfg.max_queued_jobs = 3;
    f->cfg.tenant_max_queued_jobs = 2;
    open_both(f);
    const char *sa = "cccc0000000000000000000000000000000000000000000000000000000000cc";
    const char *sc = "eeee0000000000000000000000000000000000000000000000000000000000ee";
    archive(f, sa, 600);
    archive(f, sc, 600);
    struct rematd_model a, b, c, got;
    model_init(&a, sa, "", "default", 600);
    model_init(&b, sa, "dddd", "blue", 600);
    assert_int_equal(rematd_store_add_model(f->a, &a, 2000, 1000, &got), REMATD_STORE_OK);
    assert_int_equal(rematd_store_add_model(f->a, &b, 2000, 1000, &got), REMATD_STORE_OK);
    assert_int_equal(rematd_store_get_model(f->b, a.id, &got), REMATD_STORE_OK);
    assert_string_equal(got.tenant, "default");
    rematd_model_clear(&got);
    assert_int_equal(rematd_store_get_model(f->b, b.id, &got), REMATD_STORE_OK);
    assert_string_equal(got.tenant, "blue");
    rematd_model_clear(&got);
    struct rematd_model *list;
    size_t n;
    assert_int_equal(rematd_store_list_models(f->b, "blue", 100, &list, &n), REMATD_STORE_OK);
    assert_int_equal(n, 1);
    assert_string_equal(list[0].id, b.id);
    rematd_models_free(list, n);
    unsigned long long total = 0;
    assert_int_equal(rematd_store_models_bytes(f->b, "blue", &total), REMATD_STORE_OK);
    assert_int_equal(total, 600);
    assert_int_equal(rematd_store_models_bytes(f->b, NULL, &total), REMATD_STORE_OK);
    assert_int_equal(total, 1200);
    model_init(&c, sc, "", "blue", 600);
    assert_int_equal(rematd_store_add_model(f->b, &c, 2000, 1000, &got), REMATD_STORE_FULL);
    model_init(&c, sc, "", "green", 600);
    assert_int_equal(rematd_store_add_model(f->b, &c, 2000, 1000, &got), REMATD_STORE_OK);
    model_init(&c, sc, "ffff", "red", 600);
    assert_int_equal(rematd_store_add_model(f->b, &c, 2000, 1000, &got), REMATD_STORE_FULL);
    assert_int_equal(rematd_store_delete_model(f->a, a.id), REMATD_STORE_OK);
    assert_int_equal(rematd_store_model_sha_used(f->b, sa), REMATD_STORE_OK);
    assert_int_equal(rematd_store_delete_model(f->a, b.id), REMATD_STORE_OK);
    assert_int_equal(rematd_store_model_sha_used(f->b, sa), REMATD_STORE_NOT_FOUND);

    char id[4][REMATD_ID_LEN + 1];
    struct rematd_job_new j;
    struct rematd_idem existing;
    for (int i = 0; i < 3; i++) {
        new_job(&j, id[i], NULL, NULL);
        j.tenant = "blue";
        assert_int_equal(rematd_store_create_job(i % 2 ? f->a : f->b, &j, &existing),
                         i < 2 ? REMATD_STORE_OK : REMATD_STORE_FULL);
    }
    new_job(&j, id[2], NULL, NULL);
    assert_int_equal(rematd_store_create_job(f->a, &j, &existing), REMATD_STORE_OK);
    new_job(&j, id[3], NULL, NULL);
    j.tenant = "green";
    assert_int_equal(rematd_store_create_job(f->b, &j, &existing), REMATD_STORE_FULL);
    struct rematd_job job;
    assert_int_equal(rematd_store_get_job(f->b, id[0], &job), REMATD_STORE_OK);
    assert_string_equal(job.tenant, "blue");
    rematd_job_clear(&job);
    assert_int_equal(rematd_store_get_job(f->b, id[2], &job), REMATD_STORE_OK);
    assert_string_equal(job.tenant, "default");
    rematd_job_clear(&job);

    struct rematd_plan_write w[2];
    plan_init(&w[0], NULL, "{\"a\":1}");
    plan_init(&w[1], NULL, "{\"b\":2}");
    w[1].tenant = "blue";
    write_plans(f->a, w, 2);
    struct rematd_stored_plan sp;
    assert_int_equal(rematd_store_get_plan(f->b, w[0].id, &sp), REMATD_STORE_OK);
    assert_string_equal(sp.tenant, "default");
    rematd_stored_plan_clear(&sp);
    assert_int_equal(rematd_store_get_plan(f->b, w[1].id, &sp), REMATD_STORE_OK);
    assert_string_equal(sp.tenant, "blue");
    rematd_stored_plan_clear(&sp);
    plan_free(&w[0]);
    plan_free(&w[1]);
}

int main(void)
{
    if (!maintenance_uri() || !*maintenance_uri()) {
        printf("skipped: REMAT_TEST_PG is not set (make check-postgresql sets it)\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_migrate_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plan_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idem_conflict, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lease_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expiry_once, setup_short_lease, teardown),
        cmocka_unit_test_setup_teardown(test_idem_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upgrade_counts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_purge_frees_the_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tenants, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tenant_idem_share, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
