/*
 * sandbox.c - the sandboxed child that loads and runs uploaded models
 * (sandbox.h; the threat model and what is allowed: docs/security.md).
 *
 * The worker's side (rw_sandbox_run) makes a private scratch folder,
 * writes the job there, and starts /proc/self/exe --sandbox-child with
 * posix_spawn: three descriptors (3 the job, 4 the archive, 5 the result
 * pipe), stdin and stdout on /dev/null, stderr the worker's log, every
 * other descriptor closed, a clean environment, a process group of its
 * own.  It then reads the child's progress lines, passes them on to the
 * job's heartbeat, and kills the child at the deadline or when the job is
 * lost or the worker stops.
 *
 * The child's side (rw_sandbox_child_main) opens the device first (libtorch
 * reads what it needs to start while it still may), then confines itself,
 * then runs the job, and writes one line: "R <result JSON>" or
 * "F <failure JSON>".  Progress lines are "P <stage> <stages> <activity>".
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
#include <linux/landlock.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef HAVE_SECCOMP
#include <seccomp.h>
#endif

#include <jansson.h>

#include "rematx/rematx.h"
#include "sandbox.h"
#include "shim.h"

extern char **environ;

/* The child's descriptors. */
enum { FD_JOB = 3, FD_ARCHIVE = 4, FD_RESULT = 5 };

/* The archive as the child opens it: its own descriptor, through /proc.
 * The child never learns where the worker keeps its cache. */
#define CHILD_MODEL_PATH "/proc/self/fd/4"

/* A result line may be long (a validation's timeline), not unbounded. */
#define MAX_RESULT_BYTES (256u * 1024 * 1024)

/* Landlock rights newer than Debian 12's <linux/landlock.h> (ABI 2). */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14) /* ABI 3 */
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */
#endif
#define LL_NET_BIND_TCP (1ULL << 0)        /* ABI 4 */
#define LL_NET_CONNECT_TCP (1ULL << 1)     /* ABI 4 */
#define LL_SCOPE_ABSTRACT_UNIX (1ULL << 0) /* ABI 6 */
#define LL_SCOPE_SIGNAL (1ULL << 1)        /* ABI 6 */

/* struct landlock_ruleset_attr as of ABI 6; the kernel is told the size
 * its ABI knows, so older kernels read only the fields they have. */
struct ll_ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

static int landlock_abi(void)
{
    long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return v > 0 ? (int)v : 0;
}

void rw_sandbox_init(struct rw_sandbox *sb, const char *device, long long memory_bytes,
                     int job_timeout_s, int unsafe)
{
    memset(sb, 0, sizeof *sb);
    sb->device = device;
    sb->memory_bytes = memory_bytes;
    sb->job_timeout_s = job_timeout_s > 0 ? job_timeout_s : RW_JOB_TIMEOUT_DEFAULT_S;
    sb->landlock_abi = landlock_abi();
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

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
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
        job = json_pack("{s:s, s:O, s:s, s:I, s:s, s:I}", "kind", kind, "spec", copy, "device",
                        sb->device, "memory_bytes", (json_int_t)sb->memory_bytes, "scratch",
                        scratch, "parent_pid", (json_int_t)getpid());
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

/* ---- the child's side ---- */

static void child_report(const char *tag, json_t *body)
{
    char *text = rematx_json_dumps(body, JSON_COMPACT);
    if (text != NULL) {
        write_all(FD_RESULT, tag, 2);
        write_all(FD_RESULT, text, strlen(text));
        write_all(FD_RESULT, "\n", 1);
    }
    free(text);
}

static void child_fail(const struct rw_failure *why)
{
    json_t *f = json_pack("{s:s, s:b, s:b}", "reason", why->reason, "retryable", why->retryable,
                          "abandoned", why->abandoned);
    child_report("F ", f);
    json_decref(f);
}

static void child_fail_msg(const char *msg)
{
    struct rw_failure why;
    memset(&why, 0, sizeof why);
    snprintf(why.reason, sizeof why.reason, "sandbox: %s", msg);
    child_fail(&why);
}

static int child_progress(void *ctx, int stage, int stages, const char *activity)
{
    (void)ctx;
    char line[96];
    int n = snprintf(line, sizeof line, "P %d %d %s\n", stage, stages, activity);
    if (n > 0 && (size_t)n < sizeof line)
        write_all(FD_RESULT, line, (size_t)n);
    return 0; /* the worker kills this process when the job must stop */
}

/* The process's virtual size now, in bytes (VmSize), or -1. */
static long long vm_size(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL)
        return -1;
    char line[256];
    long long kb = -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "VmSize: %lld kB", &kb) == 1)
            break;
    fclose(f);
    return kb >= 0 ? kb * 1024 : -1;
}

