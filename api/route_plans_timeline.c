/* GET /v1/plans/{id}/timeline.svg: the plan's predicted traced memory at
 * every phase index, with store-all and sqrt(n) drawn beside it.  The plan
 * is solved again from its stored request and options (solvers are
 * deterministic), since the timeline is not stored. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_common.h"

static int timeline_of(const struct remat_profile *p, const struct remat_options *o,
                       struct remat_sim *sim, struct remat_error *err)
{
    struct remat_plan plan;
    memset(&plan, 0, sizeof plan);
    int rc = remat_solve(p, o, &plan, err);
    if (rc == REMAT_OK)
        rc = remat_simulate(p, REMAT_MODEL_TRACED, &plan.schedule, 1, sim, err);
    remat_plan_clear(&plan);
    return rc;
}

static enum rematd_handled timeline(struct rematd_request *r)
{
    char *body, *options, *request;
    int got = rematd_store_get_plan(r->srv->store, r->id, &body, &options, &request);
    if (got <= 0) {
        rq_problem(r, got < 0 ? 503 : 404, got < 0 ? "unavailable" : "not-found", NULL,
                   got < 0 ? "the store did not answer" : "no plan with this id");
        return HANDLED;
    }
    free(body);
    json_t *req = request ? json_loads(request, 0, NULL) : NULL;
    json_t *oj = options ? json_loads(options, 0, NULL) : NULL;
    free(request);
    free(options);
    if (!req || !oj) {
        json_decref(req);
        json_decref(oj);
        rq_problem(r, 500, "internal", NULL, "the stored plan request cannot be read");
        return HANDLED;
    }
    struct remat_profile *p = NULL;
    struct remat_options opts;
    json_t *norm = NULL;
    int rc = rematd_plan_request(r, req, &p, &opts, &norm);
    json_decref(req);
    json_decref(oj);
    json_decref(norm);
    if (rc < 0)
        return HANDLED;
    struct remat_sim sims[3];
    memset(sims, 0, sizeof sims);
    struct remat_error err = {0};
    struct remat_options base;
    remat_options_init(&base);
    base.algorithm = REMAT_ALG_SQRT;
    rc = timeline_of(p, &opts, &sims[0], &err);
    if (rc == REMAT_OK)
        rc = remat_simulate_checkpoints(p, REMAT_MODEL_TRACED, NULL, 0, 1, &sims[1], &err);
    if (rc == REMAT_OK)
        rc = timeline_of(p, &base, &sims[2], &err);
    if (rc != REMAT_OK) {
        rematd_answer_remat_error(r, rc, &err, NULL);
    } else {
        char label[64], title[128];
        snprintf(label, sizeof label, "%s", remat_algorithm_name(opts.algorithm));
        snprintf(title, sizeof title, "Predicted memory (traced model), plan %.12s…, %zu stages",
                 r->id, p->n_stages);
        struct rematd_series s[3] = {
            {label, "#d62728", sims[0].timeline, sims[0].n_phases, sims[0].peak_bytes},
            {"store-all", "#1f77b4", sims[1].timeline, sims[1].n_phases, sims[1].peak_bytes},
            {"sqrt(n)", "#2ca02c", sims[2].timeline, sims[2].n_phases, sims[2].peak_bytes},
        };
        size_t len = 0;
        char *svg = rematd_svg_timeline(title, s, 3, &len);
        if (svg)
            rq_text(r, 200, "image/svg+xml", svg, len, 0);
        else
            rq_problem(r, 500, "internal", NULL, "out of memory");
    }
    for (int i = 0; i < 3; i++)
        remat_sim_clear(&sims[i]);
    remat_profile_free(p);
    return HANDLED;
}

const struct remat_route route_plans_timeline = {.method = "GET",
                                                 .pattern = "/v1/plans/{id}/timeline.svg",
                                                 .name = "plans_timeline",
                                                 .auth = AUTH_CLIENT,
                                                 .handler = timeline};
