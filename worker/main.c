/*
 * main.c - remat-worker: leases profiling and validation jobs from rematd and
 * runs them on one device through the libtorch shim (shim.h).
 *
 * The protocol is the one in docs/worker.md (lease, heartbeat, complete,
 * fail, release).  The shim runs on the main thread; a second thread renews
 * the lease every lease_seconds/3 with the latest per-stage progress, so a
 * long stage never lets the lease lapse.  A stale lease (409) or SIGTERM
 * makes the shim stop at its next step: on SIGTERM the job is released
 * (given back without counting an attempt) and the worker exits 0.
 *
 * One process serves many jobs: libtorch takes most of a second to load.
 * An uploaded model's job is the exception: its model loads and runs in a
 * sandboxed child, remat-worker --sandbox-child (sandbox.h), exec'd per job.
 *
 * Local modes for tests and for machines without rematd:
 *   remat-worker --profile-local SPEC.json            prints the profile
 *   remat-worker --validate-local SPEC.json PLAN.json prints the validation;
 *       --profile PROFILE.json checks the plan against the profile it was
 *       made from, as a validation job from rematd does
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "cache.h"
#include "http.h"
#include "rematx/rematx.h"
#include "sandbox.h"
#include "shim.h"

#define MAX_REPLY_BYTES (16 * 1024 * 1024)

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
    (void)sig;
    stopping = 1;
}

/* SIGTERM and SIGINT are blocked from before the shared libraries'
 * initializers run until main has its handlers, so that one sent while the
 * worker starts waits instead of being lost.  In a container the worker is
 * PID 1, and the kernel drops a signal that PID 1 leaves at its default
 * action: a stop in the second or so the worker takes to start was
 * dropped, and the worker served on until SIGKILL (as PID 1 of a PID
 * namespace, 7 of 20 SIGTERMs sent 0-1.5 s after the start).  A blocked
 * signal is never dropped; it is delivered when main unblocks it.  An
 * executable's .preinit_array runs before any library's initializer
 * (libtorch's take 0.45-0.65 s here), and threads those initializers start
 * inherit the mask, so the signal goes to the main thread.  What is left is
 * the dynamic loader's own work before it, mapping and binding the ~290
 * libraries (0.4-0.5 s here: 20 of 30 SIGTERMs sent 0-0.4 s after the
 * start are still dropped); only a launcher that blocks the signals before
 * it execs this program, or an init as PID 1, closes that too: the
 * worker images run it under tini (deploy/Dockerfile.worker-*). */
static void block_stop_signals(int argc, char **argv, char **envp)
{
    (void)argc;
    (void)argv;
    (void)envp;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, NULL);
}

typedef void (*preinit_fn)(int, char **, char **);
__attribute__((section(".preinit_array"), used)) static const preinit_fn preinit_block =
    block_stop_signals;

struct worker {
    const char *server; /* base URL, no trailing slash needed */
    const char *token;  /* NULL: none */
    const char *device;
    char id[128];
    struct rw_cache cache;     /* uploaded models (cache.h) */
    struct rw_sandbox sandbox; /* where uploaded models run (sandbox.h) */
};

/* What the heartbeat thread reports and what it found out. */
struct job_state {
    const struct worker *w;
    char job_id[64];
    char lease_id[128];
    int lease_seconds;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int done; /* the job has finished: the heartbeat thread returns */
    int lost; /* a heartbeat said 409: the job is not ours any more */
    int stage, stages;
    const char *activity; /* building, measuring, validating (shim.h) */
};

/* One line, one write(2): the lines of a container's log (podman and
 * kubelet record each write) stay whole, and a thread's line never lands in
 * the middle of another's. */
static void logf_(const char *fmt, ...)
{
    char line[2048];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    size_t n = strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%SZ remat-worker: ", &tm);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        m = 0;
    n += (size_t)m < sizeof line - n - 1 ? (size_t)m : sizeof line - n - 2;
    line[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, n);
    (void)w; /* nowhere to tell of a log that cannot be written */
}

/* ---- HTTP ---- */

