/* cmd_frontier.c - `remat frontier`: every (peak, time) Pareto point of a
 * profile, from the least-memory schedule to store-all, as JSON, a table
 * or a picture (rematx/svg.h, the one rematd draws). */
#include <stdint.h>

#include "cli.h"
#include "rematx/svg.h"

int cli_cmd_frontier(int argc, char **argv)
{
    const char *path = NULL;
    size_t slots = 0;
    enum cli_format fmt = CLI_FORMAT_AUTO;
    struct cli_deadline deadline = {0, 0};
    for (int i = 1; i < argc; i++) {
        int done;
        if (cli_shared_option("frontier", cli_help_frontier, argc, argv, &i, 1, &fmt, &deadline,
                              &done)) {
            if (done >= 0)
                return done;
            continue;
        }
        int missing = 0;
        int64_t x;
        const char *v = cli_opt_value(argc, argv, &i, "--slots", &missing);
        if (v != NULL) {
            if (cli_parse_count(v, 1000000, &x) < 0 || x == 0) {
                fprintf(stderr, "remat frontier: --slots: '%s' is not a count in 1..1000000\n", v);
                return 2;
            }
            slots = (size_t)x;
        } else if (missing) {
            fprintf(stderr, "remat frontier: --slots needs a value\n");
            return 2;
        } else if (cli_profile_operand("frontier", argv[i], &path) < 0) {
            return 2;
        }
    }
    if (path == NULL) {
        fprintf(stderr, "remat frontier: no profile given (a file, or - for stdin)\n");
        return 2;
    }
    int status = 0;
    struct remat_profile *p = cli_load_profile(path, &status);
    if (p == NULL)
        return status;
    struct remat_frontier f;
    struct remat_error err = {0};
    int rc = remat_frontier_compute_cancel(
        p, slots, deadline.seconds > 0 ? cli_deadline_passed : NULL, &deadline, &f, &err);
    if (rc < 0) {
        status = rc == REMAT_ECANCELED ? cli_deadline_failed("frontier", &deadline)
                                       : cli_fail(path, &err);
        remat_profile_free(p);
        return status;
    }
    fmt = cli_format_resolve(fmt);
    if (fmt == CLI_FORMAT_TABLE) {
        status = cli_table_frontier(p, &f);
    } else if (fmt == CLI_FORMAT_SVG) {
        char title[160];
        snprintf(title, sizeof title, "Memory against time: %.80s, %zu stages",
                 p->model != NULL ? p->model : "profile", p->n_stages);
        size_t len = 0;
        char *svg = rematx_svg_frontier(title, p, &f, NULL, 0, &len, &err);
        status = svg != NULL ? cli_print_svg(svg, len) : cli_fail(path, &err);
    } else {
        status = cli_print_json(remat_frontier_to_json(p, &f));
    }
    remat_frontier_clear(&f);
    remat_profile_free(p);
    return status;
}
