/*
 * POST /v1/models: upload a TorchScript archive (docs/models.md).
 *
 * The body, raw (application/octet-stream) or the file field of a
 * multipart/form-data form (curl -F), is streamed to a temporary file under
 * <data-dir>/models/tmp while its SHA-256 is computed, so rematd never holds
 * more of it than one network read.  At the end the file is synced, checked
 * (api/zipcheck.c: a TorchScript layout, no traversal, no bomb) and renamed
 * to models/<sha256>; then its record is added.  The id is the digest's
 * first 32 hex digits: the same bytes again answer 200 with the model they
 * already are, new bytes 201 + Location.  Limits: --max-model-bytes (413,
 * from Content-Length before anything is read, else once passed) and
 * --max-models-bytes for all models together (507), uploads in flight
 * counted: an upload reserves its Content-Length at the start, or, sent
 * without one, its bytes a mebibyte at a time as they arrive, so that two
 * uploads that each fit but not together do not both go through.  Time:
 * no whole-request deadline, only --upload-idle-timeout between two reads
 * (http/request.c): a large model on a slow link goes through.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "models_common.h"
#include "rematx/sha256.h"
#include "torchpickle.h"
#include "zipcheck.h"

struct upload {
    struct rematd_server *srv;
    unsigned long long reserved; /* of in_flight, given back at the end */
    int fd;
    char tmp[1200];
    struct rematx_sha256 sha;
    unsigned long long bytes;
    int write_errno;              /* the first failed write's errno, or 0 */
    struct MHD_PostProcessor *pp; /* multipart/form-data, or NULL */
    char field[64];               /* the form's file field, once seen */
    int field_done;               /* a later field began: the file is whole */
    /* A refusal made before the body arrived, answered once it has been
     * read and dropped: answering while a client is still sending makes it
     * see a broken pipe rather than the problem. */
    int over; /* past --max-models-bytes while arriving: hashed, not written */
    int refused_status;
    const char *refused_slug;
    char refused_detail[320];
};

/* Bytes reserved by the uploads in flight on this rematd: their archives
 * are on their way to the data directory and count against
 * --max-models-bytes as the stored ones do.  One counter for the process
 * (its uploads share the quota); replicas on PostgreSQL each count their
 * own, and the store's check at the end stays exact. */
static atomic_ullong in_flight;

/* Reserves for u up to want bytes in all: 0, or -1 when the models stored
 * and the uploads in flight leave no room (nothing reserved then). */
static int reserve(struct upload *u, unsigned long long want, unsigned long long *used_out)
{
    if (want <= u->reserved)
        return 0;
    unsigned long long add = want - u->reserved, used = 0;
    if (rematd_store_models_bytes(u->srv->store, NULL, &used) != REMATD_STORE_OK)
        used = 0; /* the store's own check at the end still holds */
    unsigned long long others = atomic_fetch_add(&in_flight, add);
    unsigned long long max = u->srv->cfg.max_models_bytes;
    *used_out = used + others - u->reserved;
    if (used > max || others + add > max - used) {
        atomic_fetch_sub(&in_flight, add);
        return -1;
    }
    u->reserved += add;
    return 0;
}

static void unreserve(struct upload *u)
{
    atomic_fetch_sub(&in_flight, u->reserved);
    u->reserved = 0;
}

