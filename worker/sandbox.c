/*
 * sandbox.c - the worker's side of the sandbox that loads and runs uploaded
 * models (sandbox.h; the threat model and what is allowed:
 * docs/security.md; the child's side, which confines itself: confine.c).
 *
 * rw_sandbox_run makes a private scratch folder, writes the job there, and
 * starts /proc/self/exe --sandbox-child with posix_spawn: three descriptors
 * (3 the job, 4 the archive, 5 the result pipe), stdin and stdout on
 * /dev/null, stderr the worker's log, every other descriptor closed, a
 * clean environment, a process group of its own.  It then reads the
 * child's progress lines, passes them on to the job's heartbeat, kills the
 * child at the deadline or when the job is lost or the worker stops, and
 * says how a child that gave no result ended.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* posix_spawn_file_actions_addclosefrom_np, sigabbrev_np */
#endif
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "rematx/rematx.h"
#include "sandbox.h"
#include "sandbox_private.h"
#include "shim.h"

extern char **environ;

/* A result line may be long (a validation's timeline), not unbounded. */
#define MAX_RESULT_BYTES (256u * 1024 * 1024)

void rw_sandbox_init(struct rw_sandbox *sb, const char *device, long long memory_bytes,
                     int job_timeout_s, int unsafe)
{
    memset(sb, 0, sizeof *sb);
    sb->device = device;
    sb->memory_bytes = memory_bytes;
    sb->job_timeout_s = job_timeout_s > 0 ? job_timeout_s : RW_JOB_TIMEOUT_DEFAULT_S;
    sb->landlock_abi = rw_sandbox_landlock_abi();
#ifdef HAVE_SECCOMP
    int have_seccomp = 1;
#else
    int have_seccomp = 0;
#endif
    if (unsafe)
        sb->mode = RW_SANDBOX_UNSAFE;
    else if (!have_seccomp)
        snprintf(sb->missing, sizeof sb->missing,
                 "this remat-worker was built without libseccomp (Debian: libseccomp-dev)");
    else if (sb->landlock_abi == 0)
        snprintf(sb->missing, sizeof sb->missing,
                 "this kernel has no Landlock (Linux 5.13 or later, lsm=landlock): %s",
                 strerror(errno));
    if (sb->missing[0] != '\0')
        sb->mode = RW_SANDBOX_MISSING;
}

/* The spec's own model spec: a validation's model_spec, a profile's spec. */
static const json_t *model_spec_of(const char *kind, const json_t *spec)
{
    return strcmp(kind, "validation") == 0 ? json_object_get(spec, "model_spec") : spec;
}

int rw_sandbox_wants(const char *kind, const json_t *spec)
{
    const char *p = json_string_value(json_object_get(model_spec_of(kind, spec), "model_path"));
    return p != NULL && p[0] != '\0';
}

/* ---- the worker's side ---- */

static void fail(struct rw_failure *why, int retryable, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void fail(struct rw_failure *why, int retryable, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why->reason, sizeof why->reason, fmt, ap);
    va_end(ap);
    why->retryable = retryable;
}

static int remove_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    (void)type;
    (void)ftw;
    remove(path);
    return 0;
}

/* The variables the child keeps: where libtorch and its libraries are
 * found and how many threads they use, the sanitizers' options.  Nothing
 * else: not REMAT_WORKER_TOKEN, not the cache's folder. */
static const char *const kept_env[] = {
    "LD_LIBRARY_PATH",      "OMP_NUM_THREADS",   "MKL_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "PYTORCH_CUDA_ALLOC_CONF",
    "ASAN_OPTIONS",         "UBSAN_OPTIONS",     "LSAN_OPTIONS",
};

static char **child_env(const char *scratch)
{
    size_t n = sizeof kept_env / sizeof kept_env[0];
    char **env = calloc(n + 4, sizeof *env);
    if (env == NULL)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *v = getenv(kept_env[i]);
        if (v == NULL)
            continue;
        size_t len = strlen(kept_env[i]) + strlen(v) + 2;
        if ((env[k] = malloc(len)) == NULL)
            goto oom;
        snprintf(env[k++], len, "%s=%s", kept_env[i], v);
    }
    /* HOME and TMPDIR are the scratch folder: whatever a library caches
     * (CUDA's kernel cache under ~/.nv) lands where the child may write. */
    const char *dirs[] = {"HOME", "TMPDIR"};
    for (size_t i = 0; i < 2; i++) {
        size_t len = strlen(dirs[i]) + strlen(scratch) + 2;
        if ((env[k] = malloc(len)) == NULL)
            goto oom;
        snprintf(env[k++], len, "%s=%s", dirs[i], scratch);
    }
    return env;
