/* svg.h - remat's pictures, one implementation for rematd's routes and the
 * remat CLI: the memory timeline of a plan (GET /v1/plans/{id}/timeline.svg)
 * and the memory/time frontier of a profile (GET
 * /v1/profiles/{id}/frontier.svg, `remat frontier --format svg`), and the
 * byte counts both write for people ("205 MiB").
 *
 * Every text that reaches a picture from outside (titles, stage names,
 * labels) is escaped here, so a stage named "<script>" is drawn as text.
 * Each picture is at most REMATX_SVG_MAX bytes: long series are thinned to
 * a few points per pixel column. */
#ifndef REMATX_SVG_H
#define REMATX_SVG_H

#include <stddef.h>
#include <stdint.h>

#include "remat.h"

#ifdef __cplusplus
extern "C" {
#endif

#define REMATX_SVG_MAX ((size_t)16 << 20)

/* Room for any rematx_human_bytes text and its NUL. */
#define REMATX_HUMAN_MAX 24

/* Writes bytes in binary units with three significant digits ("512 B",
 * "3.50 KiB", "20.5 MiB", "205 MiB", "1.25 GiB") into out
 * (REMATX_HUMAN_MAX bytes) and returns out. */
char *rematx_human_bytes(int64_t bytes, char *out);

/* An algorithm's plan as a table row or a picture's label names it: its
 * name, and for min-peak what it is the least of ("min-peak
 * (single-level)").  Its name alone reads as the least peak of all, but it
 * is the least over checkpoint sets' single-level plans (docs/min-peak.md),
 * and min-time's multi-level schedules, where a stage is recomputed more
 * than once, can peak lower (docs/min-time.md).  Static storage. */
const char *rematx_plan_label(enum remat_algorithm a);

/* One line of the timeline: bytes[k] is what is live after op k. */
struct rematx_svg_series {
    const char *label; /* escaped when drawn */
    const char *color; /* an SVG colour, "#d62728" */
    const int64_t *bytes;
    size_t n;
    int64_t peak_bytes; /* drawn as a dashed line (the peak is inside an op) */
    /* The ops behind bytes (n of them), or NULL.  The first series' ops lay
     * out the x axis by stage and phase (forward, backward, recompute
     * shaded); another series with ops is stretched so that its forward
     * and backward line up with the first's. */
    const struct remat_op *ops;
    int measured; /* drawn thin and black, as a measurement */
};

/* The timeline chart: one line per series, axes in human units, the x axis
 * labelled by the stage names of profile (may be NULL: op indices).
 * Returns a new NUL-terminated SVG document (*len bytes), or NULL when out
 * of memory. */
char *rematx_svg_timeline(const char *title, const struct remat_profile *profile,
                          const struct rematx_svg_series *s, size_t n_series, size_t *len);

/* A measured run of a plan of the profile (a validation). */
struct rematx_svg_measured {
    const char *label;            /* escaped when drawn; may be NULL */
    int64_t measured_peak_bytes;  /* > 0 */
    double step_ms;               /* measured step time; < 0 when not measured */
    int64_t predicted_peak_bytes; /* the plan's prediction */
    double predicted_ms;          /* the plan's predicted step time */
};

/* The frontier chart: peak memory against step time, every point of f,
 * the store-all, sqrt and min-peak plans of profile marked and labelled
 * (solved here), and each measured run beside its prediction.
 * Returns a new NUL-terminated SVG document (*len bytes), or NULL with err
 * filled (a solver's failure, or out of memory). */
char *rematx_svg_frontier(const char *title, const struct remat_profile *profile,
                          const struct remat_frontier *f, const struct rematx_svg_measured *m,
                          size_t n_measured, size_t *len, struct remat_error *err);

#ifdef __cplusplus
}
#endif

#endif
