/* jobs/fits.h - POST /v1/fits and its jobs (docs/scheduling.md): the
 * request's reader and the answer (fits_read.c, pure), and what the two
 * fits routes share around the store and the solve bounds (fits.c). */
#ifndef REMATD_JOBS_FITS_H
#define REMATD_JOBS_FITS_H

#include <jansson.h>

#include "problem.h"
#include "remat.h"
#include "rematd.h"

#define REMATD_FITS_MAX_BATCHES 8

/* Every member POST /v1/fits takes, and those a model spec passes on to
 * its profile jobs (POST /v1/profiles). */
extern const char *const rematd_fits_fields[];
extern const char *const rematd_fits_profile_fields[];

struct rematd_fits_req {
    struct remat_profile *ps[REMAT_FITS_MAX_PROFILES];
    char ids[REMAT_FITS_MAX_PROFILES][REMATD_ID_LEN + 1]; /* profile jobs, when by id */
    size_t n;
    int64_t mem[REMAT_FITS_MAX_MEMORIES];
    size_t n_mem;
    struct remat_fits_options o;
    /* One rank of a data-parallel job (fits_sharded.c): set by "parallel". */
    int sharded;
    struct remat_shard_job job;
    struct remat_shard_spec shard;         /* the rank's, once answered */
    int64_t global_batch;                  /* "global_batch"; 0 when not asked */
    char gpu[REMAT_FITS_MAX_MEMORIES][16]; /* memory k's GPU name; "" for bytes */
    /* A Hugging Face config's profiles measured at two shorter lengths and
     * scaled to seq_len by the worker ("measure_seq_lens"): 0 when not. */
    int64_t seq_len, seq_lens[2];
};

void rematd_fits_req_free(struct rematd_fits_req *f);

/* The answer's options and memories (every source of profiles).  0, or -1
 * with p filled. */
int rematd_fits_read_options(json_t *body, struct rematd_fits_req *f, struct rematd_problem *p);
/* The options, the optimizer and the profiles ("profiles" inline, or
 * "profile_ids" through ctx).  0 with f filled (rematd_fits_req_free), or
 * -1 with p filled (f may hold profiles read before: free it). */
int rematd_fits_read(const struct rematd_read_ctx *ctx, json_t *body, struct rematd_fits_req *f,
                     struct rematd_problem *p);
/* A model spec's batches to measure: "batches" (1..8 distinct sizes),
 * default 8, 32.  0 with b[0..*n), or -1 with p filled. */
int rematd_fits_read_batches(json_t *body, json_int_t *b, size_t *n, struct rematd_problem *p);
/* The answer from f's profiles (new), or NULL with *rc and err (f->o's
 * cancel hook is honoured). */
json_t *rematd_fits_compute(struct rematd_fits_req *f, struct remat_error *err, int *rc);

/* fits_sharded.c: "parallel" and mixed precision into f (0, or -1 with p
 * filled); called by rematd_fits_read_options. */
int rematd_fits_read_parallel(json_t *body, struct rematd_fits_req *f, struct rematd_problem *p);
/* The answers of remat_fits_sharded as a JSON array, each with its
 * "per_rank" (f->shard set to the rank's spec); or NULL with *rc, err. */
json_t *rematd_fits_sharded_compute(struct rematd_fits_req *f, struct remat_error *err, int *rc);

/* fits.c */
struct rematd_request;
/* The answer under POST /v1/plans's bounds (plan_common.h): the memory
 * bound of the whole answer reserved from --solve-memory-bytes, every solve
 * canceled at --solve-timeout-ms, a client that hung up, or shutdown.
 * Returns the answer (new), or NULL with p filled. */
json_t *rematd_fits_answer(struct rematd_request *r, struct rematd_fits_req *f,
                           struct rematd_problem *p);
/* The answer from the done profile jobs of a "profiles" map ({"batch":
 * id}) for the stored request.  Returns 0 with *ans (new), or with *ans
 * NULL and *pending the count of jobs not done yet; -1 with p filled, 422
 * profile-failed when one failed.  Answers nothing. */
int rematd_fits_from_jobs(struct rematd_request *r, json_t *request, json_t *profiles, json_t **ans,
                          size_t *pending, struct rematd_problem *p);
/* The profile job at batch for a model spec: a done one of the same reuse
 * key (*done = 1), else a new queued one; id gets its id.  0, or -1 after
 * answering. */
int rematd_fits_profile_job(struct rematd_request *r, json_t *body, json_int_t batch,
                            char id[REMATD_ID_LEN + 1], int *done);
/* Queues the confirming profiles of ans (each answer's largest batch outside
 * the measured ones) into profiles.  Returns how many were added (0:
 * nothing to confirm), or -1 after answering. */
int rematd_fits_confirm(struct rematd_request *r, json_t *request, json_t *ans, json_t *profiles);

#endif
