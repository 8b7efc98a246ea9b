/* fits.c - what a cluster scheduler asks of a model: its profile at any
 * batch, from a few measured ones, and per device memory the largest batch
 * that fits and the batch that trains fastest under it (docs/scheduling.md).
 *
 * The batch model.  Every byte and time field of a stage grows with the
 * batch in a real network (activations are per sample; weights and the
 * optimizer are not): remat takes each field as non-decreasing (a running
 * maximum over the measured batches, which changes nothing when the
 * measurements already grow) and linear between measured batches, the
 * nearest segment extended outside them, a single profile scaled in
 * proportion.  Under that model the traced peak of any fixed plan is a max of
 * sums of non-decreasing fields, so it is non-decreasing in the batch, and so
 * is the least of them over all plans: "fits" is monotone, and bisection
 * finds the largest batch exactly.  The answer is checked where it is given:
 * the plan at b is simulated and fits, the best plan at b + 1 is simulated
 * and does not, and both peaks are reported.  The model itself is checked
 * by remat_batch_fit_check against measured batches left out. */
#include <math.h>
#include <stdio.h>

#include "remat_private.h"

/* The measured profiles in ascending batch order. */
struct bmodel {
    size_t m;
    const struct remat_profile *p[REMAT_FITS_MAX_PROFILES];
    int64_t b[REMAT_FITS_MAX_PROFILES];
    size_t index[REMAT_FITS_MAX_PROFILES]; /* position in the caller's array */
    int (*cancel)(void *);                 /* remat_fits_options.cancel */
    void *cancel_arg;
};

static int bad(struct remat_error *err, int code, size_t k, const char *field, const char *why)
{
    char ptr[160];
    snprintf(ptr, sizeof ptr, "/profiles/%zu%.100s", k, field);
    return remat__error(err, code, ptr, "profile %zu: %s", k, why);
}

static int bmodel_init(struct bmodel *md, const struct remat_profile *const *ps, size_t n,
                       struct remat_error *err)
{
    memset(md, 0, sizeof *md);
    if (ps == NULL || n == 0)
        return remat__error(err, REMAT_EINVAL, "/profiles", "at least one profile is needed");
    if (n > REMAT_FITS_MAX_PROFILES)
        return remat__error(err, REMAT_ELIMIT, "/profiles", "at most %d profiles",
                            REMAT_FITS_MAX_PROFILES);
    for (size_t k = 0; k < n; k++) {
        const struct remat_profile *p = ps[k];
        struct remat_error e;
        if (p == NULL)
            return bad(err, REMAT_EINVAL, k, "", "missing");
        int rc = remat_profile_validate(p, &e);
        if (rc < 0)
            return bad(err, rc, k, e.pointer, e.message);
        if (p->batch_size <= 0)
            return bad(err, REMAT_EINVAL, k, "/batch_size", "batch_size must be set (> 0)");
        if (p->batch_size > REMAT_FITS_MAX_BATCH)
            return bad(err, REMAT_ELIMIT, k, "/batch_size", "batch_size is over 2^24");
        const struct remat_profile *q = ps[0];
        if (p->n_stages != q->n_stages)
            return bad(err, REMAT_EINVAL, k, "/stages",
                       "every profile must have the stages of profile 0");
        for (size_t i = 0; i < p->n_stages; i++)
            if (p->stages[i].param_bytes != q->stages[i].param_bytes) {
                char f[64];
                snprintf(f, sizeof f, "/stages/%zu/param_bytes", i);
                return bad(err, REMAT_EINVAL, k, f, "the weights must not change with the batch");
            }
        if (p->optimizer.kind != q->optimizer.kind ||
            p->optimizer.state_bytes != q->optimizer.state_bytes)
            return bad(err, REMAT_EINVAL, k, "/optimizer",
                       "the optimizer must be the same in every profile");
        /* Insertion in batch order. */
        size_t j = md->m;
        while (j > 0 && md->b[j - 1] > p->batch_size) {
            md->p[j] = md->p[j - 1];
            md->b[j] = md->b[j - 1];
            md->index[j] = md->index[j - 1];
            j--;
        }
        if (j > 0 && md->b[j - 1] == p->batch_size)
            return bad(err, REMAT_EINVAL, k, "/batch_size", "two profiles of the same batch");
        md->p[j] = p;
        md->b[j] = p->batch_size;
        md->index[j] = k;
        md->m++;
    }
    return REMAT_OK;
}

/* A field the batch model predicts but does not report on (not in enum
 * remat_fit_field): the forward with grad's transient. */
