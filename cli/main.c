/* main.c - the remat program: dispatches to one command per file. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "config.h"
#include "rematx/real.h"

static const char usage[] =
    "usage: remat plan [--algorithm NAME] [--segments K] [--model sum|prefix|traced]\n"
    "                  [--budget BYTES] [--slots S] PROFILE.json|-\n"
    "       remat simulate --checkpoints C1,C2,... [--model M] [--timeline] PROFILE.json|-\n"
    "       remat frontier [--slots S] PROFILE.json|-\n"
    "       remat --version\n";

struct remat_profile *cli_load_profile(const char *path, int *status)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "remat: %s: cannot open\n", path);
        *status = 2;
        return NULL;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    while (buf != NULL) {
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
        if (len == cap) {
            char *bigger = realloc(buf, cap * 2);
            if (bigger == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    int read_error = ferror(f);
    if (f != stdin)
        fclose(f);
    if (buf == NULL || read_error) {
        free(buf);
        fprintf(stderr, "remat: %s: %s\n", path, buf == NULL ? "out of memory" : "read error");
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
        return remat_cmd_plan(argc - 1, argv + 1);
    if (strcmp(cmd, "simulate") == 0)
        return remat_cmd_simulate(argc - 1, argv + 1);
    if (strcmp(cmd, "frontier") == 0)
        return remat_cmd_frontier(argc - 1, argv + 1);
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
