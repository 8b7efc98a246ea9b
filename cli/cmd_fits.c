/* cmd_fits.c - `remat fits`: from profiles of one model measured at a few
 * batch sizes, the largest batch that fits each memory and the batch that
 * trains fastest under it (docs/scheduling.md), offline. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* "none" .. "adamw", with an optional ":foreach". */
static int parse_optimizer(const char *v, struct remat_optim_spec *spec)
{
    char name[32];
    const char *colon = strchr(v, ':');
    size_t len = colon ? (size_t)(colon - v) : strlen(v);
    if (len >= sizeof name)
        return -1;
    memcpy(name, v, len);
    name[len] = '\0';
    if (remat_optim_parse(name, &spec->kind) < 0)
        return -1;
    if (colon != NULL && strcmp(colon + 1, "foreach") != 0)
        return -1;
    spec->foreach = colon != NULL;
    return 0;
}

/* A dtype option's bytes per element: 0, or -1 having said why. */
static int dtype_opt(const char *opt, const char *v, int *bytes)
{
    *bytes = remat_dtype_bytes(v);
    if (*bytes > 0)
        return 0;
    fprintf(stderr, "remat fits: %s: '%s' is not float32, bfloat16, float16 or float64\n", opt, v);
    return -1;
}

int cli_cmd_fits(int argc, char **argv)
{
    int64_t mem[REMAT_FITS_MAX_MEMORIES];
    size_t n_mem = 0;
    const char *paths[REMAT_FITS_MAX_PROFILES];
    size_t n_paths = 0;
    struct remat_fits_options o;
    remat_fits_options_init(&o);
    struct remat_optim_spec spec;
    remat_optim_spec_init(&spec);
    int have_opt = 0;
    /* --parallel: one rank of a data-parallel job (docs/scheduling.md,
     * "Sharded jobs"). */
    struct remat_shard_job job;
    remat_shard_job_init(&job);
    int sharded = 0;
    int64_t global_batch = 0;
    const char *gpu_of[REMAT_FITS_MAX_MEMORIES] = {0}; /* memory k's GPU name, or NULL */
    enum cli_format fmt = CLI_FORMAT_AUTO;
    struct cli_deadline deadline = {0, 0};
    for (int i = 1; i < argc; i++) {
        int missing = 0;
        const char *v;
        int64_t x;
        int done;
        if (cli_shared_option("fits", cli_help_fits, argc, argv, &i, 0, &fmt, &deadline, &done)) {
            if (done >= 0)
                return done;
            continue;
        }
        if ((v = cli_opt_value(argc, argv, &i, "--memory", &missing)) != NULL) {
            if (n_mem == REMAT_FITS_MAX_MEMORIES) {
                fprintf(stderr, "remat fits: at most %d --memory\n", REMAT_FITS_MAX_MEMORIES);
                return 2;
            }
            if (cli_parse_count(v, REMAT_MAX_BYTES, &x) == 0 && x > 0)
                mem[n_mem++] = x;
            else if (remat_gpu_memory_bytes(v, &mem[n_mem]) == REMAT_OK)
                gpu_of[n_mem++] = v;
            else {
                fprintf(stderr, "remat fits: --memory: '%s' is neither bytes nor a GPU name (", v);
                for (size_t k = 0; remat_gpu_name(k) != NULL; k++)
                    fprintf(stderr, "%s%s", k ? ", " : "", remat_gpu_name(k));
                fprintf(stderr, ")\n");
                return 2;
            }
        } else if ((v = cli_opt_value(argc, argv, &i, "--margin", &missing)) != NULL) {
            if (cli_parse_count(v, REMAT_MAX_BYTES, &o.margin_bytes) < 0) {
                fprintf(stderr, "remat fits: --margin: '%s' is not a byte count\n", v);
                return 2;
            }
        } else if ((v = cli_opt_value(argc, argv, &i, "--margin-fraction", &missing)) != NULL) {
            char *end;
            o.margin_fraction = strtod(v, &end);
            if (*end != '\0' || !(o.margin_fraction >= 0 && o.margin_fraction <= 0.9)) {
                fprintf(stderr, "remat fits: --margin-fraction: '%s' is not in [0, 0.9]\n", v);
                return 2;
            }
        } else if ((v = cli_opt_value(argc, argv, &i, "--max-batch", &missing)) != NULL) {
            if (cli_parse_count(v, REMAT_FITS_MAX_BATCH, &o.max_batch) < 0 || o.max_batch == 0) {
                fprintf(stderr, "remat fits: --max-batch: '%s' is not in 1..2^24\n", v);
                return 2;
            }
        } else if ((v = cli_opt_value(argc, argv, &i, "--optimizer", &missing)) != NULL) {
            if (parse_optimizer(v, &spec) < 0) {
                fprintf(stderr,
                        "remat fits: --optimizer: '%s' is not none, sgd, sgd-momentum, adam or "
                        "adamw (with :foreach)\n",
                        v);
                return 2;
            }
            have_opt = 1;
        } else if ((v = cli_opt_value(argc, argv, &i, "--parallel", &missing)) != NULL) {
            if (cli_parse_count(v, REMAT_SHARD_MAX_RANKS, &job.data) < 0 || job.data == 0) {
                fprintf(stderr, "remat fits: --parallel: '%s' is not in 1..2^20 ranks\n", v);
                return 2;
            }
            sharded = 1;
        } else if ((v = cli_opt_value(argc, argv, &i, "--strategy", &missing)) != NULL) {
            if (remat_shard_parse(v, &job.strategy) < 0) {
                fprintf(stderr,
                        "remat fits: --strategy: '%s' is not ddp, zero1, zero2, zero3, "
                        "fsdp or hsdp\n",
                        v);
                return 2;
            }
        } else if ((v = cli_opt_value(argc, argv, &i, "--shard-group", &missing)) != NULL) {
            if (cli_parse_count(v, REMAT_SHARD_MAX_RANKS, &job.shard_group) < 0 ||
                job.shard_group == 0) {
                fprintf(stderr, "remat fits: --shard-group: '%s' is not in 1..2^20\n", v);
                return 2;
            }
        } else if ((v = cli_opt_value(argc, argv, &i, "--param-dtype", &missing)) != NULL) {
            if (dtype_opt("--param-dtype", v, &job.param_bytes) < 0)
                return 2;
        } else if ((v = cli_opt_value(argc, argv, &i, "--reduce-dtype", &missing)) != NULL) {
            if (dtype_opt("--reduce-dtype", v, &job.grad_bytes) < 0)
                return 2;
        } else if ((v = cli_opt_value(argc, argv, &i, "--global-batch", &missing)) != NULL) {
            if (cli_parse_count(v, REMAT_FITS_MAX_GLOBAL_BATCH, &global_batch) < 0 ||
                global_batch == 0) {
                fprintf(stderr, "remat fits: --global-batch: '%s' is not in 1..2^40\n", v);
                return 2;
            }
        } else if (strcmp(argv[i], "--master-weights") == 0 ||
                   strcmp(argv[i], "--no-master-weights") == 0) {
            job.master_weights = argv[i][2] == 'm';
        } else if (strcmp(argv[i], "--no-throughput") == 0) {
            o.want_throughput = 0;
        } else if (missing) {
            fprintf(stderr, "remat fits: %s needs a value\n", argv[i]);
            return 2;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "remat fits: unknown option '%s'\n", argv[i]);
            return 2;
        } else if (n_paths == REMAT_FITS_MAX_PROFILES) {
            fprintf(stderr, "remat fits: at most %d profiles\n", REMAT_FITS_MAX_PROFILES);
            return 2;
        } else {
            paths[n_paths++] = argv[i];
        }
    }
    if (!sharded && (job.strategy != REMAT_SHARD_DDP || job.shard_group != 0 || global_batch != 0 ||
                     job.param_bytes != 0 || job.grad_bytes != 0 || job.master_weights != -1)) {
        fprintf(stderr, "remat fits: --strategy, --shard-group, --global-batch and the dtypes need "
                        "--parallel N\n");
        return 2;
    }
    if (n_paths == 0 || n_mem == 0) {
        fprintf(stderr, "remat fits: needs --memory BYTES|GPU and at least one profile\n");
        return 2;
    }
    struct remat_profile *ps[REMAT_FITS_MAX_PROFILES];
    int status = 0;
    size_t loaded = 0;
    for (; loaded < n_paths; loaded++) {
        ps[loaded] = cli_load_profile(paths[loaded], &status);
        if (ps[loaded] == NULL)
            break;
    }
    struct remat_error err = {0};
    /* --optimizer models the optimizer of profiles measured without one. */
    for (size_t k = 0; status == 0 && have_opt && k < loaded; k++)
        if (ps[k]->optimizer.kind == REMAT_OPTIM_NONE &&
            remat_optim_estimate(ps[k], &spec, &ps[k]->optimizer, &err) < 0)
            status = cli_fail(paths[k], &err);
    struct remat_fits_answer ans[REMAT_FITS_MAX_MEMORIES];
    struct remat_fit_check chk[REMAT_FITS_MAX_PROFILES];
    size_t n_chk = 0;
    const struct remat_profile *const *cps = (const struct remat_profile *const *)ps;
    if (status == 0 && remat_batch_fit_check(cps, loaded, chk, &n_chk, &err) < 0)
        status = cli_fail("fits", &err);
    if (deadline.seconds > 0) {
        o.cancel = cli_deadline_passed;
        o.cancel_arg = &deadline;
    }
    struct remat_shard_breakdown br[REMAT_FITS_MAX_MEMORIES];
    struct remat_shard_spec used;
    int rc = 0;
    if (status == 0 && sharded)
        rc = remat_fits_sharded(cps, loaded, mem, n_mem, &o, &job, ans, br, &used, &err);
    else if (status == 0)
        rc = remat_fits(cps, loaded, mem, n_mem, &o, ans, &err);
    /* --global-batch: what a scheduler places, per memory. */
    struct remat_fits_schedule sch[REMAT_FITS_MAX_MEMORIES];
    for (size_t k = 0; status == 0 && rc == REMAT_OK && global_batch > 0 && k < n_mem; k++)
        if (remat_fits_schedule(cps, loaded, &o, &job, global_batch, &ans[k], &br[k], &sch[k],
                                &err) < 0) {
            status = cli_fail("fits", &err);
            for (size_t j = 0; j < n_mem; j++)
                remat_fits_answer_clear(&ans[j]);
        }
    if (rc == REMAT_ECANCELED)
        status = cli_deadline_failed("fits", &deadline);
    else if (rc < 0)
        status = cli_fail("fits", &err);
    else if (status == 0 && cli_format_resolve(fmt) == CLI_FORMAT_TABLE) {
        status = cli_table_fits(ans, n_mem, chk, n_chk);
        for (size_t k = 0; sharded && k < n_mem; k++)
            printf("%sper rank (%s, %" PRId64 " ranks) at batch %" PRId64 ": weights %" PRId64
                   ", gradients %" PRId64 ", optimizer %" PRId64 ", gathered %" PRId64
                   ", buckets %" PRId64 ", activations %" PRId64 ", step %" PRId64 ": peak %" PRId64
                   " bytes\n",
                   k ? "" : "\n", remat_shard_name(used.strategy), used.data, ans[k].batch,
                   br[k].weights, br[k].gradients, br[k].optimizer, br[k].gathered, br[k].buckets,
                   br[k].activations, br[k].step_tmp, br[k].peak);
        for (size_t k = 0; global_batch > 0 && k < n_mem; k++) {
            json_t *j = remat_fits_schedule_to_json(&sch[k], gpu_of[k]);
            char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
            printf("%sschedule %zu: %s\n", k ? "" : "\n", k, text ? text : "(out of memory)");
            free(text);
            json_decref(j);
        }
        for (size_t k = 0; k < n_mem; k++)
            remat_fits_answer_clear(&ans[k]);
    } else if (status == 0) {
        json_t *root = json_object(), *arr = json_array(), *fit = json_array();
        int bad = root == NULL || arr == NULL || fit == NULL;
        for (size_t k = 0; !bad && k < n_mem; k++) {
            json_t *a = remat_fits_answer_to_json(&ans[k]);
            if (a != NULL && sharded)
                bad |= json_object_set_new(a, "per_rank",
                                           remat_shard_breakdown_to_json(&used, &br[k])) < 0;
            if (a != NULL && sharded && global_batch > 0)
                bad |= json_object_set_new(a, "schedule",
                                           remat_fits_schedule_to_json(&sch[k], gpu_of[k])) < 0;
            bad |= json_array_append_new(arr, a) < 0;
        }
        for (size_t k = 0; !bad && k < n_chk; k++) {
            json_t *c = json_object(), *e = json_object();
            bad |= c == NULL || e == NULL;
            for (int f = 0; !bad && f < REMAT_FIT_N_FIELDS; f++)
                bad |= json_object_set_new(e, remat_fit_field_name(f),
                                           json_real(chk[k].rel_err[f])) < 0;
            bad |= c == NULL || json_object_set_new(c, "batch", json_integer(chk[k].batch)) < 0;
            bad |= c == NULL || json_object_set_new(c, "rel_err", e) < 0;
            bad |= json_array_append_new(fit, c) < 0;
        }
        bad |= root == NULL || json_object_set_new(root, "answers", arr) < 0;
        bad |= root == NULL || json_object_set_new(root, "fit_check", fit) < 0;
        if (bad) {
            json_decref(root);
            root = NULL;
        }
        status = cli_print_json(root);
        for (size_t k = 0; k < n_mem; k++)
            remat_fits_answer_clear(&ans[k]);
    }
    for (size_t k = 0; k < loaded; k++)
        remat_profile_free(ps[k]);
    return status;
}