#define FIT_FWD_GRAD_TMP_BYTES REMAT_FIT_N_FIELDS

/* The value of field f of stage i (0 = the profile's input) of profile p. */
static int64_t field_i(const struct remat_profile *p, size_t i, int f)
{
    if (i == 0)
        return p->input_bytes;
    const struct remat_stage *s = &p->stages[i - 1];
    switch (f) {
    case REMAT_FIT_OUT_BYTES:
        return s->out_bytes;
    case REMAT_FIT_SAVED_BYTES:
        return s->saved_bytes;
    case REMAT_FIT_FWD_TMP_BYTES:
        return s->fwd_tmp_bytes;
    case FIT_FWD_GRAD_TMP_BYTES:
        return remat_stage_fwd_grad_tmp_bytes(s);
    default:
        return s->bwd_tmp_bytes;
    }
}

static double field_d(const struct remat_profile *p, size_t i, int f)
{
    const struct remat_stage *s = &p->stages[i - 1];
    return f == REMAT_FIT_FWD_MS ? s->fwd_ms : s->bwd_ms;
}

static int64_t div_floor(__int128 a, int64_t b) /* b > 0, a >= 0 */
{
    return (int64_t)(a / b);
}

static int64_t clamp_bytes(__int128 v)
{
    return v < 0 ? 0 : v > REMAT_MAX_BYTES ? REMAT_MAX_BYTES : (int64_t)v;
}

/* The segment of the model that covers batch x: lo and lo + 1. */
static size_t segment(const struct bmodel *md, const int64_t *b, size_t m, int64_t x)
{
    (void)md;
    size_t k = 0;
    while (k + 2 < m && x >= b[k + 1])
        k++;
    return k;
}

/* Field f of stage i at batch x, over the measured batches b[0..m) of ps
 * (m >= 1), with the running maximum applied. */
static int64_t predict_i(const struct bmodel *md, const struct remat_profile *const *ps,
                         const int64_t *b, size_t m, size_t i, int f, int64_t x)
{
    int64_t v[REMAT_FITS_MAX_PROFILES] = {0}; /* m >= 1 of them are set */
    for (size_t k = 0; k < m; k++) {
        v[k] = field_i(ps[k], i, f);
        if (k > 0 && v[k] < v[k - 1])
            v[k] = v[k - 1];
    }
    if (m == 1) /* in proportion, rounded up */
        return clamp_bytes(((__int128)v[0] * x + b[0] - 1) / b[0]);
    size_t k = segment(md, b, m, x);
    int64_t b0 = b[k], b1 = b[k + 1], v0 = v[k], v1 = v[k + 1];
    __int128 d = (__int128)(v1 - v0);
    if (x >= b0)
        return clamp_bytes(v0 + (d * (x - b0) + (b1 - b0) - 1) / (b1 - b0));
    return clamp_bytes(v0 - div_floor(d * (b0 - x), b1 - b0));
}

static double predict_d(const struct bmodel *md, const struct remat_profile *const *ps,
                        const int64_t *b, size_t m, size_t i, int f, int64_t x)
{
    double v[REMAT_FITS_MAX_PROFILES] = {0}; /* m >= 1 of them are set */
    for (size_t k = 0; k < m; k++) {
        v[k] = field_d(ps[k], i, f);
        if (k > 0 && v[k] < v[k - 1])
            v[k] = v[k - 1];
    }
    double r;
    if (m == 1) {
        r = v[0] * (double)x / (double)b[0];
    } else {
        size_t k = segment(md, b, m, x);
        r = v[k] + (v[k + 1] - v[k]) * (double)(x - b[k]) / (double)(b[k + 1] - b[k]);
    }
    return r < 0 ? 0 : r > 1e12 ? 1e12 : r;
}

