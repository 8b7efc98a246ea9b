/* table.c - the answers of plan, simulate, frontier and fits as a person
 * reads them: bytes in KiB/MiB/GiB, the plan beside store-all and sqrt(n),
 * checkpoints by stage name.  The JSON stays the contract for programs;
 * these tables may change between releases. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "rematx/svg.h"

#define NAME_MAX_SHOWN 40

/* Under every table with a min-peak row: what it is the least of
 * (rematx_plan_label says why). */
#define MIN_PEAK_NOTE                                                                              \
    "min-peak: the least peak among single-level checkpoint plans (each stage\n"                   \
    "recomputed at most once); min-time's multi-level plans can peak lower.\n"

/* A plan's figures for one row. */
struct row {
    const char *label;
    int64_t peak_bytes;
    double recompute_ms;
    double total_ms;
};

static int solve_row(const struct remat_profile *p, enum remat_algorithm alg, struct row *r)
{
    struct remat_options o;
    remat_options_init(&o);
    o.algorithm = alg;
    struct remat_plan plan;
    memset(&plan, 0, sizeof plan);
    struct remat_error err = {0};
    int rc = remat_solve(p, &o, &plan, &err);
    if (rc == REMAT_OK) {
        r->peak_bytes = plan.peak_bytes;
        r->recompute_ms = plan.recompute_ms;
        r->total_ms = plan.total_ms;
    } else {
        cli_fail(remat_algorithm_name(alg), &err);
    }
    remat_plan_clear(&plan);
    return rc;
}

static void print_rows(const struct cli_style *st, const struct row *rows, size_t n,
                       const struct row *store_all)
{
    printf("%s%-24s %12s %10s %22s %12s%s\n", st->bold, "plan", "peak", "saving", "extra time",
           "step time", st->off);
    for (size_t i = 0; i < n; i++) {
        char h[REMATX_HUMAN_MAX], saving[32], extra[48], ms[32], total[32];
        rematx_human_bytes(rows[i].peak_bytes, h);
        if (store_all->peak_bytes > 0)
            snprintf(saving, sizeof saving, "%.1f %%",
                     100.0 * (double)(store_all->peak_bytes - rows[i].peak_bytes) /
                         (double)store_all->peak_bytes);
        else
            snprintf(saving, sizeof saving, "-");
        if (store_all->total_ms > 0)
            snprintf(extra, sizeof extra, "+%s (+%.1f %%)",
                     cli_ms(rows[i].recompute_ms, ms, sizeof ms),
                     100.0 * rows[i].recompute_ms / store_all->total_ms);
        else
            snprintf(extra, sizeof extra, "+%s", cli_ms(rows[i].recompute_ms, ms, sizeof ms));
        printf("%s%-24s %12s %10s %22s %12s%s\n", i == 0 ? st->good : "", rows[i].label, h, saving,
               extra, cli_ms(rows[i].total_ms, total, sizeof total), i == 0 ? st->off : "");
    }
}

static void print_title(const struct cli_style *st, const struct remat_profile *p, const char *what)
{
    char h[REMATX_HUMAN_MAX];
    printf("%s%s%s: %zu stages", st->bold, what, st->off, p->n_stages);
    if (p->model != NULL) {
        char name[NAME_MAX_SHOWN + 1];
        size_t k = 0;
        for (; k < NAME_MAX_SHOWN && p->model[k] != '\0'; k++)
            name[k] = (unsigned char)p->model[k] < 0x20 || p->model[k] == 0x7f ? '?' : p->model[k];
        name[k] = '\0';
        printf(" of %s", name);
    }
    if (p->batch_size > 0)
        printf(", batch %" PRId64, p->batch_size);
    printf(", input %s\n\n", rematx_human_bytes(p->input_bytes, h));
}

static void print_checkpoints(const struct cli_style *st, const struct remat_profile *p,
                              const size_t *ck, size_t n)
{
    printf("%scheckpoints (%zu)%s:", st->bold, n, st->off);
    if (n == 0)
        printf(" none: every activation is kept");
    for (size_t i = 0; i < n; i++) {
        char name[NAME_MAX_SHOWN + 1];
        printf("%s after %s (%zu)", i ? "," : "", cli_stage_name(p, ck[i], name, sizeof name),
               ck[i]);
    }
    printf("\n");
    if (n > 0) {
        /* What torch.utils.checkpoint wraps: the stages between checkpoints. */
        printf("%ssegments%s:", st->bold, st->off);
        size_t from = 1;
        for (size_t i = 0; i <= n; i++) {
            size_t to = i < n ? ck[i] : p->n_stages;
            char a[NAME_MAX_SHOWN + 1], b[NAME_MAX_SHOWN + 1];
            if (from == to)
                printf(" [%s]", cli_stage_name(p, from, a, sizeof a));
            else
                printf(" [%s .. %s]", cli_stage_name(p, from, a, sizeof a),
                       cli_stage_name(p, to, b, sizeof b));
            from = to + 1;
        }
        printf("\n");
    }
}

