/* solve_bench.c - times every solver on seeded random chains of 10 to
 * 1,000,000 stages and prints the median of repeated runs (make bench).
 *
 *   bench/solve_bench [--json] [--quick] [--only SOLVER|min-time|floor] [--dist D]
 *   bench/solve_bench --print-request
 *
 * D is the size distribution of the random chains (tests/randchain.h):
 * uniform (the default), heavy, ties or pooling.
 *
 * What is timed is the solver itself (the checkpoint choice), not the
 * schedule, simulation and JSON that remat_solve adds around it; the
 * "simulate" row times one traced simulation of a sqrt plan for scale.
 * "min-peak-old" is min-peak as it was: the least-recompute pass run until
 * it gives up, where min-peak now knows beforehand that it would.
 * The "parse" row times remat_profile_parse (the streaming reader) of the
 * chain's compact JSON text, made once, at n = 50 (a service request) and
 * n = 1,000,000 (the largest profile); "parse-jansson" times what it
 * replaced (jansson's tree, then remat_profile_from_json) at n = 50.
 * The "request50" row times what rematd's POST /v1/plans does per request
 * on the 50-stage profile of api/bench-http.sh (that text, made here by the
 * same loop): remat_profile_parse, remat_solve (min-peak, the default
 * options), remat_plan_dumps and the frees.  "req-parse", "req-solve" and
 * "req-dump" time its three parts alone on the same profile.
 * The "old beside new" rows (old_new_rows) time, at n = 1,000,000 and in
 * turns in one process, each path that changed against its copy as it was
 * (bench/solve_old.h): the medians and minima of both and new/old, after
 * checking that both give the same plan (the same stages for "parse").  The
 * "floor" row there is one pass over the stage records (a sum of
 * out_bytes), what no solver can go under; it has no old path, so both of
 * its columns hold the one figure.  Each row gives wall-clock times and
 * this thread's CPU time (what a run costs without its waits for a core):
 * on a shared machine compare the ratios of one run, not figures of two.
 * Sizes a solver's complexity makes absurd are skipped: acg (O(n^4) in the
 * worst case) and paper-cubic (O(n^3)) stop where one run would pass ~2 s. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "randchain.h"
#include "remat_private.h"
#include "solve_minpeak.h"
#include "solve_old.h"

int64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void bench_report(const struct bench_config *cfg, const char *solver, size_t n, int64_t median_ns,
                  int runs, const char *extra_json)
{
    if (cfg->json) {
        printf("{\"solver\": \"%s\", \"n\": %zu, \"median_ns\": %lld, \"runs\": %d%s%s}\n", solver,
               n, (long long)median_ns, runs, extra_json != NULL ? ", " : "",
               extra_json != NULL ? extra_json : "");
    } else {
        double v = (double)median_ns;
        const char *unit = "ns";
        if (v >= 1e9) {
            v /= 1e9;
            unit = "s";
        } else if (v >= 1e6) {
            v /= 1e6;
            unit = "ms";
        } else if (v >= 1e3) {
            v /= 1e3;
            unit = "us";
        }
        printf("%-14s %9zu %10.3f %-2s %7d%s%s\n", solver, n, v, unit, runs,
               extra_json != NULL ? "  " : "", extra_json != NULL ? extra_json : "");
    }
    fflush(stdout);
}

enum which {
    W_STORE_ALL,
    W_SQRT,
    W_UNIFORM,
    W_ACG,
    W_CUBIC,
    W_LINEAR,
    W_PREFIX_REF,
    W_MIN_PEAK,
    W_MIN_PEAK_SPENT,
    W_SIMULATE,
    W_PARSE,
    W_PARSE_JANSSON,
    W_REQUEST,
    W_REQ_PARSE,
    W_REQ_SOLVE,
    W_REQ_DUMP,
    W_COUNT
};

static const char *const names[W_COUNT] = {
    "store-all",  "sqrt",      "uniform",      "acg",      "paper-cubic", "paper-linear",
    "prefix-ref", "min-peak",  "min-peak-old", "simulate", "parse",       "parse-jansson",
    "request50",  "req-parse", "req-solve",    "req-dump"};

/* The largest n each one runs at (the next size would pass ~2 s a run). */
static const size_t max_n[W_COUNT] = {1000000, 1000000, 1000000, 1000,    1000,    1000000,
                                      10000,   1000000, 1000000, 1000000, 1000000, 50,
                                      50,      50,      50,      50};

