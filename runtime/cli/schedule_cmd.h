/* schedule_cmd.h: the `pipezip schedule` subcommand (table entry in runtime/cli/cli.c). */
#ifndef PZ_SCHEDULE_CMD_H
#define PZ_SCHEDULE_CMD_H

/* pipezip schedule --stages S --micro-batches M [--schedule NAME] [--virtual-stages V]
 *                  [--stage K]
 * argv holds the flags only (argv[0] is the first flag). Returns the exit
 * status: 0, or 1 after printing "pipezip schedule: error: ..." to stderr. */
int pz_cmd_schedule(int argc, char **argv);

#endif
