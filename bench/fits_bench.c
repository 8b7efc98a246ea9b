/* fits_bench.c - how long a scheduler waits for POST /v1/fits's answer:
 * remat_fits on a 50-stage model (profiles at two batch sizes, adam) for
 * four memory sizes, throughput search on and off; median and p95 over
 * the runs.  Nothing else runs in this program: the HTTP overhead is
 * bench-http's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "randchain.h"
#include "remat.h"

/* CPU time of this process: the machine this runs on is shared, and wall
 * time there measures the other jobs as much as this one. */
static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* A CNN-like chain whose activations grow in proportion to the batch. */
static struct remat_profile *at(const struct remat_profile *base, int64_t b)
{
    struct remat_profile *p = remat_profile_new(base->n_stages, NULL);
    if (p == NULL)
        return NULL;
    p->batch_size = b;
    p->input_bytes = base->input_bytes * 1000 * b;
    for (size_t i = 0; i < base->n_stages; i++) {
        const struct remat_stage *s = &base->stages[i];
        struct remat_stage *d = &p->stages[i];
        d->out_bytes = s->out_bytes * 1000 * b;
        d->saved_bytes = s->saved_bytes * 1000 * b;
        d->fwd_tmp_bytes = s->fwd_tmp_bytes * 1000 * b;
        d->fwd_grad_tmp_bytes = d->fwd_tmp_bytes;
        d->bwd_tmp_bytes = s->bwd_tmp_bytes * 1000 * b;
        d->param_bytes = s->param_bytes * 1000;
        d->fwd_ms = 0.05 + s->fwd_ms * (double)b / 8;
        d->bwd_ms = 0.1 + s->bwd_ms * (double)b / 8;
    }
    return p;
}

static void run(struct remat_profile *const *ps, const int64_t *mem, int throughput, int runs)
{
    struct remat_fits_options o;
    remat_fits_options_init(&o);
    o.want_throughput = throughput;
    int64_t *ns = malloc((size_t)runs * sizeof *ns);
    struct remat_fits_answer ans[4];
    int64_t batch[4] = {0}, best[4] = {0};
    for (int r = 0; ns != NULL && r < runs; r++) {
        int64_t t0 = now_ns();
        struct remat_error err;
        if (remat_fits((const struct remat_profile *const *)ps, 2, mem, 4, &o, ans, &err) < 0) {
            fprintf(stderr, "fits_bench: %s\n", err.message);
            exit(1);
        }
        ns[r] = now_ns() - t0;
        for (int k = 0; k < 4; k++) {
            batch[k] = ans[k].batch;
            best[k] = ans[k].best_batch;
            remat_fits_answer_clear(&ans[k]);
        }
    }
    if (ns == NULL)
        exit(1);
    qsort(ns, (size_t)runs, sizeof *ns, cmp);
    printf("fits  n=50  memories=4  throughput=%-3s  CPU median %8.3f ms  p95 %8.3f ms  runs %d  "
           "largest batches %lld %lld %lld %lld  throughput-best %lld %lld %lld %lld\n",
           throughput ? "yes" : "no", (double)ns[runs / 2] / 1e6,
           (double)ns[(runs * 95) / 100] / 1e6, runs, (long long)batch[0], (long long)batch[1],
           (long long)batch[2], (long long)batch[3], (long long)best[0], (long long)best[1],
           (long long)best[2], (long long)best[3]);
    free(ns);
}

int main(int argc, char **argv)
{
    int runs = argc > 1 && strcmp(argv[1], "--quick") == 0 ? 5 : 40;
    struct remat_profile *base = randchain_profile(7, 50, RANDCHAIN_POOLING, 1);
    if (base == NULL)
        return 1;
    struct remat_profile *ps[2] = {at(base, 8), at(base, 32)};
    if (ps[0] == NULL || ps[1] == NULL)
        return 1;
    struct remat_optim_spec spec;
    remat_optim_spec_init(&spec);
    spec.kind = REMAT_OPTIM_ADAM;
    for (int k = 0; k < 2; k++)
        if (remat_optim_estimate(ps[k], &spec, &ps[k]->optimizer, NULL) < 0)
            return 1;
    /* Four memories from store-all's peak at batches 8, 32, 64 and 128. */
    int64_t mem[4];
    int64_t bs[4] = {8, 32, 64, 128};
    for (int k = 0; k < 4; k++) {
        struct remat_profile *p =
            remat_profile_at_batch((const struct remat_profile *const *)ps, 2, bs[k], NULL, NULL);
        struct remat_sim sim;
        if (p == NULL ||
            remat_simulate_checkpoints(p, REMAT_MODEL_TRACED, NULL, 0, 0, &sim, NULL) < 0)
            return 1;
        mem[k] = sim.peak_bytes;
        remat_sim_clear(&sim);
        remat_profile_free(p);
    }
    run(ps, mem, 0, runs);
    run(ps, mem, 1, runs);
    remat_profile_free(ps[0]);
    remat_profile_free(ps[1]);
    remat_profile_free(base);
    return 0;
}