/* The parse rows run only at these sizes. */
static int parse_size(size_t n)
{
    return n == 50 || n == 1000000;
}

/* The profile's text for the parse rows. */
struct text {
    char *s;
    size_t len;
};

/* The request rows' input: the profile object of api/bench-http.sh's body,
 * written by the same loop, and that profile parsed and solved once for the
 * rows that time one part alone. */
struct request {
    char s[16384];
    size_t len;
    struct remat_profile *profile;
    struct remat_plan plan;
};

static int request_init(struct request *q)
{
    size_t cap = sizeof q->s, len = 0;
    len += (size_t)snprintf(q->s + len, cap - len,
                            "{\"format\":\"remat.profile/v1\",\"input_bytes\":19267584,"
                            "\"stages\":[");
    for (int i = 1; i <= 50; i++) {
        long long out = (long long)(i % 7 + 1) * 3211264;
        len += (size_t)snprintf(q->s + len, cap - len,
                                "%s{\"name\":\"layer%d\",\"out_bytes\":%lld,\"saved_bytes\":%lld,"
                                "\"fwd_tmp_bytes\":%lld,\"bwd_tmp_bytes\":%lld,\"param_bytes\":%d,"
                                "\"fwd_ms\":%d.%d,\"bwd_ms\":%d.%d}",
                                i > 1 ? "," : "", i, out, out * 2, out / 2, out, (i % 5) * 147456,
                                i % 3, i % 10, i % 4 + 1, i % 7);
    }
    len += (size_t)snprintf(q->s + len, cap - len, "]}");
    if (len >= cap)
        return -1;
    q->len = len;
    memset(&q->plan, 0, sizeof q->plan);
    q->profile = remat_profile_parse(q->s, q->len, "/profile", NULL);
    if (q->profile == NULL || remat_solve(q->profile, NULL, &q->plan, NULL) != REMAT_OK)
        return -1;
    return 0;
}

static void request_clear(struct request *q)
{
    remat_plan_clear(&q->plan);
    remat_profile_free(q->profile);
    q->profile = NULL;
}

/* One request as fast_create in api/route_plans_create.c serves it. */
static int request_once(const struct request *q)
{
    struct remat_error err;
    struct remat_profile *p = remat_profile_parse(q->s, q->len, "/profile", &err);
    if (p == NULL)
        return REMAT_EINVAL;
    struct remat_options opts;
    remat_options_init(&opts);
    struct remat_plan plan;
    memset(&plan, 0, sizeof plan);
    int rc = remat_solve(p, &opts, &plan, &err);
    if (rc == REMAT_OK) {
        size_t len = 0;
        char *text = remat_plan_dumps(p, &plan, &len);
        rc = text != NULL ? REMAT_OK : REMAT_ENOMEM;
        free(text);
    }
    remat_plan_clear(&plan);
    remat_profile_free(p);
    return rc;
}

