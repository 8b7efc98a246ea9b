/* GET /v1/worker/models/{id}: an uploaded model's archive for a worker
 * (worker token), sent from the file by libmicrohttpd without reading it
 * into memory, with its digest in X-Remat-Sha256 for the worker to check
 * what it received. */
#include "config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "models_common.h"

static enum rematd_handled get(struct rematd_request *r)
{
    struct rematd_model m;
    if (rematd_model_by_id(r, &m) < 0)
        return REMATD_HANDLED;
    char path[1200];
    /* With a store shared by replicas the upload may have been another
     * replica's: its archive is fetched from the store first. */
    int fd = rematd_model_path(&r->srv->cfg, m.sha256, path, sizeof path) == 0 &&
                     rematd_store_model_file(r->srv->store, &m, path) == REMATD_STORE_OK
                 ? open(path, O_RDONLY | O_CLOEXEC)
                 : -1;
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) < 0 || sb.st_size != m.bytes) {
        if (fd >= 0)
            close(fd);
        rematd_model_clear(&m);
        rematd_req_problem(r, 500, "internal", NULL,
                           "the archive of model %s is missing or damaged", r->id);
        return REMATD_HANDLED;
    }
    /* Through the common answer path (X-Request-Id, Connection: close while
     * draining); the fd is the response's from here. */
    rematd_req_header(r, "X-Remat-Sha256", m.sha256);
    rematd_model_clear(&m);
    rematd_req_file(r, 200, fd, (size_t)sb.st_size, "application/octet-stream");
    return REMATD_HANDLED;
}

const struct rematd_route rematd_route_worker_models = {.method = "GET",
                                                        .pattern = "/v1/worker/models/{id}",
                                                        .name = "worker_models",
                                                        .auth = REMATD_AUTH_WORKER,
                                                        .handler = get};
