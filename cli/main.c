/* main.c - the remat program: dispatches to one command per file. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "config.h"
#include "rematx/dynbuf.h"
#include "rematx/real.h"

/* The largest profile file remat reads. */
#define MAX_PROFILE_TEXT ((size_t)1 << 30)

static const char usage[] =
    "usage: remat plan [--algorithm NAME] [--segments K] [--model sum|prefix|traced]\n"
    "                  [--budget BYTES] [--slots S] [--deadline SECONDS] [--format F]\n"
    "                  PROFILE.json|-\n"
    "       remat simulate --checkpoints C1,C2,... [--model M] [--timeline] [--format F]\n"
    "                  PROFILE.json|-\n"
    "       remat frontier [--slots S] [--deadline SECONDS] [--format table|json|svg]\n"
    "                  PROFILE.json|-\n"
    "       remat fits --memory BYTES|GPU [--memory ...] [--margin BYTES]\n"
    "                  [--margin-fraction F] [--max-batch N] [--optimizer NAME[:foreach]]\n"
    "                  [--no-throughput] [--deadline SECONDS] [--format F] PROFILE.json...\n"
    "       remat spec --hf-config FILE --seq-len N [--batch-size B] [--dtype D]\n"
    "                  [--device D] [--params]\n"
    "       remat --version\n"
    "       remat COMMAND --help\n"
    "--format table (the default on a terminal; colour unless NO_COLOR is set) or json\n"
    "(the default otherwise); frontier also draws an svg.\n";

#define FORMAT_HELP                                                                                \
    "  --format F        table (the default on a terminal; colour unless NO_COLOR is\n"            \
    "                    set) or json (the default otherwise)\n"
#define DEADLINE_HELP                                                                              \
    "  --deadline S      stop the solve after S seconds (exit 1) instead of running on\n"

const char cli_help_plan[] =
    "usage: remat plan [options] PROFILE.json|-\n"
    "Solves a profile (docs/profile.md) and prints the checkpoint plan.\n"
    "  --algorithm NAME  min-peak (the default), min-time, store-all, sqrt, uniform,\n"
    "                    acg, paper-cubic, paper-linear\n"
    "  --segments K      uniform: K segments\n"
    "  --budget BYTES    min-time: the peak allowed, weights included\n"
    "  --slots S         min-time: memory slots of its table (default 500)\n"
    "  --model M         report the peak in model sum, prefix or traced\n" DEADLINE_HELP
        FORMAT_HELP;
const char cli_help_simulate[] =
    "usage: remat simulate --checkpoints C1,C2,... [options] PROFILE.json|-\n"
    "The peak memory of keeping the outputs of stages C1, C2, ... (1..n-1).\n"
    "  --checkpoints L   the stages kept, comma separated (\"\" for none)\n"
    "  --model M         sum, prefix or traced (the default)\n"
    "  --timeline        also every op with the memory after it\n" FORMAT_HELP;
const char cli_help_frontier[] =
    "usage: remat frontier [options] PROFILE.json|-\n"
    "Every (peak, time) Pareto point, from the least-memory schedule to store-all.\n"
    "  --slots S         memory slots of the table (default 500)\n" DEADLINE_HELP FORMAT_HELP
    "                    or svg (a picture)\n";
const char cli_help_fits[] =
    "usage: remat fits --memory BYTES|GPU [options] PROFILE.json...\n"
    "From profiles of one model at a few batch sizes: the largest batch that fits\n"
    "each memory, with its plan, and the batch that trains fastest under it.\n"
    "  --memory M        bytes, or a GPU name (remat fits --memory x lists them);\n"
    "                    up to 16\n"
    "  --margin BYTES    kept free on the device\n"
    "  --margin-fraction F  and this fraction of it (0..0.9)\n"
    "  --max-batch N     the search's upper end (1..2^24)\n"
    "  --optimizer NAME[:foreach]  none, sgd, sgd-momentum, adam or adamw, for\n"
    "                    profiles measured without one\n"
    "  --no-throughput   only the largest batch, not the fastest\n"
    "  --parallel N      one rank of a job over N data-parallel ranks, with\n"
    "                    --strategy ddp|zero1|zero2|zero3|fsdp|hsdp (ddp),\n"
    "                    --shard-group M (hsdp), --param-dtype D, --reduce-dtype D,\n"
    "                    --[no-]master-weights: the per-rank breakdown;\n"
    "                    --global-batch G: micro-batch, accumulation, least ranks\n"
    "                    and scheduler requests per memory\n"
    "                    (docs/scheduling.md, \"Sharded jobs\")\n" DEADLINE_HELP FORMAT_HELP;

