/* models_common.c - the model routes' shared parts (models_common.h). */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "models_common.h"
#include "rematx/sha256.h"

/* rematd's one lock over the models folder (models_common.h says why). */
static pthread_mutex_t models_mu = PTHREAD_MUTEX_INITIALIZER;

void rematd_models_lock(void)
{
    pthread_mutex_lock(&models_mu);
}

void rematd_models_unlock(void)
{
    pthread_mutex_unlock(&models_mu);
}

int rematd_model_path(const struct rematd_config *cfg, const char *sha256, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%s/models/%s", cfg->data_dir, sha256);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

int rematd_models_tmp_dir(const struct rematd_config *cfg, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%s/models/tmp", cfg->data_dir);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

/* Removes every file of dir for which keep() says no; returns how many. */
static int sweep(const char *dir, struct rematd_store *st)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, "tmp") == 0)
            continue;
        if (st && rematx_is_sha256_hex(e->d_name)) {
            /* Any tenant's record keeps the file (tenants share it). */
            enum rematd_store_result got = rematd_store_model_sha_used(st, e->d_name);
            if (got != REMATD_STORE_NOT_FOUND)
                continue; /* kept, or the store cannot tell: keep */
        } else if (st) {
            continue; /* not an archive's name: not ours to remove */
        }
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) == 0)
            removed++;
    }
    closedir(d);
    return removed;
}

int rematd_models_prepare(const struct rematd_config *cfg, struct rematd_store *st)
{
    char dir[1100], tmp[1100];
    snprintf(dir, sizeof dir, "%s/models", cfg->data_dir);
    if (rematd_models_tmp_dir(cfg, tmp, sizeof tmp) < 0 ||
        (mkdir(dir, 0700) < 0 && errno != EEXIST) || (mkdir(tmp, 0700) < 0 && errno != EEXIST)) {
        rematd_log("error", "cannot make the models folder",
                   json_pack("{s:s, s:s}", "path", dir, "detail", strerror(errno)));
        return -1;
    }
    int partial = sweep(tmp, NULL);
    int orphans = sweep(dir, st);
    if (partial || orphans)
        rematd_log("info", "models folder cleaned",
                   json_pack("{s:i, s:i}", "partial_uploads", partial, "orphans", orphans));
    return 0;
}

json_t *rematd_model_view(const struct rematd_model *m)
{
    char created[32], self[64];
    rematd_rfc3339(m->created_at, created);
    snprintf(self, sizeof self, "/v1/models/%s", m->id);
    json_t *meta = m->meta ? json_loads(m->meta, 0, NULL) : NULL;
    json_t *v = json_pack("{s:s, s:s, s:s, s:I, s:s, s:{s:s}}", "id", m->id, "kind", "uploaded",
                          "sha256", m->sha256, "bytes", (json_int_t)m->bytes, "created_at", created,
                          "links", "self", self);
    /* The default stages are kept with the archive's facts but answered
     * beside them. */
    json_t *stages = json_object_get(meta, "stages");
    if (v && json_is_object(stages))
        json_object_set(v, "stages", stages);
    if (json_is_object(meta))
        json_object_del(meta, "stages");
    if (v && json_is_object(meta))
        json_object_set(v, "archive", meta);
    json_decref(meta);
    return v;
}

int rematd_model_by_id(struct rematd_request *r, struct rematd_model *m)
{
    enum rematd_store_result got = rematd_store_get_model(r->srv->store, r->id, m);
    if (got == REMATD_STORE_OK && !rematd_req_owns(r, m->tenant)) {
        rematd_model_clear(m);
        got = REMATD_STORE_NOT_FOUND;
    }
    if (got == REMATD_STORE_NOT_FOUND) {
        rematd_req_problem(r, 404, "not-found", NULL, "no uploaded model with id %s", r->id);
        return -1;
    }
    if (got != REMATD_STORE_OK) {
        rematd_req_problem(r, 503, "unavailable", NULL, "the store did not answer");
        return -1;
    }
    return 0;
}
