/*
 * store.c - the store's one interface (store.h) over its backends
 * (store_backend.h): which backend a --store names, and every call passed
 * on to it.  What a call fills is freed by values.c, whichever backend
 * filled it.
 *
 * --store sqlite:DIR (or a bare directory, --data-dir's value and the
 * default) is the embedded SQLite store (sqlite/sqlite.c); --store
 * postgresql://... (or postgres://..., or postgresql: followed by libpq's
 * key=value words) the PostgreSQL one (pg/pg.c), when configure found
 * libpq.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_backend.h"

/* The PostgreSQL connection string of spec, or NULL when spec names no
 * PostgreSQL store. */
static const char *pg_conninfo(const char *spec)
{
    if (strncmp(spec, "postgresql://", 13) == 0 || strncmp(spec, "postgres://", 11) == 0)
        return spec;
    if (strncmp(spec, "postgresql:", 11) == 0)
        return spec + 11;
    return NULL;
}

int rematd_store_is_shared(const char *spec)
{
    return pg_conninfo(spec) != NULL;
}

struct rematd_store *rematd_store_open(const char *spec, const struct rematd_config *cfg,
                                       char *errbuf, size_t errlen)
{
    const char *conninfo = pg_conninfo(spec);
    if (conninfo) {
#ifdef HAVE_LIBPQ
        return rematd__pg_open(conninfo, cfg, errbuf, errlen);
#else
        snprintf(errbuf, errlen,
                 "--store %.11s...: this rematd was built without PostgreSQL support (configure"
                 " found no libpq; install libpq-dev and configure again), so it can only use"
                 " --store sqlite:DIR",
                 spec);
        return NULL;
#endif
    }
    if (strncmp(spec, "sqlite:", 7) == 0)
        spec += 7;
    if (!spec[0]) {
        snprintf(errbuf, errlen, "--store sqlite: names no directory");
        return NULL;
    }
    return rematd__sqlite_open(spec, cfg, errbuf, errlen);
}

const char *rematd_store_backend(struct rematd_store *st)
{
    return st->ops->name;
}

void rematd_store_close(struct rematd_store *st)
{
    if (st)
        st->ops->close(st);
}

enum rematd_store_result rematd_store_ready(struct rematd_store *st)
{
    return st->ops->ready(st);
}

enum rematd_store_result rematd_store_get_idempotency(struct rematd_store *st, const char *scope,
                                                      const char *key, struct rematd_idem *out)
{
    return st->ops->get_idempotency(st, scope, key, out);
}

void rematd_store_enqueue_plan(struct rematd_store *st, struct rematd_plan_write *w)
{
    rematd__group_enqueue(st->group, w);
}

void rematd_store_commit_stats(struct rematd_store *st, unsigned long *commits,
                               unsigned long *plans)
{
    *commits = atomic_load(&st->group->commits);
    *plans = atomic_load(&st->group->committed_plans);
}

enum rematd_store_result rematd_store_get_plan(struct rematd_store *st, const char *id,
                                               struct rematd_stored_plan *out)
{
    return st->ops->get_plan(st, id, out);
}

enum rematd_store_result rematd_store_create_job(struct rematd_store *st,
                                                 const struct rematd_job_new *job,
                                                 struct rematd_idem *existing)
{
    return st->ops->create_job(st, job, existing);
}

enum rematd_store_result rematd_store_find_reusable(struct rematd_store *st, const char *kind,
                                                    const char *reuse_key, struct rematd_job *out)
{
    memset(out, 0, sizeof *out);
    char ids[1][REMATD_ID_LEN + 1];
    size_t n = 0;
    enum rematd_store_result res = st->ops->done_ids(st, kind, reuse_key, 1, ids, &n);
    if (res != REMATD_STORE_OK)
        return res;
    /* A done job never changes again: reading it apart is safe. */
    return n == 0 ? REMATD_STORE_NOT_FOUND : st->ops->get_job(st, ids[0], out);
}