int cli_table_plan(const struct remat_profile *p, const struct remat_plan *plan)
{
    struct cli_style st;
    cli_style_init(&st);
    struct row rows[3] = {
        {rematx_plan_label(plan->algorithm), plan->peak_bytes, plan->recompute_ms, plan->total_ms},
        {"store-all", 0, 0, 0},
        {"sqrt(n)", 0, 0, 0},
    };
    if (solve_row(p, REMAT_ALG_STORE_ALL, &rows[1]) < 0 ||
        solve_row(p, REMAT_ALG_SQRT, &rows[2]) < 0)
        return 1;
    print_title(&st, p, "remat plan");
    print_rows(&st, rows, 3, &rows[1]);
    if (plan->algorithm == REMAT_ALG_MIN_PEAK)
        fputs(MIN_PEAK_NOTE, stdout);
    printf("\n");
    if (plan->budget_bytes > 0) {
        char h[REMATX_HUMAN_MAX];
        printf("%sbudget%s: %s\n", st.bold, st.off, rematx_human_bytes(plan->budget_bytes, h));
    }
    /* Past 300 stages min-time plans on runs of stages: say how far from
     * the optimum the plan may be (0, exact, says nothing). */
    if (plan->optimality_gap > 0)
        printf("%soptimality gap%s: at most %.2f%% slower than the fastest schedule that fits "
               "(docs/min-time.md)\n",
               st.bold, st.off, 100.0 * plan->optimality_gap);
    if (plan->single_level)
        print_checkpoints(&st, p, plan->checkpoints, plan->n_checkpoints);
    else
        printf("%sschedule%s: nested (%zu ops); --format json lists them\n", st.bold, st.off,
               plan->schedule.n_ops);
    return cli_flush();
}

/* A bar of up to 40 cells for v out of max. */
static void bar(int64_t v, int64_t max)
{
    int cells = max > 0 ? (int)(40.0 * (double)v / (double)max + 0.5) : 0;
    for (int k = 0; k < cells; k++)
        fputs("#", stdout);
}

int cli_table_simulate(const struct remat_profile *p, enum remat_model model,
                       const size_t *checkpoints, size_t n_checkpoints, const struct remat_sim *sim)
{
    struct cli_style st;
    cli_style_init(&st);
    char what[64];
    snprintf(what, sizeof what, "remat simulate (%s model)", remat_model_name(model));
    print_title(&st, p, what);
    struct row rows[3] = {{"these checkpoints", sim->peak_bytes, sim->recompute_ms, sim->total_ms},
                          {"store-all", 0, 0, 0},
                          {"sqrt(n)", 0, 0, 0}};
    if (solve_row(p, REMAT_ALG_STORE_ALL, &rows[1]) < 0 ||
        solve_row(p, REMAT_ALG_SQRT, &rows[2]) < 0)
        return 1;
    if (model != REMAT_MODEL_TRACED)
        printf("%s(store-all and sqrt(n) are under the traced model)%s\n", st.dim, st.off);
    print_rows(&st, rows, 3, &rows[1]);
    printf("\n");
    print_checkpoints(&st, p, checkpoints, n_checkpoints);
    /* The op the peak happens in, by stage, when the schedule says. */
    struct remat_schedule s;
    remat_schedule_init(&s);
    struct remat_error err = {0};
    if (remat_schedule_from_checkpoints(p, checkpoints, n_checkpoints, &s, &err) == REMAT_OK &&
        s.n_ops == sim->n_phases) {
        char name[NAME_MAX_SHOWN + 1];
        if (sim->peak_phase < s.n_ops)
            printf("%speak%s during op %zu of %zu: %s of %s\n", st.bold, st.off, sim->peak_phase,
                   s.n_ops, remat_op_name(s.ops[sim->peak_phase].kind),
                   cli_stage_name(p, s.ops[sim->peak_phase].stage, name, sizeof name));
        else
            printf("%speak%s during the optimizer step\n", st.bold, st.off);
        if (sim->timeline != NULL) {
            /* One line per op (every k-th past 200): live bytes as a bar. */
            int64_t max = sim->peak_bytes;
            size_t every = s.n_ops / 200 + 1;
            printf("\n%s%6s %-7s %-20s %12s%s\n", st.bold, "op", "kind", "stage", "live after",
                   st.off);
            for (size_t k = 0; k < s.n_ops; k += every) {
                char h[REMATX_HUMAN_MAX];
                printf("%6zu %-7s %-20.20s %12s ", k, remat_op_name(s.ops[k].kind),
                       cli_stage_name(p, s.ops[k].stage, name, sizeof name),
                       rematx_human_bytes(sim->timeline[k], h));
                bar(sim->timeline[k], max);
                printf("\n");
            }
        }
    } else {
        printf("%speak%s at phase %zu\n", st.bold, st.off, sim->peak_phase);
    }
    remat_schedule_clear(&s);
    return cli_flush();
}