static struct remat_profile *predict(const struct bmodel *md, const struct remat_profile *const *ps,
                                     const int64_t *b, size_t m, int64_t x, struct remat_error *err)
{
    const struct remat_profile *q = ps[0];
    struct remat_profile *p = remat_profile_new(q->n_stages, err);
    if (p == NULL)
        return NULL;
    p->batch_size = x;
    p->input_bytes = predict_i(md, ps, b, m, 0, REMAT_FIT_INPUT_BYTES, x);
    p->optimizer = q->optimizer;
    for (size_t k = 1; k < m; k++) { /* the step's transient and time: the largest measured */
        if (ps[k]->optimizer.step_tmp_bytes > p->optimizer.step_tmp_bytes)
            p->optimizer.step_tmp_bytes = ps[k]->optimizer.step_tmp_bytes;
        if (ps[k]->optimizer.step_ms > p->optimizer.step_ms)
            p->optimizer.step_ms = ps[k]->optimizer.step_ms;
    }
    for (size_t i = 1; i <= q->n_stages; i++) {
        struct remat_stage *s = &p->stages[i - 1];
        s->name = q->stages[i - 1].name;
        s->param_bytes = q->stages[i - 1].param_bytes;
        s->out_bytes = predict_i(md, ps, b, m, i, REMAT_FIT_OUT_BYTES, x);
        s->saved_bytes = predict_i(md, ps, b, m, i, REMAT_FIT_SAVED_BYTES, x);
        /* Lines through points where saved >= out stay so inside the
         * range; outside it they may cross. */
        if (s->saved_bytes < s->out_bytes)
            s->saved_bytes = s->out_bytes;
        s->fwd_tmp_bytes = predict_i(md, ps, b, m, i, REMAT_FIT_FWD_TMP_BYTES, x);
        s->fwd_grad_tmp_bytes = predict_i(md, ps, b, m, i, FIT_FWD_GRAD_TMP_BYTES, x);
        s->bwd_tmp_bytes = predict_i(md, ps, b, m, i, REMAT_FIT_BWD_TMP_BYTES, x);
        /* What a backward frees before its peak takes bytes away, and a
         * field that takes away would make the peak of a plan fall as the
         * batch grows: the bisection's monotonicity is worth more than
         * those bytes, so a predicted profile leaves it at 0 (an over-,
         * never an under-prediction). */
        s->bwd_freed_bytes = 0;
        s->fwd_ms = predict_d(md, ps, b, m, i, REMAT_FIT_FWD_MS, x);
        s->bwd_ms = predict_d(md, ps, b, m, i, REMAT_FIT_BWD_MS, x);
    }
    int rc = remat_profile_validate(p, err);
    if (rc < 0) {
        remat_profile_free(p);
        return NULL;
    }
    return p;
}

static int outside(const struct bmodel *md, int64_t x)
{
    return md->m == 1 ? x != md->b[0] : (x < md->b[0] || x > md->b[md->m - 1]);
}

struct remat_profile *remat_profile_at_batch(const struct remat_profile *const *profiles,
                                             size_t n_profiles, int64_t batch, int *extrapolated,
                                             struct remat_error *err)
{
    struct bmodel md;
    if (bmodel_init(&md, profiles, n_profiles, err) < 0)
        return NULL;
    if (batch < 1 || batch > REMAT_FITS_MAX_BATCH) {
        remat__error(err, REMAT_EINVAL, "/batch", "batch must be in 1..2^24");
        return NULL;
    }
    if (extrapolated != NULL)
        *extrapolated = outside(&md, batch);
    return predict(&md, md.p, md.b, md.m, batch, err);
}

const char *remat_fit_field_name(int field)
{
    static const char *const names[REMAT_FIT_N_FIELDS] = {
        "input_bytes",   "out_bytes", "saved_bytes", "fwd_tmp_bytes",
        "bwd_tmp_bytes", "fwd_ms",    "bwd_ms"};
    return field >= 0 && field < REMAT_FIT_N_FIELDS ? names[field] : "?";
}

int remat_batch_fit_check(const struct remat_profile *const *profiles, size_t n_profiles,
                          struct remat_fit_check *out, size_t *n_out, struct remat_error *err)
{
    *n_out = 0;
    struct bmodel md;
    int rc = bmodel_init(&md, profiles, n_profiles, err);
    if (rc < 0)
        return rc;
    for (size_t left = 1; left + 1 < md.m; left++) {
        /* md.m >= 3 here, so m = md.m - 1 >= 2 of them are set. */
        const struct remat_profile *ps[REMAT_FITS_MAX_PROFILES] = {0};
        int64_t b[REMAT_FITS_MAX_PROFILES] = {0};
        size_t m = 0;
        for (size_t k = 0; k < md.m; k++)
            if (k != left) {
                ps[m] = md.p[k];
                b[m++] = md.b[k];
            }
        const struct remat_profile *meas = md.p[left];
        struct remat_profile *pred = predict(&md, ps, b, m, md.b[left], err);
        if (pred == NULL)
            return err != NULL ? err->code : REMAT_ENOMEM;
        struct remat_fit_check *c = &out[(*n_out)++];
        memset(c, 0, sizeof *c);
        c->batch = md.b[left];
        for (int f = 0; f < REMAT_FIT_N_FIELDS; f++) {
            double worst = 0, scale = 0;
            size_t lo = f == REMAT_FIT_INPUT_BYTES ? 0 : 1;
            size_t hi = f == REMAT_FIT_INPUT_BYTES ? 0 : meas->n_stages;
            for (size_t i = lo; i <= hi; i++) {
                double a, e;
                if (f == REMAT_FIT_FWD_MS || f == REMAT_FIT_BWD_MS) {
                    a = field_d(meas, i, f);
                    e = field_d(pred, i, f);
                } else {
                    a = (double)field_i(meas, i, f);
                    e = (double)field_i(pred, i, f);
                }
                worst = fabs(e - a) > worst ? fabs(e - a) : worst;
                scale = a > scale ? a : scale;
            }
            c->rel_err[f] = scale > 0 ? worst / scale : worst > 0 ? 1 : 0;
        }
        remat_profile_free(pred);
    }
    return REMAT_OK;
}

