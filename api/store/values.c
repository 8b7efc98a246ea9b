/*
 * values.c - the store's values (store.h): a job status's name, and
 * freeing what a call filled, the same whichever backend filled it.  The
 * backends and the group commit call these too, so they live apart from
 * store.c's dispatch: each backend then depends on this file and on
 * group.c, never back on store.c, which depends on them.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "store_backend.h"

const char *rematd_job_status_name(enum rematd_job_status s)
{
    /* No default: a status added to the enum without a name here is a
     * -Wswitch error. */
    switch (s) {
    case REMATD_JOB_QUEUED:
        return "queued";
    case REMATD_JOB_RUNNING:
        return "running";
    case REMATD_JOB_DONE:
        return "done";
    case REMATD_JOB_FAILED:
        return "failed";
    }
    return "unknown";
}

int rematd_job_status_parse(const char *name, enum rematd_job_status *out)
{
    for (int s = 0; name != NULL && s <= REMATD_JOB_STATUS_LAST; s++)
        if (strcmp(name, rematd_job_status_name((enum rematd_job_status)s)) == 0) {
            *out = (enum rematd_job_status)s;
            return 0;
        }
    return -1;
}

void rematd__job_counts_add(struct rematd_job_counts *c, const char *name, long n)
{
    enum rematd_job_status s;
    if (rematd_job_status_parse(name, &s) < 0)
        return;
    switch (s) {
    case REMATD_JOB_QUEUED:
        c->queued += n;
        break;
    case REMATD_JOB_RUNNING:
        c->running += n;
        break;
    case REMATD_JOB_DONE:
        c->done += n;
        break;
    case REMATD_JOB_FAILED:
        c->failed += n;
        break;
    }
}

void rematd_idem_clear(struct rematd_idem *r)
{
    free(r->body);
    r->body = NULL;
}

void rematd_stored_plan_clear(struct rematd_stored_plan *p)
{
    free(p->record);
    free(p->options);
    free(p->legacy_body);
    free(p->legacy_request);
    memset(p, 0, sizeof *p);
}

void rematd_job_clear(struct rematd_job *j)
{
    free(j->spec);
    free(j->progress);
    free(j->result);
    free(j->reason);
    j->spec = j->progress = j->result = j->reason = NULL;
}

void rematd_lease_clear(struct rematd_lease *l)
{
    free(l->spec);
    l->spec = NULL;
}

void rematd_model_clear(struct rematd_model *m)
{
    free(m->meta);
    m->meta = NULL;
}

void rematd_models_free(struct rematd_model *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        rematd_model_clear(&list[i]);
    free(list);
}
