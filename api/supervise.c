/*
 * supervise.c - `rematd --workers N`: start N local remat-worker processes
 * pointed at this server, restart one that dies (after a backoff that
 * doubles up to 30 s and resets once a worker has lived a minute), and stop
 * them all on shutdown (SIGTERM, then SIGKILL after a grace period).
 * Driven from the main thread's loop; no threads, no signal handlers.
 *
 * A worker that dies, however often and however fast, is started again
 * (the backoff keeps a crash loop to one start in 30 s): one model that
 * crashes its worker must not take the service's workers away for good.
 * Only a program that cannot run at all (exec failed: 126, 127) is not
 * restarted.  /readyz says when none is alive; /metrics counts exits and
 * crashes (struct rematd_worker_stats).
 *
 * A worker never outlives rematd: it is started with PR_SET_PDEATHSIG
 * SIGKILL (the main thread, which forks, lives as long as the process),
 * and it holds the read end of a pipe whose write end only rematd has, so
 * that the worker sees EOF the moment rematd is gone however it went
 * (REMAT_PARENT_FD, docs/worker.md).  Were it left running it would keep
 * sending its token to whatever next listens on the port.
 *
 * Each device slot i has a lock file, <data-dir>/workers/slot-<i>.lock,
 * that its worker holds (flock, inherited across exec) and that names its
 * pid.  A slot whose lock is held when rematd starts a worker belongs to
 * an orphan of an earlier rematd: it is logged and killed, and the slot
 * started once the lock is free, so no two workers share a device.
 *
 * A worker gets the worker token only: REMAT_TOKEN, the clients' token, is
 * removed from its environment.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rematd.h"
#include "supervise.h"

struct child {
    pid_t pid;
    int pipe_w; /* rematd's end of the worker's parent pipe, -1 when none */
    char device[16];
    char id[64];
    double started;
    double next_start;
    double backoff;
    int quick_failures; /* exits within a second of the start, in a row */
    int given_up;
};

struct rematd_supervisor {
    struct child *kids;
    int n;
    int stopping; /* rematd_supervisor_term was called: exits are shutdown's */
    struct rematd_worker_stats *stats;
    char server[80];
    char socket[128]; /* REMAT_SERVER_SOCKET for the workers, "" = none */
    char path[1024];
    char token[256];
    char slots[1100]; /* the slot lock directory */
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

int rematd_supervisor_check(struct rematd_config *cfg)
{
    if (cfg->workers == 0 || access(cfg->worker_path, X_OK) == 0)
        return 0;
    if (!cfg->worker_path_set) {
        /* The default path, not installed: in a build tree the worker sits
         * in ../worker/ beside api/rematd, so `./api/rematd --workers 1`
         * works there.  Said in the log; never done for a path the operator
         * gave (config.c refuses that one). */
        char self[900];
        ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
        if (len > 0) {
            self[len] = '\0';
            char *slash = strrchr(self, '/');
            if (slash) {
                *slash = '\0';
                char alt[1024];
                snprintf(alt, sizeof alt, "%s/../worker/remat-worker", self);
                if (access(alt, X_OK) == 0) {
                    rematd_log("info", "worker program from the build tree",
                               json_pack("{s:s, s:s}", "default", cfg->worker_path, "path", alt));
                    snprintf(cfg->worker_path, sizeof cfg->worker_path, "%s", alt);
                    return 0;
                }
            }
        }
    }
    rematd_log("error", "no worker program",
               json_pack("{s:s, s:s}", "worker_path", cfg->worker_path, "detail",
                         "not an executable file; set --worker-path or --workers 0"));
    return -1;
}

/* The pid that holds slot lock fd's file, when the process is alive and
 * really has the file open; 0 otherwise. */
static pid_t lock_holder(int fd, const char *lock_path)
{
    char buf[32] = "";
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    long pid = strtol(buf, NULL, 10);
    if (pid <= 1 || pid == (long)getpid())
        return 0;
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%ld/fd", pid);
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    pid_t found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        char link[400], target[1200];
        snprintf(link, sizeof link, "%s/%s", dir, e->d_name);
        ssize_t len = readlink(link, target, sizeof target - 1);
        if (len > 0) {
            target[len] = '\0';
            if (strcmp(target, lock_path) == 0)
                found = (pid_t)pid;
        }
    }
    closedir(d);
    return found;
}

