/* bench_isa.c: see bench_isa.h. */
#include "bench/bench_isa.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/io/file.h"
#include "base/status.h"

int bench_each_isa(char **argv, pz_isa lowest, int (*setup)(pz_isa level)) {
    char self[4096];
    if (pz_self_exe(self, sizeof self) != 0) pz_die("%s: cannot find its own executable", argv[0]);
    pz_isa top = pz_isa_cpu() < pz_isa_built() ? pz_isa_cpu() : pz_isa_built();
    int bad = 0;
    for (int l = (int)top; l >= (int)lowest; l--) {
        printf("%s== PIPEZIP_ISA=%s ==\n", l == (int)top ? "" : "\n", pz_isa_name((pz_isa)l));
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) pz_die("%s: fork failed", argv[0]);
        if (pid == 0) {
            setenv("PIPEZIP_ISA", pz_isa_name((pz_isa)l), 1);
            if (setup) setup((pz_isa)l);
            execv(self, argv);
            _exit(127);
        }
        int wst = 0;
        if (waitpid(pid, &wst, 0) != pid || !WIFEXITED(wst) || WEXITSTATUS(wst) != 0) {
            fprintf(stderr, "%s: the run at %s failed\n", argv[0], pz_isa_name((pz_isa)l));
            bad = 1;
        }
    }
    return bad;
}

void bench_isa_same_env(char **argv, int (*setup)(pz_isa level)) {
    if (!setup(pz_isa_level())) return;
    char self[4096];
    if (pz_self_exe(self, sizeof self) != 0) pz_die("%s: cannot find its own executable", argv[0]);
    fflush(NULL);
    execv(self, argv);
    pz_die("%s: cannot run itself again (%s): %s", argv[0], self, strerror(errno));
}