static int run_once(enum which w, const struct remat_profile *p, const struct text *text,
                    const struct request *req)
{
    struct remat_plan plan;
    memset(&plan, 0, sizeof plan);
    int rc;
    switch (w) {
    case W_STORE_ALL:
        rc = remat__solve_store_all(p, &plan, NULL);
        break;
    case W_SQRT:
        rc = remat__solve_sqrt(p, &plan, NULL);
        break;
    case W_UNIFORM:
        rc = remat__solve_uniform(p, 8, &plan, NULL);
        break;
    case W_ACG:
        rc = remat__solve_acg(p, &plan, NULL);
        break;
    case W_CUBIC:
        rc = remat__solve_paper_cubic(p, &plan, NULL);
        break;
    case W_LINEAR:
        rc = remat__solve_paper_linear(p, &plan, NULL);
        break;
    case W_PREFIX_REF:
        rc = remat__prefix_ref(p, &plan, NULL);
        break;
    case W_MIN_PEAK:
        rc = remat__solve_min_peak(p, &plan, NULL);
        break;
    case W_MIN_PEAK_SPENT:
        rc = remat__min_peak_with(p, REMAT__MINPEAK_SPENT_PASS, &plan, NULL);
        break;
    case W_PARSE: {
        struct remat_profile *q = remat_profile_parse(text->s, text->len, "", NULL);
        rc = q != NULL ? REMAT_OK : REMAT_EINVAL;
        remat_profile_free(q);
        break;
    }
    case W_PARSE_JANSSON: {
        json_t *root = json_loadb(text->s, text->len, JSON_REJECT_DUPLICATES, NULL);
        struct remat_profile *q = remat_profile_from_json(root, "", NULL);
        rc = q != NULL ? REMAT_OK : REMAT_EINVAL;
        remat_profile_free(q);
        json_decref(root);
        break;
    }
    case W_REQUEST:
        rc = request_once(req);
        break;
    case W_REQ_PARSE: {
        struct remat_profile *q = remat_profile_parse(req->s, req->len, "/profile", NULL);
        rc = q != NULL ? REMAT_OK : REMAT_EINVAL;
        remat_profile_free(q);
        break;
    }
    case W_REQ_SOLVE:
        rc = remat_solve(req->profile, NULL, &plan, NULL);
        break;
    case W_REQ_DUMP: {
        char *s = remat_plan_dumps(req->profile, &req->plan, NULL);
        rc = s != NULL ? REMAT_OK : REMAT_ENOMEM;
        free(s);
        break;
    }
    default: {
        rc = remat__solve_sqrt(p, &plan, NULL);
        struct remat_sim sim;
        if (rc == REMAT_OK)
            rc = remat_simulate_checkpoints(p, REMAT_MODEL_TRACED, plan.checkpoints,
                                            plan.n_checkpoints, 0, &sim, NULL);
        if (rc == REMAT_OK)
            remat_sim_clear(&sim);
        break;
    }
    }
    remat_plan_clear(&plan);
    return rc;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* ---- old beside new -------------------------------------------------- */

/* This thread's CPU time in nanoseconds: on a machine shared with other
 * work, what a run costs without the time it waited for a core. */
static int64_t cpu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

enum old_new { ON_LINEAR, ON_MIN_PEAK, ON_PARSE, ON_COUNT };
static const char *const on_names[ON_COUNT] = {"paper-linear", "min-peak", "parse"};

/* The parse row's input and result: the profile's compact text, and the
 * profile read back (its stages are compared, old against new). */
struct parse_io {
    const char *s;
    size_t len;
    struct remat_profile *got;
};

/* One parse and, as the parse row of the table times it, the free of its
 * profile, but for the first turn's (keep), which is compared. */
static int on_parse(int old, struct parse_io *io, int keep)
{
    struct remat_profile *q =
        old ? bench_old_profile_parse(io->s, io->len, "", NULL, NULL, NULL, NULL)
            : remat_profile_parse(io->s, io->len, "", NULL);
    int rc = q != NULL ? REMAT_OK : REMAT_EINVAL;
    if (keep)
        io->got = q;
    else
        remat_profile_free(q);
    return rc;
}

/* Whether two profiles read from one text hold the same stages. */
static int same_profile(const struct remat_profile *a, const struct remat_profile *b)
{
    if (a->n_stages != b->n_stages || a->input_bytes != b->input_bytes)
        return 0;
    for (size_t i = 0; i < a->n_stages; i++) {
        struct remat_stage x = a->stages[i], y = b->stages[i];
        if (strcmp(x.name, y.name) != 0)
            return 0;
        x.name = y.name = NULL;
        if (memcmp(&x, &y, sizeof x) != 0)
            return 0;
    }
    return 1;
}

static int on_run(enum old_new w, int old, const struct remat_profile *p, struct remat_plan *plan)
{
    if (w == ON_LINEAR)
        return old ? bench_old_paper_linear(p, plan, NULL)
                   : remat__solve_paper_linear(p, plan, NULL);
    return old ? bench_old_min_peak_with(p, REMAT__MINPEAK_AUTO, plan, NULL)
               : remat__solve_min_peak(p, plan, NULL);
}

static int same_plan(const struct remat_plan *a, const struct remat_plan *b)
{
    return a->n_checkpoints == b->n_checkpoints && a->objective_value == b->objective_value &&
           (a->n_checkpoints == 0 ||
            memcmp(a->checkpoints, b->checkpoints, a->n_checkpoints * sizeof *a->checkpoints) == 0);
}

/* One pass over the stage records: the time of a sum of out_bytes. */
static void floor_once(const struct remat_profile *p, int64_t *wall, int64_t *cpu)
{
    int64_t t0 = bench_now_ns(), c0 = cpu_now_ns(), sum = 0;
    for (size_t i = 0; i < p->n_stages; i++)
        sum += p->stages[i].out_bytes;
    /* Stored where the compiler must form it, so that the loop stays. */
    volatile int64_t sink = sum;
    (void)sink;
    *cpu = cpu_now_ns() - c0;
    *wall = bench_now_ns() - t0;
}

static double ratio_of(int64_t a, int64_t b)
{
    return b > 0 ? (double)a / (double)b : 0;
}

/* t holds four series of runs: wall new, wall old, CPU new, CPU old. */
static void old_new_report(const struct bench_config *cfg, const char *what, size_t n, int64_t *t,
                           int runs)
{
    for (int k = 0; k < 4; k++)
        qsort(t + k * runs, (size_t)runs, sizeof *t, cmp_i64);
    int64_t *wn = t, *wo = t + runs, *cn = t + 2 * runs, *co = t + 3 * runs;
    int h = runs / 2;
    if (cfg->json) {
        printf("{\"solver\": \"%s\", \"n\": %zu, \"median_ns\": %lld, \"min_ns\": %lld, "
               "\"old_median_ns\": %lld, \"old_min_ns\": %lld, \"ratio\": %.3f, "
               "\"ratio_min\": %.3f, \"cpu_median_ns\": %lld, \"old_cpu_median_ns\": %lld, "
               "\"cpu_ratio\": %.3f, \"runs\": %d}\n",
               what, n, (long long)wn[h], (long long)wn[0], (long long)wo[h], (long long)wo[0],
               ratio_of(wn[h], wo[h]), ratio_of(wn[0], wo[0]), (long long)cn[h], (long long)co[h],
               ratio_of(cn[h], co[h]), runs);
    } else {
        printf("%-14s %9zu %9.1f %9.1f %9.1f %9.1f %7.3f %7.3f %9.1f %9.1f %7.3f %5d\n", what, n,
               (double)wo[h] / 1e6, (double)wn[h] / 1e6, (double)wo[0] / 1e6, (double)wn[0] / 1e6,
               ratio_of(wn[h], wo[h]), ratio_of(wn[0], wo[0]), (double)co[h] / 1e6,
               (double)cn[h] / 1e6, ratio_of(cn[h], co[h]), runs);
    }
    fflush(stdout);
}

/* Each changed path against its old copy at a million stages, in turns so
 * that both see the same machine. */
static int old_new_rows(const struct bench_config *cfg, const char *only, int dist)
{
    size_t n = 1000000;
    int runs = cfg->scale < 1 ? 5 : 15;
    struct remat_profile *p = randchain_profile(42, n, (enum randchain_dist)dist, 1);
    int64_t *t = malloc(4 * (size_t)runs * sizeof *t);
    struct parse_io io = {NULL, 0, NULL}, io_old = {NULL, 0, NULL};
    char *text = NULL;
    if (p != NULL && (only == NULL || strcmp(only, "parse") == 0)) {
        json_t *j = remat_profile_to_json(p);
        text = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        io.s = io_old.s = text;
        io.len = io_old.len = text != NULL ? strlen(text) : 0;
    }
    if (p == NULL || t == NULL || ((only == NULL || strcmp(only, "parse") == 0) && text == NULL)) {
        fprintf(stderr, "solve_bench: out of memory at n = %zu\n", n);
        remat_profile_free(p);
        free(t);
        free(text);
        return -1;
    }
    if (!cfg->json)
        printf("\n%-14s %9s %9s %9s %9s %9s %7s %7s %9s %9s %7s %5s\n"
               "%-14s %9s %9s %9s %9s %9s %7s %7s %9s %9s %7s %5s\n",
               "old beside new", "n", "old", "new", "old", "new", "new/old", "new/old", "old",
               "new", "new/old", "runs", "(ms)", "", "median", "median", "min", "min", "median",
               "min", "cpu med", "cpu med", "cpu", "");
    int rc = 0;
    if (only == NULL || strcmp(only, "floor") == 0) {
        /* The floor has no old path: its row repeats the one figure. */
        for (int r = 0; r < runs; r++) {
            floor_once(p, &t[r], &t[2 * runs + r]);
            t[runs + r] = t[r];
            t[3 * runs + r] = t[2 * runs + r];
        }
        old_new_report(cfg, "floor", n, t, runs);
    }
    for (int w = 0; w < ON_COUNT && rc == 0; w++) {
        if (only != NULL && strcmp(only, on_names[w]) != 0)
            continue;
        for (int r = 0; r < runs && rc == 0 && w == ON_PARSE; r++) {
            for (int old = 0; old < 2; old++) {
                struct parse_io *x = old ? &io_old : &io;
                int64_t a = bench_now_ns(), c = cpu_now_ns();
                int got = on_parse(old, x, r == 0);
                t[(2 + old) * runs + r] = cpu_now_ns() - c;
                t[old * runs + r] = bench_now_ns() - a;
                if (got != REMAT_OK) {
                    fprintf(stderr, "solve_bench: parse%s failed\n", old ? " (old)" : "");
                    rc = -1;
                }
            }
            if (rc == 0 && r == 0 && !same_profile(io.got, io_old.got)) {
                fprintf(stderr, "solve_bench: parse: the old and new profiles differ\n");
                rc = -1;
            }
        }
        if (w != ON_PARSE) {
            /* Both once, untimed: the same plan, or no figures. */
            struct remat_plan a, b;
            memset(&a, 0, sizeof a);
            memset(&b, 0, sizeof b);
            if (on_run((enum old_new)w, 0, p, &a) != REMAT_OK ||
                on_run((enum old_new)w, 1, p, &b) != REMAT_OK || !same_plan(&a, &b)) {
                fprintf(stderr, "solve_bench: %s: the old and new plans differ\n", on_names[w]);
                rc = -1;
            }
            remat_plan_clear(&a);
            remat_plan_clear(&b);
        }
        for (int r = 0; r < runs && rc == 0 && w != ON_PARSE; r++) {
            for (int old = 0; old < 2; old++) {
                struct remat_plan plan;
                memset(&plan, 0, sizeof plan);
                int64_t a = bench_now_ns(), c = cpu_now_ns();
                int got = on_run((enum old_new)w, old, p, &plan);
                t[(2 + old) * runs + r] = cpu_now_ns() - c;
                t[old * runs + r] = bench_now_ns() - a;
                if (got != REMAT_OK) {
                    fprintf(stderr, "solve_bench: %s%s failed\n", on_names[w], old ? " (old)" : "");
                    rc = -1;
                }
                remat_plan_clear(&plan);
            }
        }
        if (rc == 0)
            old_new_report(cfg, on_names[w], n, t, runs);
    }
    remat_profile_free(io.got);
    remat_profile_free(io_old.got);
    free(text);
    free(t);
    remat_profile_free(p);
    return rc;
}

int main(int argc, char **argv)
{
    struct bench_config cfg = {.json = 0, .scale = 1.0};
    const char *only = NULL; /* --only: one solver (min-time: the min-time part alone) */
    int dist = RANDCHAIN_UNIFORM;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            cfg.json = 1;
        } else if (strcmp(argv[i], "--quick") == 0) {
            cfg.scale = 0.1;
        } else if (strcmp(argv[i], "--print-request") == 0) {
            /* The request rows' profile text, to check it against the
             * shell loop of api/bench-http.sh. */
            static struct request q;
            if (request_init(&q) < 0)
                return 1;
            fwrite(q.s, 1, q.len, stdout);
            request_clear(&q);
            return 0;
        } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else if (strcmp(argv[i], "--dist") == 0 && i + 1 < argc) {
            const char *name = argv[++i];
            for (dist = 0; dist < RANDCHAIN_N_DISTS; dist++)
                if (strcmp(name, randchain_dist_name((enum randchain_dist)dist)) == 0)
                    break;
            if (dist == RANDCHAIN_N_DISTS) {
                fprintf(stderr, "solve_bench: --dist: uniform, heavy, ties or pooling\n");
                return 2;
            }
        } else {
            fprintf(stderr, "usage: solve_bench [--json] [--quick] [--only SOLVER] [--dist D]\n");
            return 2;
        }
    }
    static struct request req;
    if (request_init(&req) < 0) {
        fprintf(stderr, "solve_bench: the request profile does not solve\n");
        return 1;
    }
    static const size_t sizes[] = {10, 50, 100, 1000, 10000, 100000, 1000000};
    if (!cfg.json)
        printf("%-14s %9s %13s %7s\n", "solver", "n", "median", "runs");
    int mintime_only = only != NULL && strcmp(only, "min-time") == 0;
    for (size_t s = 0; !mintime_only && s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        struct remat_profile *p = randchain_profile(42, n, (enum randchain_dist)dist, 1);
        if (p == NULL) {
            fprintf(stderr, "solve_bench: out of memory at n = %zu\n", n);
            return 1;
        }
        struct text text = {NULL, 0};
        for (int w = 0; w < W_COUNT; w++) {
            if (n > max_n[w] || (only != NULL && strcmp(only, names[w]) != 0))
                continue;
            if (w >= W_REQUEST && n != 50)
                continue;
            if (w == W_PARSE || w == W_PARSE_JANSSON) {
                if (!parse_size(n))
                    continue;
                if (text.s == NULL) {
                    json_t *j = remat_profile_to_json(p);
                    text.s = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
                    json_decref(j);
                    if (text.s == NULL) {
                        fprintf(stderr, "solve_bench: out of memory at n = %zu\n", n);
                        return 1;
                    }
                    text.len = strlen(text.s);
                }
            }
            /* One run to size the repetitions: about 0.3 s of runs (less
             * with --quick), at least 3 and at most 100,000. */
            int64_t t0 = bench_now_ns();
            if (run_once((enum which)w, p, &text, &req) != REMAT_OK)
                continue; /* not built in this tree (min-peak placeholder) */
            int64_t one = bench_now_ns() - t0;
            double want = 0.3e9 * cfg.scale / (double)(one > 0 ? one : 1);
            int runs = want < 3 ? 3 : want > 100000 ? 100000 : (int)want;
            int64_t *t = malloc((size_t)runs * sizeof *t);
            if (t == NULL)
                return 1;
            for (int r = 0; r < runs; r++) {
                int64_t a = bench_now_ns();
                run_once((enum which)w, p, &text, &req);
                t[r] = bench_now_ns() - a;
            }
            qsort(t, (size_t)runs, sizeof *t, cmp_i64);
            bench_report(&cfg, names[w], n, t[runs / 2], runs, NULL);
            free(t);
        }
        free(text.s);
        remat_profile_free(p);
    }
    request_clear(&req);
    if (!mintime_only && old_new_rows(&cfg, only, dist) < 0)
        return 1;
    if (only == NULL || mintime_only)
        bench_mintime(&cfg);
    return 0;
}
