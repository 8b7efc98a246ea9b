/* supervise.h - local remat-worker processes (supervise.c), driven from
 * the main thread (main.c). */
#ifndef REMATD_SUPERVISE_H
#define REMATD_SUPERVISE_H

#include "rematd.h"

struct rematd_supervisor;
/* Before anything starts: with --workers, finds the worker program (the
 * default path, or the build tree's when that is not installed; a path
 * given is taken as given).  0, or -1 after logging why. */
int rematd_supervisor_check(struct rematd_config *cfg);
/* server: the URL the workers reach this rematd at (main.c makes it from
 * the bound address); socket (NULL or "": none): the Unix socket rematd
 * keeps for them, given as REMAT_SERVER_SOCKET, where clients' connections
 * never take their place (main.c); stats (borrowed, outliving the
 * supervisor) is kept up to date for /readyz and /metrics. */
struct rematd_supervisor *rematd_supervisor_start(const struct rematd_config *cfg,
                                                  const char *server, const char *socket,
                                                  struct rematd_worker_stats *stats);
void rematd_supervisor_tick(struct rematd_supervisor *sv);
/* SIGTERM to every worker, none restarted after. */
void rematd_supervisor_term(struct rematd_supervisor *sv);
/* Workers still running (those that exited are reaped). */
int rematd_supervisor_alive(struct rematd_supervisor *sv);
/* SIGTERM, then SIGKILL to those left after grace_seconds; frees sv. */
void rematd_supervisor_stop(struct rematd_supervisor *sv, double grace_seconds);
int rematd_count_devices(void);

#endif
