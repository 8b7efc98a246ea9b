/* bench_mintime.c - min-time and the frontier, timed on one core.
 *
 * The chains are synthetic and heterogeneous, CNN-like (flat runs of equal
 * stages, pooling drops, channel doublings, saved tensors 1-3x the output),
 * with the budget halfway between the least persistent peak and store-all,
 * so the activations are about twice what fits, as in the Rotor figures of
 * ../shared/research/anchors.md §1.  Each row also times the bare table fill
 * pruned and unpruned (Rotor's full table) in the same process, and reports
 * the table memory of both, and the solver's two fills (the budget's and the
 * store-all table's) whole, as they were, beside the parts it now fills:
 * fill_ns against top_fill_ns, sa_whole_fill_ns against sa_part_fill_ns. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "solve_mintime.h"
#include "bench.h"
#include "randchain.h"

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static struct remat_profile *cnn_chain(size_t n, uint64_t seed)
{
    struct remat_profile *p = remat_profile_new(n, NULL);
    if (p == NULL)
        return NULL;
    uint64_t s = seed;
    int64_t level = INT64_C(64) << 20; /* 64 MiB activations at the top */
    p->input_bytes = level / 4;
    for (size_t i = 0; i < n; i++) {
        uint64_t roll = mix(&s) % 10;
        if (roll < 2 && level > (INT64_C(1) << 20))
            level /= 2;
        else if (roll == 2 && level < (INT64_C(256) << 20))
            level += level / 2;
        struct remat_stage *st = &p->stages[i];
        st->out_bytes = level;
        st->saved_bytes = level + (int64_t)(mix(&s) % 3) * level;
        st->fwd_tmp_bytes = (int64_t)(mix(&s) % 2) * level;
        st->fwd_grad_tmp_bytes = st->fwd_tmp_bytes;
        st->bwd_tmp_bytes = (int64_t)(mix(&s) % 3) * level;
        st->param_bytes = (int64_t)(mix(&s) % 8) << 18;
        st->fwd_ms = 0.5 + (double)(mix(&s) % 40) / 8.0;
        st->bwd_ms = 2 * st->fwd_ms + (double)(mix(&s) % 8) / 8.0;
    }
    return p;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int64_t median(int64_t *v, int runs)
{
    qsort(v, (size_t)runs, sizeof *v, cmp_i64);
    return v[runs / 2];
}

static int runs_for(const struct bench_config *cfg, int base)
{
    int r = (int)(base * cfg->scale);
    return r < 1 ? 1 : r;
}

/* Median ns of one table fill; sets *bytes to its table memory.  cap and
 * root are remat__mt_fill_capped's (HUGE_VAL and 0: the whole table). */
static int64_t time_part_fill(const struct remat_profile *p, int64_t budget, size_t slots,
                              int prune, double cap, int64_t root, int runs, size_t *bytes)
{
    if (runs < 1)
        return -1;
    int64_t *ns = malloc((size_t)runs * sizeof *ns);
    if (ns == NULL)
        return -1;
    for (int r = 0; r < runs; r++) {
        struct remat__mt *t = NULL;
        int64_t t0 = bench_now_ns();
        int rc = remat__mt_fill_capped(p, budget, slots, prune, cap, root, NULL, &t, NULL);
        ns[r] = bench_now_ns() - t0;
        if (rc != REMAT_OK) {
            free(ns);
            return -1;
        }
        *bytes = remat__mt_table_bytes(t);
        remat__mt_free(t);
    }
    int64_t m = median(ns, runs);
    free(ns);
    return m;
}

static int64_t time_fill(const struct remat_profile *p, int64_t budget, size_t slots, int prune,
                         int runs, size_t *bytes)
{
    return time_part_fill(p, budget, slots, prune, HUGE_VAL, 0, runs, bytes);
}

/* The solver's two fills, each as it was (the whole table) and as it is:
 * the budget's table for its top only, and the store-all table that the
 * walk for a faster schedule reads (src/solve_mintime.c), from the budget
 * up and capped at the budget table's top time (the solver's cap is that
 * or less). */
