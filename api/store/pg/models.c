/*
 * pg/models.c - uploaded models on PostgreSQL: the record, and the
 * archive itself in the database.
 *
 * Where the archive lives: in the database (model_chunks, 1 MiB rows),
 * added in the transaction that adds the record.  A model uploaded to one
 * replica is then readable from every other with nothing more to operate:
 * no shared volume (a ReadWriteMany volume is what the PostgreSQL store is
 * there to avoid) and no object store with its own credentials, backups
 * and consistency between an object and its row.  Archives are bounded by
 * --max-models-bytes (a few GB at most), which PostgreSQL holds well; one
 * backup of the database is a backup of everything.  Each replica keeps a
 * copy of an archive it served as the file models/<sha256> under its own
 * data directory (the route sends files): the upload's replica has it
 * from the upload, the others fetch it once, chunk by chunk, checked
 * against its SHA-256 before it is renamed into place.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rematx/sha256.h"
#include "pg.h"

#define CHUNK_BYTES (1 << 20)
#define BYTEA_OID 17
#define TEXT_OID 25
#define INT4_OID 23

#define COLS "id, sha256, bytes, created_at, meta, tenant"

static int read_row(PGresult *res, int i, struct rematd_model *m)
{
    memset(m, 0, sizeof *m);
    snprintf(m->id, sizeof m->id, "%s", PQgetvalue(res, i, 0));
    snprintf(m->sha256, sizeof m->sha256, "%s", PQgetvalue(res, i, 1));
    m->bytes = atoll(PQgetvalue(res, i, 2));
    m->created_at = strtod(PQgetvalue(res, i, 3), NULL);
    m->meta = strdup(PQgetvalue(res, i, 4));
    snprintf(m->tenant, sizeof m->tenant, "%s", PQgetvalue(res, i, 5));
    return m->meta ? 0 : -1;
}

static enum rematd_store_result get_on(PGconn *c, const char *id, const char *lock,
                                       struct rematd_model *out)
{
    memset(out, 0, sizeof *out);
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT " COLS " FROM models WHERE id = $1%s", lock);
    const char *v[] = {id};
    PGresult *res = rematd__pg_exec(c, "read model", sql, 1, v, NULL);
    enum rematd_store_result ret = REMATD_STORE_ERROR;
    if (res && PQntuples(res) == 0)
        ret = REMATD_STORE_NOT_FOUND;
    else if (res)
        ret = read_row(res, 0, out) == 0 ? REMATD_STORE_OK : REMATD_STORE_ERROR;
    PQclear(res);
    if (ret != REMATD_STORE_OK)
        rematd_model_clear(out);
    return ret;
}

enum rematd_store_result rematd__pg_get_model(struct rematd_store *base, const char *id,
                                              struct rematd_model *out)
{
    struct rematd_pg *st = (struct rematd_pg *)base;
    PGconn *c = rematd__pg_get(st);
    enum rematd_store_result ret = get_on(c, id, "", out);
    rematd__pg_put(st, c);
    return ret;
}

/* Copies the archive at path into model_chunks for id, in c's open
 * transaction.  0, or -1 (logged). */
static int insert_chunks(PGconn *c, const char *id, const char *path, long long bytes)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rematd_log("error", "store write failed",
                   json_pack("{s:s, s:s, s:s}", "op", "INSERT model", "path", path, "error",
                             strerror(errno)));
        return -1;
    }
    unsigned char *buf = malloc(CHUNK_BYTES);
    int rc = buf ? 0 : -1;
    long long done = 0;
    for (int seq = 0; rc == 0 && done < bytes; seq++) {
        size_t want = bytes - done < CHUNK_BYTES ? (size_t)(bytes - done) : CHUNK_BYTES;
        size_t got = 0;
        while (got < want) {
            ssize_t n = read(fd, buf + got, want - got);
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        if (got != want) {
            rematd_log("error", "store write failed",
                       json_pack("{s:s, s:s, s:s}", "op", "INSERT model", "path", path, "error",
                                 "the archive is shorter than its record"));
            rc = -1;
            break;
        }
        char s[16];
        snprintf(s, sizeof s, "%d", seq);
        const char *v[] = {id, s, (const char *)buf};
        int lens[] = {0, 0, (int)got}, fmts[] = {0, 0, 1};
        Oid types[] = {TEXT_OID, INT4_OID, BYTEA_OID};
        PGresult *res =
            PQexecParams(c, "INSERT INTO model_chunks (model_id, seq, data) VALUES ($1, $2, $3)", 3,
                         types, v, lens, fmts, 0);
        if (!res || PQresultStatus(res) != PGRES_COMMAND_OK) {
            rematd_log("error", "store write failed",
                       json_pack("{s:s, s:s}", "op", "INSERT model", "error",
                                 res ? PQresultErrorMessage(res) : PQerrorMessage(c)));
            rc = -1;
        }
        PQclear(res);
        done += (long long)got;
    }
    free(buf);
    close(fd);
    return rc;
}