/* A reply over MAX_REPLY_BYTES (or out of memory) makes the buffer fail and
 * curl stop reading: returning less than n aborts the transfer. */
static size_t on_body(char *ptr, size_t size, size_t nmemb, void *user)
{
    size_t n = size * nmemb;
    return rematx_dyn_addn(user, ptr, n) == 0 ? n : 0;
}

/* A lease poll is cut short by SIGTERM at libcurl's next progress call (at
 * least once a second, whatever it waits on: a name lookup, a connect, a
 * reply), so that a stop never waits out the connect and reply timeouts;
 * a job's own calls (heartbeat, complete, release) run to the end. */
static int on_progress_stop(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)arg;
    (void)dt;
    (void)dn;
    (void)ut;
    (void)un;
    return stopping ? 1 : 0;
}

/* POSTs body (not stolen) to server+path.  Returns the HTTP status, or -1
 * when no answer came; *reply (may be NULL) gets the parsed JSON reply or
 * NULL. */
static long post_as(const struct worker *w, const char *path, const json_t *body, json_t **reply,
                    int stop_on_signal)
{
    if (reply != NULL)
        *reply = NULL;
    char *text = rematx_json_dumps(body, JSON_COMPACT);
    if (text == NULL)
        return -1;
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    CURL *c = rw_http_open(w->server, path, w->token, &h);
    if (c == NULL) {
        rw_http_close(c, h);
        free(text);
        return -1;
    }
    struct rematx_dynbuf b;
    rematx_dyn_init(&b, MAX_REPLY_BYTES);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, text);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
    if (stop_on_signal) {
        curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress_stop);
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    }
    long status = -1;
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    else if (!(rc == CURLE_ABORTED_BY_CALLBACK && stopping))
        logf_("POST %s: %s", path, curl_easy_strerror(rc));
    if (reply != NULL && rematx_dyn_len(&b) > 0 && status >= 200 && status < 300)
        *reply = json_loadb(rematx_dyn_ptr(&b), rematx_dyn_len(&b), 0, NULL);
    rw_http_close(c, h);
    rematx_dyn_free(&b);
    free(text);
    return status;
}

static long post(const struct worker *w, const char *path, const json_t *body, json_t **reply)
{
    return post_as(w, path, body, reply, 0);
}

/* ---- heartbeats ---- */

static void *heartbeat_main(void *arg)
{
    struct job_state *js = arg;
    char path[160];
    snprintf(path, sizeof path, "/v1/worker/jobs/%s/heartbeat", js->job_id);
    pthread_mutex_lock(&js->lock);
    while (!js->done) {
        int every = js->lease_seconds / 3 > 0 ? js->lease_seconds / 3 : 1;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += every;
        while (!js->done && pthread_cond_timedwait(&js->wake, &js->lock, &until) != ETIMEDOUT)
            ;
        if (js->done)
            break;
        /* "activity": rematd before 0.2 knew it only as "phase" (the
         * deprecated name: "phase" is an op index of a schedule, remat.h),
         * so rematd is upgraded before its workers. */
        json_t *body =
            json_pack("{s:s, s:{s:i, s:i, s:s}}", "lease_id", js->lease_id, "progress", "stage",
                      js->stage, "stages", js->stages, "activity", js->activity);
        pthread_mutex_unlock(&js->lock);
        json_t *reply = NULL;
        /* Not cut short by SIGTERM: the lease must live on while the shim
         * ends its step, or the release that follows finds it stale. */
        long st = body != NULL ? post(js->w, path, body, &reply) : -1;
        json_decref(body);
        pthread_mutex_lock(&js->lock);
        if (st == 409 || st == 404) {
            js->lost = 1;
            logf_("job %s: heartbeat answered %ld: abandoning it", js->job_id, st);
        } else if (st == 200) {
            const json_t *ls = json_object_get(reply, "lease_seconds");
            if (json_is_integer(ls) && json_integer_value(ls) > 0 && json_integer_value(ls) < 86400)
                js->lease_seconds = (int)json_integer_value(ls);
        }
        json_decref(reply);
    }
    pthread_mutex_unlock(&js->lock);
    return NULL;
}

