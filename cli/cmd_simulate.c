/* cmd_simulate.c - `remat simulate`: the peak (and timeline) of a
 * checkpoint set under a model. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Parses "3,11,24" (or "" for none) into a new array; 0 on success. */
static int parse_list(const char *s, size_t **out, size_t *n)
{
    size_t cap = 1;
    for (const char *c = s; *c != '\0'; c++)
        cap += *c == ',';
    size_t *ck = malloc(cap * sizeof *ck);
    if (ck == NULL)
        return -1;
    *n = 0;
    const char *c = s;
    while (*c != '\0') {
        if (*c < '0' || *c > '9') {
            free(ck);
            return -1;
        }
        errno = 0;
        char *end;
        unsigned long long v = strtoull(c, &end, 10);
        if (errno != 0 || v > REMAT_MAX_STAGES || (*end != ',' && *end != '\0') ||
            (*end == ',' && end[1] == '\0')) {
            free(ck);
            return -1;
        }
        ck[(*n)++] = (size_t)v;
        c = *end == ',' ? end + 1 : end;
    }
    *out = ck;
    return 0;
}

int cli_cmd_simulate(int argc, char **argv)
{
    const char *path = NULL, *list = NULL;
    enum remat_model model = REMAT_MODEL_TRACED;
    int want_timeline = 0;
    enum cli_format fmt = CLI_FORMAT_AUTO;
    for (int i = 1; i < argc; i++) {
        int missing = 0;
        const char *v;
        int done;
        if (cli_shared_option("simulate", cli_help_simulate, argc, argv, &i, 0, &fmt, NULL,
                              &done)) {
            if (done >= 0)
                return done;
            continue;
        }
        if ((v = cli_opt_value(argc, argv, &i, "--checkpoints", &missing)) != NULL) {
            list = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--model", &missing)) != NULL) {
            if (cli_parse_model("simulate", v, &model) < 0)
                return 2;
        } else if (missing) {
            fprintf(stderr, "remat simulate: %s needs a value\n", argv[i]);
            return 2;
        } else if (strcmp(argv[i], "--timeline") == 0) {
            want_timeline = 1;
        } else if (cli_profile_operand("simulate", argv[i], &path) < 0) {
            return 2;
        }
    }
    if (path == NULL || list == NULL) {
        fprintf(stderr, "remat simulate: needs --checkpoints C1,C2,... and a profile (or -)\n");
        return 2;
    }
    size_t *ck = NULL, n_ck = 0;
    if (parse_list(list, &ck, &n_ck) < 0) {
        fprintf(stderr, "remat simulate: --checkpoints: '%s' is not a list like 3,11,24\n", list);
        return 2;
    }
    int status = 0;
    struct remat_profile *p = cli_load_profile(path, &status);
    if (p == NULL) {
        free(ck);
        return status;
    }
    struct remat_sim sim;
    struct remat_error err = {0};
    int rc = remat_simulate_checkpoints(p, model, ck, n_ck, want_timeline, &sim, &err);
    if (rc < 0) {
        free(ck);
        status = cli_fail(path, &err);
        remat_profile_free(p);
        return status;
    }
    if (cli_format_resolve(fmt) == CLI_FORMAT_TABLE) {
        status = cli_table_simulate(p, model, ck, n_ck, &sim);
        free(ck);
        remat_sim_clear(&sim);
        remat_profile_free(p);
        return status;
    }
    free(ck);
    json_t *out = json_object();
    json_t *tl = want_timeline ? json_array() : NULL;
    int bad = out == NULL || (want_timeline && tl == NULL);
    if (!bad) {
        bad |= json_object_set_new(out, "model", json_string(remat_model_name(model))) < 0;
        bad |= json_object_set_new(out, "peak_bytes", json_integer(sim.peak_bytes)) < 0;
        bad |= json_object_set_new(out, "peak_phase", json_integer((json_int_t)sim.peak_phase)) < 0;
        bad |= json_object_set_new(out, "recompute_ms", json_real(sim.recompute_ms)) < 0;
        bad |= json_object_set_new(out, "total_ms", json_real(sim.total_ms)) < 0;
        for (size_t k = 0; tl != NULL && !bad && k < sim.n_phases; k++)
            bad |= json_array_append_new(tl, json_integer(sim.timeline[k])) < 0;
        if (tl != NULL) {
            bad |= json_object_set_new(out, "timeline", tl) < 0;
            tl = NULL;
        }
    }
    json_decref(tl);
    remat_sim_clear(&sim);
    remat_profile_free(p);
    if (bad) {
        json_decref(out);
        fprintf(stderr, "remat simulate: out of memory\n");
        return 1;
    }
    return cli_print_json(out);
}
