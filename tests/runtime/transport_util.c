/* transport_util.c: see transport_util.h. */
#include "tests/runtime/transport_util.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(fd, (struct sockaddr *)&a, &l) != 0) {
        perror("free_port");
        exit(1);
    }
    close(fd);
    return ntohs(a.sin_port);
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
