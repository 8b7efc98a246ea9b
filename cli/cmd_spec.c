/* cmd_spec.c - `remat spec --hf-config FILE --seq-len N`: a Hugging Face
 * config.json checked offline as rematd checks it (src/rematx/hfconfig.h),
 * and the body of POST /v1/profiles (or /v1/fits) that profiles it, with
 * the normalised config; or, with --params, Hugging Face's parameter count
 * of the model. */
#include <string.h>

#include "cli.h"
#include "rematx/rematx.h"

int cli_cmd_spec(int argc, char **argv)
{
    const char *path = NULL, *dtype = NULL, *device = NULL;
    int64_t seq_len = -1, batch = -1;
    int params_only = 0;
    for (int i = 1; i < argc; i++) {
        int missing = 0;
        const char *v;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(cli_help_spec, stdout);
            return 0;
        }
        if ((v = cli_opt_value(argc, argv, &i, "--hf-config", &missing)) != NULL) {
            path = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--seq-len", &missing)) != NULL) {
            if (cli_parse_count(v, REMATX_MAX_DIM, &seq_len) < 0 || seq_len == 0) {
                fprintf(stderr, "remat spec: --seq-len: '%s' is not in 1..%d\n", v, REMATX_MAX_DIM);
                return 2;
            }
        } else if ((v = cli_opt_value(argc, argv, &i, "--batch-size", &missing)) != NULL) {
            if (cli_parse_count(v, REMATX_MAX_BATCH, &batch) < 0 || batch == 0) {
                fprintf(stderr, "remat spec: --batch-size: '%s' is not in 1..%d\n", v,
                        REMATX_MAX_BATCH);
                return 2;
            }
        } else if ((v = cli_opt_value(argc, argv, &i, "--dtype", &missing)) != NULL) {
            if (strcmp(v, "fp32") && strcmp(v, "fp16") && strcmp(v, "bf16")) {
                fprintf(stderr, "remat spec: --dtype: '%s' is not fp32, fp16 or bf16\n", v);
                return 2;
            }
            dtype = v;
        } else if ((v = cli_opt_value(argc, argv, &i, "--device", &missing)) != NULL) {
            device = v;
        } else if (strcmp(argv[i], "--params") == 0) {
            params_only = 1;
        } else if (missing) {
            fprintf(stderr, "remat spec: %s needs a value\n", argv[i]);
            return 2;
        } else {
            fprintf(stderr, "remat spec: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (path == NULL) {
        fputs(cli_help_spec, stderr);
        return 2;
    }
    json_error_t je;
    json_t *cfg = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (cfg == NULL) {
        fprintf(stderr, "remat spec: %s:%d: %s\n", path, je.line, je.text);
        return 2;
    }
    struct rematx_hf h;
    struct remat_error err = {0};
    int rc = rematx_hf_read(cfg, "/hf_config", &h, &err);
    json_decref(cfg);
    if (rc != REMAT_OK)
        return cli_fail(path, &err);
    if (params_only) {
        printf("%lld\n", (long long)rematx_hf_params(&h));
        return cli_flush();
    }
    if (seq_len < 0) {
        fprintf(stderr, "remat spec: --seq-len is needed with --hf-config\n");
        return 2;
    }
    if (seq_len > h.max_positions || (h.sliding_window > 0 && seq_len > h.sliding_window)) {
        fprintf(stderr, "remat spec: --seq-len %lld: past the config's %s (%lld)\n",
                (long long)seq_len, seq_len > h.max_positions ? "positions" : "sliding window",
                (long long)(seq_len > h.max_positions ? h.max_positions : h.sliding_window));
        return 2;
    }
    json_t *body =
        json_pack("{s:o, s:I}", "hf_config", rematx_hf_json(&h), "seq_len", (json_int_t)seq_len);
    if (body != NULL && batch > 0)
        json_object_set_new(body, "batch_size", json_integer(batch));
    if (body != NULL && dtype != NULL)
        json_object_set_new(body, "dtype", json_string(dtype));
    if (body != NULL && device != NULL)
        json_object_set_new(body, "device", json_string(device));
    return cli_print_json(body);
}