/* Room for what libtorch maps after the limit is set and is no tensor:
 * the stacks of its thread pools (8 MiB each) and malloc's per-thread
 * arenas (64 MiB of address space each, little of it touched). */
#define AS_SLACK_BYTES (1LL << 30)

static int set_limits(const char *device, long long memory_bytes)
{
    struct rlimit none = {0, 0};
    if (setrlimit(RLIMIT_CORE, &none) < 0)
        return -1;
    if (memory_bytes <= 0)
        return 0;
    long long vm = vm_size();
    if (vm < 0)
        return -1;
    /* A file in the scratch folder is memory too where /tmp is a tmpfs. */
    struct rlimit fsize = {(rlim_t)memory_bytes, (rlim_t)memory_bytes};
    if (setrlimit(RLIMIT_FSIZE, &fsize) < 0)
        return -1;
    if (strncmp(device, "cuda", 4) == 0) {
        /* The CUDA driver reserves address space far beyond the machine's
         * memory (unified addressing): RLIMIT_AS would make it fail to
         * start.  RLIMIT_DATA counts the private writable mappings, which
         * is where host memory goes (malloc, pinned buffers); the
         * reservations are PROT_NONE and the device's mappings shared. */
        struct rlimit data = {(rlim_t)(vm + memory_bytes), (rlim_t)(vm + memory_bytes)};
        return setrlimit(RLIMIT_DATA, &data);
    }
    /* On a CPU every byte the model can allocate is in the address space. */
    rlim_t as = (rlim_t)(vm + memory_bytes + AS_SLACK_BYTES);
    struct rlimit lim = {as, as};
    return setrlimit(RLIMIT_AS, &lim);
}

/* The rights each kind of rule grants, and the ones a rule on a file (not
 * a folder) may carry at all (the kernel refuses the others). */
#define LL_READ (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
#define LL_EXEC (LL_READ | LANDLOCK_ACCESS_FS_EXECUTE)
#define LL_FILE_RIGHTS                                                                             \
    (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |   \
     LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV)
#define LL_DEVICE (LL_READ | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_IOCTL_DEV)
#define LL_SCRATCH                                                                                 \
    (LL_READ | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |                     \
     LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |  \
     LANDLOCK_ACCESS_FS_REFER | LANDLOCK_ACCESS_FS_TRUNCATE)

static uint64_t ll_fs_rights(int abi)
{
    uint64_t all = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1; /* ABI 1: bits 0-12 */
    if (abi >= 2)
        all |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3)
        all |= LANDLOCK_ACCESS_FS_TRUNCATE;
    if (abi >= 5)
        all |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
    return all;
}

/* Adds a rule for fd (a folder or a file); rights the ABI lacks are dropped. */
static int ll_allow_fd(int rs, int fd, uint64_t rights, uint64_t handled)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -1;
    if (!S_ISDIR(st.st_mode))
        rights &= LL_FILE_RIGHTS;
    struct landlock_path_beneath_attr pb = {.allowed_access = rights & handled, .parent_fd = fd};
    if (pb.allowed_access == 0)
        return 0;
    return syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) == 0 ? 0 : -1;
}

/* A path that does not exist here (no GPU, another distribution's
 * folders) is no error: there is nothing to allow. */
static int ll_allow(int rs, const char *path, uint64_t rights, uint64_t handled)
{
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT || errno == ENOTDIR || errno == EACCES ? 0 : -1;
    int rc = ll_allow_fd(rs, fd, rights, handled);
    close(fd);
    return rc;
}

/* The folders of every library mapped now (libtorch and the ~290
 * libraries it pulled in): libraries libtorch loads later with dlopen
 * (oneDNN's, MKL's, CUDA's) sit beside them.  Not remat-worker's own
 * folder, unless a library shares it: the program is mapped already, and
 * an operator may keep other things beside it. */
