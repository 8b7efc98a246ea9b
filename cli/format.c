/* format.c - how the commands answer a person: --format, the choice of
 * table or JSON by whether standard output is a terminal, colour (only on
 * a terminal, never with NO_COLOR set, https://no-color.org), and stage
 * names made safe to print. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

int cli_format_option(const char *cmd, int argc, char **argv, int *i, int allow_svg,
                      enum cli_format *fmt)
{
    const char *a = argv[*i], *v;
    if (strncmp(a, "--format", 8) != 0 || (a[8] != '\0' && a[8] != '='))
        return 0;
    if (a[8] == '=')
        v = a + 9;
    else if (*i + 1 < argc)
        v = argv[++*i];
    else {
        fprintf(stderr, "remat %s: --format needs a value\n", cmd);
        return -1;
    }
    if (strcmp(v, "json") == 0)
        *fmt = CLI_FORMAT_JSON;
    else if (strcmp(v, "table") == 0)
        *fmt = CLI_FORMAT_TABLE;
    else if (allow_svg && strcmp(v, "svg") == 0)
        *fmt = CLI_FORMAT_SVG;
    else {
        fprintf(stderr, "remat %s: --format: '%s' is not table or json%s\n", cmd, v,
                allow_svg ? " or svg" : "");
        return -1;
    }
    return 1;
}

enum cli_format cli_format_resolve(enum cli_format f)
{
    if (f != CLI_FORMAT_AUTO)
        return f;
    return isatty(STDOUT_FILENO) ? CLI_FORMAT_TABLE : CLI_FORMAT_JSON;
}

void cli_style_init(struct cli_style *s)
{
    const char *no = getenv("NO_COLOR");
    int on = isatty(STDOUT_FILENO) && (no == NULL || no[0] == '\0');
    s->bold = on ? "\033[1m" : "";
    s->dim = on ? "\033[2m" : "";
    s->good = on ? "\033[32m" : "";
    s->bad = on ? "\033[31m" : "";
    s->off = on ? "\033[0m" : "";
}

const char *cli_stage_name(const struct remat_profile *p, size_t stage, char *buf, size_t size)
{
    const char *name = stage >= 1 && stage <= p->n_stages ? p->stages[stage - 1].name : NULL;
    if (name == NULL || name[0] == '\0') {
        snprintf(buf, size, "stage %zu", stage);
        return buf;
    }
    /* A name is the profile's text: its control characters (an escape
     * sequence would drive the terminal) print as '?'. */
    size_t k = 0;
    for (; name[k] != '\0' && k + 1 < size; k++)
        buf[k] = (unsigned char)name[k] < 0x20 || name[k] == 0x7f ? '?' : name[k];
    buf[k] = '\0';
    return buf;
}

const char *cli_ms(double ms, char *buf, size_t size)
{
    if (ms >= 10000)
        snprintf(buf, size, "%.2f s", ms / 1000);
    else
        snprintf(buf, size, "%.*f ms", ms >= 100 ? 0 : ms >= 10 ? 1 : 2, ms);
    return buf;
}

int cli_print_svg(char *svg, size_t len)
{
    if (svg == NULL) {
        fprintf(stderr, "remat: out of memory\n");
        return 1;
    }
    int bad = fwrite(svg, 1, len, stdout) != len || fflush(stdout) != 0;
    free(svg);
    if (bad) {
        fprintf(stderr, "remat: cannot write the output\n");
        return 1;
    }
    return 0;
}

int cli_flush(void)
{
    if (ferror(stdout) || fflush(stdout) != 0) {
        fprintf(stderr, "remat: cannot write the output\n");
        return 1;
    }
    return 0;
}