const char cli_help_spec[] =
    "usage: remat spec --hf-config FILE --seq-len N [options]\n"
    "A Hugging Face config.json checked as rematd checks it, and the body of\n"
    "POST /v1/profiles that profiles it (docs/models.md, \"From a Hugging Face config\").\n"
    "  --hf-config FILE  the config.json (Llama, Mistral, Qwen2 or GPT-2)\n"
    "  --seq-len N       tokens per sample, at most the config's positions\n"
    "  --batch-size B, --dtype fp32|fp16|bf16, --device cpu|cuda|cuda:N  put in the body\n"
    "  --params          print the model's parameter count instead\n";

struct remat_profile *cli_load_profile(const char *path, int *status)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "remat: %s: cannot open\n", path);
        *status = 2;
        return NULL;
    }
    /* A profile of REMAT_MAX_STAGES stages with names is well under 1 GiB
     * of text; a larger file is refused, not read into memory. */
    struct rematx_dynbuf b;
    rematx_dyn_init(&b, MAX_PROFILE_TEXT);
    for (;;) {
        size_t more = MAX_PROFILE_TEXT - rematx_dyn_len(&b);
        if (more > (1 << 16))
            more = 1 << 16;
        else if (more == 0) {
            /* Full: one byte more is one byte too many. */
            char c;
            if (fread(&c, 1, 1, f) == 1)
                rematx_dyn_addn(&b, &c, 1);
            break;
        }
        char *room = rematx_dyn_room(&b, more);
        if (room == NULL)
            break;
        size_t got = fread(room, 1, more, f);
        if (got == 0)
            break;
        rematx_dyn_setlen(&b, rematx_dyn_len(&b) + got);
    }
    int rc = rematx_dyn_error(&b);
    int read_error = ferror(f);
    if (f != stdin)
        fclose(f);
    if (rc != 0 || read_error) {
        rematx_dyn_free(&b);
        fprintf(stderr, "remat: %s: %s\n", path,
                rc == REMAT_ENOMEM   ? "out of memory"
                : rc == REMAT_ELIMIT ? "larger than 1 GiB, the most remat reads"
                                     : "read error");
        *status = 1;
        return NULL;
    }
    size_t len = 0;
    char *buf = rematx_dyn_take(&b, &len);
    if (buf == NULL) {
        fprintf(stderr, "remat: %s: out of memory\n", path);
        *status = 1;
        return NULL;
    }
    struct remat_error err = {0};
    struct remat_profile *p = remat_profile_loadb(buf, len, &err);
    free(buf);
    if (p == NULL)
        *status = cli_fail(path, &err);
    return p;
}

int cli_fail(const char *what, const struct remat_error *err)
{
    if (err->pointer[0] != '\0')
        fprintf(stderr, "remat: %s: %s: %s\n", what, err->pointer, err->message);
    else
        fprintf(stderr, "remat: %s: %s\n", what, err->message);
    return err->code == REMAT_ENOMEM ? 1 : 2;
}

int cli_print_json(json_t *v)
{
    if (v == NULL) {
        fprintf(stderr, "remat: out of memory\n");
        return 1;
    }
    int rc = rematx_json_dumpf(v, stdout, JSON_COMPACT) < 0 || fputc('\n', stdout) == EOF;
    json_decref(v);
    if (rc || fflush(stdout) != 0) {
        fprintf(stderr, "remat: cannot write the output\n");
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "plan") == 0)
        return cli_cmd_plan(argc - 1, argv + 1);
    if (strcmp(cmd, "simulate") == 0)
        return cli_cmd_simulate(argc - 1, argv + 1);
    if (strcmp(cmd, "frontier") == 0)
        return cli_cmd_frontier(argc - 1, argv + 1);
    if (strcmp(cmd, "fits") == 0)
        return cli_cmd_fits(argc - 1, argv + 1);
    if (strcmp(cmd, "spec") == 0)
        return cli_cmd_spec(argc - 1, argv + 1);
    if (strcmp(cmd, "--version") == 0) {
        printf("remat %s\n", PACKAGE_VERSION);
        return 0;
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        fputs(usage, stdout);
        return 0;
    }
    fprintf(stderr, "remat: unknown command '%s' (try remat --help)\n", cmd);
    return 2;
}
