/* main.c: the pipezip program; all logic lives in the library (runtime/cli/cli.c). */
#include <stdio.h>

#include "runtime/cli/cli.h"

int main(int argc, char **argv) {
    /* Line-buffered stderr: a line printed in pieces (an indent, then the
     * text) leaves in one write, so ranks under mpirun, whose streams share
     * one terminal, never splice into each other's lines. */
    static char err_buf[BUFSIZ];
    setvbuf(stderr, err_buf, _IOLBF, sizeof err_buf);
    return pz_cli_main(argc, argv);
}