static void spawn(struct rematd_supervisor *sv, struct child *c, int slot)
{
    double now = rematd_mono();
    c->next_start = now + c->backoff;
    char lock_path[1200];
    snprintf(lock_path, sizeof lock_path, "%s/slot-%d.lock", sv->slots, slot);
    int lk = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lk < 0) {
        rematd_log("error", "cannot open a worker slot lock",
                   json_pack("{s:s, s:s}", "path", lock_path, "detail", strerror(errno)));
        return;
    }
    if (flock(lk, LOCK_EX | LOCK_NB) < 0) {
        /* An orphan of an earlier rematd still serves this slot. */
        pid_t orphan = lock_holder(lk, lock_path);
        rematd_log(
            "warn", "orphan worker holds a device slot",
            json_pack("{s:i, s:s, s:i}", "slot", slot, "device", c->device, "pid", (int)orphan));
        if (orphan > 0)
            kill(orphan, SIGKILL);
        close(lk);
        c->next_start = now + 0.2;
        return;
    }
    int pfd[2];
    /* Only this thread forks, so setting close-on-exec after pipe() races
     * with nothing. */
    if (pipe(pfd) < 0) {
        close(lk);
        return;
    }
    fcntl(pfd[0], F_SETFD, FD_CLOEXEC);
    fcntl(pfd[1], F_SETFD, FD_CLOEXEC);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        close(lk);
        close(pfd[0]);
        close(pfd[1]);
        return;
    }
    if (pid == 0) {
        /* Killed with rematd, even by SIGKILL; and if rematd died before
         * the prctl, gone now. */
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        if (getppid() != parent)
            _exit(0);
        /* The two descriptors the worker keeps: the slot lock and the read
         * end of its parent pipe. */
        fcntl(lk, F_SETFD, 0);
        fcntl(pfd[0], F_SETFD, 0);
        char fdnum[16];
        snprintf(fdnum, sizeof fdnum, "%d", pfd[0]);
        setenv("REMAT_PARENT_FD", fdnum, 1);
        /* The token goes through the environment, not argv, so `ps` never
         * shows it; the clients' token is not the worker's business. */
        unsetenv("REMAT_TOKEN");
        if (sv->token[0])
            setenv("REMAT_WORKER_TOKEN", sv->token, 1);
        else
            unsetenv("REMAT_WORKER_TOKEN");
        if (sv->socket[0])
            setenv("REMAT_SERVER_SOCKET", sv->socket, 1);
        else
            unsetenv("REMAT_SERVER_SOCKET");
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
    close(pfd[0]);
    c->pipe_w = pfd[1];
    char pidtxt[32];
    int len = snprintf(pidtxt, sizeof pidtxt, "%d\n", (int)pid);
    if (ftruncate(lk, 0) < 0 || pwrite(lk, pidtxt, (size_t)len, 0) != len)
        rematd_log("warn", "cannot write a worker slot lock",
                   json_pack("{s:s, s:s}", "path", lock_path, "detail", strerror(errno)));
    close(lk);
    c->pid = pid;
    c->started = now;
    rematd_log("info", "worker started",
               json_pack("{s:i, s:s, s:s, s:s}", "pid", (int)pid, "device", c->device, "worker_id",
                         c->id, "path", sv->path));
}

static void publish(struct rematd_supervisor *sv)
{
    int alive = 0;
    for (int i = 0; i < sv->n; i++)
        alive += sv->kids[i].pid > 0;
    if (sv->stats)
        atomic_store(&sv->stats->alive, alive);
}