oom:
    for (size_t i = 0; i < k; i++)
        free(env[i]);
    free(env);
    return NULL;
}

static void free_env(char **env)
{
    for (size_t i = 0; env != NULL && env[i] != NULL; i++)
        free(env[i]);
    free(env);
}

/* The activities the child may report, as static strings for the
 * heartbeat (shim.h: progress activities are static storage). */
static const char *static_activity(const char *a)
{
    static const char *const known[] = {"building", "measuring", "validating", "loading",
                                        "fetching", "running",   "checking"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(a, known[i]) == 0)
            return known[i];
    return "running";
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* Starts the child; returns its pid, or -1 with why filled.  result_w is
 * the write end of the result pipe, job_fd the job, archive_fd the model. */
static pid_t spawn_child(int job_fd, int archive_fd, int result_w, const char *scratch,
                         struct rw_failure *why)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    char **env = child_env(scratch);
    if (env == NULL) {
        fail(why, 1, "out of memory");
        return -1;
    }
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    /* dup2 onto 3, 4, 5 in an order that never overwrites a source: the
     * sources are first moved above 5 (they were opened after 0-2, so they
     * may sit on 3-5 themselves). */
    int src[3] = {job_fd, archive_fd, result_w};
    for (int i = 0; i < 3; i++)
        posix_spawn_file_actions_adddup2(&fa, src[i], 10 + i);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    for (int i = 0; i < 3; i++)
        posix_spawn_file_actions_adddup2(&fa, 10 + i, FD_JOB + i);
    /* Every other descriptor (rematd's parent pipe, libcurl's sockets, the
     * cache's files) stays with the worker. */
    posix_spawn_file_actions_addclosefrom_np(&fa, FD_RESULT + 1);
    sigset_t none, dflt;
    sigemptyset(&none);
    sigemptyset(&dflt);
    sigaddset(&dflt, SIGPIPE);
    sigaddset(&dflt, SIGTERM);
    sigaddset(&dflt, SIGINT);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &dflt);
    /* A group of its own: a Ctrl-C or a group signal meant for the worker
     * is the worker's to act on; it kills the child itself. */
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                      POSIX_SPAWN_SETPGROUP);
    char arg0[] = "remat-worker", arg1[] = "--sandbox-child";
    char *argv[] = {arg0, arg1, NULL};
    pid_t pid = -1;
    int rc = posix_spawn(&pid, "/proc/self/exe", &fa, &at, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    free_env(env);
    if (rc != 0) {
        fail(why, 1, "cannot start the sandboxed process: %s", strerror(rc));
        return -1;
    }
    return pid;
}

/* Where the child was: " (measuring stage 3 of 12)". */
static void describe_where(char *out, size_t cap, int stage, int stages, const char *activity)
{
    if (stages > 0)
        snprintf(out, cap, " (%s stage %d of %d)", activity, stage, stages);
    else
        snprintf(out, cap, " (before its first stage: loading or building the model)");
}

/* What the job's failure says of a child that ended without a result. */
static void explain_end(int status, int attempt, int stage, int stages, const char *activity,
                        struct rw_failure *why)
{
    char where[96];
    describe_where(where, sizeof where, stage, stages, activity);
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        const char *abbrev = sigabbrev_np(sig);
        /* A crash is the model's: one more try elsewhere may tell a bad
         * machine from a bad model, a third would not. */
        fail(why, attempt < 2,
             "the uploaded model's process died of signal %d (SIG%s, %s)%s; the worker is unharmed",
             sig, abbrev != NULL ? abbrev : "?", strsignal(sig), where);
    } else {
        fail(why, 0, "the uploaded model's process exited with status %d without a result%s",
             WIFEXITED(status) ? WEXITSTATUS(status) : -1, where);
    }
}

