/*
 * confine.c - the sandboxed child's side: it confines itself and runs an
 * uploaded model (sandbox.h; the threat model and what is allowed:
 * docs/security.md; the worker's side that starts it: sandbox.c).
 *
 * rw_sandbox_child_main opens the device first (libtorch reads what it
 * needs to start while it still may), then confines itself
 * (rw_sandbox_confine: rlimits, no_new_privs, a Landlock ruleset, a seccomp
 * filter), then runs the job, and writes one line on FD_RESULT:
 * "R <result JSON>" or "F <failure JSON>".  Progress lines are
 * "P <stage> <stages> <activity>".
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* SYS_landlock_*, O_PATH, CLONE_THREAD */
#endif
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/landlock.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef HAVE_SECCOMP
#include <seccomp.h>
#endif

#include <jansson.h>

#include "rematx/rematx.h"
#include "sandbox.h"
#include "sandbox_private.h"
#include "shim.h"

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

int rw_sandbox_landlock_abi(void)
{
    long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return v > 0 ? (int)v : 0;
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

/* A path and what it is allowed. */
struct ll_path {
    const char *path;
    uint64_t rights;
};

/* Allows every path of the table, in order; a path that fails does not
 * stop the others (the ruleset is dropped whole when one did). */
static int ll_allow_all(int rs, const struct ll_path *paths, size_t n, uint64_t handled)
{
    int rc = 0;
    for (size_t i = 0; i < n; i++)
        rc |= ll_allow(rs, paths[i].path, paths[i].rights, handled);
    return rc;
}

/* What every child may read beside the libraries: the dynamic loader's
 * cache, for dlopen; what libtorch reads of the machine: the CPUs
 * (cpuinfo, OpenMP), the memory.  /proc/self only: another process's /proc
 * is denied by Landlock's ptrace rule anyway (the worker's environment
 * holds its token). */
static const struct ll_path everywhere[] = {
    {"/etc/ld.so.cache", LANDLOCK_ACCESS_FS_READ_FILE},
    {"/proc/self", LL_READ},
    {"/proc/cpuinfo", LL_READ},
    {"/proc/meminfo", LL_READ},
    {"/proc/stat", LL_READ},
    {"/sys/devices/system/cpu", LL_READ},
    {"/sys/devices/system/node", LL_READ},
    {"/sys/fs/cgroup", LL_READ},
    {"/dev/null", LL_READ | LANDLOCK_ACCESS_FS_WRITE_FILE},
    {"/dev/zero", LL_READ},
    {"/dev/urandom", LL_READ},
    {"/dev/random", LL_READ},
};

/* CUDA: the driver's device files with their ioctls (Landlock ABI 5 and
 * later tell ioctls on devices apart; nothing else gets them; the
 * numbered /dev/nvidiaN are added in apply_landlock), what the driver reads
 * of itself and of the PCI bus, and the libraries it loads (libcuda,
 * libnvrtc) beside the mapped ones or in CUDA's usual folders.  Not run on
 * a GPU here: see docs/security.md. */
static const struct ll_path cuda_devices[] = {
    {"/dev/nvidiactl", LL_DEVICE},        {"/dev/nvidia-uvm", LL_DEVICE},
    {"/dev/nvidia-uvm-tools", LL_DEVICE}, {"/dev/nvidia-modeset", LL_DEVICE},
    {"/dev/nvidia-caps", LL_DEVICE},
};
static const struct ll_path cuda_files[] = {
    {"/proc/driver/nvidia", LL_READ}, {"/proc/devices", LL_READ},
    {"/sys/bus/pci", LL_READ},        {"/sys/devices", LL_READ},
    {"/usr/local/cuda", LL_EXEC},     {"/usr/lib/x86_64-linux-gnu", LL_EXEC},
    {"/usr/lib64", LL_EXEC},
};

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
    rc |= ll_allow_all(rs, everywhere, sizeof everywhere / sizeof everywhere[0], h);
    if (strncmp(device, "cuda", 4) == 0) {
        /* CUDA: its device files and what its driver reads (cuda_devices,
         * cuda_files). */
        rc |= ll_allow_all(rs, cuda_devices, sizeof cuda_devices / sizeof cuda_devices[0], h);
        for (int i = 0; i < 64; i++) {
            char p[32];
            snprintf(p, sizeof p, "/dev/nvidia%d", i);
            rc |= ll_allow(rs, p, LL_DEVICE, h);
        }
        rc |= ll_allow_all(rs, cuda_files, sizeof cuda_files / sizeof cuda_files[0], h);
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
    /* Signals only to itself (raise, abort): each of these calls names
     * its target process first. */
    const int signalling[] = {SCMP_SYS(kill), SCMP_SYS(tgkill), SCMP_SYS(rt_sigqueueinfo),
                              SCMP_SYS(rt_tgsigqueueinfo)};
    for (size_t i = 0; rc == 0 && i < sizeof signalling / sizeof signalling[0]; i++)
        rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), signalling[i], 1,
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
    int abi = rw_sandbox_landlock_abi();
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
    /* The worker's choice, never the spec's: only a local run turns it off. */
    rw_set_op_check(!json_is_false(json_object_get(job, "op_check")));
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
