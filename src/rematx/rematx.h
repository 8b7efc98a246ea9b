/*
 * rematx.h - the internals of libremat that remat's own programs borrow
 * (rematd, the remat CLI, remat-worker), as curl's lib/curlx/ lends libcurl's
 * helpers to the curl tool.
 *
 * What is declared under src/rematx/ is not libremat's API: it is not
 * installed, its names start with rematx_, and it may change with any
 * release.  Everything else a program outside src/ uses comes from remat.h.
 * A program outside src/ includes this header and remat.h, never
 * remat_private.h (tests/check-includes.sh holds that).
 *
 * The pieces:
 *  - dynbuf.h: the one bounded growable buffer.
 *  - real.h: reals printed as the shortest text that reads back.
 *  - zoo.h: the built-in model zoo (GET /v1/models, the profile request's
 *    checks, and the layer lists remat-worker builds).
 *  - core.h: the two functions of libremat's core that rematd calls (the
 *    streaming profile reader with its byte count, a schedule's growth),
 *    wrapped so that remat_private.h stays inside src/.
 *  - sha256.h: SHA-256, one-shot and streaming (request fingerprints,
 *    uploaded models named by content, the worker's cache checks).
 *  - svg.h: the timeline and frontier pictures, and bytes in human units
 *    (rematd's .svg routes and the CLI's tables and --format svg).
 *  - error.h: filling a struct remat_error (rematx_error), as libremat does.
 *  - layers.h: the layer vocabulary (types, arguments, bounds) and the
 *    profile spec's limits that rematd and remat-worker share.
 *  - names.h: messages that list a name table (the algorithms).
 */
#ifndef REMATX_H
#define REMATX_H

#include "remat.h"
#include "rematx/core.h"
#include "rematx/dynbuf.h"
#include "rematx/error.h"
#include "rematx/hfconfig.h"
#include "rematx/layers.h"
#include "rematx/names.h"
#include "rematx/real.h"
#include "rematx/sha256.h"
#include "rematx/svg.h"
#include "rematx/utf8.h"
#include "rematx/zoo.h"

#endif