/* Reads "F {reason, retryable, abandoned}" into why. */
static void read_failure(const char *text, struct rw_failure *why)
{
    json_t *f = json_loads(text, 0, NULL);
    const char *r = json_string_value(json_object_get(f, "reason"));
    fail(why, json_is_true(json_object_get(f, "retryable")), "%s",
         r != NULL && r[0] != '\0' ? r : "the sandboxed process failed without a reason");
    why->abandoned = json_is_true(json_object_get(f, "abandoned"));
    json_decref(f);
}

json_t *rw_sandbox_run(const struct rw_sandbox *sb, const char *kind, const json_t *spec,
                       int attempt, rw_progress_fn progress, void *ctx, struct rw_failure *why)
{
    memset(why, 0, sizeof *why);
    int validation = strcmp(kind, "validation") == 0;
    if (sb->mode == RW_SANDBOX_UNSAFE)
        return validation ? rw_validate(spec, progress, ctx, why)
                          : rw_profile(spec, progress, ctx, why);
    if (sb->mode == RW_SANDBOX_MISSING) {
        fail(why, 1,
             "uploaded models run only in the sandbox, and %s; start the worker with "
             "--unsafe-no-sandbox to run them unconfined (docs/security.md)",
             sb->missing);
        return NULL;
    }

    const char *path = json_string_value(json_object_get(model_spec_of(kind, spec), "model_path"));
    int archive = path != NULL ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    if (archive < 0) {
        fail(why, 1, "cannot open the model's archive: %s", strerror(errno));
        return NULL;
    }
    const char *tmp = getenv("TMPDIR");
    char scratch[PATH_MAX];
    snprintf(scratch, sizeof scratch, "%s/remat-sandbox-XXXXXX",
             tmp != NULL && tmp[0] == '/' ? tmp : "/tmp");
    if (mkdtemp(scratch) == NULL) {
        fail(why, 1, "cannot make the sandbox's scratch folder %s: %s", scratch, strerror(errno));
        close(archive);
        return NULL;
    }

    /* The job: the spec with the child's own path to the archive. */
    json_t *copy = json_deep_copy(spec);
    json_t *ms = copy != NULL ? (json_t *)model_spec_of(kind, copy) : NULL;
    json_t *job = NULL;
    if (ms != NULL && json_object_set_new(ms, "model_path", json_string(CHILD_MODEL_PATH)) == 0)
        job = json_pack("{s:s, s:O, s:s, s:I, s:s, s:I, s:b}", "kind", kind, "spec", copy, "device",
                        sb->device, "memory_bytes", (json_int_t)sb->memory_bytes, "scratch",
                        scratch, "parent_pid", (json_int_t)getpid(), "op_check", !sb->no_op_check);
    json_decref(copy);
    char jpath[PATH_MAX + 16];
    snprintf(jpath, sizeof jpath, "%s/job.json", scratch);
    int job_fd = -1;
    if (job != NULL && json_dump_file(job, jpath, JSON_COMPACT) == 0)
        job_fd = open(jpath, O_RDONLY | O_CLOEXEC);
    unlink(jpath);
    json_decref(job);

    int pfd[2] = {-1, -1};
    pid_t pid = -1;
    json_t *result = NULL;
    struct rematx_dynbuf buf;
    rematx_dyn_init(&buf, MAX_RESULT_BYTES);
    if (job_fd < 0) {
        fail(why, 1, "cannot write the job for the sandboxed process: %s", strerror(errno));
        goto out;
    }
    if (pipe2(pfd, O_CLOEXEC) < 0) {
        fail(why, 1, "cannot make a pipe: %s", strerror(errno));
        goto out;
    }
    pid = spawn_child(job_fd, archive, pfd[1], scratch, why);
    close(pfd[1]);
    pfd[1] = -1;
    if (pid < 0)
        goto out;

    double deadline = now_s() + sb->job_timeout_s;
    int stage = 0, stages = 0, eof = 0, killed_for = 0, status = 0, reaped = 0;
    const char *activity = "loading";
    size_t scanned = 0;
    enum { KILL_TIMEOUT = 1, KILL_STOP, KILL_OVERSIZE };
    while (!reaped) {
        double left = deadline - now_s();
        if (left <= 0 && !killed_for) {
            killed_for = KILL_TIMEOUT;
            kill(pid, SIGKILL);
        }
        if (!killed_for && progress != NULL && progress(ctx, stage, stages, activity) != 0) {
            killed_for = KILL_STOP;
            kill(pid, SIGKILL);
        }
        if (!eof) {
            struct pollfd p = {pfd[0], POLLIN, 0};
            int wait_ms = left > 0.25 ? 250 : left > 0 ? (int)(left * 1000) + 1 : 50;
            if (poll(&p, 1, wait_ms) > 0) {
                char chunk[65536];
                ssize_t n = read(pfd[0], chunk, sizeof chunk);
                if (n == 0)
                    eof = 1;
                else if (n > 0 && rematx_dyn_addn(&buf, chunk, (size_t)n) < 0 && !killed_for) {
                    killed_for = KILL_OVERSIZE;
                    kill(pid, SIGKILL);
                }
            }
            /* Progress lines as they come; the last line is the result. */
            char *b = rematx_dyn_ptr(&buf);
            size_t len = rematx_dyn_len(&buf);
            for (;;) {
                char *nl = b != NULL ? memchr(b + scanned, '\n', len - scanned) : NULL;
                if (nl == NULL)
                    break;
                if (b[scanned] == 'P') {
                    int s, ss;
                    char act[32];
                    *nl = '\0';
                    if (sscanf(b + scanned, "P %d %d %31s", &s, &ss, act) == 3) {
                        stage = s;
                        stages = ss;
                        activity = static_activity(act);
                    }
                    *nl = '\n';
                }
                scanned = (size_t)(nl - b) + 1;
            }
        } else {
            /* The pipe is closed: wait for the exit, still under the deadline. */
            struct timespec t = {0, 20 * 1000000L};
            nanosleep(&t, NULL);
        }
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            reaped = 1;
        else if (w < 0 && errno != EINTR) {
            reaped = 1;
            status = 0;
        }
    }
    /* Whatever the child wrote before it ended. */
    for (;;) {
        char chunk[65536];
        ssize_t n = read(pfd[0], chunk, sizeof chunk);
        if (n <= 0 || rematx_dyn_addn(&buf, chunk, (size_t)n) < 0)
            break;
    }

    if (killed_for == KILL_TIMEOUT) {
        char where[96];
        describe_where(where, sizeof where, stage, stages, activity);
        fail(why, 0,
             "the job ran past its time limit of %d s (--job-timeout, REMAT_JOB_TIMEOUT): the "
             "uploaded model's process was killed%s",
             sb->job_timeout_s, where);
    } else if (killed_for == KILL_STOP) {
        fail(why, 1, "abandoned: the lease was lost or the worker is stopping");
        why->abandoned = 1;
    } else if (killed_for == KILL_OVERSIZE) {
        fail(why, 0, "the uploaded model's process wrote more than %u bytes of result",
             MAX_RESULT_BYTES);
    } else {
        /* The last whole line: R or F; anything else is a process that
         * ended without saying how. */
        char *b = rematx_dyn_ptr(&buf);
        size_t len = rematx_dyn_len(&buf);
        char *last = NULL;
        if (b != NULL && len > 0 && b[len - 1] == '\n') {
            b[len - 1] = '\0';
            last = strrchr(b, '\n');
            last = last != NULL ? last + 1 : b;
        }
        int clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (clean && last != NULL && last[0] == 'R' && last[1] == ' ') {
            result = json_loads(last + 2, 0, NULL);
            if (!json_is_object(result)) {
                json_decref(result);
                result = NULL;
                fail(why, 0, "the uploaded model's process gave a result that is not an object");
            }
        } else if (last != NULL && last[0] == 'F' && last[1] == ' ') {
            /* The child's own words, also when it could not confine itself
             * and exited 1. */
            read_failure(last + 2, why);
        } else {
            explain_end(status, attempt, stage, stages, activity, why);
        }
    }

out:
    rematx_dyn_free(&buf);
    if (pfd[0] >= 0)
        close(pfd[0]);
    if (job_fd >= 0)
        close(job_fd);
    close(archive);
    /* FTW_PHYS: a link the child made is removed, never followed. */
    nftw(scratch, remove_one, 16, FTW_DEPTH | FTW_PHYS);
    return result;
}