void remat_fits_options_init(struct remat_fits_options *o)
{
    memset(o, 0, sizeof *o);
    o->want_throughput = 1;
}

void remat_fits_answer_clear(struct remat_fits_answer *a)
{
    if (a == NULL)
        return;
    remat_profile_free(a->profile);
    remat_profile_free(a->best_profile);
    remat_plan_clear(&a->plan);
    remat_plan_clear(&a->best_plan);
    memset(a, 0, sizeof *a);
    remat_plan_clear(&a->plan);
    remat_plan_clear(&a->best_plan);
}

/* What a batch needs: the peak of the plan chosen by alg (store-all or
 * min-peak; min-time under budget for the throughput), with the profile and
 * plan when keep is set.  A batch whose profile is over remat's limits does
 * not fit: *peak = INT64_MAX. */
enum want { W_STORE_ALL, W_MIN_PEAK, W_MIN_TIME };

struct eval {
    int64_t peak;
    double total_ms;
    int infeasible;
    struct remat_profile *profile; /* when kept */
    struct remat_plan plan;        /* when kept */
};

static int evaluate(const struct bmodel *md, int64_t x, enum want w, int64_t budget,
                    size_t mem_slots, int keep, struct eval *out, struct remat_error *err)
{
    memset(out, 0, sizeof *out);
    remat_schedule_init(&out->plan.schedule);
    if (md->cancel != NULL && md->cancel(md->cancel_arg))
        return remat__error(err, REMAT_ECANCELED, "", "canceled");
    struct remat_error e;
    struct remat_profile *p = predict(md, md->p, md->b, md->m, x, &e);
    if (p == NULL) {
        if (e.code == REMAT_ELIMIT) {
            out->peak = INT64_MAX;
            out->infeasible = 1;
            return REMAT_OK;
        }
        if (err != NULL)
            *err = e;
        return e.code;
    }
    int rc;
    if (w == W_STORE_ALL && !keep) {
        struct remat_sim sim;
        rc = remat_simulate_checkpoints(p, REMAT_MODEL_TRACED, NULL, 0, 0, &sim, err);
        out->peak = sim.peak_bytes;
        out->total_ms = sim.total_ms;
        remat_sim_clear(&sim);
    } else {
        struct remat_options o;
        remat_options_init(&o);
        o.algorithm = w == W_STORE_ALL  ? REMAT_ALG_STORE_ALL
                      : w == W_MIN_PEAK ? REMAT_ALG_MIN_PEAK
                                        : REMAT_ALG_MIN_TIME;
        o.budget_bytes = w == W_MIN_TIME ? budget : 0;
        o.mem_slots = mem_slots;
        o.cancel = md->cancel;
        o.cancel_arg = md->cancel_arg;
        rc = remat_solve(p, &o, &out->plan, err);
        if (rc == REMAT_EINFEASIBLE || rc == REMAT_ELIMIT) {
            out->peak = INT64_MAX;
            out->infeasible = 1;
            rc = REMAT_OK;
        } else if (rc == REMAT_OK) {
            out->peak = out->plan.peak_bytes;
            out->total_ms = out->plan.total_ms;
        }
        if (!keep || rc != REMAT_OK)
            remat_plan_clear(&out->plan);
    }
    if (keep && rc == REMAT_OK)
        out->profile = p;
    else
        remat_profile_free(p);
    return rc;
}

/* The largest x in 1..max_b with peak(x) <= usable under w, with the peaks
 * at x and x + 1 (x = 0: even batch 1 does not fit; *next is its peak). */
