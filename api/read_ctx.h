/* read_ctx.h - the readers' context over rematd's store (read_ctx.c). */
#ifndef REMATD_READ_CTX_H
#define REMATD_READ_CTX_H

#include "problem.h"
#include "rematd.h"

struct rematd_request;

/* A reader's context for the request r: its stage limit, and the profile
 * jobs and uploaded models of r's tenant (another tenant's read as none:
 * 404). */
void rematd_read_ctx_init(struct rematd_read_ctx *ctx, struct rematd_request *r);
/* The done profile job's result as a profile (new), or NULL with prob
 * filled; req is the struct rematd_request asking. */
struct remat_profile *rematd_profile_lookup(void *req, const char *id, const char *pointer,
                                            struct rematd_problem *prob);

#endif
