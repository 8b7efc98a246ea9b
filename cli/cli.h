/* cli.h - the commands of the remat program, one file each. */
#ifndef REMAT_CLI_H
#define REMAT_CLI_H

#include <stdio.h>

#include "remat.h"

/* Each returns the process exit status: 0 on success, 2 on bad input (one
 * line on stderr saying what is wrong and where), 1 on other failures. */
int cli_cmd_plan(int argc, char **argv);
int cli_cmd_simulate(int argc, char **argv);
int cli_cmd_frontier(int argc, char **argv);
int cli_cmd_fits(int argc, char **argv);
int cli_cmd_spec(int argc, char **argv);

/* Reads and parses a profile from a file, or from stdin when path is "-".
 * Prints one line on stderr and returns NULL on failure (*status is then
 * the exit status: 2 for bad input, 1 for other failures). */
struct remat_profile *cli_load_profile(const char *path, int *status);

/* Prints one error line "remat: WHAT: POINTER: MESSAGE" on stderr and
 * returns the exit status for the code (2 for bad input, 1 otherwise). */
int cli_fail(const char *what, const struct remat_error *err);

/* Prints a JSON value on stdout followed by a newline; 0 or 1. */
int cli_print_json(json_t *v);

/* How a command answers (format.c): a table for a person, JSON for a
 * program, or a picture. */
enum cli_format { CLI_FORMAT_AUTO, CLI_FORMAT_JSON, CLI_FORMAT_TABLE, CLI_FORMAT_SVG };

/* Takes --format VALUE or --format=VALUE at argv[*i]: 1 when taken (*fmt
 * set), 0 when argv[*i] is another option, -1 after one line on stderr
 * for a bad or missing value (exit 2).  svg only when allow_svg. */
int cli_format_option(const char *cmd, int argc, char **argv, int *i, int allow_svg,
                      enum cli_format *fmt);
/* AUTO becomes TABLE when stdout is a terminal, JSON otherwise. */
enum cli_format cli_format_resolve(enum cli_format f);

/* Escape sequences for a table: all "" unless stdout is a terminal and
 * NO_COLOR is unset or empty. */
struct cli_style {
    const char *bold, *dim, *good, *bad, *off;
};
void cli_style_init(struct cli_style *s);

/* Stage `stage` (1..n)'s name, safe for a terminal, or "stage N" when it
 * has none; written into buf (size bytes), which is returned. */
const char *cli_stage_name(const struct remat_profile *p, size_t stage, char *buf, size_t size);
/* A duration for a person: "0.25 ms", "12.5 ms", "150 ms", "12.50 s".  Returns buf. */
const char *cli_ms(double ms, char *buf, size_t size);

/* Writes an SVG document (taking it: freed here) on stdout; 0 or 1
 * (NULL is out of memory). */
int cli_print_svg(char *svg, size_t len);
/* After a table: 0, or 1 with a line on stderr when stdout failed. */
int cli_flush(void);

/* The tables (table.c). */
int cli_table_plan(const struct remat_profile *p, const struct remat_plan *plan);
int cli_table_simulate(const struct remat_profile *p, enum remat_model model,
                       const size_t *checkpoints, size_t n_checkpoints,
                       const struct remat_sim *sim);
int cli_table_frontier(const struct remat_profile *p, const struct remat_frontier *f);
int cli_table_fits(const struct remat_fits_answer *a, size_t n, const struct remat_fit_check *chk,
                   size_t n_chk);

/* Each command's help (main.c): its usage and what each option means. */
extern const char cli_help_plan[], cli_help_simulate[], cli_help_frontier[], cli_help_fits[],
    cli_help_spec[];

/* A wall-clock bound on a command's solve (--deadline SECONDS). */
struct cli_deadline {
    double seconds; /* as given; 0: none */
    double end;     /* CLOCK_MONOTONIC seconds past which the solve stops */
};
/* The solvers' cancel callback (arg: a struct cli_deadline): nonzero once
 * the deadline has passed; never with no deadline. */
int cli_deadline_passed(void *arg);
/* The line for a solve stopped by its deadline; returns the exit status 1. */
int cli_deadline_failed(const char *cmd, const struct cli_deadline *d);

/* Takes at argv[*i] the options every command reads the same way: --help
 * or -h (help printed), --format (svg only when allow_svg) and, when d is
 * not NULL, --deadline.  Returns 1 when argv[*i] was one of them, and then
 * the command ends with *exit_status when it is not -1: 0 after the help,
 * 2 after one line on stderr for a bad or missing value; returns 0 when
 * argv[*i] is another argument.  One place, so that the commands cannot
 * drift apart in how they read these. */
int cli_shared_option(const char *cmd, const char *help, int argc, char **argv, int *i,
                      int allow_svg, enum cli_format *fmt, struct cli_deadline *d,
                      int *exit_status);

/* The value of --name VALUE or --name=VALUE at argv[*i] (advancing *i past
 * a separate VALUE); NULL when argv[*i] is another option, with *missing set
 * when it is --name without a value. */
const char *cli_opt_value(int argc, char **argv, int *i, const char *name, int *missing);

/* Reads a non-negative decimal integer of at most max; 0 on success, -1
 * otherwise (a sign, blanks, trailing text, overflow). */
int cli_parse_count(const char *s, int64_t max, int64_t *out);

/* What a command that reads one profile does with an argument no option
 * took: an unknown option, a second profile, or the profile (*path).  0
 * when it is the profile; -1 after one line on stderr (exit 2). */
int cli_profile_operand(const char *cmd, const char *arg, const char **path);

/* --model's value: 0 with *model set, or -1 after one line on stderr. */
int cli_parse_model(const char *cmd, const char *v, enum remat_model *model);

#endif
