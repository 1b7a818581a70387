/* flags.h: the table-driven parser of a command's flags, so that --help is
 * generated from the same table that parses the flags and cannot drift
 * (the commands' tables: runtime/cli/cli.c; train's: runtime/plan/options.c). */
#ifndef PZ_BASE_FLAGS_H
#define PZ_BASE_FLAGS_H

#include <stdio.h>

typedef enum { PZ_FLAG_INT, PZ_FLAG_LONG, PZ_FLAG_FLOAT, PZ_FLAG_STR, PZ_FLAG_BOOL } pz_flag_kind;

typedef struct {
    const char *name;      /* "--batch" */
    pz_flag_kind kind;
    void *ptr;             /* int*, long*, float*, const char**, int* */
    const char *help;
    double lo, hi;         /* range for numbers */
    int *given;            /* set to 1 when the flag appears (optional) */
} pz_flag;


/* One line per flag: name, N or S for its value, help and default. */
void pz_flags_print(FILE *f, const pz_flag *fs, int n);
/* Parses argv (--flag value or --flag=value; numbers checked against their
 * range). rest_start: positional arguments may follow the flags, and their
 * first index goes there (NULL: none allowed). Returns 0 on success, 1 after
 * printing "pipezip CMD: error: ..." to stderr, 2 after printing usage and
 * the flags for --help. */
int pz_flags_parse(const char *cmd, const char *usage, int argc, char **argv, const pz_flag *fs, int n,
                   int *rest_start);

#endif