static int on_progress(void *ctx, int stage, int stages, const char *activity)
{
    struct job_state *js = ctx;
    if (js == NULL)
        return stopping ? 1 : 0;
    pthread_mutex_lock(&js->lock);
    js->stage = stage;
    js->stages = stages;
    js->activity = activity;
    int stop = js->lost || stopping;
    pthread_mutex_unlock(&js->lock);
    return stop;
}

/* A local run's progress: with --trace, each phase's start on stderr, in
 * seconds since the first one (where a profile's time goes, stage by
 * stage: bench/profile-speed.py). */
struct local_trace {
    int on;
    struct timespec t0;
};

static int on_local_progress(void *ctx, int stage, int stages, const char *activity)
{
    struct local_trace *t = ctx;
    if (t->on) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (t->on == 1) {
            t->t0 = now;
            t->on = 2;
        }
        fprintf(stderr, "remat-worker: trace %.3f %s %d/%d\n",
                (double)(now.tv_sec - t->t0.tv_sec) + (now.tv_nsec - t->t0.tv_nsec) / 1e9, activity,
                stage, stages);
    }
    return stopping ? 1 : 0;
}

/* ---- jobs ---- */

static void finish(const struct worker *w, struct job_state *js, const char *verb, json_t *body)
{
    char path[160];
    snprintf(path, sizeof path, "/v1/worker/jobs/%s/%s", js->job_id, verb);
    json_object_set_new(body, "lease_id", json_string(js->lease_id));
    /* A lost answer would leave the job to its lease's expiry: try a few times. */
    for (int attempt = 0; attempt < 3; attempt++) {
        long st = post(w, path, body, NULL);
        if (st == 200 || st == 204) {
            logf_("job %s: %s", js->job_id, verb);
            break;
        }
        if (st == 409 || st == 404) {
            logf_("job %s: %s answered %ld (the lease is stale)", js->job_id, verb, st);
            break;
        }
        sleep(1);
    }
    json_decref(body);
}

/* A job on an uploaded model (its model_id, or its model_spec's for a
 * validation): the archive from the cache, fetched when missing.  Returns
 * a new copy of spec whose model spec carries model_path; NULL with why
 * empty when the job names no uploaded model; NULL with why filled when
 * the archive could not be had. */
static json_t *fetch_model(const struct worker *w, const json_t *spec, const char *kind,
                           struct job_state *js, struct rw_failure *why)
{
    int validation = strcmp(kind, "validation") == 0;
    const json_t *ms = validation ? json_object_get(spec, "model_spec") : spec;
    const char *id = json_string_value(json_object_get(ms, "model_id"));
    if (id == NULL)
        return NULL;
    on_progress(js, 0, 0, "fetching");
    char path[1200];
    int retry = 0;
    if (rw_cache_get(&w->cache, id, json_string_value(json_object_get(ms, "model_sha256")),
                     json_integer_value(json_object_get(ms, "model_bytes")), path, sizeof path,
                     why->reason, sizeof why->reason, &retry) < 0) {
        why->retryable = retry;
        return NULL;
    }
    json_t *copy = json_deep_copy(spec);
    json_t *cms = validation ? json_object_get(copy, "model_spec") : copy;
    if (copy == NULL || json_object_set_new(cms, "model_path", json_string(path)) < 0) {
        json_decref(copy);
        snprintf(why->reason, sizeof why->reason, "out of memory");
        why->retryable = 1;
        return NULL;
    }
    return copy;
}

