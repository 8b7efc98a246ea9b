/*
 * values.c - the store's values (store.h): freeing what a call filled, the
 * same whichever backend filled it.  The backends and the group commit call
 * these too, so they live apart from store.c's dispatch: each backend then
 * depends on this file and on group.c, never back on store.c, which
 * depends on them.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "store.h"

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
