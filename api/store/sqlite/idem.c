/*
 * sqlite/idem.c - Idempotency-Key records: (scope, key) -> (SHA-256 of the
 * request body, the id of what the key created, the answer's body).
 *
 * A record is inserted in the transaction that stores the plan or job, so
 * a key is never recorded for something that was not stored, nor the other
 * way round.  Records live --idempotency-ttl seconds: reads ignore older
 * ones, and the writer thread deletes them once a minute.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite.h"

/* The live record of (scope, key) read on db: OK, NOT_FOUND or ERROR. */
static enum rematd_store_result lookup(struct rematd_sqlite *st, sqlite3 *db, const char *scope,
                                       const char *key, struct rematd_idem *out)
{
    memset(out, 0, sizeof *out);
    sqlite3_stmt *s = NULL;
    enum rematd_store_result found = REMATD_STORE_ERROR;
    if (sqlite3_prepare_v2(db,
                           "SELECT body_hash, resource_id, body FROM idempotency"
                           " WHERE scope = ? AND key = ? AND created_at >= ?",
                           -1, &s, NULL) == SQLITE_OK) {
        sqlite3_bind_text(s, 1, scope, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, key, -1, SQLITE_STATIC);
        sqlite3_bind_double(s, 3, rematd_now() - st->idem_ttl);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
            snprintf(out->body_hash, sizeof out->body_hash, "%s",
                     (const char *)sqlite3_column_text(s, 0));
            snprintf(out->resource_id, sizeof out->resource_id, "%s",
                     (const char *)sqlite3_column_text(s, 1));
            out->body = rematd__sql_col_dup(s, 2);
            found = out->body ? REMATD_STORE_OK : REMATD_STORE_ERROR;
        } else if (rc == SQLITE_DONE) {
            found = REMATD_STORE_NOT_FOUND;
        }
    }
    sqlite3_finalize(s);
    return found;
}

enum rematd_store_result rematd__sqlite_get_idempotency(struct rematd_store *base,
                                                        const char *scope, const char *key,
                                                        struct rematd_idem *out)
{
    struct rematd_sqlite *st = (struct rematd_sqlite *)base;
    pthread_mutex_lock(&st->rmu);
    enum rematd_store_result rc = lookup(st, st->r, scope, key, out);
    pthread_mutex_unlock(&st->rmu);
    return rc;
}

static int insert(struct rematd_sqlite *st, const char *scope, const char *key,
                  const char *body_hash, const char *resource_id, const char *body, double now)
{
    sqlite3_stmt *s = st->ins_idem;
    sqlite3_bind_text(s, 1, scope, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, body_hash, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, resource_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 5, body, -1, SQLITE_STATIC);
    sqlite3_bind_double(s, 6, now);
    return rematd__sql_step_reset(s);
}

/* The tenant a scope names: "<tenant>/<route>", or the route alone for
 * "default" (http/request.c).  Writes it into name (REMATD_TENANT_MAX + 1
 * bytes). */
static void scope_tenant(const char *scope, char *name)
{
    const char *slash = strchr(scope, '/');
    size_t n = slash ? (size_t)(slash - scope) : 0;
    if (n == 0 || n > REMATD_TENANT_MAX) {
        snprintf(name, REMATD_TENANT_MAX + 1, "%s", REMATD_TENANT_DEFAULT);
        return;
    }
    memcpy(name, scope, n);
    name[n] = '\0';
}

