/* GET /v1/plans/{id}/timeline.svg: the plan's predicted traced memory at
 * every phase index, with store-all and sqrt(n) drawn beside it: the stored
 * schedule replayed on the stored profile (plan_codec.h), since the
 * timeline itself is not stored. */
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
    int rc = rematd_plan_request(r, req, p, &opts, &norm);
    json_decref(req);
    json_decref(norm);
    if (rc < 0)
        return -1;
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
        snprintf(label, sizeof label, "%s", remat_algorithm_name(plan.algorithm));
        snprintf(title, sizeof title, "Predicted memory (traced model), plan %.12s…, %zu stages",
                 r->id, p->n_stages);
        struct rematx_svg_series s[3] = {
            {label, "#d62728", sims[0].timeline, sims[0].n_phases, sims[0].peak_bytes,
             plan.schedule.ops, 0},
            {"store-all", "#1f77b4", sims[1].timeline, sims[1].n_phases, sims[1].peak_bytes,
             all.ops, 0},
            {"sqrt(n)", "#2ca02c", sims[2].timeline, sims[2].n_phases, sims[2].peak_bytes,
             sq.schedule.ops, 0},
        };
        size_t len = 0;
        char *svg = rematx_svg_timeline(title, p, s, 3, &len);
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
