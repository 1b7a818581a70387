/* cli.h: the `pipezip` command line. */
#ifndef PZ_CLI_H
#define PZ_CLI_H

/* Runs a subcommand; returns the process exit status. */
int pz_cli_main(int argc, char **argv);

#endif
