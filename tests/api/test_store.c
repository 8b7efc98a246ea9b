/* Unit tests of the store through its interface (api/store.h) on a
 * temporary data directory: each call's result (OK, NOT_FOUND, CONFLICT),
 * plans by group commit, Idempotency-Key records (a key recorded first is
 * handed back, one past its TTL gives way), the job and lease state
 * machine, and the schema versions (a new database is at the current one,
 * an older one is migrated with its records, a newer one is refused).
 * They speak only of store.h, so another backend can be held to them. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "store.h"
#include "store_plans.h"

struct fixture {
    char dir[64];
    struct rematd_config cfg;
    struct rematd_store *st;
};

static int setup_ttl(void **state, unsigned ttl)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    const char *tmp = getenv("TMPDIR");
    snprintf(f->dir, sizeof f->dir, "%.40s/remat-store.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    assert_non_null(mkdtemp(f->dir));
    f->cfg.lease_seconds = 30;
    f->cfg.max_attempts = 2;
    f->cfg.idempotency_ttl = ttl;
    snprintf(f->cfg.sync, sizeof f->cfg.sync, "full");
    *state = f;
    return 0;
}

static int setup(void **state)
{
    return setup_ttl(state, 3600);
}

static int setup_no_ttl(void **state)
{
    return setup_ttl(state, 0);
}

static void open_store(struct fixture *f)
{
    char err[512] = "";
    f->st = rematd_store_open(f->dir, &f->cfg, err, sizeof err);
    if (!f->st)
        fail_msg("open: %s", err);
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    rematd_store_close(f->st);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

/* Runs sql on the fixture's database file with a connection of its own. */
static long long db_int(struct fixture *f, const char *sql)
{
    char path[128];
    snprintf(path, sizeof path, "%s/rematd.db", f->dir);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *s = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
    long long v = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
    sqlite3_finalize(s);
    sqlite3_close(db);
    return v;
}

static void db_exec(struct fixture *f, const char *sql)
{
    char path[128];
    snprintf(path, sizeof path, "%s/rematd.db", f->dir);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("%s: %s", sql, msg);
    sqlite3_close(db);
}

/* Plans: written by the writer thread, waited for here. */
static void plan_init(struct rematd_plan_write *w, struct waiter *wt, const char *key,
                      const char *body)
{
    memset(w, 0, sizeof *w);
    rematd_new_ordered_id(w->id);
    rematd_rfc3339(rematd_now(), w->created_at);
    w->algorithm = "sqrt";
    w->options = strdup("{\"algorithm\":\"sqrt\"}");
    w->record = (unsigned char *)strdup("record bytes");
    w->record_len = strlen("record bytes");
    w->body = strdup(body);
    w->idem_key = key;
    w->idem_scope = "plans_create";
    rematd_sha256_hex("request", 7, w->body_hash);
    w->cls = wt;
}

static void test_new_database(void **state)
{
    struct fixture *f = *state;
    open_store(f);
    assert_int_equal(rematd_store_ready(f->st), REMATD_STORE_OK);
    rematd_store_close(f->st);
    f->st = NULL;
    assert_int_equal(db_int(f, "PRAGMA user_version"), 5);
    assert_int_equal(
        db_int(f, "SELECT count(*) FROM pragma_table_info('idempotency') WHERE name = 'location'"),
        0);
    assert_int_equal(db_int(f, "SELECT count(*) FROM pragma_table_info('jobs')"
                               " WHERE name = 'model_id'"),
                     1);
    assert_int_equal(
        db_int(f, "SELECT count(*) FROM pragma_table_info('jobs') WHERE name = 'reuse_key'"), 1);
    /* Opening again migrates nothing and keeps the version. */
    open_store(f);
    rematd_store_close(f->st);
    f->st = NULL;
    assert_int_equal(db_int(f, "PRAGMA user_version"), 5);
}

static void test_newer_refused(void **state)
{
    struct fixture *f = *state;
    db_exec(f, "CREATE TABLE future (x); PRAGMA user_version = 6;");
    char err[512] = "";
    f->st = rematd_store_open(f->dir, &f->cfg, err, sizeof err);
    assert_null(f->st);
    assert_non_null(strstr(err, "schema version 6, newer than this rematd knows (5)"));
    assert_int_equal(db_int(f, "PRAGMA user_version"), 6);
    assert_int_equal(db_int(f, "SELECT count(*) FROM sqlite_master WHERE name = 'plans'"), 0);
}

/* A database from before versions keeps its Idempotency-Key records: the
 * id is taken from their Location. */
