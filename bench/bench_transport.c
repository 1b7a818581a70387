/* bench_transport.c: 64 MiB message bandwidth of the UCX transport between two
 * processes on this host, per UCX configuration, next to memcpy bandwidth.
 * A printout, not an assertion.
 *
 * usage: bench_transport [iterations (default 10)] [message MiB (default 64)]
 * Each configuration forks rank 0 and rank 1 with its UCX_* variables set;
 * rank 0 sends `iterations` messages (after 2 warm-ups) and rank 1 answers
 * each with 8 bytes, so one iteration = one message + a tiny ack. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/net/transport.h"
#include "base/clock.h"
#include "tests/runtime/net/transport_util.h"

typedef struct {
    const char *name;
    const char *env[4];
} config;

/* The transport itself defaults UCX_MM_ERROR_HANDLING=y, UCX_MM_FIFO_SIZE=1024
 * and UCX_KEEPALIVE_INTERVAL=1s (runtime/net/transport.c). */
static const config configs[] = {
    {"tcp (UCX_TLS=tcp)", {"UCX_TLS=tcp", NULL}},
    {"shm (UCX_TLS=sm,tcp: sysv lanes)", {"UCX_TLS=sm,tcp", NULL}},
    {"shm, UCX's FIFO size (UCX_MM_FIFO_SIZE=64)", {"UCX_TLS=sm,tcp", "UCX_MM_FIFO_SIZE=64", NULL}},
    {"no UCX_* variable set", {"UCX_TLS=", NULL}},
};

static void *big_alloc(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, 2u << 20, n) != 0) { perror("posix_memalign"); exit(1); }
    madvise(p, n, MADV_HUGEPAGE);
    memset(p, 1, n);
    return p;
}

static void die_on(pz_status st, int rank) {
    if (st == PZ_OK) return;
    fprintf(stderr, "rank %d: %s\n", rank, pz_last_error());
    exit(1);
}

static int child(const config *c, int rank, int port, int iters, size_t bytes, int out_fd) {
    apply_env(c->env);
    pz_transport_opts o = {rank, 2, "127.0.0.1", port, 30.0, 30.0, 0, NULL, 0};
    pz_transport *t;
    die_on(pz_transport_init(&t, &o), rank);
    uint8_t *buf = big_alloc(bytes);
    uint64_t ack = 0;
    pz_request *r, *a;
    double t0 = 0;
    for (int i = -2; i < iters; i++) {
        if (i == 0) t0 = pz_now();
        uint32_t step = (uint32_t)(i + 2);
        if (rank == 0) {
            die_on(pz_transport_recv(t, 1, pz_tag(1, step, 0, 2), &ack, 8, "ack", &a), rank);
            die_on(pz_transport_send(t, 1, pz_tag(0, step, 0, 1), buf, bytes, "data", &r), rank);
            die_on(pz_transport_wait(t, r, NULL), rank);
            die_on(pz_transport_wait(t, a, NULL), rank);
        } else {
            die_on(pz_transport_recv(t, 0, pz_tag(0, step, 0, 1), buf, bytes, "data", &r), rank);
            die_on(pz_transport_wait(t, r, NULL), rank);
            die_on(pz_transport_send(t, 0, pz_tag(1, step, 0, 2), &ack, 8, "ack", &a), rank);
            die_on(pz_transport_wait(t, a, NULL), rank);
        }
    }
    double dt = pz_now() - t0;
    if (rank == 0) {
        double gbs = (double)bytes * iters / dt / 1e9;
        if (write(out_fd, &gbs, sizeof gbs) != (ssize_t)sizeof gbs) return 1;
    }
    pz_transport_close(t, 0);
    free(buf);
    return 0;
}

int main(int argc, char **argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 10;
    size_t mib = argc > 2 ? (size_t)atoi(argv[2]) : 64;
    if (iters < 1 || mib < 1 || mib > 1024) {
        fprintf(stderr, "usage: bench_transport [iterations] [message MiB]\n");
        return 2;
    }
    size_t bytes = mib << 20;
    alarm(300);

    /* memcpy reference on the same kind of buffers */
    uint8_t *a = big_alloc(bytes), *b = big_alloc(bytes);
    memcpy(b, a, bytes);
    double t0 = pz_now();
    for (int i = 0; i < iters; i++) { a[i] = (uint8_t)i; memcpy(b, a, bytes); }
    double memcpy_gbs = (double)bytes * iters / (pz_now() - t0) / 1e9;
    if (b[0] != a[0]) return 1;
    free(a);
    free(b);
    printf("message size %zu MiB, %d iterations (+2 warm-up), one message + 8-byte ack each\n", mib, iters);
    printf("%-52s %8.2f GB/s\n", "memcpy (one process)", memcpy_gbs);
    fflush(stdout);

    for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
        int pfd[2];
        if (pipe(pfd) != 0) return 1;
        int port = free_port();
        pid_t kids[2];
        for (int r = 0; r < 2; r++) {
            kids[r] = fork();
            if (kids[r] == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                close(pfd[0]);
                _exit(child(&configs[c], r, port, iters, bytes, pfd[1]));
            }
        }
        close(pfd[1]);
        double gbs = -1;
        ssize_t got = read(pfd[0], &gbs, sizeof gbs);
        close(pfd[0]);
        int ok = 1;
        for (int r = 0; r < 2; r++) {
            int st;
            waitpid(kids[r], &st, 0);
            ok = ok && WIFEXITED(st) && WEXITSTATUS(st) == 0;
        }
        if (got == (ssize_t)sizeof gbs && ok)
            printf("%-52s %8.2f GB/s (%.0f%% of memcpy)\n", configs[c].name, gbs, 100 * gbs / memcpy_gbs);
        else
            printf("%-52s   failed\n", configs[c].name);
        fflush(stdout);
    }
    return 0;
}
