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
int remat_cmd_fits(int argc, char **argv);

/* Reads and parses a profile from a file, or from stdin when path is "-".
 * Prints one line on stderr and returns NULL on failure (*status is then
 * the exit status: 2 for bad input, 1 for other failures). */
struct remat_profile *cli_load_profile(const char *path, int *status);

/* Prints one error line "remat: WHAT: POINTER: MESSAGE" on stderr and
 * returns the exit status for the code (2 for bad input, 1 otherwise). */
int cli_fail(const char *what, const struct remat_error *err);

/* Prints a JSON value on stdout followed by a newline; 0 or 1. */
int cli_print_json(json_t *v);

/* The value of --name VALUE or --name=VALUE at argv[*i] (advancing *i past
 * a separate VALUE); NULL when argv[*i] is another option, with *missing set
 * when it is --name without a value. */
const char *cli_opt_value(int argc, char **argv, int *i, const char *name, int *missing);

/* Reads a non-negative decimal integer of at most max; 0 on success, -1
 * otherwise (a sign, blanks, trailing text, overflow). */
int cli_parse_count(const char *s, int64_t max, int64_t *out);

#endif