static int largest(const struct bmodel *md, enum want w, int64_t usable, int64_t max_b,
                   int64_t *x_out, int64_t *peak_out, int64_t *next_out, int *capped,
                   struct remat_error *err)
{
    struct eval e;
    int64_t lo = 0, hi = 0, lo_peak = 0, hi_peak = 0;
    *capped = 0;
    /* Doubling from 1, then bisection between the last fit and the first
     * miss. */
    for (int64_t x = 1;; x = x > max_b / 2 ? max_b : 2 * x) {
        int rc = evaluate(md, x, w, 0, 0, 0, &e, err);
        if (rc < 0)
            return rc;
        if (e.peak <= usable) {
            lo = x;
            lo_peak = e.peak;
            if (x == max_b) {
                *capped = 1;
                break;
            }
        } else {
            hi = x;
            hi_peak = e.peak;
            break;
        }
    }
    while (hi != 0 && hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        int rc = evaluate(md, mid, w, 0, 0, 0, &e, err);
        if (rc < 0)
            return rc;
        if (e.peak <= usable) {
            lo = mid;
            lo_peak = e.peak;
        } else {
            hi = mid;
            hi_peak = e.peak;
        }
    }
    *x_out = lo;
    *peak_out = lo_peak;
    *next_out = hi_peak;
    return REMAT_OK;
}

static double rate(int64_t x, double total_ms)
{
    return total_ms > 0 ? (double)x * 1000.0 / total_ms : (double)x * 1e12;
}

/* The candidate batches of the throughput search: every batch up to 24,
 * then a geometric grid (ratio 5/4) up to hi, and hi.  Ascending. */
static size_t grid(int64_t hi, int64_t *out, size_t cap)
{
    size_t n = 0;
    for (int64_t x = 1; x < hi && n + 1 < cap; x = x < 24 ? x + 1 : x + x / 4)
        out[n++] = x;
    out[n++] = hi;
    return n;
}

/* Min-time's discretisation while comparing candidates: coarse slots make
 * each table fill several times cheaper and can only make a candidate's
 * plan slower, never over the memory; the chosen batch is solved again at
 * the slots asked for (bench/fits_bench: 0.9 s to about 0.1 s of CPU for
 * four memories of a 50-stage model at 500 slots against 50). */
#define SCREEN_SLOTS 50

/* The throughput search's state: the best so far, and the least
 * recomputation any batch above the last one solved needs.
 *
 * Under the batch model every field grows with the batch, so a plan that
 * fits at x + 1 fits at x and recomputes no longer there: the least
 * recomputation under a memory, R(x) = min-time's total_ms(x) - store-all's
 * total_ms(x), is non-decreasing in x.  So for x above a solved x0,
 * total_ms(x) >= store-all's total_ms(x) + R(x0), and x cannot beat the best
 * rate so far when x * 1000 / that bound does not: its min-time solve is
 * skipped for a simulation.  Candidates are visited in ascending order, so
 * R(x0) is the last solved one's. */
struct tsearch {
    int64_t best;
    double best_rate;
    double r_floor;  /* R of the last solved batch above store-all's; 0 before */
    int64_t r_batch; /* that batch */
    int stop;        /* a batch went over the memory: every larger one does */
    size_t solves, skipped;
};

static int consider(const struct bmodel *md, struct remat_fits_answer *a, size_t screen, int64_t x,
                    struct tsearch *t, struct remat_error *err)
{
    if (t->stop)
        return REMAT_OK;
    struct eval sa;
    /* Store-all's time at x: the answer at or below its largest batch, a
     * bound above it. */
    int rc = evaluate(md, x, W_STORE_ALL, 0, 0, 0, &sa, err);
    if (rc < 0)
        return rc;
    a->best_candidates++;
    if (x <= a->store_all_batch) {
        if (!sa.infeasible && rate(x, sa.total_ms) > t->best_rate) {
            t->best_rate = rate(x, sa.total_ms);
            t->best = x;
        }
        return REMAT_OK;
    }
    double floor = x > t->r_batch ? t->r_floor : 0;
    if (sa.infeasible || rate(x, sa.total_ms + floor) <= t->best_rate) {
        t->skipped++;
        return REMAT_OK;
    }
    struct eval e;
    rc = evaluate(md, x, W_MIN_TIME, a->usable_bytes, screen, 0, &e, err);
    if (rc < 0)
        return rc;
    t->solves++;
    if (e.infeasible) {
        t->stop = 1;
        return REMAT_OK;
    }
    if (x > t->r_batch) {
        double r = e.total_ms - sa.total_ms;
        t->r_floor = r > t->r_floor ? r : t->r_floor;
        t->r_batch = x;
    }
    if (rate(x, e.total_ms) > t->best_rate) {
        t->best_rate = rate(x, e.total_ms);
        t->best = x;
    }
    return REMAT_OK;
}