enum rematd_store_result rematd__pg_add_model(struct rematd_store *base,
                                              const struct rematd_model *m,
                                              unsigned long long quota_bytes,
                                              unsigned long long tenant_quota_bytes,
                                              struct rematd_model *existing)
{
    const char *tenant = m->tenant[0] ? m->tenant : REMATD_TENANT_DEFAULT;
    struct rematd_pg *st = (struct rematd_pg *)base;
    memset(existing, 0, sizeof *existing);
    PGconn *c = rematd__pg_get(st);
    /* The quota is counted under a lock every replica's upload takes. */
    if (rematd__pg_begin_locked(c, "INSERT model", REMATD_PG_LOCK_MODELS) < 0)
        return rematd__pg_end_write(st, c, REMATD_STORE_ERROR);
    enum rematd_store_result ret = get_on(c, m->id, "", existing);
    if (ret != REMATD_STORE_NOT_FOUND)
        return rematd__pg_end_write(st, c, ret == REMATD_STORE_OK ? REMATD_STORE_CONFLICT : ret);
    const char *tv[] = {tenant};
    PGresult *res = rematd__pg_exec(c, "INSERT model",
                                    "SELECT coalesce(sum(bytes), 0),"
                                    " coalesce(sum(bytes) FILTER (WHERE tenant = $1), 0)"
                                    " FROM models",
                                    1, tv, NULL);
    if (!res)
        return rematd__pg_end_write(st, c, REMATD_STORE_ERROR);
    unsigned long long used = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
    unsigned long long mine = strtoull(PQgetvalue(res, 0, 1), NULL, 10);
    PQclear(res);
    unsigned long long b = (unsigned long long)m->bytes;
    if (b > quota_bytes || used > quota_bytes - b || b > tenant_quota_bytes ||
        mine > tenant_quota_bytes - b)
        return rematd__pg_end_write(st, c, REMATD_STORE_FULL);
    char bytes[32], t[64], path[1200];
    snprintf(bytes, sizeof bytes, "%lld", m->bytes);
    snprintf(t, sizeof t, "%.17g", m->created_at);
    snprintf(path, sizeof path, "%s/%s", st->models_dir, m->sha256);
    const char *v[] = {m->id, m->sha256, bytes, t, m->meta ? m->meta : "{}", tenant};
    if (rematd__pg_cmd(c, "INSERT model",
                       "INSERT INTO models (" COLS ") VALUES ($1, $2, $3, $4, $5, $6)", 6, v,
                       NULL) < 0 ||
        insert_chunks(c, m->id, path, m->bytes) < 0)
        return rematd__pg_end_write(st, c, REMATD_STORE_ERROR);
    return rematd__pg_end_write(st, c, REMATD_STORE_OK);
}

enum rematd_store_result rematd__pg_list_models(struct rematd_store *base, const char *tenant,
                                                size_t max, struct rematd_model **out, size_t *n)
{
    struct rematd_pg *st = (struct rematd_pg *)base;
    *out = NULL;
    *n = 0;
    char lim[32];
    snprintf(lim, sizeof lim, "%zu", max);
    const char *v[] = {lim, tenant ? tenant : REMATD_TENANT_DEFAULT};
    PGconn *c = rematd__pg_get(st);
    PGresult *res = rematd__pg_exec(c, "list models",
                                    "SELECT " COLS " FROM models WHERE tenant = $2"
                                    " ORDER BY created_at, id LIMIT $1",
                                    2, v, NULL);
    rematd__pg_put(st, c);
    if (!res)
        return REMATD_STORE_ERROR;
    size_t rows = (size_t)PQntuples(res);
    struct rematd_model *list = rows ? calloc(rows, sizeof *list) : NULL;
    if (rows && !list) {
        PQclear(res);
        return REMATD_STORE_ERROR;
    }
    for (size_t i = 0; i < rows; i++) {
        if (read_row(res, (int)i, &list[i]) < 0) {
            rematd_models_free(list, i + 1);
            PQclear(res);
            return REMATD_STORE_ERROR;
        }
    }
    PQclear(res);
    *out = list;
    *n = rows;
    return REMATD_STORE_OK;
}

enum rematd_store_result rematd__pg_lock_model(PGconn *c, const char *what, const char *id,
                                               int for_update)
{
    const char *v[] = {id};
    PGresult *res = rematd__pg_exec(c, what,
                                    for_update ? "SELECT 1 FROM models WHERE id = $1 FOR UPDATE"
                                               : "SELECT 1 FROM models WHERE id = $1 FOR SHARE",
                                    1, v, NULL);
    if (!res)
        return REMATD_STORE_ERROR;
    int have = PQntuples(res) > 0;
    PQclear(res);
    return have ? REMATD_STORE_OK : REMATD_STORE_NOT_FOUND;
}