static void test_migrates_old_records(void **state)
{
    struct fixture *f = *state;
    char sql[1024];
    snprintf(sql, sizeof sql,
             "CREATE TABLE idempotency (scope TEXT NOT NULL, key TEXT NOT NULL,"
             " body_hash TEXT NOT NULL, status INTEGER NOT NULL, location TEXT,"
             " body TEXT NOT NULL, created_at REAL NOT NULL, PRIMARY KEY (scope, key));"
             "INSERT INTO idempotency VALUES ('profiles_create', 'k', 'h', 202,"
             " '/v1/profiles/0123456789abcdef0123456789abcdef', '{\"old\":1}', %.3f);",
             rematd_now());
    db_exec(f, sql);
    open_store(f);
    struct rematd_idem rec;
    assert_int_equal(rematd_store_get_idempotency(f->st, "profiles_create", "k", &rec),
                     REMATD_STORE_OK);
    assert_string_equal(rec.resource_id, "0123456789abcdef0123456789abcdef");
    assert_string_equal(rec.body, "{\"old\":1}");
    assert_string_equal(rec.body_hash, "h");
    rematd_idem_clear(&rec);
    assert_int_equal(rematd_store_get_idempotency(f->st, "plans_create", "k", &rec),
                     REMATD_STORE_NOT_FOUND);
}

static void test_plans(void **state)
{
    struct fixture *f = *state;
    open_store(f);
    struct rematd_plan_write ws[3];
    plan_init(&ws[0], NULL, NULL, "{\"a\":1}");
    plan_init(&ws[1], NULL, "key-1", "{\"b\":2}");
    plan_init(&ws[2], NULL, NULL, "{\"c\":3}");
    snprintf(ws[2].profile_id, sizeof ws[2].profile_id, "%s", ws[0].id);
    write_plans(f->st, ws, 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(ws[i].result, REMATD_STORE_OK);
    unsigned long commits, plans;
    rematd_store_commit_stats(f->st, &commits, &plans);
    assert_int_equal(plans, 3);
    assert_true(commits >= 1 && commits <= 3);

    struct rematd_stored_plan sp;
    assert_int_equal(rematd_store_get_plan(f->st, ws[2].id, &sp), REMATD_STORE_OK);
    assert_int_equal(sp.record_len, ws[2].record_len);
    assert_memory_equal(sp.record, ws[2].record, sp.record_len);
    assert_string_equal(sp.created_at, ws[2].created_at);
    assert_string_equal(sp.profile_id, ws[0].id);
    assert_string_equal(sp.options, "{\"algorithm\":\"sqrt\"}");
    assert_null(sp.legacy_body);
    rematd_stored_plan_clear(&sp);
    assert_int_equal(rematd_store_get_plan(f->st, ws[0].id, &sp), REMATD_STORE_OK);
    assert_string_equal(sp.profile_id, "");
    rematd_stored_plan_clear(&sp);
    assert_int_equal(rematd_store_get_plan(f->st, "0123456789abcdef0123456789abcdef", &sp),
                     REMATD_STORE_NOT_FOUND);
    assert_null(sp.record);

    /* The key's record names the plan and keeps its answer. */
    struct rematd_idem rec;
    assert_int_equal(rematd_store_get_idempotency(f->st, "plans_create", "key-1", &rec),
                     REMATD_STORE_OK);
    assert_string_equal(rec.resource_id, ws[1].id);
    assert_string_equal(rec.body, "{\"b\":2}");
    assert_string_equal(rec.body_hash, ws[1].body_hash);
    rematd_idem_clear(&rec);
    assert_int_equal(rematd_store_get_idempotency(f->st, "profiles_create", "key-1", &rec),
                     REMATD_STORE_NOT_FOUND);

    /* The key again (a request that found no record when it arrived):
     * CONFLICT with the first plan's record, and the plan is not stored.
     * Two such in one batch or in two: either way. */
    struct rematd_plan_write again[2];
    plan_init(&again[0], NULL, "key-1", "{\"b\":3}");
    plan_init(&again[1], NULL, "key-2", "{\"d\":4}");
    write_plans(f->st, again, 2);
    assert_int_equal(again[0].result, REMATD_STORE_CONFLICT);
    assert_string_equal(again[0].existing.resource_id, ws[1].id);
    assert_string_equal(again[0].existing.body, "{\"b\":2}");
    assert_int_equal(rematd_store_get_plan(f->st, again[0].id, &sp), REMATD_STORE_NOT_FOUND);
    assert_int_equal(again[1].result, REMATD_STORE_OK);
    rematd_store_commit_stats(f->st, &commits, &plans);
    assert_int_equal(plans, 4);
    for (int i = 0; i < 3; i++)
        plan_free(&ws[i]);
    plan_free(&again[0]);
    plan_free(&again[1]);
}

static void new_job(struct rematd_job_new *j, char id[REMATD_ID_LEN + 1], const char *kind,
                    const char *device, const char *key, const char *body)
{
    rematd_new_id(id);
    *j = (struct rematd_job_new){.id = id,
                                 .created_at = rematd_now(),
                                 .kind = kind,
                                 .device = device,
                                 .spec = "{\"model\":\"vgg11\"}",
                                 .idem_key = key,
                                 .idem_scope = "profiles_create",
                                 .body_hash = "hash",
                                 .body = body};
}

static void test_jobs_and_keys(void **state)
{
    struct fixture *f = *state;
    open_store(f);
    char a[REMATD_ID_LEN + 1], b[REMATD_ID_LEN + 1];
    struct rematd_job_new ja, jb;
    struct rematd_idem existing;
    new_job(&ja, a, "profile", "cpu", "k", "{\"first\":1}");
    assert_int_equal(rematd_store_create_job(f->st, &ja, &existing), REMATD_STORE_OK);
    new_job(&jb, b, "profile", "cpu", "k", "{\"second\":1}");
    assert_int_equal(rematd_store_create_job(f->st, &jb, &existing), REMATD_STORE_CONFLICT);
    assert_string_equal(existing.resource_id, a);
    assert_string_equal(existing.body, "{\"first\":1}");
    rematd_idem_clear(&existing);

    struct rematd_job job;
    assert_int_equal(rematd_store_get_job(f->st, b, &job), REMATD_STORE_NOT_FOUND);
    assert_int_equal(rematd_store_get_job(f->st, a, &job), REMATD_STORE_OK);
    assert_string_equal(job.id, a);
    assert_string_equal(job.kind, "profile");
    assert_int_equal(job.status, REMATD_JOB_QUEUED);
    assert_int_equal(job.attempts, 0);
    assert_string_equal(job.spec, "{\"model\":\"vgg11\"}");
    assert_null(job.progress);
    assert_null(job.result);
    assert_true(job.created_at == ja.created_at && job.updated_at == ja.created_at);
    rematd_job_clear(&job);
    struct rematd_job_counts n;
    assert_int_equal(rematd_store_count_jobs(f->st, &n), REMATD_STORE_OK);
    assert_int_equal(n.queued, 1);
    assert_int_equal(n.running + n.done + n.failed, 0);

    /* A status this rematd has no name for (a newer one's, or damage) is
     * not read as any of its own, and is counted under none. */
    db_exec(f, "UPDATE jobs SET status = 'paused'");
    assert_int_equal(rematd_store_get_job(f->st, a, &job), REMATD_STORE_ERROR);
    assert_int_equal(rematd_store_count_jobs(f->st, &n), REMATD_STORE_OK);
    assert_int_equal(n.queued + n.running + n.done + n.failed, 0);
}

/* Every status has its own name, which parses back to it; nothing else
 * parses.  The names are the API's (openapi.yaml's job status enum). */
static void test_job_status_names(void **state)
{
    (void)state;
    static const char *const api[] = {"queued", "running", "done", "failed"};
    assert_int_equal(REMATD_JOB_STATUS_LAST + 1, sizeof api / sizeof *api);
    for (int s = 0; s <= REMATD_JOB_STATUS_LAST; s++) {
        const char *name = rematd_job_status_name((enum rematd_job_status)s);
        assert_string_equal(name, api[s]);
        enum rematd_job_status back = REMATD_JOB_STATUS_LAST;
        assert_int_equal(rematd_job_status_parse(name, &back), 0);
        assert_int_equal(back, s);
    }
    const char *bad[] = {"", "Queued", "queued ", "unknown", "runnin", NULL};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        enum rematd_job_status out = REMATD_JOB_RUNNING;
        assert_int_equal(rematd_job_status_parse(bad[i], &out), -1);
        assert_int_equal(out, REMATD_JOB_RUNNING);
    }
}