static void time_solver_fills(const struct remat_profile *p, int64_t budget, int64_t sa,
                              size_t slots, int runs, char *out, size_t cap)
{
    size_t bytes = 0;
    struct remat__mt *t = NULL;
    double top_ms = HUGE_VAL;
    if (remat__mt_fill(p, budget, slots, 1, &t, NULL) == REMAT_OK)
        top_ms = remat__mt_time(t, remat__mt_top(t));
    remat__mt_free(t);
    int64_t b_top = time_part_fill(p, budget, slots, 1, HUGE_VAL, budget, runs, &bytes);
    int64_t sa_whole = time_part_fill(p, sa, slots, 1, HUGE_VAL, 0, runs, &bytes);
    int64_t sa_part = time_part_fill(p, sa, slots, 1, top_ms, budget, runs, &bytes);
    snprintf(out, cap,
             ", \"top_fill_ns\": %" PRId64 ", \"sa_whole_fill_ns\": %" PRId64
             ", \"sa_part_fill_ns\": %" PRId64,
             b_top, sa_whole, sa_part);
}

static void bench_solve(const struct bench_config *cfg, size_t n, size_t slots, int runs,
                        int full_runs)
{
    struct remat_profile *p = cnn_chain(n, 42 + n);
    if (p == NULL)
        return;
    struct remat_plan plan;
    struct remat_error err;
    struct remat_options o;
    remat_options_init(&o);
    o.algorithm = REMAT_ALG_MIN_TIME;
    o.budget_bytes = 1;
    o.mem_slots = slots;
    remat_solve(p, &o, &plan, &err);
    int64_t least = plan.min_budget_bytes;
    o.budget_bytes = INT64_C(1) << 60;
    if (remat_solve(p, &o, &plan, &err) != REMAT_OK) {
        fprintf(stderr, "bench_mintime: %s\n", err.message);
        remat_profile_free(p);
        return;
    }
    int64_t sa = plan.peak_bytes;
    double sa_ms = plan.total_ms;
    remat_plan_clear(&plan);
    o.budget_bytes = least + (sa - least) / 2;
    int64_t *ns = malloc((size_t)runs * sizeof *ns);
    double total_ms = 0;
    int64_t peak = 0;
    for (int r = 0; ns != NULL && r < runs; r++) {
        int64_t t0 = bench_now_ns();
        int rc = remat_solve(p, &o, &plan, &err);
        ns[r] = bench_now_ns() - t0;
        if (rc != REMAT_OK) {
            fprintf(stderr, "bench_mintime: %s\n", err.message);
            free(ns);
            remat_profile_free(p);
            return;
        }
        total_ms = plan.total_ms;
        peak = plan.peak_bytes;
        remat_plan_clear(&plan);
    }
    if (ns == NULL) {
        remat_profile_free(p);
        return;
    }
    int64_t solve_ns = median(ns, runs);
    free(ns);
    size_t pruned_bytes = 0, full_bytes = 0;
    int64_t fill_ns = time_fill(p, o.budget_bytes, slots, 1, runs, &pruned_bytes);
    int64_t nofloor_ns = time_fill(p, o.budget_bytes, slots, 2, full_runs, &full_bytes);
    int64_t rotor_ns = full_runs > 0 && n <= 100
                           ? time_fill(p, o.budget_bytes, slots, 0, full_runs, &full_bytes)
                           : -1;
    char fills[160];
    time_solver_fills(p, o.budget_bytes, sa, slots, runs, fills, sizeof fills);
    char extra[800];
    snprintf(extra, sizeof extra,
             "\"slots\": %zu, \"budget_bytes\": %" PRId64 ", \"peak_bytes\": %" PRId64
             ", \"total_ms\": %.3f, \"store_all_ms\": %.3f, \"table_bytes\": %zu, "
             "\"fill_ns\": %" PRId64 ", \"unpruned_fill_ns\": %" PRId64
             ", \"rotor_loop_fill_ns\": %" PRId64 ", \"unpruned_table_bytes\": %zu%s",
             slots, o.budget_bytes, peak, total_ms, sa_ms, pruned_bytes, fill_ns, nofloor_ns,
             rotor_ns, full_bytes, fills);
    bench_report(cfg, "min-time", n, solve_ns, runs, extra);
    remat_profile_free(p);
}

