/*
 * test_sandbox.c - what a process confined by rw_sandbox_confine (the
 * sandbox of uploaded models, worker/confine.c, docs/security.md) can and
 * cannot do, one system call at a time: the lines of docs/security.md that
 * no TorchScript model can drive (sockets, processes, limits, signals to
 * the worker, memfd) and the file rules again, without libtorch.
 *
 * Each test forks a child that confines itself and tries one thing; the
 * child's exit status says what happened.  The shim's calls (rw_open,
 * rw_profile, rw_validate) are stubs here: sandbox.c's job runner is not
 * what is tested.  Skips (77) without Landlock or without libseccomp.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create */
#endif
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../worker/sandbox.h"

/* The shim is not under test (see the top). */
int rw_open(const char *device, long long cpu_limit_bytes, struct rw_failure *why)
{
    (void)device;
    (void)cpu_limit_bytes;
    (void)why;
    return 0;
}

json_t *rw_profile(const json_t *spec, rw_progress_fn progress, void *ctx, struct rw_failure *why)
{
    (void)spec;
    (void)progress;
    (void)ctx;
    snprintf(why->reason, sizeof why->reason, "stub");
    return NULL;
}

json_t *rw_validate(const json_t *spec, rw_progress_fn progress, void *ctx, struct rw_failure *why)
{
    return rw_profile(spec, progress, ctx, why);
}

void rw_set_op_check(int on)
{
    (void)on;
}

static char scratch[256], outside[300], archive[300];
static int archive_fd = -1; /* in the child: its archive, as fd 4 is the sandbox's */

/* What a confined child's attempt gave: its errno (0: it worked). */
typedef int (*attempt_fn)(void);

static int confined(attempt_fn f)
{
    pid_t pid = fork();
    if (pid == 0) {
        archive_fd = open(archive, O_RDONLY);
        char why[256] = "cannot open the archive";
        if (archive_fd < 0 ||
            rw_sandbox_confine("cpu", scratch, archive_fd, 1LL << 30, why, sizeof why) < 0) {
            fprintf(stderr, "confine: %s\n", why);
            _exit(255);
        }
        _exit(f());
    }
    int status = 0;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status));
    assert_int_not_equal(WEXITSTATUS(status), 255);
    return WEXITSTATUS(status);
}

static int result(int rc)
{
    return rc < 0 ? (errno > 0 && errno < 255 ? errno : 254) : 0;
}

static int try_inet_socket(void)
{
    return result(socket(AF_INET, SOCK_STREAM, 0));
}

static int try_unix_socket(void)
{
    return result(socket(AF_UNIX, SOCK_STREAM, 0));
}

static int try_socketpair(void)
{
    int sv[2];
    return result(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
}

static int try_fork(void)
{
    pid_t p = fork();
    if (p == 0)
        _exit(0);
    return result(p < 0 ? -1 : 0);
}

static int try_exec(void)
{
    char *argv[] = {(char *)"true", NULL};
    return result(execv("/bin/true", argv));
}

static void *thread_main(void *arg)
{
    return arg;
}

static int try_thread(void)
{
    pthread_t t;
    int rc = pthread_create(&t, NULL, thread_main, NULL);
    if (rc != 0)
        return rc;
    pthread_join(t, NULL);
    return 0;
}

static int try_setrlimit(void)
{
    struct rlimit r;
    getrlimit(RLIMIT_NOFILE, &r);
    r.rlim_cur = r.rlim_cur > 16 ? r.rlim_cur - 1 : r.rlim_cur;
    return result(setrlimit(RLIMIT_NOFILE, &r));
}

static int try_getrlimit(void)
{
    struct rlimit r;
    return result(getrlimit(RLIMIT_AS, &r));
}

static int try_kill_parent(void)
{
    return result(kill(getppid(), 0));
}

static int try_raise_self(void)
{
    return result(kill(getpid(), 0));
}

static int try_memfd(void)
{
    return result(memfd_create("x", 0));
}

static int try_read_hostname(void)
{
    return result(open("/etc/hostname", O_RDONLY));
}

static int try_write_outside(void)
{
    return result(open(outside, O_WRONLY | O_CREAT, 0600));
}

static int try_write_scratch(void)
{
    char p[300];
    snprintf(p, sizeof p, "%s/file", scratch);
    int fd = open(p, O_WRONLY | O_CREAT, 0600);
    return result(fd < 0 || write(fd, "x", 1) != 1 ? -1 : 0);
}

static int try_read_archive(void)
{
    char c, p[64];
    snprintf(p, sizeof p, "/proc/self/fd/%d", archive_fd);
    int fd = open(p, O_RDONLY);
    return result(fd < 0 || read(fd, &c, 1) != 1 ? -1 : 0);
}

static int try_ptrace_environ(void)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%ld/environ", (long)getppid());
    return result(open(p, O_RDONLY));
}