static void model_init(struct rematd_model *m, const char *sha, long long bytes)
{
    memset(m, 0, sizeof *m);
    snprintf(m->sha256, sizeof m->sha256, "%s", sha);
    memcpy(m->id, sha, REMATD_ID_LEN);
    m->id[REMATD_ID_LEN] = '\0';
    m->bytes = bytes;
    m->created_at = rematd_now();
    m->meta = (char *)"{\"root\":\"net\"}";
}

/* Uploaded models: added once (the same id again hands back the first),
 * bounded by the quota, listed oldest first, and not deleted while a
 * queued or running job names them; a job naming a deleted model is not
 * stored. */
static void test_models(void **state)
{
    struct fixture *f = *state;
    open_store(f);
    const char *sa = "aaaa0000000000000000000000000000000000000000000000000000000000aa";
    const char *sb = "bbbb0000000000000000000000000000000000000000000000000000000000bb";
    struct rematd_model a, b, got;
    model_init(&a, sa, 600);
    model_init(&b, sb, 500);
    assert_int_equal(rematd_store_add_model(f->st, &a, 1000, 1000, &got), REMATD_STORE_OK);
    assert_int_equal(rematd_store_add_model(f->st, &a, 1000, 1000, &got), REMATD_STORE_CONFLICT);
    assert_string_equal(got.sha256, sa);
    assert_int_equal(got.bytes, 600);
    assert_string_equal(got.meta, "{\"root\":\"net\"}");
    rematd_model_clear(&got);
    /* 600 + 500 > 1000: full; with room, added. */
    assert_int_equal(rematd_store_add_model(f->st, &b, 1000, 1000, &got), REMATD_STORE_FULL);
    assert_int_equal(rematd_store_add_model(f->st, &b, 1100, 1100, &got), REMATD_STORE_OK);
    unsigned long long total = 0;
    assert_int_equal(rematd_store_models_bytes(f->st, NULL, &total), REMATD_STORE_OK);
    assert_int_equal(total, 1100);
    struct rematd_model *list;
    size_t n;
    assert_int_equal(rematd_store_list_models(f->st, NULL, 100, &list, &n), REMATD_STORE_OK);
    assert_int_equal(n, 2);
    assert_string_equal(list[0].id, a.id);
    assert_string_equal(list[1].id, b.id);
    rematd_models_free(list, n);
    assert_int_equal(rematd_store_get_model(f->st, b.id, &got), REMATD_STORE_OK);
    assert_int_equal(got.bytes, 500);
    rematd_model_clear(&got);

    /* A queued job holds a; once done it does not. */
    char jid[REMATD_ID_LEN + 1];
    struct rematd_job_new j;
    struct rematd_idem existing;
    new_job(&j, jid, "profile", "cpu", NULL, NULL);
    j.model_id = a.id;
    assert_int_equal(rematd_store_create_job(f->st, &j, &existing), REMATD_STORE_OK);
    assert_int_equal(rematd_store_delete_model(f->st, a.id), REMATD_STORE_CONFLICT);
    static const char *const kinds[] = {"profile", NULL};
    static const char *const cpu[] = {"cpu", NULL};
    struct rematd_lease l;
    assert_int_equal(rematd_store_lease_job(f->st, "w", kinds, cpu, &l), REMATD_STORE_OK);
    assert_int_equal(rematd_store_delete_model(f->st, a.id), REMATD_STORE_CONFLICT);
    assert_int_equal(rematd_store_complete_job(f->st, jid, l.lease_id, "{}"), REMATD_STORE_OK);
    rematd_lease_clear(&l);
    assert_int_equal(rematd_store_delete_model(f->st, a.id), REMATD_STORE_OK);
    assert_int_equal(rematd_store_delete_model(f->st, a.id), REMATD_STORE_NOT_FOUND);
    assert_int_equal(rematd_store_get_model(f->st, a.id, &got), REMATD_STORE_NOT_FOUND);
    /* A job for the deleted model is refused, and nothing is stored. */
    new_job(&j, jid, "profile", "cpu", NULL, NULL);
    j.model_id = a.id;
    assert_int_equal(rematd_store_create_job(f->st, &j, &existing), REMATD_STORE_NOT_FOUND);
    struct rematd_job job;
    assert_int_equal(rematd_store_get_job(f->st, jid, &job), REMATD_STORE_NOT_FOUND);
    assert_int_equal(rematd_store_models_bytes(f->st, NULL, &total), REMATD_STORE_OK);
    assert_int_equal(total, 500);
}

