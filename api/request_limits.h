/* request_limits.h - the bounds of a request's fields, one name each.
 *
 * The routes check these and openapi.yaml states them; each line names
 * the places of openapi.yaml (JSON pointers after "openapi:") whose
 * maximum, or maxItems, must be the value, and tests/check-limits.sh fails
 * when one differs, so that the two cannot drift apart.  Not named
 * limits.h: test programs are built with -I api, where that name would
 * hide the C library's <limits.h>.
 *
 * The bounds a job's spec shares with the worker (the batch, a layer's
 * integers, nesting, an input dimension) are src/rematx/layers.h's, which
 * the worker reads a spec by: named here after them, so that rematd, the
 * worker and openapi.yaml have one value (check-limits.sh reads both
 * headers). */
#ifndef REMATD_REQUEST_LIMITS_H
#define REMATD_REQUEST_LIMITS_H

#include "rematx/layers.h"

/* A profile job's batch_size.
 * openapi: /components/schemas/ProfileRequest/properties/batch_size/maximum
 * openapi: /components/schemas/FitsRequest/properties/batches/items/maximum */
#define REMATD_MAX_BATCH REMATX_MAX_BATCH

/* An integer field of a layer (out_channels, kernel_size, out_features...).
 * openapi: /components/schemas/LayerCount/maximum */
#define REMATD_MAX_LAYER_INT REMATX_MAX_DIM

/* Layers nested in one sequential layer.
 * openapi: /components/schemas/LayerSequential/properties/layers/maxItems */
#define REMATD_MAX_NESTED_LAYERS REMATX_MAX_NESTED_LAYERS

/* One dimension of input_shape, or of an uploaded model's input.shape.
 * openapi: /components/schemas/ProfileRequest/properties/input_shape/items/maximum
 * openapi: /components/schemas/ModelInput/properties/shape/items/maximum
 * openapi: /components/schemas/FitsRequest/properties/input_shape/items/maximum */
#define REMATD_MAX_INPUT_DIM REMATX_MAX_DIM

/* A profile job's warmup steps.
 * openapi: /components/schemas/ProfileRequest/properties/warmup/maximum
 * openapi: /components/schemas/FitsRequest/properties/warmup/maximum */
#define REMATD_MAX_WARMUP 100

/* Measured steps of a profile or a validation job.
 * openapi: /components/schemas/ProfileRequest/properties/repeats/maximum
 * openapi: /components/schemas/FitsRequest/properties/repeats/maximum
 * openapi: /components/schemas/ValidationRequest/properties/repeats/maximum */
#define REMATD_MAX_REPEATS 1000

/* min-time's memory discretisation (a plan's mem_slots, the frontier's
 * ?mem_slots).
 * openapi: /components/schemas/PlanRequest/properties/mem_slots/maximum
 * openapi: /components/schemas/ValidationRequest/properties/mem_slots/maximum
 * openapi: /paths/~1v1~1profiles~1{id}~1frontier.svg/get/parameters/1/schema/maximum */
#define REMATD_MAX_MEM_SLOTS 100000

#endif
