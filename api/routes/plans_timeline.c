/* GET /v1/plans/{id}/timeline.svg: the plan's predicted traced memory
 * after every op, with store-all and sqrt(n) drawn beside it: the stored
 * schedule replayed on the stored profile (plan_codec.h), since the
 * timeline itself is not stored.  The x axis names each op's stage and
 * shades forward, backward and recomputation; when a done validation of
 * this plan measured a timeline ("timeline": true), the newest is drawn
 * over the prediction. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_common.h"
#include "rematx/svg.h"

/* The sqrt(n) line: solved under the service's bounds (plan_common.h) into
 * *sq (the caller clears it), and replayed.  Returns 0, or -1 after
 * answering. */
static int timeline_of(struct rematd_request *r, const struct remat_profile *p,
                       const struct remat_options *o, struct remat_plan *sq, struct remat_sim *sim)
{
    if (rematd_plan_solve(r, p, o, sq) < 0)
        return -1;
    struct remat_error err = {0};
    int rc = remat_simulate(p, REMAT_MODEL_TRACED, &sq->schedule, 1, sim, &err);
    if (rc != REMAT_OK) {
        rematd_answer_remat_error(r, rc, &err, NULL);
        return -1;
    }
    return 0;
}

/* What a validation measured op by op, as a series to draw. */
struct measured {
    int64_t *bytes;
    struct remat_op *ops;
    size_t n;
    int64_t peak_bytes;
    char label[48];
};

static void measured_clear(struct measured *m)
{
    free(m->bytes);
    free(m->ops);
    memset(m, 0, sizeof *m);
}

/* The result's timeline ({op, stage, peak_bytes, after_bytes} per op, as
 * worker_check.c accepted it) into m: 1, or 0 when it has none. */
static int measured_of(const char *job_id, const json_t *tl, struct measured *m)
{
    size_t n = json_array_size(tl);
    if (n == 0)
        return 0;
    m->bytes = calloc(n, sizeof *m->bytes);
    m->ops = calloc(n, sizeof *m->ops);
    if (!m->bytes || !m->ops) {
        measured_clear(m);
        return 0;
    }
    for (size_t k = 0; k < n; k++) {
        const json_t *e = json_array_get(tl, k);
        enum remat_op_kind kind = REMAT_OP_F_ALL;
        remat_op_parse(json_string_value(json_object_get(e, "op")), &kind);
        m->ops[k].kind = (uint8_t)kind;
        m->ops[k].stage = (uint32_t)json_integer_value(json_object_get(e, "stage"));
        m->bytes[k] = json_integer_value(json_object_get(e, "after_bytes"));
        int64_t pk = json_integer_value(json_object_get(e, "peak_bytes"));
        if (pk > m->peak_bytes)
            m->peak_bytes = pk;
        if (m->bytes[k] > m->peak_bytes)
            m->peak_bytes = m->bytes[k];
    }
    m->n = n;
    snprintf(m->label, sizeof m->label, "measured (validation %.8s)", job_id);
    return 1;
}

/* The newest done validation of this plan that measured a timeline (its
 * key is its profile's: rematd_store_list_done).  1 with m filled, 0 when
 * there is none or the store cannot say: the prediction is drawn alone. */
static int find_measured(struct rematd_request *r, const char *profile_id, struct measured *m)
{
    memset(m, 0, sizeof *m);
    if (!profile_id[0])
        return 0;
    char key[REMATD_ID_LEN + 16];
    snprintf(key, sizeof key, "profile:%s", profile_id);
    struct rematd_job *jobs = NULL;
    size_t n = 0;
    if (rematd_store_list_done(r->srv->store, "validation", key, 64, &jobs, &n) != REMATD_STORE_OK)
        return 0;
    int found = 0;
    for (size_t k = 0; k < n; k++) {
        if (!found && jobs[k].spec && jobs[k].result) {
            json_t *spec = json_loads(jobs[k].spec, 0, NULL);
            const char *pid = json_string_value(json_object_get(spec, "plan_id"));
            if (pid && strcmp(pid, r->id) == 0) {
                json_t *res = json_loads(jobs[k].result, 0, NULL);
                found = measured_of(jobs[k].id, json_object_get(res, "timeline"), m);
                json_decref(res);
            }
            json_decref(spec);
        }
        rematd_job_clear(&jobs[k]);
    }
    free(jobs);
    return found;
}

/* The stored record keeps no stage names (plan_codec.h): a plan of a
 * profile job takes them from the job's profile, when it has as many
 * stages.  NULL (stages by number) when there is none or it cannot be
 * read. */
static struct remat_profile *names_of(struct rematd_request *r, const char *profile_id,
                                      size_t n_stages)
{
    struct rematd_job job;
    if (!profile_id[0] || rematd_store_get_job(r->srv->store, profile_id, &job) != REMATD_STORE_OK)
        return NULL;
    struct remat_profile *q = NULL;
    if (job.result) {
        struct remat_error err = {0};
        q = remat_profile_loadb(job.result, strlen(job.result), &err);
    }
    rematd_job_clear(&job);
    if (q && q->n_stages != n_stages) {
        remat_profile_free(q);
        q = NULL;
    }
    return q;
}

/* The profile and plan of a plan stored by rematd 0.1.0: solved again
 * from its stored request and options (solvers are deterministic). */