enum rematd_store_result rematd__pg_delete_model(struct rematd_store *base, const char *id)
{
    struct rematd_pg *st = (struct rematd_pg *)base;
    PGconn *c = rematd__pg_get(st);
    if (rematd__pg_cmd(c, "BEGIN", "BEGIN", 0, NULL, NULL) < 0)
        return rematd__pg_end_write(st, c, REMATD_STORE_ERROR);
    const char *v[] = {id};
    /* FOR UPDATE: a job naming the model takes FOR SHARE on this row in
     * its transaction (pg/jobs.c): the count below sees it. */
    enum rematd_store_result locked = rematd__pg_lock_model(c, "DELETE model", id, 1);
    if (locked != REMATD_STORE_OK)
        return rematd__pg_end_write(st, c, locked);
    PGresult *res = rematd__pg_exec(c, "DELETE model",
                                    "SELECT count(*) FROM jobs WHERE model_id = $1"
                                    " AND status IN ('queued', 'running')",
                                    1, v, NULL);
    if (!res)
        return rematd__pg_end_write(st, c, REMATD_STORE_ERROR);
    long users = atol(PQgetvalue(res, 0, 0));
    PQclear(res);
    if (users > 0)
        return rematd__pg_end_write(st, c, REMATD_STORE_CONFLICT);
    if (rematd__pg_cmd(c, "DELETE model", "DELETE FROM models WHERE id = $1", 1, v, NULL) < 0)
        return rematd__pg_end_write(st, c, REMATD_STORE_ERROR);
    return rematd__pg_end_write(st, c, REMATD_STORE_OK);
}

enum rematd_store_result rematd__pg_models_bytes(struct rematd_store *base, const char *tenant,
                                                 unsigned long long *total)
{
    struct rematd_pg *st = (struct rematd_pg *)base;
    *total = 0;
    PGconn *c = rematd__pg_get(st);
    const char *v[] = {tenant};
    PGresult *res = rematd__pg_exec(c, "models bytes",
                                    "SELECT coalesce(sum(bytes), 0) FROM models"
                                    " WHERE $1::text IS NULL OR tenant = $1",
                                    1, v, NULL);
    rematd__pg_put(st, c);
    if (!res)
        return REMATD_STORE_ERROR;
    *total = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return REMATD_STORE_OK;
}

enum rematd_store_result rematd__pg_model_sha_used(struct rematd_store *base, const char *sha256)
{
    struct rematd_pg *st = (struct rematd_pg *)base;
    PGconn *c = rematd__pg_get(st);
    const char *v[] = {sha256};
    PGresult *res = rematd__pg_exec(c, "model sha256 used",
                                    "SELECT 1 FROM models WHERE sha256 = $1 LIMIT 1", 1, v, NULL);
    rematd__pg_put(st, c);
    if (!res)
        return REMATD_STORE_ERROR;
    int have = PQntuples(res) > 0;
    PQclear(res);
    return have ? REMATD_STORE_OK : REMATD_STORE_NOT_FOUND;
}

/* Writes the archive of m from the database into tmp (open on fd),
 * hashing it.  0, or -1. */
static int fetch_into(PGconn *c, const struct rematd_model *m, int fd, char digest[65])
{
    struct rematx_sha256 sha;
    rematx_sha256_init(&sha);
    long long done = 0;
    for (int seq = 0; done < m->bytes; seq++) {
        char s[16];
        snprintf(s, sizeof s, "%d", seq);
        const char *v[] = {m->id, s};
        PGresult *res =
            PQexecParams(c, "SELECT data FROM model_chunks WHERE model_id = $1 AND seq = $2", 2,
                         NULL, v, NULL, NULL, 1);
        if (!res || PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
            PQclear(res);
            return -1;
        }
        const char *data = PQgetvalue(res, 0, 0);
        size_t len = (size_t)PQgetlength(res, 0, 0);
        rematx_sha256_update(&sha, data, len);
        size_t off = 0;
        while (off < len) {
            ssize_t n = write(fd, data + off, len - off);
            if (n <= 0) {
                PQclear(res);
                return -1;
            }
            off += (size_t)n;
        }
        PQclear(res);
        done += (long long)len;
        if (len == 0)
            return -1;
    }
    rematx_sha256_final_hex(&sha, digest);
    return done == m->bytes && fsync(fd) == 0 ? 0 : -1;
}

enum rematd_store_result rematd__pg_model_file(struct rematd_store *base,
                                               const struct rematd_model *m, const char *path)
{
    struct rematd_pg *st = (struct rematd_pg *)base;
    struct stat sb;
    if (stat(path, &sb) == 0 && sb.st_size == m->bytes)
        return REMATD_STORE_OK;
    char tmp[1300];
    snprintf(tmp, sizeof tmp, "%s/tmp/fetch.XXXXXX", st->models_dir);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return REMATD_STORE_ERROR;
    PGconn *c = rematd__pg_get(st);
    char digest[65] = "";
    int rc = fetch_into(c, m, fd, digest);
    rematd__pg_put(st, c);
    close(fd);
    if (rc == 0 && strcmp(digest, m->sha256) != 0) {
        rematd_log("error", "model archive damaged",
                   json_pack("{s:s, s:s, s:s}", "id", m->id, "sha256", m->sha256, "read", digest));
        rc = -1;
    }
    if (rc == 0 && rename(tmp, path) == 0) {
        rematd_log("info", "model fetched from the store",
                   json_pack("{s:s, s:I}", "id", m->id, "bytes", (json_int_t)m->bytes));
        return REMATD_STORE_OK;
    }
    unlink(tmp);
    return REMATD_STORE_ERROR;
}
