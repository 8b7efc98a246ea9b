/* randchain.c - seeded random chains; see randchain.h. */
#include <math.h>

#include "randchain.h"

void randchain_seed(struct randchain_rng *r, uint64_t seed)
{
    r->state = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
}

uint64_t randchain_next(struct randchain_rng *r)
{
    /* splitmix64: small, fast, and the same everywhere. */
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t randchain_below(struct randchain_rng *r, uint64_t bound)
{
    return randchain_next(r) % bound;
}

const char *randchain_dist_name(enum randchain_dist d)
{
    switch (d) {
    case RANDCHAIN_UNIFORM:
        return "uniform";
    case RANDCHAIN_HEAVY:
        return "heavy";
    case RANDCHAIN_TIES:
        return "ties";
    case RANDCHAIN_POOLING:
        return "pooling";
    default:
        return "?";
    }
}

static int64_t draw(struct randchain_rng *r, enum randchain_dist dist, int64_t *pool_level)
{
    switch (dist) {
    case RANDCHAIN_HEAVY: {
        /* exp(U * 14): log-uniform between 1 and about 1.2e6. */
        double u = (double)randchain_below(r, 1u << 20) / (double)(1u << 20);
        return (int64_t)exp(u * 14.0);
    }
    case RANDCHAIN_TIES: {
        static const int64_t vals[] = {0, 1, 1, 1, 2, 2, 2, 4};
        return vals[randchain_below(r, 8)];
    }
    case RANDCHAIN_POOLING: {
        uint64_t roll = randchain_below(r, 10);
        if (roll < 2 && *pool_level > 4)
            *pool_level /= roll == 0 ? 4 : 2; /* a pooling layer */
        else if (roll == 2)
            *pool_level *= 2; /* channels double */
        if (*pool_level > (INT64_C(1) << 30))
            *pool_level = INT64_C(1) << 30;
        return *pool_level;
    }
    default:
        return 1 + (int64_t)randchain_below(r, 1000);
    }
}

void randchain_refine(struct randchain_rng *r, struct remat_stage *s)
{
    int64_t x = s->out_bytes, extra = s->saved_bytes - x, f = s->fwd_tmp_bytes;
    s->fwd_grad_tmp_bytes = f;
    uint64_t k = randchain_below(r, 8);
    if (k >= 3 && k < 6) {
        /* A block that saves its internals: its no-grad forward holds them
         * as a transient, at most x̄_i - x_i more (min-peak's sweep needs no
         * more: docs/min-peak.md, Lemma 2). */
        s->fwd_grad_tmp_bytes =
            f - (int64_t)randchain_below(r, (uint64_t)(f < extra ? f : extra) + 1);
    } else if (k == 6) {
        /* The forward with grad holds more. */
        s->fwd_grad_tmp_bytes = f + (int64_t)randchain_below(r, (uint64_t)x + 1);
    } else if (k == 7) {
        /* Anything: now and then more below f than Lemma 2 allows, so the
         * sweep's fallback is taken too. */
        s->fwd_grad_tmp_bytes = (int64_t)randchain_below(r, (uint64_t)x + (uint64_t)f + 1);
    }
    /* Half of the backwards free some of x̄_i and δ_i before their peak,
     * often more than their transient: a negative net transient. */
    s->bwd_freed_bytes = randchain_below(r, 2) == 0
                             ? 0
                             : (int64_t)randchain_below(r, (uint64_t)(s->saved_bytes + x) + 1);
}

struct remat_profile *randchain_profile(uint64_t seed, size_t n, enum randchain_dist dist, int full)
{
    struct remat_profile *p = remat_profile_new(n, NULL);
    if (p == NULL)
        return NULL;
    struct randchain_rng r;
    randchain_seed(&r, seed ^ ((uint64_t)dist << 56) ^ ((uint64_t)n << 32));
    int64_t level = INT64_C(1) << (16 + randchain_below(&r, 6));
    p->input_bytes = draw(&r, dist, &level);
    if (dist == RANDCHAIN_TIES && p->input_bytes == 0)
        p->input_bytes = 1;
    /* The refinements of a block (fwd_grad_tmp_bytes, bwd_freed_bytes) come
     * from a stream of their own, so every other field is drawn as before. */
    struct randchain_rng r2;
    randchain_seed(&r2, seed ^ ((uint64_t)dist << 48) ^ ((uint64_t)n << 24) ^ 0x5eed);
    for (size_t i = 0; i < n; i++) {
        struct remat_stage *s = &p->stages[i];
        s->out_bytes = draw(&r, dist, &level);
        s->saved_bytes = s->out_bytes;
        if (!full)
            continue;
        int64_t x = s->out_bytes;
        /* Layers keep their input or a mask besides the output; some keep
         * nothing more (ReLU keeps only its output). */
        s->saved_bytes =
            x + (randchain_below(&r, 3) == 0 ? 0 : (int64_t)randchain_below(&r, (uint64_t)x + 1));
        s->fwd_tmp_bytes = (int64_t)randchain_below(&r, (uint64_t)x / 2 + 1);
        s->bwd_tmp_bytes = (int64_t)randchain_below(&r, (uint64_t)x + 1);
        s->param_bytes = randchain_below(&r, 4) == 0 ? 0 : (int64_t)randchain_below(&r, 1000);
        s->fwd_ms = 0.25 * (double)randchain_below(&r, 16);
        s->bwd_ms = 0.25 * (double)(1 + randchain_below(&r, 32));
        randchain_refine(&r2, s);
    }
    return p;
}

struct remat_profile *randchain_stack(uint64_t seed, size_t pre, size_t block, size_t k,
                                      size_t post, enum randchain_dist dist)
{
    size_t n = pre + block * k + post;
    struct remat_profile *src = randchain_profile(seed, pre + block + post, dist, 1);
    struct remat_profile *p = src != NULL ? remat_profile_new(n, NULL) : NULL;
    if (p == NULL) {
        remat_profile_free(src);
        return NULL;
    }
    p->input_bytes = src->input_bytes;
    size_t o = 0;
    for (size_t i = 0; i < pre; i++)
        p->stages[o++] = src->stages[i];
    for (size_t c = 0; c < k; c++)
        for (size_t i = 0; i < block; i++)
            p->stages[o++] = src->stages[pre + i];
    for (size_t i = 0; i < post; i++)
        p->stages[o++] = src->stages[pre + block + i];
    remat_profile_free(src);
    return p;
}
