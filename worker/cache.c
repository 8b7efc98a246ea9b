/* cache.c - the worker's model cache (cache.h). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>

#include "cache.h"
#include "http.h"
#include "rematx/sha256.h"

int rw_cache_init(struct rw_cache *c, const char *server, const char *token)
{
    memset(c, 0, sizeof *c);
    c->server = server;
    c->token = token;
    c->max_bytes = 10ULL << 30;
    const char *mb = getenv("REMAT_WORKER_CACHE_BYTES");
    if (mb && *mb) {
        char *end;
        unsigned long long v = strtoull(mb, &end, 10);
        if (*end || v == 0) {
            fprintf(stderr, "remat-worker: REMAT_WORKER_CACHE_BYTES: want a positive integer\n");
            return -1;
        }
        c->max_bytes = v;
    }
    const char *dir = getenv("REMAT_WORKER_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"),
               *home = getenv("HOME");
    if (dir && *dir)
        snprintf(c->dir, sizeof c->dir, "%s", dir);
    else if (xdg && *xdg == '/')
        snprintf(c->dir, sizeof c->dir, "%s/remat-worker", xdg);
    else if (home && *home == '/')
        snprintf(c->dir, sizeof c->dir, "%s/.cache/remat-worker", home);
    else
        snprintf(c->dir, sizeof c->dir, "/tmp/remat-worker-%ld", (long)getuid());
    /* Parents first: ~/.cache may not exist yet. */
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", c->dir);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(buf, 0700);
            *p = '/';
        }
    if (mkdir(c->dir, 0700) < 0 && errno != EEXIST) {
        fprintf(stderr, "remat-worker: cannot make the cache folder %s: %s\n", c->dir,
                strerror(errno));
        return -1;
    }
    rw_cache_sweep_parts(c);
    return 0;
}

int rw_cache_sweep_parts(const struct rw_cache *c)
{
    DIR *d = opendir(c->dir);
    if (!d)
        return 0;
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, ".part.", 6) != 0)
            continue;
        /* A download in progress holds its file's lock (another worker on
         * the same folder); one whose lock can be taken was left by a
         * worker killed mid-download. */
        int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
            continue;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0 && unlinkat(dirfd(d), e->d_name, 0) == 0) {
            fprintf(stderr, "remat-worker: cache: removed %s, left by a stopped download\n",
                    e->d_name);
            removed++;
        }
        close(fd);
    }
    closedir(d);
    return removed;
}

/* Whether the file at path is bytes long and its SHA-256 is sha256: a hit
 * is hashed again, so that a file planted or changed in the folder (of the
 * right size) is never loaded as the archive a job names. */
static int holds(const char *path, const char *sha256, long long bytes)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return 0;
    struct stat sb;
    int ok = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size == bytes;
    struct rematx_sha256 sha;
    rematx_sha256_init(&sha);
    static const size_t chunk = 1 << 20;
    char *buf = ok ? malloc(chunk) : NULL;
    ok = buf != NULL;
    long long seen = 0;
    while (ok) {
        ssize_t n = read(fd, buf, chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            ok = n == 0;
            break;
        }
        rematx_sha256_update(&sha, buf, (size_t)n);
        seen += n;
    }
    free(buf);
    close(fd);
    if (!ok || seen != bytes)
        return 0;
    char got[65];
    rematx_sha256_final_hex(&sha, got);
    return strcmp(got, sha256) == 0;
}

struct cached {
    char name[65];
    unsigned long long bytes;
    struct timespec used;
};

static int older(const void *a, const void *b)
{
    const struct cached *x = a, *y = b;
    if (x->used.tv_sec != y->used.tv_sec)
        return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
    return x->used.tv_nsec < y->used.tv_nsec ? -1 : x->used.tv_nsec > y->used.tv_nsec;
}

unsigned long long rw_cache_evict(const struct rw_cache *c, unsigned long long need,
                                  const char *keep)
{
    DIR *d = opendir(c->dir);
    if (!d)
        return 0;
    struct cached *list = NULL;
    size_t n = 0, cap = 0;
    unsigned long long total = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!rematx_is_sha256_hex(e->d_name))
            continue;
        char path[1400];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%.64s", c->dir, e->d_name);
        if (stat(path, &sb) < 0)
            continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 32;
            struct cached *nl = realloc(list, nc * sizeof *nl);
            if (!nl)
                break;
            list = nl;
            cap = nc;
        }
        memcpy(list[n].name, e->d_name, 65); /* 64 hex digits and the NUL */
        list[n].bytes = (unsigned long long)sb.st_size;
        list[n].used = sb.st_mtim;
        total += list[n].bytes;
        n++;
    }
    closedir(d);
    if (n > 0) /* an empty cache has no list at all: qsort's array must not be NULL */
        qsort(list, n, sizeof *list, older);
    for (size_t i = 0; i < n && total + need > c->max_bytes; i++) {
        if (keep && strcmp(list[i].name, keep) == 0)
            continue;
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", c->dir, list[i].name);
        if (unlink(path) == 0) {
            total -= list[i].bytes;
            fprintf(stderr, "remat-worker: cache: evicted %s (%llu bytes)\n", list[i].name,
                    list[i].bytes);
        }
    }
    free(list);
    return total;
}

