/* dp_fork.c: see dp_fork.h. */
#include "tests/runtime/dp/dp_fork.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "tests/runtime/net/transport_util.h"

#define MAXW 16

static const uint8_t k_secret[] = "dp tests job secret 0123456789abcdef";

pz_status dp_transport(pz_transport **t, int rank, int world, int port, double peer_timeout_s) {
    pz_transport_opts o = {rank, world, "127.0.0.1", port, peer_timeout_s, 20.0, 0, k_secret, sizeof k_secret - 1};
    return pz_transport_init(t, &o);
}

pz_status dp_world_group(pz_transport **t, pz_dp_group *g, int rank, int world, int port, double peer_timeout_s) {
    int ranks[PZ_DP_MAX];
    for (int r = 0; r < world && r < PZ_DP_MAX; r++) ranks[r] = r;
    pz_status st = dp_transport(t, rank, world, port, peer_timeout_s);
    return st == PZ_OK ? pz_dp_group_init(g, *t, rank, ranks, world) : st;
}

int dp_fork_run(const char *name, int world, double limit_s, dp_child_fn fn, void *arg) {
    return dp_fork_run_victim(name, world, limit_s, fn, arg, -1);
}

int dp_fork_run_victim(const char *name, int world, double limit_s, dp_child_fn fn, void *arg, int victim) {
    pid_t kids[MAXW];
    int status[MAXW], reaped[MAXW] = {0};
    if (world < 1 || world > MAXW) return 0;
    int port = free_port();
    double t0 = pz_now();
    fflush(NULL);
    for (int r = 0; r < world; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            for (int i = 0; i < r; i++) kill(kids[i], SIGKILL);
            exit(1);
        }
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            alarm((unsigned)limit_s + 5);
            exit(fn(r, world, port, arg)); /* exit, not _exit: LeakSanitizer checks at exit */
        }
        kids[r] = pid;
    }
    int left = world, timed_out = 0;
    while (left > 0) {
        if (victim >= 0 && !reaped[victim] && left == 1) kill(kids[victim], SIGKILL);
        if (pz_now() - t0 > limit_s && !timed_out) {
            timed_out = 1;
            for (int i = 0; i < world; i++)
                if (!reaped[i]) kill(kids[i], SIGKILL);
        }
        for (int i = 0; i < world; i++) {
            if (reaped[i]) continue;
            if (waitpid(kids[i], &status[i], WNOHANG) == kids[i]) { reaped[i] = 1; left--; }
        }
        if (left) nanosleep(&(struct timespec){0, 5000000}, NULL);
    }
    int ok = !timed_out;
    for (int i = 0; i < world; i++) ok &= rank_ended_ok(i, status[i], i == victim);
    printf("%s - %s W=%d (%.2f s)%s\n", ok ? "ok" : "FAIL", name, world, pz_now() - t0, timed_out ? " TIMED OUT" : "");
    fflush(stdout);
    return ok;
}