static int throughput(const struct bmodel *md, const struct remat_fits_options *o,
                      struct remat_fits_answer *a, struct remat_error *err)
{
    int64_t cand[128];
    size_t nc = grid(a->batch, cand, sizeof cand / sizeof cand[0] - 1);
    /* Store-all's largest batch is a candidate too: often the best. */
    int64_t sa = a->store_all_batch;
    if (sa > 0 && sa < a->batch) {
        size_t k = 0;
        while (cand[k] < sa)
            k++;
        if (cand[k] != sa) {
            memmove(cand + k + 1, cand + k, (nc - k) * sizeof cand[0]);
            cand[k] = sa;
            nc++;
        }
    }
    size_t screen = o->mem_slots > 0 && o->mem_slots < SCREEN_SLOTS ? o->mem_slots : SCREEN_SLOTS;
    a->best_candidates = 0;
    struct tsearch t = {0, -1, 0, 0, 0, 0, 0};
    for (size_t k = 0; k < nc; k++) {
        int rc = consider(md, a, screen, cand[k], &t, err);
        if (rc < 0)
            return rc;
    }
    /* Refine between the best candidate's neighbours on the grid, in
     * ascending order again (the bound holds for batches above the last
     * solved one only: restart it). */
    if (t.best > 0) {
        size_t best_k = 0;
        while (best_k + 1 < nc && cand[best_k] != t.best)
            best_k++;
        int64_t lo = best_k > 0 ? cand[best_k - 1] : t.best;
        int64_t hi = best_k + 1 < nc ? cand[best_k + 1] : t.best;
        int64_t step = (hi - lo) / 9 + 1, best = t.best;
        t.r_floor = 0;
        t.r_batch = 0;
        t.stop = 0;
        for (int64_t x = lo + 1; x < hi; x += step) {
            if (x == best)
                continue;
            int rc = consider(md, a, screen, x, &t, err);
            if (rc < 0)
                return rc;
        }
    }
    if (t.best == 0)
        return REMAT_OK;
    struct eval e;
    int rc = evaluate(md, t.best, W_MIN_TIME, a->usable_bytes, o->mem_slots, 1, &e, err);
    if (rc < 0)
        return rc;
    if (e.infeasible) /* cannot happen: it was feasible above */
        return remat__error(err, REMAT_EINVAL, "", "internal error: the best batch went over");
    a->best_batch = t.best;
    a->best_profile = e.profile;
    a->best_plan = e.plan;
    a->best_samples_per_s = rate(t.best, e.plan.total_ms);
    a->extrapolated |= outside(md, t.best);
    return REMAT_OK;
}

static int answer_one(const struct bmodel *md, int64_t memory, const struct remat_fits_options *o,
                      struct remat_fits_answer *a, struct remat_error *err)
{
    a->memory_bytes = memory;
    int64_t margin = o->margin_bytes + (int64_t)((double)memory * o->margin_fraction);
    a->usable_bytes = memory - margin;
    int64_t max_b = o->max_batch > 0 ? o->max_batch : REMAT_FITS_MAX_BATCH;
    int capped_sa = 0;
    int rc = largest(md, W_STORE_ALL, a->usable_bytes, max_b, &a->store_all_batch,
                     &a->store_all_peak_bytes, &a->store_all_next_peak_bytes, &capped_sa, err);
    if (rc < 0)
        return rc;
    int64_t peak = 0;
    rc = largest(md, W_MIN_PEAK, a->usable_bytes, max_b, &a->batch, &peak, &a->next_peak_bytes,
                 &a->capped, err);
    if (rc < 0)
        return rc;
    /* The answer, checked: its plan is solved and simulated again and must
     * fit; batch + 1 was simulated by the search and did not. */
    struct eval e;
    rc = evaluate(md, a->batch > 0 ? a->batch : 1, W_MIN_PEAK, 0, 0, 1, &e, err);
    if (rc < 0)
        return rc;
    a->profile = e.profile;
    if (a->batch > 0) {
        a->plan = e.plan;
        if (a->plan.peak_bytes != peak || peak > a->usable_bytes ||
            (!a->capped && a->next_peak_bytes <= a->usable_bytes))
            return remat__error(err, REMAT_EINVAL, "", "internal error: the fit did not verify");
    } else {
        remat_plan_clear(&e.plan);
    }
    a->extrapolated = a->batch > 0 && (outside(md, a->batch) || outside(md, a->batch + 1));
    if (a->store_all_batch > 0)
        a->extrapolated |= outside(md, a->store_all_batch) || outside(md, a->store_all_batch + 1);
    if (o->want_throughput && a->batch > 0)
        rc = throughput(md, o, a, err);
    return rc;
}

