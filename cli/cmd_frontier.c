/* cmd_frontier.c - placeholder until `remat frontier` lands. */
#include "cli.h"

int remat_cmd_frontier(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "remat: frontier is not built yet\n");
    return 2;
}
