/* plan_codec.h - how rematd stores a plan: the solved plan and the sizes and
 * times of the profile it was solved for, as one compact binary record.
 *
 * A stored plan used to be its answer's JSON (~4 KB for 50 stages, most of
 * it the schedule spelled out op by op) plus the request that made it
 * (~8 KB), kept for redrawing the timeline.  Writing those ~12 KB twice
 * (WAL, then the database) was the largest cost of POST /v1/plans.  The
 * record holds what both answers are made from, ~1.4 KB for 50 stages: GET
 * /v1/plans/{id} renders it with remat_plan_dumps, the function that wrote
 * the first answer, and the timeline replays the stored schedule on the
 * stored profile.  Stage names and profile metadata are not kept: neither
 * answer shows them.
 *
 * Layout (docs/jobs.md): a version byte (3; 1 and 2 still read), then unsigned LEB128 varints;
 * signed values zigzag-coded; each double as a varint tag k followed by
 * either a varint m with d == m / 10^(k-1) exactly (most measured times are
 * short decimals) or, for k = 0, its 8 IEEE bytes little-endian.
 */
#ifndef REMATD_PLAN_CODEC_H
#define REMATD_PLAN_CODEC_H

#include <stddef.h>

#include "remat.h"

/* Encodes profile (sizes and times) and plan.  Returns a new buffer of
 * *len bytes (free it), or NULL when out of memory. */
unsigned char *rematd_plan_encode(const struct remat_profile *profile,
                                  const struct remat_plan *plan, size_t *len);

/* Decodes a record: *profile (new; stage names empty) and *plan (caller
 * clears).  Every count, size, stage index and op is checked, and the
 * profile validated as libremat validates one, so a damaged record is an
 * error, never a crash.  Returns 0, or -1 with *profile NULL and *plan
 * cleared. */
int rematd_plan_decode(const unsigned char *buf, size_t len, struct remat_profile **profile,
                       struct remat_plan *plan);

#endif
