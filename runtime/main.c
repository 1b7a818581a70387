/* main.c: the pipezip program; all logic lives in the library (runtime/cli.c). */
#include "runtime/cli.h"

int main(int argc, char **argv) { return pz_cli_main(argc, argv); }