static void run_job(const struct worker *w, json_t *lease)
{
    struct job_state js;
    memset(&js, 0, sizeof js);
    js.w = w;
    const char *job_id = json_string_value(json_object_get(lease, "job_id"));
    const char *lease_id = json_string_value(json_object_get(lease, "lease_id"));
    const char *kind = json_string_value(json_object_get(lease, "kind"));
    const json_t *spec = json_object_get(lease, "spec");
    const json_t *ls = json_object_get(lease, "lease_seconds");
    if (job_id == NULL || lease_id == NULL || kind == NULL || strlen(job_id) >= sizeof js.job_id ||
        strlen(lease_id) >= sizeof js.lease_id) {
        logf_("a lease without job_id, lease_id or kind: ignored");
        return;
    }
    snprintf(js.job_id, sizeof js.job_id, "%s", job_id);
    snprintf(js.lease_id, sizeof js.lease_id, "%s", lease_id);
    js.lease_seconds =
        json_is_integer(ls) && json_integer_value(ls) > 0 && json_integer_value(ls) < 86400
            ? (int)json_integer_value(ls)
            : 30;
    js.activity = "building";
    pthread_mutex_init(&js.lock, NULL);
    pthread_cond_init(&js.wake, NULL);
    logf_("job %s: leased (%s, lease %d s)", js.job_id, kind, js.lease_seconds);

    pthread_t hb;
    int hb_ok = pthread_create(&hb, NULL, heartbeat_main, &js) == 0;
    struct rw_failure why;
    memset(&why, 0, sizeof why);
    json_t *result = NULL;
    json_t *local = fetch_model(w, spec, kind, &js, &why);
    /* Without the model (why says so) there is nothing to run. */
    int have_model = local != NULL || why.reason[0] == '\0';
    const json_t *attempt = json_object_get(lease, "attempt");
    /* An uploaded model's code runs in the sandboxed child (sandbox.h),
     * under the job's deadline; a zoo model's in this process. */
    if (have_model && local != NULL && rw_sandbox_wants(kind, local))
        result = rw_sandbox_run(&w->sandbox, kind, local,
                                json_is_integer(attempt) ? (int)json_integer_value(attempt) : 1,
                                on_progress, &js, &why);
    else if (have_model && strcmp(kind, "profile") == 0)
        result = rw_profile(local ? local : spec, on_progress, &js, &why);
    else if (have_model && strcmp(kind, "validation") == 0)
        result = rw_validate(local ? local : spec, on_progress, &js, &why);
    else if (have_model)
        snprintf(why.reason, sizeof why.reason, "this worker does not run %s jobs", kind);
    json_decref(local);

    pthread_mutex_lock(&js.lock);
    js.done = 1;
    pthread_cond_signal(&js.wake);
    pthread_mutex_unlock(&js.lock);
    if (hb_ok)
        pthread_join(hb, NULL);

    if (js.lost) {
        logf_("job %s: dropped (lease lost)", js.job_id);
        json_decref(result);
    } else if (result != NULL) {
        finish(w, &js, "complete", json_pack("{s:o}", "result", result));
    } else if (why.abandoned || stopping) {
        finish(w, &js, "release", json_object());
    } else {
        logf_("job %s: failed: %s", js.job_id, why.reason);
        finish(w, &js, "fail",
               json_pack("{s:s, s:b}", "reason", why.reason, "retryable", why.retryable));
    }
    pthread_cond_destroy(&js.wake);
    pthread_mutex_destroy(&js.lock);
}

static void nap_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL); /* a signal cuts it short, as it should */
}

static int serve(const struct worker *w, int once)
{
    const char *kinds_dev = w->device;
    json_t *req = json_pack("{s:s, s:[s,s], s:[s]}", "worker_id", w->id, "kinds", "profile",
                            "validation", "devices", kinds_dev);
    long backoff = 100;
    logf_("serving %s on %s as %s", w->server, w->device, w->id);
    while (!stopping) {
        json_t *lease = NULL;
        long st = post_as(w, "/v1/worker/lease", req, &lease, 1);
        if (st == 200 && lease != NULL) {
            backoff = 100;
            run_job(w, lease);
            json_decref(lease);
            if (once)
                break;
            continue;
        }
        json_decref(lease);
        if (st == 401 || st == 403) {
            /* A token the server refuses never heals by retrying: exit, so
             * that whatever runs the worker (Kubernetes, systemd, rematd
             * --workers) shows it failing instead of a worker that looks
             * alive and takes no job. */
            logf_("lease answered %ld: the server refuses this worker's token "
                  "(REMAT_WORKER_TOKEN); exiting",
                  st);
            json_decref(req);
            return 78; /* EX_CONFIG */
        }
        if (st != 204 && st != -1)
            logf_("lease answered %ld", st);
        nap_ms(backoff);
        backoff = backoff * 2 > 1000 ? 1000 : backoff * 2;
    }
    json_decref(req);
    logf_("stopped");
    return 0;
}