static int ll_allow_mapped(int rs, uint64_t handled)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (f == NULL)
        return -1;
    char line[PATH_MAX + 128], seen[64][PATH_MAX], exe[PATH_MAX];
    ssize_t el = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[el > 0 ? el : 0] = '\0';
    int nseen = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f) != NULL) {
        char *p = strchr(line, '/');
        if (p == NULL)
            continue;
        p[strcspn(p, "\n")] = '\0';
        if (strcmp(p, exe) == 0)
            continue;
        char *slash = strrchr(p, '/');
        if (slash == p)
            continue; /* a file at the root: nothing to allow */
        *slash = '\0';
        int dup = 0;
        for (int i = 0; i < nseen && !dup; i++)
            dup = strcmp(seen[i], p) == 0;
        if (dup)
            continue;
        if (nseen < 64)
            snprintf(seen[nseen++], PATH_MAX, "%s", p);
        rc = ll_allow(rs, p, LL_EXEC, handled);
    }
    fclose(f);
    return rc;
}

static int apply_landlock(int abi, const char *device, const char *scratch, int archive_fd)
{
    struct ll_ruleset_attr attr = {.handled_access_fs = ll_fs_rights(abi)};
    size_t size = sizeof attr.handled_access_fs;
    if (abi >= 4) {
        /* No TCP at all (the seccomp filter refuses every socket too). */
        attr.handled_access_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP;
        size += sizeof attr.handled_access_net;
    }
    if (abi >= 6) {
        /* No signal to a process outside the sandbox (the worker). */
        attr.scoped = LL_SCOPE_ABSTRACT_UNIX | LL_SCOPE_SIGNAL;
        size += sizeof attr.scoped;
    }
    uint64_t h = attr.handled_access_fs;
    int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
    if (rs < 0)
        return -1;
    int rc = 0;
    rc |= ll_allow_mapped(rs, h);
    /* The dynamic loader's cache, for dlopen. */
    rc |= ll_allow(rs, "/etc/ld.so.cache", LANDLOCK_ACCESS_FS_READ_FILE, h);
    /* What libtorch reads of the machine: the CPUs (cpuinfo, OpenMP), the
     * memory.  /proc/self only: another process's /proc is denied by
     * Landlock's ptrace rule anyway (the worker's environment holds its
     * token). */
    rc |= ll_allow(rs, "/proc/self", LL_READ, h);
    rc |= ll_allow(rs, "/proc/cpuinfo", LL_READ, h);
    rc |= ll_allow(rs, "/proc/meminfo", LL_READ, h);
    rc |= ll_allow(rs, "/proc/stat", LL_READ, h);
    rc |= ll_allow(rs, "/sys/devices/system/cpu", LL_READ, h);
    rc |= ll_allow(rs, "/sys/devices/system/node", LL_READ, h);
    rc |= ll_allow(rs, "/sys/fs/cgroup", LL_READ, h);
    rc |= ll_allow(rs, "/dev/null", LL_READ | LANDLOCK_ACCESS_FS_WRITE_FILE, h);
    rc |= ll_allow(rs, "/dev/zero", LL_READ, h);
    rc |= ll_allow(rs, "/dev/urandom", LL_READ, h);
    rc |= ll_allow(rs, "/dev/random", LL_READ, h);
    if (strncmp(device, "cuda", 4) == 0) {
        /* CUDA: the driver's device files with their ioctls (Landlock ABI
         * 5 and later tell ioctls on devices apart; nothing else gets
         * them), what the driver reads of itself and of the PCI bus, and
         * the libraries it loads (libcuda, libnvrtc) beside the mapped
         * ones or in CUDA's usual folders.  Not run on a GPU here: see
         * docs/security.md. */
        static const char *const dev[] = {"/dev/nvidiactl", "/dev/nvidia-uvm",
                                          "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset",
                                          "/dev/nvidia-caps"};
        for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
            rc |= ll_allow(rs, dev[i], LL_DEVICE, h);
        for (int i = 0; i < 64; i++) {
            char p[32];
            snprintf(p, sizeof p, "/dev/nvidia%d", i);
            rc |= ll_allow(rs, p, LL_DEVICE, h);
        }
        rc |= ll_allow(rs, "/proc/driver/nvidia", LL_READ, h);
        rc |= ll_allow(rs, "/proc/devices", LL_READ, h);
        rc |= ll_allow(rs, "/sys/bus/pci", LL_READ, h);
        rc |= ll_allow(rs, "/sys/devices", LL_READ, h);
        rc |= ll_allow(rs, "/usr/local/cuda", LL_EXEC, h);
        rc |= ll_allow(rs, "/usr/lib/x86_64-linux-gnu", LL_EXEC, h);
        rc |= ll_allow(rs, "/usr/lib64", LL_EXEC, h);
    }
    rc |= ll_allow(rs, scratch, LL_SCRATCH, h);
    /* The archive, by its descriptor: the child opens it as /proc/self/fd/4. */
    if (archive_fd >= 0)
        rc |= ll_allow_fd(rs, archive_fd, LANDLOCK_ACCESS_FS_READ_FILE, h);
    if (rc == 0)
        rc = (int)syscall(SYS_landlock_restrict_self, rs, 0);
    close(rs);
    return rc;
}

