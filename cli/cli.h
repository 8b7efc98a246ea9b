/* cli.h - the commands of the remat program, one file each. */
#ifndef REMAT_CLI_H
#define REMAT_CLI_H

#include <stdio.h>

#include "remat.h"

/* Each returns the process exit status: 0 on success, 2 on bad input (one
 * line on stderr saying what is wrong and where), 1 on other failures. */
int remat_cmd_plan(int argc, char **argv);
int remat_cmd_simulate(int argc, char **argv);
int remat_cmd_frontier(int argc, char **argv);

#endif
