/* main.c: the pipezip program; all logic lives in the library (runtime/cli/cli.c). */
#include <stdio.h>

#include "base/io/file.h"
#include "runtime/cli/cli.h"

int main(int argc, char **argv) {
    /* Line-buffered stderr: a line printed in pieces (an indent, then the
     * text) leaves in one write, so ranks under mpirun, whose streams share
     * one terminal, never splice into each other's lines. */
    static char err_buf[BUFSIZ];
    setvbuf(stderr, err_buf, _IOLBF, sizeof err_buf);
    pz_atomic_cleanup_on_signals();   /* no NAME.tmp.PID left by Ctrl-C */
    return pz_cli_main(argc, argv);
}