struct rematd_supervisor *rematd_supervisor_start(const struct rematd_config *cfg,
                                                  const char *server, const char *socket,
                                                  struct rematd_worker_stats *stats)
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
    sv->stats = stats;
    if (stats)
        atomic_store(&stats->supervised, n);
    snprintf(sv->server, sizeof sv->server, "%s", server);
    snprintf(sv->socket, sizeof sv->socket, "%s", socket ? socket : "");
    snprintf(sv->path, sizeof sv->path, "%s", cfg->worker_path);
    snprintf(sv->token, sizeof sv->token, "%s", cfg->worker_token);
    snprintf(sv->slots, sizeof sv->slots, "%s/workers", cfg->data_dir);
    if (mkdir(sv->slots, 0700) < 0 && errno != EEXIST)
        rematd_log("error", "cannot create the worker slot directory",
                   json_pack("{s:s, s:s}", "path", sv->slots, "detail", strerror(errno)));
    char host[64] = "local";
    gethostname(host, sizeof host - 1);
    for (int i = 0; i < n; i++) {
        struct child *c = &sv->kids[i];
        c->pipe_w = -1;
        if (gpus > 0)
            snprintf(c->device, sizeof c->device, "cuda:%d", i);
        else
            snprintf(c->device, sizeof c->device, "cpu");
        snprintf(c->id, sizeof c->id, "%.40s-%d-w%d", host, (int)getpid(), i);
        c->backoff = 1;
        spawn(sv, c, i);
    }
    publish(sv);
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
            c->quick_failures = lived < 1 ? c->quick_failures + 1 : 0;
            close(c->pipe_w);
            c->pipe_w = -1;
            int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
            /* A program that cannot run (exec failed: 127, 126) is not
             * restarted; any other exit is, a crash loop included (after
             * the backoff). */
            c->given_up = code == 126 || code == 127;
            if (sv->stats && !sv->stopping) {
                atomic_fetch_add(&sv->stats->exits, 1);
                if (WIFSIGNALED(status) || code != 0)
                    atomic_fetch_add(&sv->stats->crashes, 1);
            }
            rematd_log(c->given_up ? "error" : "warn",
                       c->given_up ? "worker exited, not restarted" : "worker exited",
                       json_pack("{s:i, s:i, s:i, s:f, s:f, s:i}", "pid", (int)c->pid, "exit", code,
                                 "signal", WIFSIGNALED(status) ? WTERMSIG(status) : 0, "lived_s",
                                 lived, "restart_in_s", c->given_up ? -1.0 : c->backoff,
                                 "quick_exits_in_a_row", c->quick_failures));
            c->pid = 0;
            c->next_start = now + c->backoff;
            c->backoff = c->backoff * 2 > 30 ? 30 : c->backoff * 2;
        } else if (!c->given_up && now >= c->next_start) {
            spawn(sv, c, i);
        }
    }
    publish(sv);
}

void rematd_supervisor_term(struct rematd_supervisor *sv)
{
    if (!sv)
        return;
    sv->stopping = 1;
    for (int i = 0; i < sv->n; i++) {
        sv->kids[i].given_up = 1; /* no restart from here on */
        if (sv->kids[i].pid > 0)
            kill(sv->kids[i].pid, SIGTERM);
    }
}

int rematd_supervisor_alive(struct rematd_supervisor *sv)
{
    int alive = 0;
    for (int i = 0; sv && i < sv->n; i++) {
        struct child *c = &sv->kids[i];
        if (c->pid > 0 && waitpid(c->pid, NULL, WNOHANG) == c->pid)
            c->pid = 0;
        alive += c->pid > 0;
    }
    return alive;
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
    for (int i = 0; i < sv->n; i++)
        if (sv->kids[i].pipe_w >= 0)
            close(sv->kids[i].pipe_w);
    rematd_log("info", "workers stopped", json_pack("{s:i}", "workers", sv->n));
    free(sv->kids);
    free(sv);
}