int remat_fits(const struct remat_profile *const *profiles, size_t n_profiles,
               const int64_t *memory_bytes, size_t n_memories,
               const struct remat_fits_options *opts, struct remat_fits_answer *out,
               struct remat_error *err)
{
    struct remat_fits_options defaults;
    if (opts == NULL) {
        remat_fits_options_init(&defaults);
        opts = &defaults;
    }
    if (out != NULL)
        memset(out, 0, n_memories * sizeof *out);
    if (memory_bytes == NULL || out == NULL || n_memories == 0)
        return remat__error(err, REMAT_EINVAL, "/memory", "at least one memory size is needed");
    if (n_memories > REMAT_FITS_MAX_MEMORIES)
        return remat__error(err, REMAT_ELIMIT, "/memory", "at most %d memory sizes",
                            REMAT_FITS_MAX_MEMORIES);
    if (opts->margin_bytes < 0 || opts->margin_bytes > REMAT_MAX_BYTES)
        return remat__error(err, REMAT_EINVAL, "/margin_bytes",
                            "margin_bytes must be in [0, 2^60]");
    if (!(opts->margin_fraction >= 0 && opts->margin_fraction <= 0.9))
        return remat__error(err, REMAT_EINVAL, "/margin_fraction",
                            "margin_fraction must be in [0, 0.9]");
    if (opts->max_batch < 0 || opts->max_batch > REMAT_FITS_MAX_BATCH)
        return remat__error(err, REMAT_EINVAL, "/max_batch", "max_batch must be in [0, 2^24]");
    for (size_t k = 0; k < n_memories; k++)
        if (memory_bytes[k] <= 0 || memory_bytes[k] > REMAT_MAX_BYTES) {
            char ptr[64];
            snprintf(ptr, sizeof ptr, "/memory/%zu", k);
            return remat__error(err, REMAT_EINVAL, ptr, "a memory size must be in [1, 2^60]");
        }
    struct bmodel md;
    int rc = bmodel_init(&md, profiles, n_profiles, err);
    md.cancel = opts->cancel;
    md.cancel_arg = opts->cancel_arg;
    for (size_t k = 0; k < n_memories && rc == REMAT_OK; k++) {
        remat_plan_clear(&out[k].plan);
        remat_plan_clear(&out[k].best_plan);
        rc = answer_one(&md, memory_bytes[k], opts, &out[k], err);
        if (rc == REMAT_OK && out[k].usable_bytes <= 0)
            rc = remat__error(err, REMAT_EINVAL, "/margin_bytes",
                              "the margins leave nothing of memory %zu", k);
    }
    if (rc < 0)
        for (size_t k = 0; k < n_memories; k++)
            remat_fits_answer_clear(&out[k]);
    return rc;
}

int remat_fits_memory_bound(const struct remat_profile *const *profiles, size_t n_profiles,
                            size_t n_memories, const struct remat_fits_options *opts,
                            int64_t *bytes, struct remat_error *err)
{
    struct remat_fits_options defaults;
    if (opts == NULL) {
        remat_fits_options_init(&defaults);
        opts = &defaults;
    }
    if (profiles == NULL || n_profiles == 0 || profiles[0] == NULL)
        return remat__error(err, REMAT_EINVAL, "/profiles", "at least one profile is needed");
    if (n_memories == 0 || n_memories > REMAT_FITS_MAX_MEMORIES)
        return remat__error(err, REMAT_ELIMIT, "/memory", "1 to %d memory sizes",
                            REMAT_FITS_MAX_MEMORIES);
    /* The largest solve: min-time at the slots asked for when the
     * throughput is wanted (the screening solves use fewer), else
     * min-peak. */
    struct remat_options o;
    remat_options_init(&o);
    o.algorithm = opts->want_throughput ? REMAT_ALG_MIN_TIME : REMAT_ALG_MIN_PEAK;
    o.mem_slots = opts->mem_slots;
    int64_t solve = 0;
    int rc = remat_solve_memory_bound(profiles[0], &o, &solve, err);
    if (rc < 0)
        return rc;
    /* Each predicted profile (stage names borrowed) and plan (checkpoints
     * and a schedule of at most 3n + 1 ops): two of each kept per answer,
     * and one of each being evaluated. */
    int64_t n = (int64_t)profiles[0]->n_stages;
    int64_t one = (int64_t)sizeof(struct remat_profile) + n * (int64_t)sizeof(struct remat_stage) +
                  (int64_t)sizeof(struct remat_plan) + 8 * n + 8 * (3 * n + 1) + 256;
    *bytes = solve + (2 * (int64_t)n_memories + 1) * one;
    return REMAT_OK;
}