struct fetch {
    int fd;
    struct rematx_sha256 sha;
    unsigned long long got, limit;
    int write_errno;
};

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *user)
{
    struct fetch *f = user;
    size_t n = size * nmemb;
    if (f->got + n > f->limit)
        return 0; /* more than the job said: stop */
    rematx_sha256_update(&f->sha, ptr, n);
    for (size_t off = 0; off < n;) {
        ssize_t w = write(f->fd, ptr + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            f->write_errno = w < 0 ? errno : EIO;
            return 0;
        }
        off += (size_t)w;
    }
    f->got += n;
    return n;
}

int rw_cache_get(const struct rw_cache *c, const char *id, const char *sha256, long long bytes,
                 char *path, size_t cap, char *why, size_t whylen, int *retryable)
{
    *retryable = 0;
    if (!rematx_is_sha256_hex(sha256) || bytes <= 0) {
        snprintf(why, whylen, "the job names no valid model digest");
        return -1;
    }
    if ((size_t)snprintf(path, cap, "%s/%s", c->dir, sha256) >= cap) {
        snprintf(why, whylen, "the cache folder's path is too long");
        return -1;
    }
    struct stat sb;
    if (lstat(path, &sb) == 0) {
        if (holds(path, sha256, bytes)) {
            /* A hit.  Touched, so that eviction sees it used. */
            utimensat(AT_FDCWD, path, NULL, 0);
            return 0;
        }
        /* Not the archive its name says: fetched again over it. */
        fprintf(stderr, "remat-worker: cache: %s is not the archive with that SHA-256; removed\n",
                sha256);
        unlink(path);
    }
    if ((unsigned long long)bytes > c->max_bytes) {
        snprintf(why, whylen,
                 "model %s is %lld bytes, more than this worker's cache holds "
                 "(REMAT_WORKER_CACHE_BYTES=%llu)",
                 id, bytes, c->max_bytes);
        return -1;
    }
    rw_cache_evict(c, (unsigned long long)bytes, NULL);
    char part[1200];
    snprintf(part, sizeof part, "%s/.part.%ld.%s", c->dir, (long)getpid(), sha256);
    struct fetch f = {.limit = (unsigned long long)bytes};
    rematx_sha256_init(&f.sha);
    f.fd = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (f.fd < 0) {
        snprintf(why, whylen, "cannot write to the cache %s: %s", c->dir, strerror(errno));
        return -1;
    }
    /* Held while the download runs: rw_cache_sweep_parts leaves it alone. */
    flock(f.fd, LOCK_EX);
    char route[200];
    snprintf(route, sizeof route, "/v1/worker/models/%s", id);
    struct curl_slist *hdr = NULL;
    CURL *h = rw_http_open(c->server, route, c->token, &hdr);
    long status = -1;
    CURLcode rc = CURLE_FAILED_INIT;
    if (h) {
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &f);
        /* Slow is fine, stalled is not: under 1 KB/s for 60 s fails. */
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1024L);
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 60L);
        rc = curl_easy_perform(h);
        if (rc == CURLE_OK)
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    }
    rw_http_close(h, hdr);
    char got[65];
    rematx_sha256_final_hex(&f.sha, got);
    int synced = f.write_errno == 0 && fsync(f.fd) == 0;
    close(f.fd);
    if (rc != CURLE_OK || status != 200 || f.write_errno || !synced ||
        f.got != (unsigned long long)bytes || strcmp(got, sha256) != 0) {
        unlink(part);
        *retryable = status != 404;
        if (f.write_errno)
            snprintf(why, whylen, "model %s: cannot write the cache: %s", id,
                     strerror(f.write_errno));
        else if (rc != CURLE_OK && f.got <= (unsigned long long)bytes)
            snprintf(why, whylen, "model %s: fetching it failed: %s", id, curl_easy_strerror(rc));
        else if (status != 200)
            snprintf(why, whylen, "model %s: rematd answered %ld to the fetch%s", id, status,
                     status == 404 ? " (deleted?)" : "");
        else
            snprintf(why, whylen,
                     "model %s: %llu bytes with SHA-256 %.16s... arrived, not the %lld bytes "
                     "with %.16s... the job names",
                     id, f.got, got, bytes, sha256);
        return -1;
    }
    /* Read-only from here: the archive is what its name says. */
    chmod(part, 0400);
    if (rename(part, path) < 0) {
        unlink(part);
        snprintf(why, whylen, "model %s: cannot rename it into the cache: %s", id, strerror(errno));
        *retryable = 1;
        return -1;
    }
    fprintf(stderr, "remat-worker: cache: fetched %s (%lld bytes, SHA-256 checked)\n", id, bytes);
    return 0;
}