/* Tenants (tenants.h): each model, job and plan keeps its tenant; the
 * same bytes are a model of each tenant that uploads them, sharing the
 * archive; lists and byte totals are a tenant's; a tenant's share of the
 * models' bytes and of the queue is its own, the whole still bounded. */
static void test_tenants(void **state)
{
    struct fixture *f = *state;
    f->cfg.max_queued_jobs = 3;
    f->cfg.tenant_max_queued_jobs = 2;
    open_store(f);
    const char *sa = "cccc0000000000000000000000000000000000000000000000000000000000cc";
    struct rematd_model a, b, got;
    model_init(&a, sa, 600);
    model_init(&b, sa, 600);
    snprintf(b.tenant, sizeof b.tenant, "blue");
    memcpy(b.id, "dddd", 4); /* the id of blue's model of the same bytes */
    assert_int_equal(rematd_store_add_model(f->st, &a, 2000, 1000, &got), REMATD_STORE_OK);
    assert_int_equal(rematd_store_add_model(f->st, &b, 2000, 1000, &got), REMATD_STORE_OK);
    assert_int_equal(rematd_store_get_model(f->st, a.id, &got), REMATD_STORE_OK);
    assert_string_equal(got.tenant, "default");
    rematd_model_clear(&got);
    assert_int_equal(rematd_store_get_model(f->st, b.id, &got), REMATD_STORE_OK);
    assert_string_equal(got.tenant, "blue");
    assert_string_equal(got.sha256, sa);
    rematd_model_clear(&got);
    struct rematd_model *list;
    size_t n;
    assert_int_equal(rematd_store_list_models(f->st, "blue", 100, &list, &n), REMATD_STORE_OK);
    assert_int_equal(n, 1);
    assert_string_equal(list[0].id, b.id);
    rematd_models_free(list, n);
    assert_int_equal(rematd_store_list_models(f->st, "green", 100, &list, &n), REMATD_STORE_OK);
    assert_int_equal(n, 0);
    unsigned long long total = 0;
    assert_int_equal(rematd_store_models_bytes(f->st, "blue", &total), REMATD_STORE_OK);
    assert_int_equal(total, 600);
    assert_int_equal(rematd_store_models_bytes(f->st, NULL, &total), REMATD_STORE_OK);
    assert_int_equal(total, 1200);
    /* blue at its share (600 + 600 > 1000); green, with none, has room. */
    struct rematd_model c;
    model_init(&c, "eeee0000000000000000000000000000000000000000000000000000000000ee", 600);
    snprintf(c.tenant, sizeof c.tenant, "blue");
    assert_int_equal(rematd_store_add_model(f->st, &c, 2000, 1000, &got), REMATD_STORE_FULL);
    snprintf(c.tenant, sizeof c.tenant, "green");
    assert_int_equal(rematd_store_add_model(f->st, &c, 2000, 1000, &got), REMATD_STORE_OK);
    /* The whole is bounded too: 1800 + 600 > 2000. */
    struct rematd_model d;
    model_init(&d, "ffff0000000000000000000000000000000000000000000000000000000000ff", 600);
    snprintf(d.tenant, sizeof d.tenant, "red");
    assert_int_equal(rematd_store_add_model(f->st, &d, 2000, 1000, &got), REMATD_STORE_FULL);
    /* The archive is used while either model of it is there. */
    assert_int_equal(rematd_store_delete_model(f->st, a.id), REMATD_STORE_OK);
    assert_int_equal(rematd_store_model_sha_used(f->st, sa), REMATD_STORE_OK);
    assert_int_equal(rematd_store_delete_model(f->st, b.id), REMATD_STORE_OK);
    assert_int_equal(rematd_store_model_sha_used(f->st, sa), REMATD_STORE_NOT_FOUND);

    /* Jobs: the tenant kept; blue's share of the queue is 2 of 3. */
    char id[4][REMATD_ID_LEN + 1];
    struct rematd_job_new j;
    struct rematd_idem existing;
    for (int i = 0; i < 3; i++) {
        new_job(&j, id[i], "profile", "cpu", NULL, NULL);
        j.tenant = "blue";
        assert_int_equal(rematd_store_create_job(f->st, &j, &existing),
                         i < 2 ? REMATD_STORE_OK : REMATD_STORE_FULL);
    }
    new_job(&j, id[2], "profile", "cpu", NULL, NULL);
    assert_int_equal(rematd_store_create_job(f->st, &j, &existing), REMATD_STORE_OK);
    new_job(&j, id[3], "profile", "cpu", NULL, NULL);
    j.tenant = "green";
    assert_int_equal(rematd_store_create_job(f->st, &j, &existing), REMATD_STORE_FULL);
    struct rematd_job job;
    assert_int_equal(rematd_store_get_job(f->st, id[0], &job), REMATD_STORE_OK);
    assert_string_equal(job.tenant, "blue");
    rematd_job_clear(&job);
    assert_int_equal(rematd_store_get_job(f->st, id[2], &job), REMATD_STORE_OK);
    assert_string_equal(job.tenant, "default");
    rematd_job_clear(&job);

    /* Plans: the tenant kept. */
    struct rematd_plan_write ws[2];
    plan_init(&ws[0], NULL, NULL, "{\"a\":1}");
    plan_init(&ws[1], NULL, NULL, "{\"b\":2}");
    ws[1].tenant = "blue";
    write_plans(f->st, ws, 2);
    struct rematd_stored_plan sp;
    assert_int_equal(rematd_store_get_plan(f->st, ws[0].id, &sp), REMATD_STORE_OK);
    assert_string_equal(sp.tenant, "default");
    rematd_stored_plan_clear(&sp);
    assert_int_equal(rematd_store_get_plan(f->st, ws[1].id, &sp), REMATD_STORE_OK);
    assert_string_equal(sp.tenant, "blue");
    rematd_stored_plan_clear(&sp);
    plan_free(&ws[0]);
    plan_free(&ws[1]);
}

