/* GET /v1/profiles/{id}/frontier.svg: a done profile's memory/time
 * frontier as a picture (rematx/svg.h, the one `remat frontier --format
 * svg` draws): peak memory against step time, every frontier point, the
 * store-all, sqrt(n) and min-peak plans marked, and a measured point for
 * each done validation of the profile (the newest MAX_MEASURED).  The
 * frontier is solved under the service's bounds (rematd_frontier_solve);
 * ?mem_slots= refines it as a plan request's mem_slots does. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_common.h"
#include "request_limits.h"
#include "rematx/svg.h"

#define MAX_MEASURED 64

/* The measured point of a done validation job, or 0 when its result or
 * spec lacks what a point needs (then it is left out). */
static int measured_of(const struct rematd_job *j, struct rematx_svg_measured *m)
{
    json_t *res = j->result ? json_loads(j->result, 0, NULL) : NULL;
    json_t *spec = j->spec ? json_loads(j->spec, 0, NULL) : NULL;
    const json_t *plan = json_object_get(spec, "plan");
    const json_t *mp = json_object_get(res, "measured_peak_bytes");
    const json_t *pp = json_object_get(res, "predicted_peak_bytes");
    const json_t *ms = json_object_get(res, "step_ms");
    const json_t *pms = json_object_get(plan, "total_ms");
    int ok = json_is_integer(mp) && json_integer_value(mp) > 0 && json_is_integer(pp) &&
             json_is_number(pms);
    if (ok) {
        m->measured_peak_bytes = json_integer_value(mp);
        m->predicted_peak_bytes = json_integer_value(pp);
        m->step_ms = json_is_number(ms) ? json_number_value(ms) : -1;
        m->predicted_ms = json_number_value(pms);
    }
    json_decref(res);
    json_decref(spec);
    return ok;
}

static enum rematd_handled frontier(struct rematd_request *r)
{
    size_t slots = 0;
    const char *q = rematd_req_query(r, "mem_slots");
    if (q != NULL) {
        char *end;
        errno = 0;
        unsigned long v = *q >= '0' && *q <= '9' ? strtoul(q, &end, 10) : 0;
        if (v < 1 || v > REMATD_MAX_MEM_SLOTS || errno != 0 || *end != '\0') {
            rematd_req_problem(r, 400, "validation", NULL,
                               "the query's mem_slots is an integer in 1..%d",
                               REMATD_MAX_MEM_SLOTS);
            return REMATD_HANDLED;
        }
        slots = (size_t)v;
    }
    struct remat_profile *p = rematd_profile_by_id(r, r->id, NULL);
    if (p == NULL)
        return REMATD_HANDLED;
    struct remat_frontier f;
    if (rematd_frontier_solve(r, p, slots, &f) < 0) {
        remat_profile_free(p);
        return REMATD_HANDLED;
    }
    char key[REMATD_ID_LEN + 16];
    snprintf(key, sizeof key, "profile:%s", r->id);
    struct rematd_job *jobs = NULL;
    size_t n_jobs = 0;
    struct rematx_svg_measured m[MAX_MEASURED];
    char labels[MAX_MEASURED][16];
    size_t n_m = 0;
    if (rematd_store_list_done(r->srv->store, "validation", key, MAX_MEASURED, &jobs, &n_jobs) !=
        REMATD_STORE_OK) {
        rematd_req_problem(r, 503, "unavailable", NULL, "the store did not answer");
    } else {
        for (size_t k = 0; k < n_jobs; k++) {
            if (measured_of(&jobs[k], &m[n_m])) {
                snprintf(labels[n_m], sizeof labels[n_m], "%.8s", jobs[k].id);
                m[n_m].label = labels[n_m];
                n_m++;
            }
            rematd_job_clear(&jobs[k]);
        }
        free(jobs);
        char title[160];
        snprintf(title, sizeof title, "Memory against time: %.60s, %zu stages, profile %.8s…",
                 p->model ? p->model : "profile", p->n_stages, r->id);
        struct remat_error err = {0};
        size_t len = 0;
        char *svg = rematx_svg_frontier(title, p, &f, m, n_m, &len, &err);
        if (svg)
            rematd_req_text(r, 200, "image/svg+xml", svg, len, 0);
        else
            rematd_answer_remat_error(r, err.code, &err, NULL);
    }
    remat_frontier_clear(&f);
    remat_profile_free(p);
    return REMATD_HANDLED;
}

const struct rematd_route rematd_route_profiles_frontier = {.method = "GET",
                                                            .pattern =
                                                                "/v1/profiles/{id}/frontier.svg",
                                                            .name = "profiles_frontier",
                                                            .auth = REMATD_AUTH_CLIENT,
                                                            .handler = frontier};
