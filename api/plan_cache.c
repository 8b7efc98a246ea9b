/* plan_cache.c - the per-thread answer to a repeated POST /v1/plans
 * (plan_cache.h). */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_cache.h"
#include "plan_common.h"

struct plan_cache {
    struct rematx_dynbuf body; /* taken from the request, not copied */
    char *text;                /* rematd_plan_text's, taken */
    size_t text_len;
    unsigned char *record;
    size_t record_len, record_cap;
    char *options;
    char profile_id[REMATD_ID_LEN + 1];
    /* The tenant it answered: a body naming a profile_id was checked to be
     * that tenant's, so another tenant's same body is not answered here. */
    char tenant[REMATD_TENANT_MAX + 1];
    enum remat_algorithm algorithm;
};

static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

static void cache_free(void *p)
{
    struct plan_cache *c = p;
    rematx_dyn_free(&c->body);
    free(c->text);
    free(c->record);
    free(c->options);
    free(c);
}

static void cache_init(void)
{
    pthread_key_create(&cache_key, cache_free);
}

int rematd_plan_cache_answer(struct rematd_request *r, struct rematd_plan_write *w,
                             enum remat_algorithm *alg)
{
    pthread_once(&cache_once, cache_init);
    struct plan_cache *c = pthread_getspecific(cache_key);
    size_t len = rematx_dyn_len(&r->body);
    if (!c || !c->text || rematx_dyn_len(&c->body) != len ||
        strcmp(c->tenant, r->tenant ? r->tenant : REMATD_TENANT_DEFAULT) != 0 ||
        memcmp(rematx_dyn_ptr(&c->body), rematx_dyn_ptr(&r->body), len) != 0)
        return 0;
    w->body = rematd_plan_finish(c->text, c->text_len, w->id, w->created_at);
    w->options = strdup(c->options);
    w->record = malloc(c->record_len);
    if (w->record) {
        memcpy(w->record, c->record, c->record_len);
        w->record_len = c->record_len;
    }
    memcpy(w->profile_id, c->profile_id, sizeof w->profile_id);
    w->algorithm = remat_algorithm_name(c->algorithm);
    *alg = c->algorithm;
    return 1;
}

void rematd_plan_cache_store(struct rematd_request *r, const struct rematd_plan_write *w,
                             char **text, size_t text_len, enum remat_algorithm alg)
{
    pthread_once(&cache_once, cache_init);
    struct plan_cache *c = pthread_getspecific(cache_key);
    if (!c) {
        c = calloc(1, sizeof *c);
        if (!c)
            return;
        rematx_dyn_init(&c->body, 1);
        if (pthread_setspecific(cache_key, c) != 0) {
            free(c);
            return;
        }
    }
    free(c->text);
    c->text = NULL;
    free(c->options);
    c->options = strdup(w->options);
    if (w->record_len > c->record_cap) {
        free(c->record);
        c->record = malloc(w->record_len);
        c->record_cap = c->record ? w->record_len : 0;
    }
    if (!c->options || !c->record || rematx_dyn_ptr(&r->body) == NULL)
        return;
    memcpy(c->record, w->record, w->record_len);
    c->record_len = w->record_len;
    /* The two bodies change places: the request frees the older one. */
    struct rematx_dynbuf old = c->body;
    c->body = r->body;
    r->body = old;
    rematx_dyn_reset(&r->body);
    c->text = *text;
    c->text_len = text_len;
    *text = NULL;
    memcpy(c->profile_id, w->profile_id, sizeof w->profile_id);
    snprintf(c->tenant, sizeof c->tenant, "%s", r->tenant ? r->tenant : REMATD_TENANT_DEFAULT);
    c->algorithm = alg;
}