/* A database at version 4 (before tenants): its models, jobs and plans
 * become the tenant "default"'s, and another tenant may then upload the
 * same bytes (sha256 was unique before). */
static void test_migrates_to_tenants(void **state)
{
    struct fixture *f = *state;
    const char *sha = "abab0000000000000000000000000000000000000000000000000000000000ab";
    char sql[4096];
    snprintf(sql, sizeof sql,
             "CREATE TABLE plans (id TEXT PRIMARY KEY, created_at TEXT NOT NULL,"
             " algorithm TEXT NOT NULL, options TEXT NOT NULL, profile_id TEXT,"
             " record BLOB NOT NULL) WITHOUT ROWID;"
             "CREATE TABLE jobs (id TEXT PRIMARY KEY, kind TEXT NOT NULL,"
             " status TEXT NOT NULL, device TEXT NOT NULL, spec TEXT NOT NULL,"
             " attempts INTEGER NOT NULL DEFAULT 0, expiries INTEGER NOT NULL DEFAULT 0,"
             " lease_id TEXT, lease_expires_at REAL, worker_id TEXT, progress TEXT,"
             " result TEXT, reason TEXT, last_error TEXT, created_at REAL NOT NULL,"
             " updated_at REAL NOT NULL, model_id TEXT, reuse_key TEXT);"
             "CREATE INDEX jobs_status ON jobs(status);"
             "CREATE TABLE idempotency (scope TEXT NOT NULL, key TEXT NOT NULL,"
             " body_hash TEXT NOT NULL, resource_id TEXT NOT NULL, body TEXT NOT NULL,"
             " created_at REAL NOT NULL, PRIMARY KEY (scope, key));"
             "CREATE TABLE models (id TEXT PRIMARY KEY, sha256 TEXT NOT NULL UNIQUE,"
             " bytes INTEGER NOT NULL, created_at REAL NOT NULL, meta TEXT NOT NULL)"
             " WITHOUT ROWID;"
             "INSERT INTO models VALUES ('%.32s', '%s', 10, 1.0, '{}');"
             "INSERT INTO jobs (id, kind, status, device, spec, created_at, updated_at)"
             " VALUES ('0123456789abcdef0123456789abcdef', 'profile', 'queued', 'cpu', '{}',"
             " 1.0, 1.0);"
             "INSERT INTO plans VALUES ('fedcba9876543210fedcba9876543210',"
             " '2026-01-01T00:00:00Z', 'sqrt', '{}', NULL, x'00');"
             "PRAGMA user_version = 4;",
             sha, sha);
    db_exec(f, sql);
    open_store(f);
    char id[REMATD_ID_LEN + 1];
    snprintf(id, sizeof id, "%.32s", sha);
    struct rematd_model m;
    assert_int_equal(rematd_store_get_model(f->st, id, &m), REMATD_STORE_OK);
    assert_string_equal(m.tenant, "default");
    rematd_model_clear(&m);
    struct rematd_job job;
    assert_int_equal(rematd_store_get_job(f->st, "0123456789abcdef0123456789abcdef", &job),
                     REMATD_STORE_OK);
    assert_string_equal(job.tenant, "default");
    rematd_job_clear(&job);
    struct rematd_stored_plan sp;
    assert_int_equal(rematd_store_get_plan(f->st, "fedcba9876543210fedcba9876543210", &sp),
                     REMATD_STORE_OK);
    assert_string_equal(sp.tenant, "default");
    rematd_stored_plan_clear(&sp);
    struct rematd_model b, got;
    model_init(&b, sha, 10);
    memcpy(b.id, "1111", 4);
    snprintf(b.tenant, sizeof b.tenant, "blue");
    assert_int_equal(rematd_store_add_model(f->st, &b, 1000, 1000, &got), REMATD_STORE_OK);
    rematd_store_close(f->st);
    f->st = NULL;
    assert_int_equal(db_int(f, "PRAGMA user_version"), 5);
}