/* The count of tenant name, added with 0 when new: NULL when out of memory. */
static long *tenant_count(struct rematd_sqlite *st, const char *name)
{
    for (size_t i = 0; i < st->idem_ntenants; i++)
        if (strcmp(st->idem_tenants[i].name, name) == 0)
            return &st->idem_tenants[i].n;
    if (st->idem_ntenants == st->idem_tenants_cap) {
        size_t cap = st->idem_tenants_cap ? 2 * st->idem_tenants_cap : 8;
        struct rematd_idem_tenant *t = realloc(st->idem_tenants, cap * sizeof *t);
        if (!t)
            return NULL;
        st->idem_tenants = t;
        st->idem_tenants_cap = cap;
    }
    struct rematd_idem_tenant *t = &st->idem_tenants[st->idem_ntenants++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n = 0;
    return &t->n;
}

int rematd__idem_recount(struct rematd_sqlite *st)
{
    st->idem_stale = 1;
    st->idem_ntenants = 0;
    sqlite3_stmt *s = NULL;
    /* One pass over the table: the tenant is the scope's part before its
     * '/', none for "default". */
    if (sqlite3_prepare_v2(st->w,
                           "SELECT substr(scope, 1, instr(scope, '/') - 1) AS t, count(*)"
                           " FROM idempotency GROUP BY t",
                           -1, &s, NULL) != SQLITE_OK)
        return -1;
    long total = 0;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(s, 0);
        long n = (long)sqlite3_column_int64(s, 1);
        total += n;
        if (st->tenant_max_idem >= st->max_idem)
            continue;
        char name[REMATD_TENANT_MAX + 1];
        snprintf(name, sizeof name, "%s", t && *t ? t : REMATD_TENANT_DEFAULT);
        long *c = tenant_count(st, name);
        if (!c)
            break;
        *c += n;
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE)
        return -1;
    st->idem_count = total;
    st->idem_stale = 0;
    return 0;
}

enum rematd_store_result rematd__idem_insert(struct rematd_sqlite *st, const char *scope,
                                             const char *key, const char *body_hash,
                                             const char *resource_id, const char *body, double now,
                                             struct rematd_idem *existing)
{
    /* The bound on records, counted in memory (a count(*) per plan would
     * cost the hot path); a key past its TTL that gives way below does not
     * add one, but is refused here all the same when the bound is reached. */
    if (st->idem_count >= st->max_idem)
        return REMATD_STORE_FULL;
    /* The tenant's share, only when it is less than the whole: with one
     * tenant the bound above is all there is. */
    long *mine = NULL;
    if (st->tenant_max_idem < st->max_idem) {
        if (st->idem_stale && rematd__idem_recount(st) < 0)
            return REMATD_STORE_ERROR;
        char name[REMATD_TENANT_MAX + 1];
        scope_tenant(scope, name);
        mine = tenant_count(st, name);
        if (!mine)
            return REMATD_STORE_ERROR;
        if (*mine >= st->tenant_max_idem)
            return REMATD_STORE_FULL;
    }
    int rc = insert(st, scope, key, body_hash, resource_id, body, now);
    if (rc == SQLITE_DONE) {
        st->idem_count++;
        if (mine)
            (*mine)++;
        st->written += (long long)(strlen(body) + strlen(key) + 200);
        return REMATD_STORE_OK;
    }
    if (rc != SQLITE_CONSTRAINT)
        return REMATD_STORE_ERROR;
    /* Taken: by a live record (checked again here, on the writer
     * connection inside the transaction, since two requests with one key
     * can both have found none on the read side) or by one past its TTL,
     * which gives way. */
    enum rematd_store_result got = lookup(st, st->w, scope, key, existing);
    if (got != REMATD_STORE_NOT_FOUND)
        return got == REMATD_STORE_OK ? REMATD_STORE_CONFLICT : REMATD_STORE_ERROR;
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(st->w, "DELETE FROM idempotency WHERE scope = ? AND key = ?", -1, &s,
                           NULL) != SQLITE_OK)
        return REMATD_STORE_ERROR;
    sqlite3_bind_text(s, 1, scope, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, key, -1, SQLITE_STATIC);
    rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE)
        return REMATD_STORE_ERROR;
    return insert(st, scope, key, body_hash, resource_id, body, now) == SQLITE_DONE
               ? REMATD_STORE_OK
               : REMATD_STORE_ERROR;
}

void rematd__idem_purge(struct rematd_sqlite *st, double now)
{
    if (!rematd__idem_purge_due(now, st->last_purge, st->idem_ttl))
        return;
    st->last_purge = now;
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(st->w, "DELETE FROM idempotency WHERE created_at < ?", -1, &s, NULL) ==
        SQLITE_OK) {
        sqlite3_bind_double(s, 1, now - st->idem_ttl);
        if (sqlite3_step(s) == SQLITE_DONE)
            st->idem_count -= sqlite3_changes(st->w);
        if (st->idem_count < 0)
            st->idem_count = 0;
    }
    sqlite3_finalize(s);
    /* The tenants' counts are not kept per row deleted: one GROUP BY puts
     * them (and the whole) right, once a minute at most. */
    if (st->tenant_max_idem < st->max_idem)
        rematd__idem_recount(st);
}