#ifdef HAVE_SECCOMP
/* Default allow, with a deny list: libtorch and a GPU driver make too many
 * kinds of system call to list them all, and what the list denies is what
 * would let a model reach past its process.  A call from another
 * architecture's table (x32, i386) kills the process: the deny list is
 * written for this one. */
static int apply_seccomp(void)
{
    scmp_filter_ctx f = seccomp_init(SCMP_ACT_ALLOW);
    if (f == NULL)
        return -1;
    int rc = seccomp_attr_set(f, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    static const char *const denied[] = {
        /* no sockets (no network, no local daemon) */
        "socket",
        "socketpair",
        /* no processes: exec, fork (a thread is a clone with CLONE_THREAD, below) */
        "execve",
        "execveat",
        "fork",
        "vfork",
        /* no new limits, priorities or credentials */
        "setrlimit",
        "setpriority",
        "ioprio_set",
        "setuid",
        "setgid",
        "setreuid",
        "setregid",
        "setresuid",
        "setresgid",
        "setgroups",
        "setfsuid",
        "setfsgid",
        "capset",
        /* no reaching into other processes */
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "kcmp",
        "pidfd_open",
        "pidfd_getfd",
        "pidfd_send_signal",
        "tkill",
        /* no namespaces, mounts or kernel state */
        "unshare",
        "setns",
        "mount",
        "umount2",
        "pivot_root",
        "chroot",
        "mount_setattr",
        "open_tree",
        "move_mount",
        "fsopen",
        "fsmount",
        "fsconfig",
        "fspick",
        "swapon",
        "swapoff",
        "reboot",
        "kexec_load",
        "kexec_file_load",
        "init_module",
        "finit_module",
        "delete_module",
        "acct",
        "quotactl",
        "bpf",
        "perf_event_open",
        "userfaultfd",
        "keyctl",
        "add_key",
        "request_key",
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "syslog",
        "sethostname",
        "setdomainname",
        "settimeofday",
        "clock_settime",
        "clock_adjtime",
        "adjtimex",
        /* no memory the rlimits do not see (a memfd is memory, not a mapping) */
        "memfd_create",
        "memfd_secret",
    };
    for (size_t i = 0; rc == 0 && i < sizeof denied / sizeof denied[0]; i++) {
        int nr = seccomp_syscall_resolve_name(denied[i]);
        if (nr != __NR_SCMP_ERROR)
            rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), nr, 0);
    }
    pid_t self = getpid();
    /* Threads only: clone without CLONE_THREAD would be a process.
     * clone3 hides its flags in memory seccomp cannot read: ENOSYS makes
     * glibc fall back to clone. */
    if (rc == 0)
        rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                              SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
    if (rc == 0)
        rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    /* Reading a limit is fine (glibc's getrlimit is prlimit64 with no new
     * one); setting one is not. */
    if (rc == 0)
        rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(prlimit64), 1,
                              SCMP_A2(SCMP_CMP_NE, 0));
    /* Signals only to itself (raise, abort). */
    if (rc == 0)
        rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(kill), 1,
                              SCMP_A0(SCMP_CMP_NE, (scmp_datum_t)self));
    if (rc == 0)
        rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(tgkill), 1,
                              SCMP_A0(SCMP_CMP_NE, (scmp_datum_t)self));
    if (rc == 0)
        rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(rt_sigqueueinfo), 1,
                              SCMP_A0(SCMP_CMP_NE, (scmp_datum_t)self));
    if (rc == 0)
        rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(rt_tgsigqueueinfo), 1,
                              SCMP_A0(SCMP_CMP_NE, (scmp_datum_t)self));
    /* No typing into the worker's terminal, if its log is one. */
    if (rc == 0)
        rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                              SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI));
    if (rc == 0)
        rc = seccomp_load(f);
    seccomp_release(f);
    return rc == 0 ? 0 : -1;
}
#endif