int cli_table_frontier(const struct remat_profile *p, const struct remat_frontier *f)
{
    struct cli_style st;
    cli_style_init(&st);
    struct row ref[3] = {{"store-all", 0, 0, 0},
                         {"sqrt(n)", 0, 0, 0},
                         {rematx_plan_label(REMAT_ALG_MIN_PEAK), 0, 0, 0}};
    if (solve_row(p, REMAT_ALG_STORE_ALL, &ref[0]) < 0 ||
        solve_row(p, REMAT_ALG_SQRT, &ref[1]) < 0 || solve_row(p, REMAT_ALG_MIN_PEAK, &ref[2]) < 0)
        return 1;
    print_title(&st, p, "remat frontier");
    printf("%zu plans, each the fastest under its peak (min-time at that budget)\n\n", f->n_points);
    printf("%s%5s %12s %10s %12s %22s%s\n", st.bold, "#", "peak", "saving", "step time",
           "extra time", st.off);
    for (size_t i = 0; i < f->n_points; i++) {
        const struct remat_frontier_point *pt = &f->points[i];
        char h[REMATX_HUMAN_MAX], t[32], e[32], extra[48];
        double more = pt->total_ms - ref[0].total_ms;
        snprintf(extra, sizeof extra, "+%s (+%.1f %%)", cli_ms(more > 0 ? more : 0, e, sizeof e),
                 ref[0].total_ms > 0 ? 100.0 * (more > 0 ? more : 0) / ref[0].total_ms : 0.0);
        printf("%5zu %12s %8.1f %% %12s %22s\n", i + 1, rematx_human_bytes(pt->peak_bytes, h),
               ref[0].peak_bytes > 0 ? 100.0 * (double)(ref[0].peak_bytes - pt->peak_bytes) /
                                           (double)ref[0].peak_bytes
                                     : 0.0,
               cli_ms(pt->total_ms, t, sizeof t), extra);
    }
    printf("\n%sfor comparison%s\n", st.bold, st.off);
    print_rows(&st, ref, 3, &ref[0]);
    fputs(MIN_PEAK_NOTE, stdout);
    return cli_flush();
}

int cli_table_fits(const struct remat_fits_answer *a, size_t n, const struct remat_fit_check *chk,
                   size_t n_chk)
{
    struct cli_style st;
    cli_style_init(&st);
    printf("%s%10s %10s %8s %11s %10s %11s %10s %12s%s\n", st.bold, "memory", "usable", "batch",
           "its peak", "store-all", "its peak", "best", "samples/s", st.off);
    for (size_t i = 0; i < n; i++) {
        char m[REMATX_HUMAN_MAX], u[REMATX_HUMAN_MAX], pk[REMATX_HUMAN_MAX], sp[REMATX_HUMAN_MAX];
        char best[24], sps[32];
        if (a[i].best_batch > 0) {
            snprintf(best, sizeof best, "%" PRId64, a[i].best_batch);
            snprintf(sps, sizeof sps, "%.1f", a[i].best_samples_per_s);
        } else {
            snprintf(best, sizeof best, "-");
            snprintf(sps, sizeof sps, "-");
        }
        printf("%10s %10s %s%8" PRId64 "%s %11s %10" PRId64 " %11s %10s %12s%s%s\n",
               rematx_human_bytes(a[i].memory_bytes, m), rematx_human_bytes(a[i].usable_bytes, u),
               a[i].batch > 0 ? st.good : st.bad, a[i].batch, st.off,
               a[i].batch > 0 ? rematx_human_bytes(a[i].plan.peak_bytes, pk) : "-",
               a[i].store_all_batch,
               a[i].store_all_batch > 0 ? rematx_human_bytes(a[i].store_all_peak_bytes, sp) : "-",
               best, sps, a[i].extrapolated ? "  (extrapolated)" : "",
               a[i].capped ? "  (at --max-batch)" : "");
    }
    printf("\n%sbatch%s: the largest that fits with the min-peak plan; %sstore-all%s: without "
           "recomputation;\n%sbest%s: the most samples per second (min-time plan)\n%s",
           st.bold, st.off, st.bold, st.off, st.bold, st.off, MIN_PEAK_NOTE);
    if (n_chk > 0) {
        printf("\n%sfit check%s (each interior batch left out and predicted from the others):\n",
               st.bold, st.off);
        for (size_t k = 0; k < n_chk; k++) {
            double worst = 0;
            int at = 0;
            for (int f = 0; f < REMAT_FIT_N_FIELDS; f++)
                if (chk[k].rel_err[f] > worst) {
                    worst = chk[k].rel_err[f];
                    at = f;
                }
            printf("  batch %" PRId64 ": largest error %.2f %% (%s)\n", chk[k].batch, 100 * worst,
                   remat_fit_field_name(at));
        }
    }
    return cli_flush();
}