/* With a TTL of 0 every record is past it at once: the key is free again,
 * although the purge has not removed the row. */
static void test_expired_key_gives_way(void **state)
{
    struct fixture *f = *state;
    open_store(f);
    char a[REMATD_ID_LEN + 1], b[REMATD_ID_LEN + 1];
    struct rematd_job_new ja, jb;
    struct rematd_idem existing;
    new_job(&ja, a, "profile", "cpu", "k", "{\"first\":1}");
    assert_int_equal(rematd_store_create_job(f->st, &ja, &existing), REMATD_STORE_OK);
    usleep(2000);
    struct rematd_idem rec;
    assert_int_equal(rematd_store_get_idempotency(f->st, "profiles_create", "k", &rec),
                     REMATD_STORE_NOT_FOUND);
    new_job(&jb, b, "profile", "cpu", "k", "{\"second\":1}");
    assert_int_equal(rematd_store_create_job(f->st, &jb, &existing), REMATD_STORE_OK);
    rematd_store_close(f->st);
    f->st = NULL;
    assert_int_equal(db_int(f, "SELECT count(*) FROM jobs"), 2);
    assert_int_equal(db_int(f, "SELECT count(*) FROM idempotency"), 1);
}

/* A short TTL: the writer's housekeeping purges expired records once a
 * TTL (not once a minute), and the count under --max-idempotency-keys goes
 * down by what it removed, so new keys fit again - exactly as many as the
 * bound allows, round after round. */
static void test_purge_frees_the_bound(void **state)
{
    struct fixture *f = *state;
    f->cfg.max_idempotency_keys = 2;
    open_store(f);
    char id[REMATD_ID_LEN + 1];
    struct rematd_job_new j;
    struct rematd_idem existing;
    /* Each round's two records share one created_at, so that no purge
     * can fall between them. */
    double t = rematd_now();
    const char *keys[] = {"k1", "k2", "k3", "k4", "k5", "k6", "k7"};
    for (int k = 0; k < 2; k++) {
        new_job(&j, id, "profile", "cpu", keys[k], "{}");
        j.created_at = t;
        assert_int_equal(rematd_store_create_job(f->st, &j, &existing), REMATD_STORE_OK);
    }
    for (int round = 0; round < 2; round++) {
        const char *next = keys[2 + 2 * round], *then = keys[3 + 2 * round];
        new_job(&j, id, "profile", "cpu", next, "{}");
        assert_int_equal(rematd_store_create_job(f->st, &j, &existing), REMATD_STORE_FULL);
        /* The purge runs in a quiet second once the records are a TTL
         * old: a TTL after they were made, not a minute. */
        double t0 = t;
        enum rematd_store_result r = REMATD_STORE_FULL;
        while (r == REMATD_STORE_FULL && rematd_now() - t0 < 10) {
            usleep(100 * 1000);
            new_job(&j, id, "profile", "cpu", next, "{}");
            t = j.created_at;
            r = rematd_store_create_job(f->st, &j, &existing);
        }
        assert_int_equal(r, REMATD_STORE_OK);
        assert_true(t - t0 >= 1.0);
        /* Both went: one more fits, and then the bound again. */
        new_job(&j, id, "profile", "cpu", then, "{}");
        j.created_at = t;
        assert_int_equal(rematd_store_create_job(f->st, &j, &existing), REMATD_STORE_OK);
    }
    new_job(&j, id, "profile", "cpu", keys[6], "{}");
    assert_int_equal(rematd_store_create_job(f->st, &j, &existing), REMATD_STORE_FULL);
    rematd_store_close(f->st);
    f->st = NULL;
    assert_int_equal(db_int(f, "SELECT count(*) FROM idempotency"), 2);
}