static void bench_frontier(const struct bench_config *cfg, size_t n, size_t slots, int runs)
{
    struct remat_profile *p = cnn_chain(n, 42 + n);
    if (p == NULL)
        return;
    int64_t *ns = malloc((size_t)runs * sizeof *ns);
    size_t points = 0;
    for (int r = 0; ns != NULL && r < runs; r++) {
        struct remat_frontier f;
        struct remat_error err;
        int64_t t0 = bench_now_ns();
        int rc = remat_frontier_compute(p, slots, &f, &err);
        ns[r] = bench_now_ns() - t0;
        if (rc != REMAT_OK) {
            fprintf(stderr, "bench_mintime: %s\n", err.message);
            break;
        }
        points = f.n_points;
        remat_frontier_clear(&f);
        if (r == runs - 1) {
            char extra[128];
            snprintf(extra, sizeof extra, "\"slots\": %zu, \"points\": %zu", slots, points);
            bench_report(cfg, "frontier", n, median(ns, runs), runs, extra);
        }
    }
    free(ns);
    remat_profile_free(p);
}

/* One min-time solve of a stack (bench_stack); its time in ns, or -1. */
static int64_t time_stack_solve(const struct remat_profile *p, const struct remat_options *o,
                                int share, struct remat_plan *plan)
{
    struct remat_error err;
    int64_t t0 = bench_now_ns();
    int rc = remat__solve_min_time_share(p, o, share, plan, &err);
    int64_t ns = bench_now_ns() - t0;
    if (rc != REMAT_OK) {
        fprintf(stderr, "bench_mintime: %s\n", err.message);
        return -1;
    }
    return ns;
}

/* A stack of `layers` copies of a random block of `block` stages between a
 * random first and last stage (an embedding and a head), budget halfway
 * between the least peak and store-all: the solve with the periodic
 * sharing, and (at `old_layers` layers, or not when 0) without it beside
 * it, as the solver was. */
static void bench_stack(const struct bench_config *cfg, size_t layers, size_t block,
                        size_t old_layers, int runs)
{
    struct remat_profile *p = randchain_stack(7 + layers, 1, block, layers, 1, RANDCHAIN_UNIFORM);
    if (p == NULL)
        return;
    size_t n = p->n_stages;
    struct remat_options o;
    remat_options_init(&o);
    o.algorithm = REMAT_ALG_MIN_TIME;
    int64_t least = 0;
    if (remat__mt_min_peak(p, &least, NULL, NULL) != REMAT_OK) {
        remat_profile_free(p);
        return;
    }
    struct remat_plan plan;
    o.budget_bytes = 0;
    struct remat_error err;
    if (remat_solve(p, &o, &plan, &err) != REMAT_OK) {
        remat_profile_free(p);
        return;
    }
    o.budget_bytes = least + (plan.peak_bytes - least) / 2;
    remat_plan_clear(&plan);
    int64_t *ns = malloc((size_t)runs * sizeof *ns);
    double total_ms = 0;
    for (int r = 0; ns != NULL && r < runs; r++) {
        ns[r] = time_stack_solve(p, &o, 1, &plan);
        if (ns[r] < 0) {
            free(ns);
            remat_profile_free(p);
            return;
        }
        total_ms = plan.total_ms;
        remat_plan_clear(&plan);
    }
    if (ns == NULL) {
        remat_profile_free(p);
        return;
    }
    int64_t new_ns = median(ns, runs);
    int64_t old_ns = -1, old_new_ns = -1;
    double old_ms = -1;
    if (old_layers > 0) {
        /* Both paths on the smaller stack, alternating. */
        struct remat_profile *q =
            randchain_stack(7 + layers, 1, block, old_layers, 1, RANDCHAIN_UNIFORM);
        int64_t ql = 0;
        struct remat_options oq = o;
        oq.budget_bytes = 0;
        if (q != NULL && remat__mt_min_peak(q, &ql, NULL, NULL) == REMAT_OK &&
            remat_solve(q, &oq, &plan, &err) == REMAT_OK) {
            oq.budget_bytes = ql + (plan.peak_bytes - ql) / 2;
            remat_plan_clear(&plan);
            int oruns = runs < 3 ? runs : 3;
            int64_t a[3] = {0}, b[3] = {0};
            for (int r = 0; r < oruns; r++) {
                a[r] = time_stack_solve(q, &oq, 0, &plan);
                old_ms = plan.total_ms;
                remat_plan_clear(&plan);
                b[r] = time_stack_solve(q, &oq, 1, &plan);
                /* The same plan either way: sharing changes no value. */
                if (plan.total_ms != old_ms)
                    fprintf(stderr, "bench_mintime: the stack's plans differ\n");
                remat_plan_clear(&plan);
            }
            old_ns = median(a, oruns);
            old_new_ns = median(b, oruns);
        }
        remat_profile_free(q);
    }
    free(ns);
    char extra[400];
    snprintf(extra, sizeof extra,
             "\"layers\": %zu, \"block\": %zu, \"budget_bytes\": %" PRId64
             ", \"total_ms\": %.3f, \"old_layers\": %zu, \"old_n\": %zu, \"old_ns\": %" PRId64
             ", \"new_ns_at_old_n\": %" PRId64,
             layers, block, o.budget_bytes, total_ms, old_layers,
             old_layers ? old_layers * block + 2 : 0, old_ns, old_new_ns);
    bench_report(cfg, "min-time-stack", n, new_ns, runs, extra);
    remat_profile_free(p);
}

