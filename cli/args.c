/* args.c - reading a command's options, the same way for every command. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

const char *cli_opt_value(int argc, char **argv, int *i, const char *name, int *missing)
{
    size_t len = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, len) != 0)
        return NULL;
    if (a[len] == '=')
        return a + len + 1;
    if (a[len] != '\0')
        return NULL;
    if (*i + 1 >= argc) {
        *missing = 1;
        return NULL;
    }
    return argv[++*i];
}

int cli_parse_count(const char *s, int64_t max, int64_t *out)
{
    if (s == NULL || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > (unsigned long long)max)
        return -1;
    *out = (int64_t)v;
    return 0;
}

int cli_profile_operand(const char *cmd, const char *arg, const char **path)
{
    if (arg[0] == '-' && arg[1] != '\0') {
        fprintf(stderr, "remat %s: unknown option '%s'\n", cmd, arg);
        return -1;
    }
    if (*path != NULL) {
        fprintf(stderr, "remat %s: one profile only ('%s' and '%s')\n", cmd, *path, arg);
        return -1;
    }
    *path = arg;
    return 0;
}

int cli_parse_model(const char *cmd, const char *v, enum remat_model *model)
{
    if (remat_model_parse(v, model) == 0)
        return 0;
    fprintf(stderr, "remat %s: --model: unknown model '%s' (sum, prefix, traced)\n", cmd, v);
    return -1;
}

/* Whether arg asks for help (--help or -h): then the help is printed on
 * stdout and 1 returned (the command exits 0); 0 otherwise. */
static int help_option(const char *arg, const char *help)
{
    if (strcmp(arg, "--help") != 0 && strcmp(arg, "-h") != 0)
        return 0;
    fputs(help, stdout);
    return 1;
}

static double monotonic_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Takes --deadline VALUE at argv[*i] (a number of seconds in (0, 10^6]): 1
 * when taken, 0 when argv[*i] is another option, -1 after one line on
 * stderr (exit 2).  The clock starts when it is read. */
static int deadline_option(const char *cmd, int argc, char **argv, int *i, struct cli_deadline *d)
{
    int missing = 0;
    const char *v = cli_opt_value(argc, argv, i, "--deadline", &missing);
    if (v == NULL && !missing)
        return 0;
    char *end = NULL;
    double s = v != NULL ? strtod(v, &end) : NAN;
    if (v == NULL || end == v || *end != '\0' || !(s > 0 && s <= 1e6)) {
        fprintf(stderr, "remat %s: --deadline: '%s' is not a number of seconds in (0, 1000000]\n",
                cmd, v != NULL ? v : "");
        return -1;
    }
    d->seconds = s;
    d->end = monotonic_s() + s;
    return 1;
}

int cli_deadline_passed(void *arg)
{
    const struct cli_deadline *d = arg;
    return d->seconds > 0 && monotonic_s() > d->end;
}

int cli_deadline_failed(const char *cmd, const struct cli_deadline *d)
{
    fprintf(stderr, "remat %s: stopped at the --deadline of %g s before an answer\n", cmd,
            d->seconds);
    return 1;
}

int cli_shared_option(const char *cmd, const char *help, int argc, char **argv, int *i,
                      int allow_svg, enum cli_format *fmt, struct cli_deadline *d, int *exit_status)
{
    *exit_status = -1;
    if (help_option(argv[*i], help)) {
        *exit_status = 0;
        return 1;
    }
    int taken = cli_format_option(cmd, argc, argv, i, allow_svg, fmt);
    if (taken == 0 && d != NULL)
        taken = deadline_option(cmd, argc, argv, i, d);
    if (taken < 0)
        *exit_status = 2;
    return taken != 0;
}
