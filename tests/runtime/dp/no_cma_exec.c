/* no_cma_exec.c: runs a command with process_vm_readv/writev refused by the
 * kernel (tests/runtime/dp/no_cma.h), for the whole process tree it starts:
 *   no_cma_exec COMMAND [ARGS...]
 * Exits 77 (skip) when no filter can be installed here. */
#include <stdio.h>
#include <unistd.h>

#include "tests/runtime/dp/no_cma.h"

int main(int argc, char **argv) {
    char why[120];
    if (argc < 2) {
        fprintf(stderr, "usage: no_cma_exec COMMAND [ARGS...]\n");
        return 2;
    }
    if (no_cma_install(why, sizeof why) != 0) {
        fprintf(stderr, "no_cma_exec: %s\n", why);
        return 77;
    }
    execvp(argv[1], argv + 1);
    perror(argv[1]);
    return 127;
}