enum rematd_store_result rematd_store_list_done(struct rematd_store *st, const char *kind,
                                                const char *key, size_t max,
                                                struct rematd_job **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (max == 0)
        return REMATD_STORE_OK;
    char(*ids)[REMATD_ID_LEN + 1] = calloc(max, sizeof *ids);
    if (ids == NULL)
        return REMATD_STORE_ERROR;
    size_t got = 0;
    enum rematd_store_result res = st->ops->done_ids(st, kind, key, max, ids, &got);
    /* Done jobs never change again: reading them one by one is safe. */
    struct rematd_job *jobs = res == REMATD_STORE_OK && got > 0 ? calloc(got, sizeof *jobs) : NULL;
    if (got > 0 && jobs == NULL)
        res = REMATD_STORE_ERROR;
    for (size_t k = 0; res == REMATD_STORE_OK && k < got; k++)
        if (st->ops->get_job(st, ids[k], &jobs[k]) != REMATD_STORE_OK)
            res = REMATD_STORE_ERROR;
    free(ids);
    if (res != REMATD_STORE_OK) {
        for (size_t i = 0; jobs != NULL && i < got; i++)
            rematd_job_clear(&jobs[i]);
        free(jobs);
        return REMATD_STORE_ERROR;
    }
    *out = jobs;
    *n = got;
    return REMATD_STORE_OK;
}

enum rematd_store_result rematd_store_get_job(struct rematd_store *st, const char *id,
                                              struct rematd_job *out)
{
    return st->ops->get_job(st, id, out);
}

enum rematd_store_result rematd_store_count_jobs(struct rematd_store *st,
                                                 struct rematd_job_counts *out)
{
    return st->ops->count_jobs(st, out);
}

enum rematd_store_result rematd_store_lease_job(struct rematd_store *st, const char *worker_id,
                                                const char *const *kinds,
                                                const char *const *devices,
                                                struct rematd_lease *out)
{
    return st->ops->lease_job(st, worker_id, kinds, devices, out);
}

enum rematd_store_result rematd_store_renew_lease(struct rematd_store *st, const char *id,
                                                  const char *lease_id, const char *progress,
                                                  double *lease_expires_at)
{
    return st->ops->renew_lease(st, id, lease_id, progress, lease_expires_at);
}

enum rematd_store_result rematd_store_complete_job(struct rematd_store *st, const char *id,
                                                   const char *lease_id, const char *result)
{
    return st->ops->complete_job(st, id, lease_id, result);
}

enum rematd_store_result rematd_store_fail_job(struct rematd_store *st, const char *id,
                                               const char *lease_id, const char *reason,
                                               int retryable)
{
    return st->ops->fail_job(st, id, lease_id, reason, retryable);
}

enum rematd_store_result rematd_store_advance_job(struct rematd_store *st, const char *id,
                                                  enum rematd_job_status status, const char *spec,
                                                  const char *result, const char *reason)
{
    return st->ops->advance_job(st, id, status, spec, result, reason);
}

enum rematd_store_result rematd_store_release_job(struct rematd_store *st, const char *id,
                                                  const char *lease_id)
{
    return st->ops->release_job(st, id, lease_id);
}

enum rematd_store_result rematd_store_add_model(struct rematd_store *st,
                                                const struct rematd_model *m,
                                                unsigned long long quota_bytes,
                                                unsigned long long tenant_quota_bytes,
                                                struct rematd_model *existing)
{
    return st->ops->add_model(st, m, quota_bytes, tenant_quota_bytes, existing);
}

enum rematd_store_result rematd_store_get_model(struct rematd_store *st, const char *id,
                                                struct rematd_model *out)
{
    return st->ops->get_model(st, id, out);
}

enum rematd_store_result rematd_store_list_models(struct rematd_store *st, const char *tenant,
                                                  size_t max, struct rematd_model **out, size_t *n)
{
    return st->ops->list_models(st, tenant, max, out, n);
}

enum rematd_store_result rematd_store_delete_model(struct rematd_store *st, const char *id)
{
    return st->ops->delete_model(st, id);
}

enum rematd_store_result rematd_store_models_bytes(struct rematd_store *st, const char *tenant,
                                                   unsigned long long *total)
{
    return st->ops->models_bytes(st, tenant, total);
}

enum rematd_store_result rematd_store_model_sha_used(struct rematd_store *st, const char *sha256)
{
    return st->ops->model_sha_used(st, sha256);
}

enum rematd_store_result rematd_store_model_file(struct rematd_store *st,
                                                 const struct rematd_model *m, const char *path)
{
    return st->ops->model_file ? st->ops->model_file(st, m, path) : REMATD_STORE_OK;
}