static int legacy_plan(struct rematd_request *r, const struct rematd_stored_plan *sp,
                       struct remat_profile **p, struct remat_plan *plan)
{
    json_t *req = sp->legacy_request ? json_loads(sp->legacy_request, 0, NULL) : NULL;
    if (!req) {
        rematd_req_problem(r, 500, "internal", NULL, "the stored plan request cannot be read");
        return -1;
    }
    struct remat_options opts;
    json_t *norm = NULL;
    struct rematd_read_ctx ctx;
    struct rematd_problem prob = {0};
    rematd_read_ctx_init(&ctx, r);
    int rc = rematd_plan_request(&ctx, req, p, &opts, &norm, &prob);
    json_decref(req);
    json_decref(norm);
    if (rc < 0) {
        rematd_req_send_problem(r, &prob);
        return -1;
    }
    /* Solved again under the bounds of any solve: a deadline, the memory
     * estimate, cancellation. */
    if (rematd_plan_solve(r, *p, &opts, plan) < 0) {
        remat_profile_free(*p);
        *p = NULL;
        return -1;
    }
    return 0;
}

static enum rematd_handled timeline(struct rematd_request *r)
{
    struct rematd_stored_plan sp;
    enum rematd_store_result got = rematd_store_get_plan(r->srv->store, r->id, &sp);
    if (got == REMATD_STORE_OK && !rematd_req_owns(r, sp.tenant)) {
        rematd_stored_plan_clear(&sp);
        got = REMATD_STORE_NOT_FOUND; /* another tenant's: as if none */
    }
    if (got != REMATD_STORE_OK) {
        int down = got == REMATD_STORE_ERROR;
        rematd_req_problem(r, down ? 503 : 404, down ? "unavailable" : "not-found", NULL,
                           down ? "the store did not answer" : "no plan with this id");
        return REMATD_HANDLED;
    }
    struct remat_profile *p = NULL;
    struct remat_plan plan;
    memset(&plan, 0, sizeof plan);
    int rc;
    if (sp.record) {
        rc = rematd_plan_decode(sp.record, sp.record_len, &p, &plan);
        if (rc < 0)
            rematd_req_problem(r, 500, "internal", NULL, "the stored plan cannot be read");
    } else {
        rc = legacy_plan(r, &sp, &p, &plan);
    }
    char profile_id[REMATD_ID_LEN + 1];
    snprintf(profile_id, sizeof profile_id, "%s", sp.profile_id);
    rematd_stored_plan_clear(&sp);
    if (rc < 0) {
        remat_plan_clear(&plan);
        return REMATD_HANDLED;
    }
    /* The stored schedule itself, replayed: the chart shows the plan that
     * was answered, its ops laying out the x axis by stage and phase. */
    struct remat_sim sims[3];
    memset(sims, 0, sizeof sims);
    struct remat_error err = {0};
    struct remat_options base;
    remat_options_init(&base);
    base.algorithm = REMAT_ALG_SQRT;
    struct remat_schedule all;
    remat_schedule_init(&all);
    struct remat_plan sq;
    memset(&sq, 0, sizeof sq);
    rc = remat_simulate(p, REMAT_MODEL_TRACED, &plan.schedule, 1, &sims[0], &err);
    if (rc == REMAT_OK)
        rc = remat_schedule_from_checkpoints(p, NULL, 0, &all, &err);
    if (rc == REMAT_OK)
        rc = remat_simulate(p, REMAT_MODEL_TRACED, &all, 1, &sims[1], &err);
    if (rc != REMAT_OK) {
        rematd_answer_remat_error(r, rc, &err, NULL);
    } else if (timeline_of(r, p, &base, &sq, &sims[2]) == 0) {
        char label[64], title[128];
        snprintf(label, sizeof label, "%s", rematx_plan_label(plan.algorithm));
        snprintf(title, sizeof title, "Predicted memory (traced model), plan %.12s…, %zu stages",
                 r->id, p->n_stages);
        struct measured meas;
        int have = find_measured(r, profile_id, &meas);
        struct rematx_svg_series s[4] = {
            {label, "#d62728", sims[0].timeline, sims[0].n_phases, sims[0].peak_bytes,
             plan.schedule.ops, 0},
            {"store-all", "#1f77b4", sims[1].timeline, sims[1].n_phases, sims[1].peak_bytes,
             all.ops, 0},
            {"sqrt(n)", "#2ca02c", sims[2].timeline, sims[2].n_phases, sims[2].peak_bytes,
             sq.schedule.ops, 0},
            {meas.label, "black", meas.bytes, meas.n, meas.peak_bytes, meas.ops, 1},
        };
        struct remat_profile *named = names_of(r, profile_id, p->n_stages);
        size_t len = 0;
        char *svg = rematx_svg_timeline(title, named ? named : p, s, have ? 4 : 3, &len);
        remat_profile_free(named);
        measured_clear(&meas);
        if (svg)
            rematd_req_text(r, 200, "image/svg+xml", svg, len, 0);
        else
            rematd_req_problem(r, 500, "internal", NULL, "out of memory");
    }
    remat_schedule_clear(&all);
    remat_plan_clear(&sq);
    for (int i = 0; i < 3; i++)
        remat_sim_clear(&sims[i]);
    remat_plan_clear(&plan);
    remat_profile_free(p);
    return REMATD_HANDLED;
}

const struct rematd_route rematd_route_plans_timeline = {.method = "GET",
                                                         .pattern = "/v1/plans/{id}/timeline.svg",
                                                         .name = "plans_timeline",
                                                         .auth = REMATD_AUTH_CLIENT,
                                                         .handler = timeline};
