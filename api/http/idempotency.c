/*
 * idempotency.c - Idempotency-Key: the key read and checked before a
 * creating route's handler runs, a recorded answer replayed, and the one
 * function that makes a creating route's answer (rematd_req_created), so
 * that the first answer and every replay agree byte for byte.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_private.h"
#include "store.h"

static void created(struct rematd_request *r, const char *id, char *body, size_t len, int replayed)
{
    char loc[sizeof req_of(r)->path + REMATD_ID_LEN + 2];
    snprintf(loc, sizeof loc, "%s/%s", r->route->pattern, id);
    rematd_req_header(r, "Location", loc);
    if (replayed)
        rematd_req_header(r, "Idempotent-Replayed", "true");
    /* A queued job: when to look again, as GET of a queued job says. */
    if (r->route->created_status == 202)
        rematd_req_header(r, "Retry-After", "2");
    rematd_req_text(r, r->route->created_status, "application/json", body, len, 0);
}

void rematd_req_created(struct rematd_request *r, const char *id, char *body, size_t len)
{
    created(r, id, body, len, 0);
}

void rematd_req_replay(struct rematd_request *r, struct rematd_idem *rec)
{
    if (strcmp(rec->body_hash, r->body_hash) != 0) {
        rematd_req_problem(r, 422, "idempotency-key-reused", NULL,
                           "this Idempotency-Key was first used with a different body");
        rematd_idem_clear(rec);
        return;
    }
    char *b = rec->body;
    rec->body = NULL;
    created(r, rec->resource_id, b, strlen(b), 1);
}

int rematd__idempotency_check(struct rematd_req *q)
{
    struct rematd_request *r = &q->pub;
    const char *key = rematd_req_header_in(r, "Idempotency-Key");
    if (!key)
        return 0;
    size_t n = strlen(key);
    int ok = n >= 1 && n <= 255;
    for (size_t i = 0; ok && i < n; i++)
        ok = key[i] > 32 && key[i] < 127;
    if (!ok) {
        rematd_req_problem(r, 400, "invalid-idempotency-key", NULL,
                           "Idempotency-Key must be 1 to 255 visible ASCII characters");
        return 1;
    }
    r->idem_key = key;
    rematd_sha256_hex(rematx_dyn_ptr(&r->body), rematx_dyn_len(&r->body), r->body_hash);
    struct rematd_idem rec;
    enum rematd_store_result got =
        rematd_store_get_idempotency(r->srv->store, r->idem_scope, key, &rec);
    if (got == REMATD_STORE_NOT_FOUND)
        return 0;
    if (got != REMATD_STORE_OK)
        rematd_req_problem(r, 503, "unavailable", NULL, "the store did not answer");
    else
        rematd_req_replay(r, &rec);
    return 1;
}