/* In the sanitizer build: an allocation the memory limit refuses returns
 * NULL, as malloc does, instead of aborting the process (ASan's default),
 * so that the limit is tested, not the sanitizer. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1";
}

static int try_big_malloc(void)
{
    /* 2 GiB past a 1 GiB limit (plus its 1 GiB of slack). */
    void *volatile p = malloc((size_t)3 << 30); /* volatile: never elided as unused */
    int rc = p == NULL ? ENOMEM : 0;
    free(p);
    return rc;
}

static void no_sockets(void **state)
{
    (void)state;
    assert_int_equal(confined(try_inet_socket), EPERM);
    assert_int_equal(confined(try_unix_socket), EPERM);
    assert_int_equal(confined(try_socketpair), EPERM);
}

static void no_processes_but_threads(void **state)
{
    (void)state;
    assert_int_equal(confined(try_fork), EPERM);
    assert_int_equal(confined(try_exec), EPERM);
    assert_int_equal(confined(try_thread), 0);
}

static void no_new_limits(void **state)
{
    (void)state;
    assert_int_equal(confined(try_setrlimit), EPERM);
    assert_int_equal(confined(try_getrlimit), 0);
}

static void signals_only_to_itself(void **state)
{
    (void)state;
    assert_int_equal(confined(try_kill_parent), EPERM);
    assert_int_equal(confined(try_raise_self), 0);
}

static void no_memfd_and_a_memory_limit(void **state)
{
    (void)state;
    assert_int_equal(confined(try_memfd), EPERM);
    assert_int_equal(confined(try_big_malloc), ENOMEM);
}

static void files(void **state)
{
    (void)state;
    assert_int_equal(confined(try_read_hostname), EACCES);
    assert_int_equal(confined(try_write_outside), EACCES);
    assert_int_equal(access(outside, F_OK), -1);
    assert_int_equal(confined(try_write_scratch), 0);
    assert_int_equal(confined(try_read_archive), 0);
    assert_int_equal(confined(try_ptrace_environ), EACCES);
}

int main(void)
{
    struct rw_sandbox sb;
    rw_sandbox_init(&sb, "cpu", 0, 0, 0);
    if (sb.mode != RW_SANDBOX_ON) {
        printf("SKIP: no sandbox here: %s\n", sb.missing);
        return 77;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(scratch, sizeof scratch, "%s/remat-test-sandbox-XXXXXX",
             tmp != NULL && tmp[0] == '/' ? tmp : "/tmp");
    if (mkdtemp(scratch) == NULL)
        return 1;
    /* The archive and the forbidden file sit outside the scratch folder. */
    snprintf(outside, sizeof outside, "%s.outside", scratch);
    snprintf(archive, sizeof archive, "%s.archive", scratch);
    FILE *f = fopen(archive, "w");
    if (f == NULL)
        return 1;
    fputs("PK", f);
    fclose(f);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(no_sockets),
        cmocka_unit_test(no_processes_but_threads),
        cmocka_unit_test(no_new_limits),
        cmocka_unit_test(signals_only_to_itself),
        cmocka_unit_test(no_memfd_and_a_memory_limit),
        cmocka_unit_test(files),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char p[300];
    snprintf(p, sizeof p, "%s/file", scratch);
    unlink(p);
    rmdir(scratch);
    unlink(archive);
    unlink(outside);
    return rc;
}