/* One tenant's job and key: scope "<tenant>/profiles_create". */
static void tenant_job(struct rematd_job_new *j, char id[REMATD_ID_LEN + 1], const char *tenant,
                       char scope[64], const char *key)
{
    new_job(j, id, "profile", "cpu", key, "{}");
    j->tenant = tenant;
    snprintf(scope, 64, "%s/profiles_create", tenant);
    j->idem_scope = scope;
}

/* --tenant-max-idempotency-keys: a tenant at its share is FULL, its job
 * rolled back with the key, while another tenant (and "default", whose
 * scopes have no '/') still records new keys.  The counts kept in memory
 * are right again after that rollback, and after a reopen, which counts
 * them from the table. */
static void test_tenant_idem_share(void **state)
{
    struct fixture *f = *state;
    f->cfg.max_idempotency_keys = 6;
    f->cfg.tenant_max_idempotency_keys = 2;
    open_store(f);
    char id[REMATD_ID_LEN + 1], scope[64];
    struct rematd_job_new j;
    struct rematd_idem existing;
    const char *keys[] = {"k1", "k2", "k3"};
    for (int i = 0; i < 3; i++) {
        tenant_job(&j, id, "blue", scope, keys[i]);
        assert_int_equal(rematd_store_create_job(f->st, &j, &existing),
                         i < 2 ? REMATD_STORE_OK : REMATD_STORE_FULL);
    }
    tenant_job(&j, id, "blue_x", scope, "k1");
    assert_int_equal(rematd_store_create_job(f->st, &j, &existing), REMATD_STORE_OK);
    for (int i = 0; i < 3; i++) {
        new_job(&j, id, "profile", "cpu", keys[i], "{}");
        assert_int_equal(rematd_store_create_job(f->st, &j, &existing),
                         i < 2 ? REMATD_STORE_OK : REMATD_STORE_FULL);
    }
    rematd_store_close(f->st);
    f->st = NULL;
    assert_int_equal(db_int(f, "SELECT count(*) FROM jobs WHERE tenant = 'blue'"), 2);
    assert_int_equal(db_int(f, "SELECT count(*) FROM idempotency"), 5);
    open_store(f);
    tenant_job(&j, id, "blue", scope, "k3");
    assert_int_equal(rematd_store_create_job(f->st, &j, &existing), REMATD_STORE_FULL);
    tenant_job(&j, id, "blue_x", scope, "k2");
    assert_int_equal(rematd_store_create_job(f->st, &j, &existing), REMATD_STORE_OK);
    tenant_job(&j, id, "green", scope, "k1");
    assert_int_equal(rematd_store_create_job(f->st, &j, &existing), REMATD_STORE_FULL);
    rematd_store_close(f->st);
    f->st = NULL;
    assert_int_equal(db_int(f, "SELECT count(*) FROM idempotency"), 6);
}

static int setup_ttl_1(void **state)
{
    return setup_ttl(state, 1);
}