/* CPU time of this process in ns: the machine the bench runs on is
 * shared, and the wall clock counts the other jobs too. */
static int64_t cpu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* One solve of a stack on the plain table with the fill `prune`
 * (remat__solve_min_time_exact); its wall and CPU ns in ns[0], ns[1], or
 * -1 both. */
static void time_exact_solve(const struct remat_profile *p, const struct remat_options *o,
                             int prune, struct remat_plan *plan, int64_t ns[2])
{
    struct remat_error err;
    int64_t t0 = bench_now_ns(), c0 = cpu_now_ns();
    int rc = remat__solve_min_time_exact(p, o, prune, plan, &err);
    ns[0] = bench_now_ns() - t0;
    ns[1] = cpu_now_ns() - c0;
    if (rc != REMAT_OK) {
        fprintf(stderr, "bench_mintime: %s\n", err.message);
        ns[0] = ns[1] = -1;
    }
}

/* The same block of 10 stages stacked k = 10, 20, 40, 80 and 160 times
 * between a first and a last stage of their own (as min-time-stack), the
 * budget halfway between the least peak and store-all: one row per k with
 * the solve on the shared table now (new) and as it was filled before the
 * bound on the leaves' room (old, prune 4), in the same process, one after
 * the other, and the plain table without the sharing up to k = 20 (it
 * takes seconds from k = 40 on).  same_plan: the plans agree op for op and
 * in time.  Past 1000 stages the solver itself takes runs of stages; this
 * row times the exact table there too. */
static void bench_stack_scaling(const struct bench_config *cfg)
{
    static const size_t ks[] = {10, 20, 40, 80, 160};
    for (size_t c = 0; c < sizeof ks / sizeof ks[0]; c++) {
        size_t k = ks[c];
        struct remat_profile *p = randchain_stack(87, 1, 10, k, 1, RANDCHAIN_UNIFORM);
        if (p == NULL)
            return;
        struct remat_options o;
        remat_options_init(&o);
        o.algorithm = REMAT_ALG_MIN_TIME;
        int64_t least = 0;
        struct remat_plan plan, ref;
        struct remat_error err;
        if (remat__mt_min_peak(p, &least, NULL, NULL) != REMAT_OK ||
            remat_solve(p, &o, &plan, &err) != REMAT_OK) {
            remat_profile_free(p);
            return;
        }
        o.budget_bytes = least + (plan.peak_bytes - least) / 2;
        remat_plan_clear(&plan);
        int64_t now[2], old[2], plain[2] = {-1, -1};
        time_exact_solve(p, &o, 4, &ref, old);
        time_exact_solve(p, &o, 1, &plan, now);
        int same = now[0] >= 0 && old[0] >= 0 && plan.total_ms == ref.total_ms &&
                   plan.schedule.n_ops == ref.schedule.n_ops;
        for (size_t i = 0; same && i < plan.schedule.n_ops; i++)
            same = plan.schedule.ops[i].kind == ref.schedule.ops[i].kind &&
                   plan.schedule.ops[i].stage == ref.schedule.ops[i].stage;
        double total_ms = plan.total_ms;
        int64_t peak = plan.peak_bytes;
        if (old[0] >= 0)
            remat_plan_clear(&ref);
        if (k <= 20) {
            time_exact_solve(p, &o, 3, &ref, plain);
            same = same && plain[0] >= 0 && ref.total_ms == plan.total_ms;
            if (plain[0] >= 0)
                remat_plan_clear(&ref);
        }
        if (now[0] >= 0)
            remat_plan_clear(&plan);
        char extra[400];
        snprintf(extra, sizeof extra,
                 "\"layers\": %zu, \"block\": 10, \"budget_bytes\": %" PRId64
                 ", \"peak_bytes\": %" PRId64 ", \"total_ms\": %.3f, \"cpu_ns\": %" PRId64
                 ", \"old_ns\": %" PRId64 ", \"old_cpu_ns\": %" PRId64 ", \"plain_ns\": %" PRId64
                 ", \"plain_cpu_ns\": %" PRId64 ", \"same_plan\": %d",
                 k, o.budget_bytes, peak, total_ms, now[1], old[0], old[1], plain[0], plain[1],
                 same);
        bench_report(cfg, "min-time-stack-k", p->n_stages, now[0], 1, extra);
        remat_profile_free(p);
    }
}