static int set_new(json_t *o, const char *k, json_t *v)
{
    return json_object_set_new(o, k, v) < 0;
}

json_t *remat_fits_answer_to_json(const struct remat_fits_answer *a)
{
    json_t *root = json_object();
    json_t *largest = json_object(), *sa = json_object();
    if (root == NULL || largest == NULL || sa == NULL) {
        json_decref(largest);
        json_decref(sa);
        json_decref(root);
        return NULL;
    }
    int bad = set_new(root, "memory_bytes", json_integer(a->memory_bytes));
    bad |= set_new(root, "usable_bytes", json_integer(a->usable_bytes));
    bad |= set_new(largest, "batch", json_integer(a->batch));
    bad |= set_new(largest, "peak_bytes", json_integer(a->batch > 0 ? a->plan.peak_bytes : 0));
    if (!a->capped) {
        bad |= set_new(largest, "next_batch", json_integer(a->batch + 1));
        bad |= set_new(largest, "next_peak_bytes", json_integer(a->next_peak_bytes));
    }
    if (a->batch > 0)
        bad |= set_new(largest, "plan", remat_plan_to_json(a->profile, &a->plan));
    bad |= set_new(root, "largest", largest);
    bad |= set_new(sa, "batch", json_integer(a->store_all_batch));
    bad |= set_new(sa, "peak_bytes", json_integer(a->store_all_peak_bytes));
    bad |= set_new(sa, "next_peak_bytes", json_integer(a->store_all_next_peak_bytes));
    bad |= set_new(root, "store_all", sa);
    if (a->best_batch > 0) {
        json_t *t = json_object();
        bad |= t == NULL;
        if (t != NULL) {
            bad |= set_new(t, "batch", json_integer(a->best_batch));
            bad |= set_new(t, "samples_per_s", json_real(a->best_samples_per_s));
            bad |= set_new(t, "step_ms", json_real(a->best_plan.total_ms));
            bad |= set_new(t, "peak_bytes", json_integer(a->best_plan.peak_bytes));
            bad |= set_new(t, "candidates", json_integer((json_int_t)a->best_candidates));
            bad |= set_new(t, "plan", remat_plan_to_json(a->best_profile, &a->best_plan));
            bad |= set_new(root, "throughput", t);
        }
    }
    bad |= set_new(root, "extrapolated", json_boolean(a->extrapolated));
    bad |= set_new(root, "capped", json_boolean(a->capped));
    if (bad) {
        json_decref(root);
        return NULL;
    }
    return root;
}

/* nvidia-smi's total MiB for each card, and SkyPilot's accelerator name
 * for it (sky show-gpus). */
static const struct {
    const char *name;
    int64_t mib;
    const char *skypilot;
} gpus[] = {
    {"t4", 15360, "T4"},
    {"v100-16gb", 16384, "V100"},
    {"v100-32gb", 32768, "V100-32GB"},
    {"a10", 23028, "A10"},
    {"l4", 23034, "L4"},
    {"a100-40gb", 40960, "A100"},
    {"a100-80gb", 81920, "A100-80GB"},
    {"h100-80gb", 81559, "H100"},
    {"h200", 143771, "H200"},
};

int remat_gpu_memory_bytes(const char *name, int64_t *bytes)
{
    for (size_t i = 0; name != NULL && i < sizeof gpus / sizeof gpus[0]; i++)
        if (strcmp(name, gpus[i].name) == 0) {
            *bytes = (gpus[i].mib << 20) - (INT64_C(1) << 30);
            return REMAT_OK;
        }
    return REMAT_EINVAL;
}

const char *remat_gpu_name(size_t i)
{
    return i < sizeof gpus / sizeof gpus[0] ? gpus[i].name : NULL;
}

const char *remat_gpu_skypilot(const char *name)
{
    for (size_t i = 0; name != NULL && i < sizeof gpus / sizeof gpus[0]; i++)
        if (strcmp(name, gpus[i].name) == 0)
            return gpus[i].skypilot;
    return NULL;
}