static void refuse(struct rematd_request *r, struct upload *u, int status, const char *slug,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void refuse(struct rematd_request *r, struct upload *u, int status, const char *slug,
                   const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(u->refused_detail, sizeof u->refused_detail, fmt, ap);
    va_end(ap);
    /* A client waiting for 100 Continue has not sent the body: answer now. */
    const char *expect = rematd_req_header_in(r, "Expect");
    if (expect && strcasecmp(expect, "100-continue") == 0) {
        if (status == 503)
            rematd_req_header(r, "Retry-After", "30");
        rematd_req_problem(r, status, slug, NULL, "%s", u->refused_detail);
        return;
    }
    u->refused_status = status;
    u->refused_slug = slug;
}

static void upload_free(void *p)
{
    struct upload *u = p;
    unreserve(u);
    if (u->pp)
        MHD_destroy_post_processor(u->pp);
    if (u->fd >= 0)
        close(u->fd);
    if (u->tmp[0])
        unlink(u->tmp); /* still there: the upload did not make it */
    free(u);
}

static size_t limit_of(const struct rematd_config *cfg)
{
    return cfg->max_model_bytes;
}

/* Reservations of a body sent without a length grow by this much. */
#define RESERVE_STEP (1ULL << 20)

static void put(struct upload *u, const char *data, size_t n)
{
    if (u->write_errno || u->refused_status)
        return;
    unsigned long long used;
    /* A step at a time, or, when a step does not fit, what has come. */
    if (!u->over && u->bytes + n > u->reserved &&
        reserve(u, (u->bytes + n + RESERVE_STEP - 1) / RESERVE_STEP * RESERVE_STEP, &used) < 0 &&
        reserve(u, u->bytes + n, &used) < 0) {
        /* No room: nothing more is written, but the rest is still hashed,
         * since bytes already stored are answered as the model they are
         * (200) whatever the quota; anything else is 507 at the end. */
        u->over = 1;
        snprintf(u->refused_detail, sizeof u->refused_detail,
                 "models stored and uploads in flight take %llu of the %zu bytes allowed "
                 "(--max-models-bytes); this upload had %llu bytes and more to come",
                 used, u->srv->cfg.max_models_bytes, u->bytes + n);
    }
    if (u->over) {
        rematx_sha256_update(&u->sha, data, n);
        u->bytes += n;
        return;
    }
    rematx_sha256_update(&u->sha, data, n);
    while (n) {
        ssize_t w = write(u->fd, data, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            u->write_errno = w < 0 ? errno : EIO;
            return;
        }
        data += w;
        n -= (size_t)w;
        u->bytes += (unsigned long long)w;
    }
}

/* The form's first field with a file name (or named "file") is the archive;
 * every other field is ignored. */
static enum MHD_Result form_part(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *filename, const char *content_type,
                                 const char *transfer_encoding, const char *data, uint64_t off,
                                 size_t size)
{
    struct upload *u = cls;
    (void)kind;
    (void)content_type;
    (void)transfer_encoding;
    if (!key)
        return MHD_YES;
    if (!u->field[0] && (filename || strcmp(key, "file") == 0) && off == 0)
        snprintf(u->field, sizeof u->field, "%.63s", key);
    if (!u->field[0] || u->field_done)
        return MHD_YES;
    if (strncmp(key, u->field, sizeof u->field - 1) != 0 || off != u->bytes) {
        u->field_done = 1;
        return MHD_YES;
    }
    put(u, data, size);
    return MHD_YES;
}

static int type_is(const char *ct, const char *want)
{
    if (!ct)
        return 0;
    while (*ct == ' ')
        ct++;
    size_t n = strcspn(ct, "; ");
    return n == strlen(want) && strncasecmp(ct, want, n) == 0;
}

static void begin(struct rematd_request *r)
{
    const struct rematd_config *cfg = &r->srv->cfg;
    struct upload *u = calloc(1, sizeof *u);
    if (!u) {
        rematd_req_problem(r, 500, "internal", NULL, "out of memory");
        return;
    }
    u->fd = -1;
    u->srv = r->srv;
    r->route_state = u;
    r->route_state_free = upload_free;
    rematx_sha256_init(&u->sha);
    const char *ct = rematd_req_header_in(r, MHD_HTTP_HEADER_CONTENT_TYPE);
    int multipart = type_is(ct, "multipart/form-data");
    if (!multipart && !type_is(ct, "application/octet-stream") && !type_is(ct, "application/zip")) {
        refuse(r, u, 415, "unsupported-media-type",
               "send the archive as application/octet-stream (curl --data-binary "
               "@m.pt -H 'Content-Type: application/octet-stream') or as the file "
               "of a multipart/form-data form (curl -F file=@m.pt)");
        return;
    }
    /* Refused before a byte is read when the length already says so; else
     * the whole length is reserved now, as the body will take it. */
    const char *cl = rematd_req_header_in(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    unsigned long long used = 0, mine = 0;
    if (cl && !multipart && reserve(u, strtoull(cl, NULL, 10), &used) < 0) {
        refuse(r, u, 507, "storage-full",
               "models stored and uploads in flight take %llu of the %zu bytes allowed "
               "(--max-models-bytes); delete some to upload %s more",
               used, cfg->max_models_bytes, cl);
        return;
    }
    /* The tenant's share (tenants.h): one tenant cannot fill the others'. */
    size_t share =
        cfg->tenant_max_models_bytes ? cfg->tenant_max_models_bytes : cfg->max_models_bytes;
    if (cl && !multipart &&
        rematd_store_models_bytes(r->srv->store, r->tenant, &mine) == REMATD_STORE_OK &&
        strtoull(cl, NULL, 10) > share - (mine < share ? mine : share)) {
        refuse(r, u, 507, "storage-full",
               "this tenant's models take %llu of the %zu bytes it may keep "
               "(--tenant-max-models-bytes); delete some to upload %s more",
               mine, share, cl);
        return;
    }
    char dir[1100];
    if (rematd_models_tmp_dir(cfg, dir, sizeof dir) < 0 ||
        snprintf(u->tmp, sizeof u->tmp, "%s/upload.XXXXXX", dir) >= (int)sizeof u->tmp ||
        (u->fd = mkstemp(u->tmp)) < 0) {
        /* The data directory removed or unwritable under a running rematd:
         * refused as every other write then is (503), or a full disk (507). */
        int e = errno;
        u->tmp[0] = '\0';
        if (e == ENOSPC || e == EDQUOT)
            refuse(r, u, 507, "storage-full", "no room for the upload: %s", strerror(e));
        else
            refuse(r, u, 503, "unavailable", "the data directory cannot take the upload: %s",
                   strerror(e));
        return;
    }
    if (multipart) {
        u->pp = rematd_req_post_processor(r, 64 * 1024, form_part, u);
        if (!u->pp)
            refuse(r, u, 400, "validation",
                   "a multipart/form-data body needs its boundary in Content-Type");
    }
}

static void chunk(struct rematd_request *r, const char *data, size_t n)
{
    struct upload *u = r->route_state;
    if (!u || u->refused_status)
        return;
    if (u->pp) {
        if (MHD_post_process(u->pp, data, n) != MHD_YES && !u->write_errno)
            u->write_errno = EBADMSG;
        return;
    }
    put(u, data, n);
}

static int sync_dir(const char *path)
{
    char dir[1200];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

static void answer_model(struct rematd_request *r, int status, const struct rematd_model *m)
{
    json_t *v = rematd_model_view(m);
    if (!v) {
        rematd_req_problem(r, 500, "internal", NULL, "out of memory");
        return;
    }
    char loc[64];
    snprintf(loc, sizeof loc, "/v1/models/%s", m->id);
    rematd_req_header(r, "Location", loc);
    rematd_req_json(r, status, v);
}

/* The stages a profile job runs when it lists none, the module's
 * top-level children (api/torchpickle.h), as {count, names}: read from
 * data.pkl where it is stored as it is, as torch.jit.save stores it; NULL
 * (and no stages in the answer) when it is deflated, larger than
 * REMATD_PICKLE_MAX_BYTES or not a pickled module. */
static json_t *default_stages(int fd, const struct rematd_zip_info *info)
{
    if (!info->pickle_stored || info->pickle_bytes > REMATD_PICKLE_MAX_BYTES)
        return NULL;
    size_t n = (size_t)info->pickle_bytes;
    unsigned char *p = malloc(n > 0 ? n : 1);
    size_t got = 0;
    while (p && got < n) {
        ssize_t k = pread(fd, p + got, n - got, (off_t)(info->pickle_offset + got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    json_t *names = p && got == n ? rematd_pickle_children(p, n) : NULL;
    free(p);
    if (!names || json_array_size(names) == 0) {
        json_decref(names);
        return NULL;
    }
    return json_pack("{s:I, s:o}", "count", (json_int_t)json_array_size(names), "names", names);
}

static enum rematd_handled finish(struct rematd_request *r)
{
    struct upload *u = r->route_state;
    const struct rematd_config *cfg = &r->srv->cfg;
    size_t share =
        cfg->tenant_max_models_bytes ? cfg->tenant_max_models_bytes : cfg->max_models_bytes;
    if (u->refused_status) {
        if (u->refused_status == 503)
            rematd_req_header(r, "Retry-After", "30");
        rematd_req_problem(r, u->refused_status, u->refused_slug, NULL, "%s", u->refused_detail);
        return REMATD_HANDLED;
    }
    if (u->pp && u->write_errno == EBADMSG) {
        rematd_req_problem(r, 400, "validation", NULL, "the multipart/form-data body is malformed");
        return REMATD_HANDLED;
    }
    if (u->over) {
        char sha[65];
        struct rematd_model have;
        rematx_sha256_final_hex(&u->sha, sha);
        char id[REMATD_ID_LEN + 1];
        memcpy(id, sha, REMATD_ID_LEN);
        id[REMATD_ID_LEN] = '\0';
        enum rematd_store_result got = rematd_store_get_model(r->srv->store, id, &have);
        if (got == REMATD_STORE_OK && strcmp(have.sha256, sha) == 0 && u->bytes > 0)
            answer_model(r, 200, &have);
        else
            rematd_req_problem(r, 507, "storage-full", NULL, "%s", u->refused_detail);
        if (got == REMATD_STORE_OK)
            rematd_model_clear(&have);
        return REMATD_HANDLED;
    }
    if (u->write_errno || fsync(u->fd) < 0) {
        int e = u->write_errno ? u->write_errno : errno;
        if (e == ENOSPC || e == EDQUOT)
            rematd_req_problem(r, 507, "storage-full", NULL,
                               "the disk under the data directory is full");
        else
            rematd_req_problem(r, 500, "internal", NULL, "cannot write the archive: %s",
                               strerror(e));
        return REMATD_HANDLED;
    }
    if (u->pp && !u->field[0]) {
        rematd_req_problem(r, 400, "validation", "/file",
                           "the form has no file field (curl -F file=@model.pt)");
        return REMATD_HANDLED;
    }
    struct rematd_zip_limits lim = {
        .max_entries = 100000,
        .max_total_bytes = 4ULL * cfg->max_model_bytes,
        .max_ratio = 200,
    };
    struct rematd_zip_info info;
    char why[320];
    enum rematd_zip_verdict v = rematd_zipcheck_fd(u->fd, u->bytes, &lim, &info, why, sizeof why);
    if (v != REMATD_ZIP_OK) {
        if (v == REMATD_ZIP_INVALID)
            rematd_req_problem(r, 400, "invalid-archive", NULL, "%s", why);
        else if (v == REMATD_ZIP_NOT_TORCHSCRIPT)
            rematd_req_problem(r, 422, "not-torchscript", NULL, "%s", why);
        else if (v == REMATD_ZIP_UNSAFE)
            rematd_req_problem(r, 422, "unsafe-archive", NULL, "%s", why);
        else
            rematd_req_problem(r, 500, "internal", NULL, "%s", why);
        return REMATD_HANDLED;
    }
    struct rematd_model m = {.bytes = (long long)u->bytes, .created_at = rematd_now()};
    rematx_sha256_final_hex(&u->sha, m.sha256);
    /* The id (store.h): the digest's for "default", as it always was; for
     * another tenant one of its own, so that the same bytes uploaded by two
     * tenants are two models and no id is shared to probe with. */
    char id_hex[65];
    if (strcmp(r->tenant, REMATD_TENANT_DEFAULT) == 0) {
        memcpy(id_hex, m.sha256, sizeof id_hex);
    } else {
        char keyed[65 + 1 + REMATD_TENANT_MAX + 1];
        int kn = snprintf(keyed, sizeof keyed, "%s/%s", m.sha256, r->tenant);
        rematd_sha256_hex(keyed, (size_t)kn, id_hex);
    }
    memcpy(m.id, id_hex, REMATD_ID_LEN);
    m.id[REMATD_ID_LEN] = '\0';
    snprintf(m.tenant, sizeof m.tenant, "%s", r->tenant);
    json_t *meta =
        json_pack("{s:s, s:I, s:I}", "root", info.root, "entries", (json_int_t)info.entries,
                  "uncompressed_bytes", (json_int_t)info.uncompressed_bytes);
    json_t *stages = default_stages(u->fd, &info);
    if (meta && stages)
        json_object_set_new(meta, "stages", stages);
    else
        json_decref(stages);
    m.meta = meta ? json_dumps(meta, JSON_COMPACT) : NULL;
    json_decref(meta);
    if (!m.meta) {
        rematd_req_problem(r, 500, "internal", NULL, "out of memory");
        return REMATD_HANDLED;
    }
    char path[1200];
    struct rematd_model existing;
    enum rematd_store_result rc = REMATD_STORE_ERROR;
    /* From here the store's own check counts the archive: its reservation
     * would count it twice. */
    unreserve(u);
    rematd_models_lock();
    if (rematd_model_path(cfg, m.sha256, path, sizeof path) == 0) {
        rc = rematd_store_get_model(r->srv->store, m.id, &existing);
        if (rc == REMATD_STORE_NOT_FOUND) {
            /* Whole and synced: in place under its name, the folder synced,
             * then the record. */
            if (rename(u->tmp, path) == 0) {
                u->tmp[0] = '\0';
                if (sync_dir(path) == 0)
                    rc = rematd_store_add_model(r->srv->store, &m, cfg->max_models_bytes, share,
                                                &existing);
                else
                    rc = REMATD_STORE_ERROR;
                /* No record names it, unless another tenant's model of the
                 * same bytes does. */
                if (rc != REMATD_STORE_OK && rc != REMATD_STORE_CONFLICT &&
                    rematd_store_model_sha_used(r->srv->store, m.sha256) == REMATD_STORE_NOT_FOUND)
                    unlink(path);
            } else {
                rc = REMATD_STORE_ERROR;
            }
        } else if (rc == REMATD_STORE_OK) {
            rc = REMATD_STORE_CONFLICT;
        }
    }
    rematd_models_unlock();
    if (rc == REMATD_STORE_OK) {
        rematd_log("info", "model uploaded",
                   json_pack("{s:s, s:s, s:I}", "id", m.id, "sha256", m.sha256, "bytes",
                             (json_int_t)m.bytes));
        answer_model(r, 201, &m);
    } else if (rc == REMATD_STORE_CONFLICT) {
        answer_model(r, 200, &existing);
        rematd_model_clear(&existing);
    } else if (rc == REMATD_STORE_FULL) {
        unsigned long long used = 0, mine = 0;
        rematd_store_models_bytes(r->srv->store, NULL, &used);
        rematd_store_models_bytes(r->srv->store, r->tenant, &mine);
        if (mine + (unsigned long long)m.bytes > share)
            rematd_req_problem(r, 507, "storage-full", NULL,
                               "this tenant's models take %llu of the %zu bytes it may keep "
                               "(--tenant-max-models-bytes); delete some to upload %lld more",
                               mine, share, m.bytes);
        else
            rematd_req_problem(r, 507, "storage-full", NULL,
                               "models take %llu of the %zu bytes allowed (--max-models-bytes); "
                               "delete some to upload %lld more",
                               used, cfg->max_models_bytes, m.bytes);
    } else {
        rematd_req_problem(r, 503, "unavailable", NULL, "the model could not be stored");
    }
    rematd_model_clear(&m);
    return REMATD_HANDLED;
}

const struct rematd_route rematd_route_models_upload = {.method = "POST",
                                                        .pattern = "/v1/models",
                                                        .name = "models_upload",
                                                        .auth = REMATD_AUTH_CLIENT,
                                                        .handler = finish,
                                                        .body_limit_of = limit_of,
                                                        .body_begin = begin,
                                                        .body_chunk = chunk};