/* The budget halfway between the solver's least and store-all's peak,
 * or -1. */
static int64_t halfway_budget(const struct remat_profile *p)
{
    struct remat_options o;
    remat_options_init(&o);
    o.algorithm = REMAT_ALG_MIN_TIME;
    o.budget_bytes = 1;
    struct remat_plan plan;
    struct remat_error err;
    if (remat_solve(p, &o, &plan, &err) != REMAT_EINFEASIBLE)
        return -1;
    int64_t least = plan.min_budget_bytes;
    o.budget_bytes = 0;
    if (remat_solve(p, &o, &plan, &err) != REMAT_OK)
        return -1;
    int64_t sa = plan.peak_bytes;
    remat_plan_clear(&plan);
    return least + (sa - least) / 2;
}

/* A random heterogeneous chain of n stages (every field random), budget
 * halfway: the solve as it is (past 300 stages on runs of stages, with
 * optimality_gap) beside the plain table as it was, which refuses past
 * 1000 stages at once and at 1000 after its floors ("the table would take
 * over 512 MiB"); old_ns is the time to that answer, old_rc its code.
 * With check = 1 (n <= 300), also the plain solve beside the runs' solve
 * on the same chain, and how much slower the runs' plan really is. */
static void bench_long(const struct bench_config *cfg, size_t n, int runs, int check)
{
    struct remat_profile *p = randchain_profile(5 + n, n, RANDCHAIN_UNIFORM, 1);
    if (p == NULL)
        return;
    int64_t budget = halfway_budget(p);
    if (budget < 0) {
        remat_profile_free(p);
        return;
    }
    struct remat_options o;
    remat_options_init(&o);
    o.algorithm = REMAT_ALG_MIN_TIME;
    o.budget_bytes = budget;
    struct remat_plan plan;
    struct remat_error err;
    int64_t *ns = malloc((size_t)runs * sizeof *ns);
    double total_ms = 0, gap = 0;
    int rc = REMAT_OK;
    for (int r = 0; ns != NULL && r < runs && rc == REMAT_OK; r++) {
        int64_t t0 = bench_now_ns();
        rc = check ? remat__solve_min_time_groups(p, &o, REMAT_MT_GROUPS, &plan, &err)
                   : remat_solve(p, &o, &plan, &err);
        ns[r] = bench_now_ns() - t0;
        if (rc == REMAT_OK) {
            total_ms = plan.total_ms;
            gap = plan.optimality_gap;
            remat_plan_clear(&plan);
        }
    }
    if (ns == NULL || rc != REMAT_OK) {
        if (rc != REMAT_OK)
            fprintf(stderr, "bench_mintime: %s\n", err.message);
        free(ns);
        remat_profile_free(p);
        return;
    }
    int64_t new_ns = median(ns, runs);
    free(ns);
    int64_t old_ns = -1, exact_ns = -1;
    int old_rc = 0;
    double exact_ms = -1;
    if (check) {
        int64_t t0 = bench_now_ns();
        if (remat_solve(p, &o, &plan, &err) == REMAT_OK) {
            exact_ns = bench_now_ns() - t0;
            exact_ms = plan.total_ms;
            remat_plan_clear(&plan);
        }
    } else {
        struct remat__mt *t = NULL;
        int64_t t0 = bench_now_ns();
        old_rc = remat__mt_fill_capped(p, budget, 0, 1, HUGE_VAL, budget, NULL, &t, &err);
        old_ns = bench_now_ns() - t0;
        remat__mt_free(t);
    }
    int64_t reserve = 0;
    remat_solve_memory_bound(p, &o, &reserve, NULL);
    char extra[400];
    snprintf(extra, sizeof extra,
             "\"budget_bytes\": %" PRId64 ", \"total_ms\": %.3f, \"optimality_gap\": %.5f, "
             "\"memory_bound_bytes\": %" PRId64 ", \"old_ns\": %" PRId64
             ", \"old_rc\": %d, \"exact_ns\": %" PRId64 ", \"exact_ms\": %.3f",
             budget, total_ms, gap, reserve, old_ns, old_rc, exact_ns, exact_ms);
    bench_report(cfg, check ? "min-time-runs" : "min-time-long", n, new_ns, runs, extra);
    remat_profile_free(p);
}

