/* worker_check.h - a worker's result checked against the job it was leased
 * (docs/jobs.md, "What a result must be").  Pure: no store, no HTTP, so the
 * complete route and the fuzz target (tests/fuzz/fuzz_result.c) run the
 * same code. */
#ifndef REMATD_WORKER_CHECK_H
#define REMATD_WORKER_CHECK_H

#include <jansson.h>

#include "remat.h"

/* The longest string a validation result may carry (device, driver, ...). */
#define REMATD_RESULT_MAX_STRING 256

/* Checks result, the body's "result" of POST /v1/worker/jobs/{id}/complete,
 * against spec, the job's stored spec (what the worker was leased).
 *
 * kind "profile": result must be a remat.profile/v1 for the job: the same
 * model (the zoo name, or "layers" for a layer list), batch_size, dtype,
 * a device of the kind asked for ("cpu" for cpu; for cuda or cuda:N not
 * "cpu", and "cuda:M" only when M is N), and one stage per layer (the zoo
 * model's layer list with the job's options; for an uploaded model the
 * stages the job lists; without a list, at least one).
 *
 * kind "validation": result must be a ValidationResult (openapi.yaml) with
 * no other member: byte counts and counts integers >= 0, times and
 * max_grad_diff finite numbers >= 0, relative_error a finite number, the
 * strings under REMATD_RESULT_MAX_STRING bytes; measured_peak_bytes,
 * predicted_peak_bytes and device present; and it must belong to the job:
 * predicted_peak_bytes is the peak of the plan in the spec, model,
 * batch_size and dtype (when given) those of the profile in the spec, the
 * device of the kind asked for, relative_error (when given) what the two
 * peaks make it.
 *
 * Returns REMAT_OK, or a negative code with err naming the field (a JSON
 * pointer under /result). */
int rematd_check_result(const char *kind, const json_t *spec, const json_t *result,
                        struct remat_error *err);

#endif
