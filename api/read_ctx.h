/* read_ctx.h - the readers' context over rematd's store (read_ctx.c). */
#ifndef REMATD_READ_CTX_H
#define REMATD_READ_CTX_H

#include "problem.h"
#include "rematd.h"

/* A reader's context for requests to srv: its stage limit, the store's
 * profile jobs and uploaded models. */
void rematd_read_ctx_init(struct rematd_read_ctx *ctx, struct rematd_server *srv);
/* The done profile job's result as a profile (new), or NULL with prob
 * filled; store is a struct rematd_store. */
struct remat_profile *rematd_profile_lookup(void *store, const char *id, const char *pointer,
                                            struct rematd_problem *prob);

#endif