/* ---- the parent pipe ---- */

/* Started by rematd --workers, the worker holds the read end of a pipe
 * whose write end only rematd has (REMAT_PARENT_FD).  End of file there
 * means rematd is gone, however it went: the worker exits at once, without
 * releasing its job or leasing again, since whatever listens on the port
 * next is not the rematd that gave it its token (docs/worker.md). */
static void *parent_watch(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char b;
    for (;;) {
        ssize_t n = read(fd, &b, 1);
        if (n == 0 || (n < 0 && errno != EINTR)) {
            logf_("rematd is gone (parent pipe closed): exiting");
            _exit(0);
        }
    }
    return NULL;
}

static int watch_parent(void)
{
    const char *v = getenv("REMAT_PARENT_FD");
    if (v == NULL || *v == '\0')
        return 0;
    char *end;
    long fd = strtol(v, &end, 10);
    if (*end != '\0' || fd < 0 || fd > 65535) {
        fprintf(stderr, "remat-worker: REMAT_PARENT_FD: not a descriptor: %s\n", v);
        return -1;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, parent_watch, (void *)(intptr_t)fd) != 0) {
        fprintf(stderr, "remat-worker: cannot watch the parent pipe\n");
        return -1;
    }
    pthread_detach(t);
    return 0;
}

/* ---- local modes ---- */

static json_t *load(const char *path)
{
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    if (j == NULL)
        fprintf(stderr, "remat-worker: %s:%d:%d: %s\n", path, e.line, e.column, e.text);
    return j;
}

