/* cmd_plan.c - `remat plan`: solve a profile and print the plan, as JSON
 * or as a table beside store-all and sqrt(n). */
#include <errno.h>
#include <inttypes.h>

#include "cli.h"

int cli_cmd_plan(int argc, char **argv)
{
    struct remat_options opts;
    remat_options_init(&opts);
    const char *path = NULL;
    enum cli_format fmt = CLI_FORMAT_AUTO;
    struct cli_deadline deadline = {0, 0};
    for (int i = 1; i < argc; i++) {
        int missing = 0;
        const char *v;
        int64_t x;
        int done;
        if (cli_shared_option("plan", cli_help_plan, argc, argv, &i, 0, &fmt, &deadline, &done)) {
            if (done >= 0)
                return done;
            continue;
        }
        if ((v = cli_opt_value(argc, argv, &i, "--algorithm", &missing)) != NULL) {
            if (remat_algorithm_parse(v, &opts.algorithm) < 0) {
                fprintf(stderr, "remat plan: --algorithm: unknown algorithm '%s'\n", v);
                return 2;
            }
        } else if ((v = cli_opt_value(argc, argv, &i, "--model", &missing)) != NULL) {
            if (cli_parse_model("plan", v, &opts.model) < 0)
                return 2;
            opts.has_model = 1;
        } else if ((v = cli_opt_value(argc, argv, &i, "--segments", &missing)) != NULL) {
            if (cli_parse_count(v, REMAT_MAX_STAGES, &x) < 0 || x == 0) {
                fprintf(stderr, "remat plan: --segments: '%s' is not a count in 1..%d\n", v,
                        REMAT_MAX_STAGES);
                return 2;
            }
            opts.segments = (size_t)x;
        } else if ((v = cli_opt_value(argc, argv, &i, "--budget", &missing)) != NULL) {
            if (cli_parse_count(v, REMAT_MAX_BYTES, &x) < 0 || x == 0) {
                fprintf(stderr, "remat plan: --budget: '%s' is not a byte count in 1..2^60\n", v);
                return 2;
            }
            opts.budget_bytes = (int64_t)x;
        } else if ((v = cli_opt_value(argc, argv, &i, "--slots", &missing)) != NULL) {
            if (cli_parse_count(v, 1000000, &x) < 0 || x == 0) {
                fprintf(stderr, "remat plan: --slots: '%s' is not a count in 1..1000000\n", v);
                return 2;
            }
            opts.mem_slots = (size_t)x;
        } else if (missing) {
            fprintf(stderr, "remat plan: %s needs a value\n", argv[i]);
            return 2;
        } else if (cli_profile_operand("plan", argv[i], &path) < 0) {
            return 2;
        }
    }
    if (path == NULL) {
        fprintf(stderr, "remat plan: no profile given (a file, or - for stdin)\n");
        return 2;
    }
    if (opts.algorithm == REMAT_ALG_UNIFORM && opts.segments == 0) {
        fprintf(stderr, "remat plan: --algorithm uniform needs --segments K\n");
        return 2;
    }
    if (opts.algorithm == REMAT_ALG_MIN_TIME && opts.budget_bytes == 0) {
        fprintf(stderr, "remat plan: --algorithm min-time needs --budget BYTES\n");
        return 2;
    }
    int status = 0;
    struct remat_profile *p = cli_load_profile(path, &status);
    if (p == NULL)
        return status;
    struct remat_plan plan;
    struct remat_error err = {0};
    if (deadline.seconds > 0) {
        opts.cancel = cli_deadline_passed;
        opts.cancel_arg = &deadline;
    }
    int rc = remat_solve(p, &opts, &plan, &err);
    if (rc < 0) {
        if (rc == REMAT_ECANCELED)
            status = cli_deadline_failed("plan", &deadline);
        else if (rc == REMAT_EINFEASIBLE)
            fprintf(stderr,
                    "remat plan: %s: no schedule fits %" PRId64
                    " bytes; the least budget that fits is %" PRId64 "\n",
                    path, opts.budget_bytes, plan.min_budget_bytes);
        else
            status = cli_fail(path, &err);
        remat_profile_free(p);
        return rc == REMAT_EINFEASIBLE ? 2 : status;
    }
    if (cli_format_resolve(fmt) == CLI_FORMAT_TABLE)
        status = cli_table_plan(p, &plan);
    else
        status = cli_print_json(remat_plan_to_json(p, &plan));
    remat_plan_clear(&plan);
    remat_profile_free(p);
    return status;
}
