/* transport_util.c: see transport_util.h. */
#include "tests/runtime/net/transport_util.h"
#include "runtime/net/launcher.h"

#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

int free_port(void) {
    int port = pz_pick_port();   /* outside the ephemeral range: see runtime/net/launcher.h */
    if (port < 0) {
        perror("free_port");
        exit(1);
    }
    return port;
}

void apply_env(const char *const *env) {
    for (int i = 0; env && env[i]; i++) {
        char buf[128];
        snprintf(buf, sizeof buf, "%s", env[i]);
        char *eq = strchr(buf, '=');
        if (!eq) continue;
        *eq = 0;
        if (eq[1]) setenv(buf, eq + 1, 1);
        else unsetenv(buf); /* "NAME=": make sure it is not set */
    }
}

void rank_say(int rank, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "  [rank %d] ", rank);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int rank_ended_ok(int rank, int status, int is_victim) {
    if (is_victim) {
        if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) return 1;
        fprintf(stderr, "  rank %d (victim) ended with status 0x%x\n", rank, status);
        return 0;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 1;
    fprintf(stderr, "  rank %d ended with %s %d\n", rank, WIFEXITED(status) ? "exit code" : "signal",
            WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    return 0;
}