/* The frontier of a random heterogeneous chain of n stages (past 300 over
 * runs of stages), beside the plain table's answer at the same chain (at
 * 1000 stages it refuses after its floors); points, whether the peaks
 * rise and the times fall strictly along it, and the largest gap. */
static void bench_frontier_long(const struct bench_config *cfg, size_t n, int runs)
{
    struct remat_profile *p = randchain_profile(5 + n, n, RANDCHAIN_UNIFORM, 1);
    if (p == NULL)
        return;
    int64_t *ns = malloc((size_t)runs * sizeof *ns);
    size_t points = 0;
    int monotone = 1;
    double worst = 0;
    int64_t sa = 0;
    for (int r = 0; ns != NULL && r < runs; r++) {
        struct remat_frontier f;
        struct remat_error err;
        int64_t t0 = bench_now_ns();
        int rc = remat_frontier_compute(p, 0, &f, &err);
        ns[r] = bench_now_ns() - t0;
        if (rc != REMAT_OK) {
            fprintf(stderr, "bench_mintime: %s\n", err.message);
            free(ns);
            remat_profile_free(p);
            return;
        }
        points = f.n_points;
        for (size_t k = 0; k < f.n_points; k++) {
            if (k > 0 && !(f.points[k].peak_bytes > f.points[k - 1].peak_bytes &&
                           f.points[k].total_ms < f.points[k - 1].total_ms))
                monotone = 0;
            if (f.points[k].plan.optimality_gap > worst)
                worst = f.points[k].plan.optimality_gap;
        }
        sa = f.n_points ? f.points[f.n_points - 1].peak_bytes : 0;
        remat_frontier_clear(&f);
    }
    if (ns == NULL) {
        remat_profile_free(p);
        return;
    }
    struct remat__mt *t = NULL;
    struct remat_error err;
    int64_t t0 = bench_now_ns();
    int old_rc = remat__mt_fill_cancel(p, sa, 0, 1, NULL, &t, &err);
    int64_t old_ns = bench_now_ns() - t0;
    remat__mt_free(t);
    char extra[200];
    snprintf(extra, sizeof extra,
             "\"points\": %zu, \"monotone\": %d, \"max_optimality_gap\": %.4f, \"old_ns\": %" PRId64
             ", \"old_rc\": %d",
             points, monotone, worst, old_ns, old_rc);
    bench_report(cfg, "frontier-long", n, median(ns, runs), runs, extra);
    free(ns);
    remat_profile_free(p);
}

void bench_mintime(const struct bench_config *cfg)
{
    bench_frontier_long(cfg, 1000, runs_for(cfg, 3));
    bench_long(cfg, 300, runs_for(cfg, 3), 1);
    bench_long(cfg, 1000, runs_for(cfg, 3), 0);
    bench_long(cfg, 5000, runs_for(cfg, 3), 0);
    bench_stack(cfg, 80, 10, 40, runs_for(cfg, 3));
    bench_stack_scaling(cfg);
    bench_solve(cfg, 39, 500, runs_for(cfg, 51), runs_for(cfg, 5));
    bench_solve(cfg, 200, 500, runs_for(cfg, 11), runs_for(cfg, 3));
    bench_frontier(cfg, 39, 500, runs_for(cfg, 21));
}
