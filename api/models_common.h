/* models_common.h - what the model routes share: where archives live,
 * the model as the API shows it, and the lock that orders a file's rename
 * or removal with its record.
 *
 * An archive is the file <data-dir>/models/<sha256>; an upload streams to
 * <data-dir>/models/tmp/ first and is renamed in place once it is whole,
 * synced and checked, then its record is added (store.h).  So a record
 * always has its file, and a crash leaves at most a temporary file or an
 * archive without a record, both removed at the next start. */
#ifndef REMATD_MODELS_COMMON_H
#define REMATD_MODELS_COMMON_H

#include "http/http.h"
#include "store.h"

/* <data-dir>/models/<sha256> into out: 0, or -1 when it does not fit. */
int rematd_model_path(const struct rematd_config *cfg, const char *sha256, char *out, size_t cap);
/* <data-dir>/models/tmp into out: 0 or -1. */
int rematd_models_tmp_dir(const struct rematd_config *cfg, char *out, size_t cap);
/* At start, after the store is open: makes the folders, removes what a
 * crash left (temporary files, archives without a record).  0, or -1
 * after logging why. */
int rematd_models_prepare(const struct rematd_config *cfg, struct rematd_store *st);
/* The model the request's {id} names into *m (the caller clears it): 0,
 * or -1 once 404 not-found or 503 unavailable is answered.  The one
 * look-up of the routes that serve a model, so that they answer alike. */
int rematd_model_by_id(struct rematd_request *r, struct rematd_model *m);
/* The model as GET /v1/models/{id} shows it: new, or NULL (no memory). */
json_t *rematd_model_view(const struct rematd_model *m);
/* Held around a file's rename into place and its record's adding, and
 * around a record's removal and its file's unlinking: otherwise a delete
 * and a new upload of the same bytes could leave a record without file. */
void rematd_models_lock(void);
void rematd_models_unlock(void);

#endif