int rw_sandbox_confine(const char *device, const char *scratch, int archive_fd,
                       long long memory_bytes, char *why, size_t cap)
{
    int abi = landlock_abi();
    if (set_limits(device, memory_bytes) < 0) {
        snprintf(why, cap, "cannot set the memory limit: %s", strerror(errno));
        return -1;
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || abi == 0 ||
        apply_landlock(abi, device, scratch, archive_fd) < 0) {
        snprintf(why, cap, "cannot apply the Landlock ruleset (ABI %d): %s", abi, strerror(errno));
        return -1;
    }
#ifdef HAVE_SECCOMP
    if (apply_seccomp() < 0) {
        snprintf(why, cap, "cannot load the seccomp filter");
        return -1;
    }
    return 0;
#else
    snprintf(why, cap, "this remat-worker was built without libseccomp");
    return -1;
#endif
}

int rw_sandbox_child_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    /* If the worker dies, so does this process; and if it died before
     * this line, the child must not run on alone. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    json_t *job = json_loadfd(FD_JOB, 0, NULL);
    close(FD_JOB);
    const char *kind = json_string_value(json_object_get(job, "kind"));
    const char *device = json_string_value(json_object_get(job, "device"));
    const char *scratch = json_string_value(json_object_get(job, "scratch"));
    const json_t *spec = json_object_get(job, "spec");
    long long memory_bytes = json_integer_value(json_object_get(job, "memory_bytes"));
    pid_t parent = (pid_t)json_integer_value(json_object_get(job, "parent_pid"));
    if (kind == NULL || device == NULL || scratch == NULL || !json_is_object(spec)) {
        child_fail_msg("the job given to the sandboxed process is incomplete");
        return 1;
    }
    if (getppid() != parent)
        return 1;
    if (chdir(scratch) < 0) {
        child_fail_msg("cannot enter the scratch folder");
        return 1;
    }

    struct rw_failure why;
    memset(&why, 0, sizeof why);
    /* libtorch starts (and reads what it needs of the machine) before the
     * model can run anything. */
    if (rw_open(device, memory_bytes, &why) != 0) {
        child_fail(&why);
        return 0;
    }
    char msg[200];
    if (rw_sandbox_confine(device, scratch, FD_ARCHIVE, memory_bytes, msg, sizeof msg) < 0) {
        child_fail_msg(msg);
        return 1;
    }

    json_t *result = strcmp(kind, "validation") == 0 ? rw_validate(spec, child_progress, NULL, &why)
                                                     : rw_profile(spec, child_progress, NULL, &why);
    if (result != NULL) {
        child_report("R ", result);
        json_decref(result);
    } else {
        /* Past RLIMIT_AS, a list or a vector fails as std::bad_alloc,
         * which the interpreter passes on as a RuntimeError. */
        if ((strstr(why.reason, "out of memory") != NULL ||
             strstr(why.reason, "bad_alloc") != NULL) &&
            memory_bytes > 0) {
            char reason[sizeof why.reason + 128];
            int n = snprintf(reason, sizeof reason,
                             "%s%s (the sandbox allows the model %lld bytes: --cpu-limit)",
                             strstr(why.reason, "out of memory") != NULL ? "" : "out of memory: ",
                             why.reason, memory_bytes);
            size_t keep = n < 0                           ? 0
                          : (size_t)n < sizeof why.reason ? (size_t)n
                                                          : sizeof why.reason - 1;
            memcpy(why.reason, reason, keep);
            why.reason[keep] = '\0';
        }
        child_fail(&why);
    }
    json_decref(job);
    /* As the worker itself ends (main.c): no library destructors. */
    _exit(0);
}
