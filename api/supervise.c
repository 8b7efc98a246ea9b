/*
 * supervise.c - `rematd --workers N`: start N local remat-worker processes
 * pointed at this server, restart one that dies (after a backoff that
 * doubles up to 30 s and resets once a worker has lived a minute), and stop
 * them all on shutdown (SIGTERM, then SIGKILL after a grace period).
 * Driven from the main thread's loop; no threads, no signal handlers.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rematd.h"

struct child {
    pid_t pid;
    char device[16];
    char id[64];
    double started;
    double next_start;
    double backoff;
};

struct rematd_supervisor {
    struct child *kids;
    int n;
    char server[64];
    char path[1024];
    char token[256];
};

int rematd_count_devices(void)
{
    DIR *d = opendir("/dev");
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *s = e->d_name;
        if (strncmp(s, "nvidia", 6) != 0 || !s[6])
            continue;
        int digits = 1;
        for (const char *p = s + 6; *p; p++)
            digits = digits && *p >= '0' && *p <= '9';
        n += digits;
    }
    closedir(d);
    return n;
}

static void spawn(struct rematd_supervisor *sv, struct child *c)
{
    pid_t pid = fork();
    if (pid < 0) {
        c->next_start = rematd_mono() + c->backoff;
        return;
    }
    if (pid == 0) {
        /* The token goes through the environment, not argv, so `ps` never
         * shows it. */
        if (sv->token[0])
            setenv("REMAT_WORKER_TOKEN", sv->token, 1);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        /* rematd ignores SIGPIPE, and an ignored signal stays ignored
         * across exec: give the worker the default back. */
        signal(SIGPIPE, SIG_DFL);
        execl(sv->path, sv->path, "--server", sv->server, "--device", c->device, "--id", c->id,
              (char *)NULL);
        _exit(127);
    }
    c->pid = pid;
    c->started = rematd_mono();
    rematd_log("info", "worker started",
               json_pack("{s:i, s:s, s:s, s:s}", "pid", (int)pid, "device", c->device, "worker_id",
                         c->id, "path", sv->path));
}

struct rematd_supervisor *rematd_supervisor_start(const struct rematd_config *cfg, unsigned port)
{
    int n = cfg->workers;
    int gpus = 0;
    if (n < 0) {
        gpus = rematd_count_devices();
        n = gpus > 0 ? gpus : 1;
    }
    if (n == 0)
        return NULL;
    struct rematd_supervisor *sv = calloc(1, sizeof *sv);
    if (!sv)
        return NULL;
    sv->kids = calloc((size_t)n, sizeof *sv->kids);
    if (!sv->kids) {
        free(sv);
        return NULL;
    }
    sv->n = n;
    snprintf(sv->server, sizeof sv->server, "http://127.0.0.1:%u", port);
    snprintf(sv->path, sizeof sv->path, "%s", cfg->worker_path);
    if (access(sv->path, X_OK) != 0) {
        /* Not installed: in a build tree the worker sits in ../worker/
         * beside api/rematd, so `./api/rematd --workers 1` works there. */
        char self[900];
        ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
        if (len > 0) {
            self[len] = '\0';
            char *slash = strrchr(self, '/');
            if (slash) {
                *slash = '\0';
                char alt[1024];
                snprintf(alt, sizeof alt, "%s/../worker/remat-worker", self);
                if (access(alt, X_OK) == 0)
                    snprintf(sv->path, sizeof sv->path, "%s", alt);
            }
        }
    }
    snprintf(sv->token, sizeof sv->token, "%s",
             cfg->worker_token[0] ? cfg->worker_token : cfg->token);
    char host[64] = "local";
    gethostname(host, sizeof host - 1);
    for (int i = 0; i < n; i++) {
        struct child *c = &sv->kids[i];
        if (gpus > 0)
            snprintf(c->device, sizeof c->device, "cuda:%d", i);
        else
            snprintf(c->device, sizeof c->device, "cpu");
        snprintf(c->id, sizeof c->id, "%.40s-%d-w%d", host, (int)getpid(), i);
        c->backoff = 1;
        spawn(sv, c);
    }
    return sv;
}

void rematd_supervisor_tick(struct rematd_supervisor *sv)
{
    if (!sv)
        return;
    double now = rematd_mono();
    for (int i = 0; i < sv->n; i++) {
        struct child *c = &sv->kids[i];
        if (c->pid > 0) {
            int status;
            pid_t p = waitpid(c->pid, &status, WNOHANG);
            if (p != c->pid)
                continue;
            double lived = now - c->started;
            if (lived > 60)
                c->backoff = 1;
            rematd_log("warn", "worker exited",
                       json_pack("{s:i, s:i, s:i, s:f, s:f}", "pid", (int)c->pid, "exit",
                                 WIFEXITED(status) ? WEXITSTATUS(status) : -1, "signal",
                                 WIFSIGNALED(status) ? WTERMSIG(status) : 0, "lived_s", lived,
                                 "restart_in_s", c->backoff));
            c->pid = 0;
            c->next_start = now + c->backoff;
            c->backoff = c->backoff * 2 > 30 ? 30 : c->backoff * 2;
        } else if (now >= c->next_start) {
            spawn(sv, c);
        }
    }
}

void rematd_supervisor_stop(struct rematd_supervisor *sv, double grace)
{
    if (!sv)
        return;
    for (int i = 0; i < sv->n; i++)
        if (sv->kids[i].pid > 0)
            kill(sv->kids[i].pid, SIGTERM);
    double end = rematd_mono() + grace;
    for (;;) {
        int alive = 0;
        for (int i = 0; i < sv->n; i++) {
            struct child *c = &sv->kids[i];
            if (c->pid <= 0)
                continue;
            if (waitpid(c->pid, NULL, WNOHANG) == c->pid)
                c->pid = 0;
            else
                alive++;
        }
        if (!alive)
            break;
        if (rematd_mono() > end) {
            for (int i = 0; i < sv->n; i++)
                if (sv->kids[i].pid > 0) {
                    kill(sv->kids[i].pid, SIGKILL);
                    waitpid(sv->kids[i].pid, NULL, 0);
                    sv->kids[i].pid = 0;
                }
            break;
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    rematd_log("info", "workers stopped", json_pack("{s:i}", "workers", sv->n));
    free(sv->kids);
    free(sv);
}
