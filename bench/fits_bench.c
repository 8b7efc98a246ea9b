/* fits_bench.c - how long a scheduler waits for POST /v1/fits's answer:
 * remat_fits on a 50-stage model (profiles at two batch sizes, adam) for
 * four memory sizes, throughput search on and off; and, with --data DIR,
 * Llama-3-8B at seq 4096 on four GPU kinds under four data-parallel
 * strategies, from its cached profiles (scaled from short sequences on
 * CPU; bench/llama3-8b-profiles.py made them).  Median and p95 over the
 * runs.  Nothing else runs in this program: the HTTP overhead is
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

/* The profile in file path (new), or NULL after saying why. */
static struct remat_profile *load(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *text = NULL;
    long n = -1;
    if (f != NULL && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 &&
        fseek(f, 0, SEEK_SET) == 0 && (text = malloc((size_t)n)) != NULL &&
        fread(text, 1, (size_t)n, f) != (size_t)n) {
        free(text);
        text = NULL;
    }
    if (f != NULL)
        fclose(f);
    if (text == NULL) {
        fprintf(stderr, "fits_bench: %s: cannot read\n", path);
        return NULL;
    }
    struct remat_error err = {0};
    struct remat_profile *p = remat_profile_loadb(text, (size_t)n, &err);
    free(text);
    if (p == NULL)
        fprintf(stderr, "fits_bench: %s: %s\n", path, err.message);
    return p;
}

#define LLAMA_LAYERS 32

/* The cached profile (embedding, block0, block1, block1 again, head) as
 * the 32-block model: block0 and then block1's numbers for every other
 * block, as the worker gives a config's blocks past the second
 * (measured_as).  Stage names borrowed from names. */
static struct remat_profile *llama(const struct remat_profile *c, char names[][16])
{
    if (c->n_stages != 5)
        return NULL;
    struct remat_profile *p = remat_profile_new(LLAMA_LAYERS + 2, NULL);
    if (p == NULL)
        return NULL;
    p->batch_size = c->batch_size;
    p->input_bytes = c->input_bytes;
    p->optimizer = c->optimizer;
    for (size_t i = 0; i < LLAMA_LAYERS + 2; i++) {
        size_t from = i == 0 ? 0 : i == LLAMA_LAYERS + 1 ? 4 : i == 1 ? 1 : 2;
        p->stages[i] = c->stages[from];
        if (i >= 1 && i <= LLAMA_LAYERS) {
            snprintf(names[i], 16, "block%zu", i - 1);
            p->stages[i].name = names[i];
        }
    }
    return p;
}

static void run_llama(const char *dir, int throughput, int runs)
{
    char path[4096], names[LLAMA_LAYERS + 2][16];
    struct remat_profile *cached[2] = {NULL, NULL}, *ps[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/llama3-8b-s4096-b%d.json", dir, k + 1);
        cached[k] = load(path);
        ps[k] = cached[k] ? llama(cached[k], names) : NULL;
        if (ps[k] == NULL)
            exit(1);
        /* AdamW on the fp32 weights the profiles were measured with. */
        struct remat_optim_spec spec;
        remat_optim_spec_init(&spec);
        spec.kind = REMAT_OPTIM_ADAMW;
        if (remat_optim_estimate(ps[k], &spec, &ps[k]->optimizer, NULL) < 0)
            exit(1);
    }
    static const char *const gpus[] = {"a100-40gb", "a100-80gb", "h100-80gb", "h200"};
    static const enum remat_shard_strategy strategies[] = {REMAT_SHARD_DDP, REMAT_SHARD_ZERO1,
                                                           REMAT_SHARD_ZERO2, REMAT_SHARD_FSDP};
    int64_t mem[4];
    for (int g = 0; g < 4; g++)
        if (remat_gpu_memory_bytes(gpus[g], &mem[g]) != REMAT_OK)
            exit(1);
    struct remat_fits_options o;
    remat_fits_options_init(&o);
    o.want_throughput = throughput;
    o.margin_fraction = 0.05;
    int64_t *ns = malloc((size_t)runs * sizeof *ns);
    int64_t batch[4][4] = {{0}};
    for (int r = 0; ns != NULL && r < runs; r++) {
        int64_t t0 = now_ns();
        for (int s = 0; s < 4; s++) {
            struct remat_shard_job job;
            remat_shard_job_init(&job);
            job.strategy = strategies[s];
            job.data = 8;
            struct remat_fits_answer ans[4];
            struct remat_shard_breakdown per_rank[4];
            struct remat_shard_spec spec;
            struct remat_error err;
            if (remat_fits_sharded((const struct remat_profile *const *)ps, 2, mem, 4, &o, &job,
                                   ans, per_rank, &spec, &err) < 0) {
                fprintf(stderr, "fits_bench: %s\n", err.message);
                exit(1);
            }
            for (int g = 0; g < 4; g++) {
                batch[s][g] = ans[g].batch;
                remat_fits_answer_clear(&ans[g]);
            }
        }
        ns[r] = now_ns() - t0;
    }
    if (ns == NULL)
        exit(1);
    qsort(ns, (size_t)runs, sizeof *ns, cmp);
    printf("fits  llama-3-8b seq 4096, 4 GPU kinds x 4 strategies, 8 ranks  throughput=%-3s  "
           "CPU median %8.3f ms  p95 %8.3f ms  runs %d\n",
           throughput ? "yes" : "no", (double)ns[runs / 2] / 1e6,
           (double)ns[(runs * 95) / 100] / 1e6, runs);
    for (int s = 0; s < 4; s++)
        printf("  %-5s largest batch per rank: %s %lld, %s %lld, %s %lld, %s %lld\n",
               remat_shard_name(strategies[s]), gpus[0], (long long)batch[s][0], gpus[1],
               (long long)batch[s][1], gpus[2], (long long)batch[s][2], gpus[3],
               (long long)batch[s][3]);
    free(ns);
    for (int k = 0; k < 2; k++) {
        remat_profile_free(ps[k]);
        remat_profile_free(cached[k]);
    }
}

int main(int argc, char **argv)
{
    int runs = 40;
    const char *data = NULL;
    for (int k = 1; k < argc; k++) {
        if (strcmp(argv[k], "--quick") == 0)
            runs = 5;
        else if (strcmp(argv[k], "--data") == 0 && k + 1 < argc)
            data = argv[++k];
    }
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
    if (data != NULL) {
        run_llama(data, 0, runs);
        run_llama(data, 1, runs);
    }
    remat_profile_free(ps[0]);
    remat_profile_free(ps[1]);
    remat_profile_free(base);
    return 0;
}