static void test_leases(void **state)
{
    struct fixture *f = *state;
    open_store(f);
    char cpu[REMATD_ID_LEN + 1], gpu[REMATD_ID_LEN + 1], val[REMATD_ID_LEN + 1];
    struct rematd_job_new j;
    struct rematd_idem existing;
    new_job(&j, cpu, "profile", "cpu", NULL, NULL);
    assert_int_equal(rematd_store_create_job(f->st, &j, &existing), REMATD_STORE_OK);
    new_job(&j, gpu, "profile", "cuda", NULL, NULL);
    assert_int_equal(rematd_store_create_job(f->st, &j, &existing), REMATD_STORE_OK);
    new_job(&j, val, "validation", "cuda:1", NULL, NULL);
    assert_int_equal(rematd_store_create_job(f->st, &j, &existing), REMATD_STORE_OK);

    static const char *const profiles[] = {"profile", NULL};
    static const char *const validations[] = {"validation", NULL};
    static const char *const cuda0[] = {"cuda:0", NULL};
    static const char *const cuda1[] = {"cuda:1", NULL};
    struct rematd_lease l, l2;
    /* "cuda" is served by any cuda:N, "cuda:1" only by itself. */
    assert_int_equal(rematd_store_lease_job(f->st, "w0", validations, cuda0, &l),
                     REMATD_STORE_NOT_FOUND);
    assert_int_equal(rematd_store_lease_job(f->st, "w0", profiles, cuda0, &l), REMATD_STORE_OK);
    assert_string_equal(l.job_id, gpu);
    assert_string_equal(l.kind, "profile");
    assert_int_equal(l.attempt, 1);
    assert_string_equal(l.spec, "{\"model\":\"vgg11\"}");
    assert_true(l.lease_expires_at > rematd_now() + 25);
    assert_int_equal(rematd_store_lease_job(f->st, "w0", profiles, cuda0, &l2),
                     REMATD_STORE_NOT_FOUND);

    /* Under the lease: renew, then complete once. */
    double until = 0;
    assert_int_equal(rematd_store_renew_lease(f->st, gpu, l.lease_id, "{\"stage\":1}", &until),
                     REMATD_STORE_OK);
    assert_true(until >= l.lease_expires_at);
    assert_int_equal(rematd_store_renew_lease(f->st, gpu, cpu, NULL, &until),
                     REMATD_STORE_CONFLICT);
    assert_int_equal(rematd_store_renew_lease(f->st, "0123456789abcdef0123456789abcdef", l.lease_id,
                                              NULL, &until),
                     REMATD_STORE_NOT_FOUND);
    struct rematd_job job;
    assert_int_equal(rematd_store_get_job(f->st, gpu, &job), REMATD_STORE_OK);
    assert_int_equal(job.status, REMATD_JOB_RUNNING);
    assert_string_equal(job.progress, "{\"stage\":1}");
    rematd_job_clear(&job);
    assert_int_equal(rematd_store_complete_job(f->st, gpu, l.lease_id, "{\"r\":1}"),
                     REMATD_STORE_OK);
    assert_int_equal(rematd_store_complete_job(f->st, gpu, l.lease_id, "{\"r\":2}"),
                     REMATD_STORE_CONFLICT);
    assert_int_equal(rematd_store_get_job(f->st, gpu, &job), REMATD_STORE_OK);
    assert_int_equal(job.status, REMATD_JOB_DONE);
    assert_string_equal(job.result, "{\"r\":1}");
    assert_int_equal(job.attempts, 1);
    rematd_job_clear(&job);
    rematd_lease_clear(&l);

    /* The validation: released (not counted), failed retryably (counted,
     * queued again), then failed for good at the second attempt. */
    assert_int_equal(rematd_store_lease_job(f->st, "w1", validations, cuda1, &l), REMATD_STORE_OK);
    assert_string_equal(l.job_id, val);
    assert_int_equal(rematd_store_release_job(f->st, val, l.lease_id), REMATD_STORE_OK);
    assert_int_equal(rematd_store_release_job(f->st, val, l.lease_id), REMATD_STORE_CONFLICT);
    rematd_lease_clear(&l);
    assert_int_equal(rematd_store_lease_job(f->st, "w1", validations, cuda1, &l), REMATD_STORE_OK);
    assert_int_equal(l.attempt, 1);
    assert_int_equal(rematd_store_fail_job(f->st, val, l.lease_id, "flaky", 1), REMATD_STORE_OK);
    rematd_lease_clear(&l);
    assert_int_equal(rematd_store_get_job(f->st, val, &job), REMATD_STORE_OK);
    assert_int_equal(job.status, REMATD_JOB_QUEUED);
    assert_int_equal(job.attempts, 1);
    rematd_job_clear(&job);
    assert_int_equal(rematd_store_lease_job(f->st, "w1", validations, cuda1, &l), REMATD_STORE_OK);
    assert_int_equal(l.attempt, 2);
    assert_int_equal(rematd_store_fail_job(f->st, val, l.lease_id, "flaky again", 1),
                     REMATD_STORE_OK);
    rematd_lease_clear(&l);
    assert_int_equal(rematd_store_get_job(f->st, val, &job), REMATD_STORE_OK);
    assert_int_equal(job.status, REMATD_JOB_FAILED);
    assert_string_equal(job.reason, "flaky again");
    rematd_job_clear(&job);

    struct rematd_job_counts n;
    assert_int_equal(rematd_store_count_jobs(f->st, &n), REMATD_STORE_OK);
    assert_int_equal(n.queued, 1);
    assert_int_equal(n.running, 0);
    assert_int_equal(n.done, 1);
    assert_int_equal(n.failed, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_new_database, setup, teardown),
        cmocka_unit_test_setup_teardown(test_newer_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrates_old_records, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plans, setup, teardown),
        cmocka_unit_test_setup_teardown(test_jobs_and_keys, setup, teardown),
        cmocka_unit_test(test_job_status_names),
        cmocka_unit_test_setup_teardown(test_expired_key_gives_way, setup_no_ttl, teardown),
        cmocka_unit_test_setup_teardown(test_purge_frees_the_bound, setup_ttl_1, teardown),
        cmocka_unit_test_setup_teardown(test_tenant_idem_share, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leases, setup, teardown),
        cmocka_unit_test_setup_teardown(test_models, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tenants, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrates_to_tenants, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
