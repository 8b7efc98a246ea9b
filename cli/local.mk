# remat, the command-line front end: one file per command (tmux style).
bin_PROGRAMS += cli/remat
cli_remat_SOURCES = cli/cli.h cli/main.c cli/args.c cli/cmd_plan.c cli/cmd_simulate.c cli/cmd_frontier.c cli/cmd_fits.c cli/cmd_spec.c \
	cli/format.c cli/table.c
cli_remat_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)
# libremat's public API, and rematx (src/rematx/rematx.h) for the buffer and
# the shortest text of reals, as rematd prints them.
cli_remat_LDADD = src/libremat.la src/rematx/librematx.la $(JANSSON_LIBS)