static int print_or_fail(json_t *result, const struct rw_failure *why)
{
    if (result == NULL) {
        fprintf(stderr, "remat-worker: %s\n", why->reason);
        return 1;
    }
    rematx_json_dumpf(result, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    fputc('\n', stdout);
    json_decref(result);
    return 0;
}

static void usage(FILE *f)
{
    fputs(
        "usage: remat-worker --server URL [--token T] [--device cpu|cuda:N] [--id NAME] [--once]\n"
        "       remat-worker --profile-local SPEC.json [--device D] [--trace]\n"
        "       remat-worker --validate-local SPEC.json PLAN.json [--profile PROFILE.json]\n"
        "                    [--repeats N] [--warmup N] [--timeline] [--device D]\n"
        "options: --cpu-limit BYTES  fail CPU jobs as out of memory past this many live bytes\n"
        "             (and an uploaded model's process past this much memory)\n"
        "         --job-timeout S    kill an uploaded model's process after S seconds (900)\n"
        "         --unsafe-no-sandbox  run uploaded models unconfined, in this process\n"
        "             (docs/security.md)\n"
        "         --unsafe-no-op-check  a local run only: let the model call operators\n"
        "             outside remat's allow-list (to see what the sandbox alone stops)\n"
        "env: REMAT_SERVER, REMAT_WORKER_TOKEN, REMAT_DEVICE, REMAT_CPU_LIMIT_BYTES,\n"
        "     REMAT_WORKER_CACHE_DIR, REMAT_WORKER_CACHE_BYTES (uploaded models),\n"
        "     REMAT_JOB_TIMEOUT, REMAT_UNSAFE_NO_SANDBOX=1\n",
        f);
}

int main(int argc, char **argv)
{
    /* The sandboxed child of an uploaded model's job (sandbox.h): its own
     * main, before any option or variable of the worker's is read. */
    if (argc == 2 && strcmp(argv[1], "--sandbox-child") == 0)
        return rw_sandbox_child_main(argc, argv);
    struct worker w = {0};
    w.server = getenv("REMAT_SERVER");
    w.token = getenv("REMAT_WORKER_TOKEN");
    w.device = getenv("REMAT_DEVICE") != NULL ? getenv("REMAT_DEVICE") : "cpu";
    const char *id = NULL, *profile_spec = NULL, *validate_spec = NULL, *validate_plan = NULL,
               *validate_profile = NULL;
    const char *limit_env = getenv("REMAT_CPU_LIMIT_BYTES");
    long long cpu_limit = limit_env != NULL ? atoll(limit_env) : -1;
    int once = 0, repeats = 0, warmup = -1, timeline = 0, no_op_check = 0;
    const char *timeout_env = getenv("REMAT_JOB_TIMEOUT"),
               *unsafe_env = getenv("REMAT_UNSAFE_NO_SANDBOX");
    const char *job_timeout = timeout_env != NULL && *timeout_env != '\0' ? timeout_env : NULL;
    int unsafe = unsafe_env != NULL && strcmp(unsafe_env, "1") == 0;
    struct local_trace trace = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (strcmp(a, "--server") == 0 && more)
            w.server = argv[++i];
        else if (strcmp(a, "--token") == 0 && more)
            w.token = argv[++i];
        else if (strcmp(a, "--device") == 0 && more)
            w.device = argv[++i];
        else if (strcmp(a, "--id") == 0 && more)
            id = argv[++i];
        else if (strcmp(a, "--once") == 0)
            once = 1;
        else if (strcmp(a, "--cpu-limit") == 0 && more)
            cpu_limit = atoll(argv[++i]);
        else if (strcmp(a, "--job-timeout") == 0 && more)
            job_timeout = argv[++i];
        else if (strcmp(a, "--unsafe-no-sandbox") == 0)
            unsafe = 1;
        else if (strcmp(a, "--unsafe-no-op-check") == 0)
            no_op_check = 1;
        else if (strcmp(a, "--repeats") == 0 && more)
            repeats = atoi(argv[++i]);
        else if (strcmp(a, "--timeline") == 0)
            timeline = 1;
        else if (strcmp(a, "--trace") == 0)
            trace.on = 1;
        else if (strcmp(a, "--warmup") == 0 && more)
            warmup = atoi(argv[++i]);
        else if (strcmp(a, "--profile-local") == 0 && more)
            profile_spec = argv[++i];
        else if (strcmp(a, "--profile") == 0 && more)
            validate_profile = argv[++i];
        else if (strcmp(a, "--validate-local") == 0 && i + 2 < argc) {
            validate_spec = argv[++i];
            validate_plan = argv[++i];
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (profile_spec == NULL && validate_spec == NULL &&
        (w.server == NULL || w.server[0] == '\0')) {
        usage(stderr);
        return 2;
    }
    if (cpu_limit < 0) {
        /* By default a CPU job may use 80% of the machine, so that a model too
         * large for it fails as out of memory instead of meeting the OOM killer. */
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        cpu_limit = pages > 0 && page > 0 ? (long long)pages * page / 10 * 8 : 0;
    }
    long timeout_s = RW_JOB_TIMEOUT_DEFAULT_S;
    if (job_timeout != NULL) {
        char *end;
        timeout_s = strtol(job_timeout, &end, 10);
        if (*end != '\0' || timeout_s <= 0 || timeout_s > 7 * 86400) {
            fprintf(stderr,
                    "remat-worker: --job-timeout (REMAT_JOB_TIMEOUT): want seconds in "
                    "1..604800, not %s\n",
                    job_timeout);
            return 2;
        }
    }
    /* A worker that serves jobs always checks: the switch is for a model
     * run by hand, never one a client sent. */
    if (no_op_check && profile_spec == NULL && validate_spec == NULL) {
        fprintf(stderr, "remat-worker: --unsafe-no-op-check is for --profile-local and "
                        "--validate-local only\n");
        return 2;
    }
    rw_sandbox_init(&w.sandbox, w.device, cpu_limit, (int)timeout_s, unsafe);
    w.sandbox.no_op_check = no_op_check;
    rw_set_op_check(!no_op_check);
    if (w.sandbox.mode == RW_SANDBOX_UNSAFE)
        fprintf(stderr, "remat-worker: --unsafe-no-sandbox: uploaded models run unconfined in "
                        "this process\n");
    else if (w.sandbox.mode == RW_SANDBOX_MISSING)
        fprintf(stderr,
                "remat-worker: no sandbox for uploaded models (%s): their jobs fail "
                "unless --unsafe-no-sandbox is given\n",
                w.sandbox.missing);
    if (id != NULL)
        snprintf(w.id, sizeof w.id, "%s", id);
    else {
        char host[64] = "worker";
        gethostname(host, sizeof host - 1);
        snprintf(w.id, sizeof w.id, "%s-%ld", host, (long)getpid());
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    /* Blocked since before libtorch loaded (block_stop_signals), or by
     * whoever started the worker: one that came meanwhile arrives now. */
    sigset_t stop_set;
    sigemptyset(&stop_set);
    sigaddset(&stop_set, SIGTERM);
    sigaddset(&stop_set, SIGINT);
    sigprocmask(SIG_UNBLOCK, &stop_set, NULL);

    struct rw_failure why;
    memset(&why, 0, sizeof why);
    if (rw_open(w.device, cpu_limit, &why) != 0) {
        fprintf(stderr, "remat-worker: %s\n", why.reason);
        return 1;
    }
    if (profile_spec != NULL) {
        json_t *spec = load(profile_spec);
        if (spec == NULL)
            return 1;
        on_local_progress(&trace, 0, 0, "start");
        int rc = print_or_fail(
            rw_sandbox_wants("profile", spec)
                ? rw_sandbox_run(&w.sandbox, "profile", spec, 1, on_local_progress, &trace, &why)
                : rw_profile(spec, on_local_progress, &trace, &why),
            &why);
        on_local_progress(&trace, 0, 0, "end");
        json_decref(spec);
        return rc;
    }
    if (validate_spec != NULL) {
        json_t *spec = load(validate_spec), *plan = load(validate_plan);
        json_t *prof = validate_profile != NULL ? load(validate_profile) : NULL;
        if (spec == NULL || plan == NULL || (validate_profile != NULL && prof == NULL)) {
            json_decref(spec);
            json_decref(plan);
            json_decref(prof);
            return 1;
        }
        json_t *job = json_pack("{s:o, s:o}", "model_spec", spec, "plan", plan);
        /* As rematd sends it: the profile the plan was made from. */
        if (prof != NULL)
            json_object_set_new(job, "profile", prof);
        if (repeats > 0)
            json_object_set_new(job, "repeats", json_integer(repeats));
        if (warmup >= 0)
            json_object_set_new(job, "warmup", json_integer(warmup));
        if (timeline)
            json_object_set_new(job, "timeline", json_true());
        int rc = print_or_fail(
            rw_sandbox_wants("validation", job)
                ? rw_sandbox_run(&w.sandbox, "validation", job, 1, on_progress, NULL, &why)
                : rw_validate(job, on_progress, NULL, &why),
            &why);
        json_decref(job);
        return rc;
    }
    if (watch_parent() < 0)
        return 1;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
        fprintf(stderr, "remat-worker: curl_global_init failed\n");
        return 1;
    }
    if (rw_cache_init(&w.cache, w.server, w.token) < 0)
        return 1;
    int rc = serve(&w, once);
    /* Out of serve() the worker has nothing left to do: it ends here, with
     * _exit, not through exit().  exit() would run curl_global_cleanup and
     * every library's destructors (libtorch's, OpenMP's) while threads may
     * still run: a lookup libcurl left to finish on its own (http.c), a
     * pool thread of a job.  A destructor that waits on one of them would
     * hold the stop past the container's grace period; the kernel frees
     * all of it anyway.  The log is written line by line (logf_); stdout
     * is flushed for form. */
    fflush(NULL);
    _exit(rc);
}
