/* cache.h - the worker's cache of uploaded models (docs/worker.md).
 *
 * An archive is fetched once from rematd (GET /v1/worker/models/{id}, the
 * worker token), its SHA-256 computed while it streams to disk and compared
 * with the one the job names, and kept as <dir>/<sha256> so that later jobs
 * on the same model load it from disk.  The folder is bounded by
 * REMAT_WORKER_CACHE_BYTES: the least recently used archives go first (a
 * use touches the file's mtime).  A cached archive is hashed again at each
 * use (a file of the right size planted in the folder is not the archive),
 * and kept read-only; a download holds a lock on its .part file, and one
 * left by a killed worker is removed at the next start. */
#ifndef REMAT_WORKER_CACHE_H
#define REMAT_WORKER_CACHE_H

#include <stddef.h>

struct rw_cache {
    char dir[1024];
    unsigned long long max_bytes;
    const char *server; /* rematd's base URL */
    const char *token;  /* the worker token, or NULL */
};

/* dir and max_bytes from REMAT_WORKER_CACHE_DIR (else $XDG_CACHE_HOME or
 * ~/.cache, /remat-worker; else /tmp/remat-worker-<uid>) and
 * REMAT_WORKER_CACHE_BYTES (default 10 GiB); makes the folder.  0 or -1. */
int rw_cache_init(struct rw_cache *c, const char *server, const char *token);

/* Removes the .part files of downloads no worker is making (their lock is
 * free); returns how many.  rw_cache_init calls it. */
int rw_cache_sweep_parts(const struct rw_cache *c);

/* The local path of model id whose digest is sha256 (bytes long), fetching
 * it when it is not cached.  0 with path filled; -1 with why filled and
 * *retryable set when another attempt could succeed (a network error, a
 * digest that does not match what arrived). */
int rw_cache_get(const struct rw_cache *c, const char *id, const char *sha256, long long bytes,
                 char *path, size_t cap, char *why, size_t whylen, int *retryable);

/* Removes least recently used archives until need more bytes fit under
 * max_bytes (keep: a digest never removed, or NULL).  Returns the bytes
 * the cache then holds. */
unsigned long long rw_cache_evict(const struct rw_cache *c, unsigned long long need,
                                  const char *keep);

#endif
