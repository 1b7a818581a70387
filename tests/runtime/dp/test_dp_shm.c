/* test_dp_shm.c: the data-parallel all-reduce's shared-memory path
 * (runtime/dp/shm.c) between forked ranks on 127.0.0.1.
 *
 *  - D = 2 and D = 3: the same bits as the network's ring (D = 2: and as
 *    recursive doubling) on random inputs, sums and means, sizes 1 .. 300001,
 *    pieces of 4 KiB (many rounds, ring chunks cut across pieces), three
 *    non-blocking all-reduces in flight waited for out of order; every
 *    member holds the same bytes; D = 2 through the single copy (where the
 *    kernel allows process_vm_readv between the ranks; the reason is printed
 *    where not) and through the two copies (shm_copy);
 *  - a member that passes another length: both fail naming the mismatch;
 *  - an offer naming no segment here (another host): the network, same sums;
 *    an offer whose sizes do not fit: PZ_ERR_PEER naming the offer;
 *  - a member frozen (SIGSTOP) before the set-up or after it (D = 2: the
 *    single copy's wait; D = 3: the two copies'): the others fail naming it
 *    within --peer-timeout;
 *  - a segment a killed member 0 left (its pid gone) is removed by the next
 *    set-up, one of a live process is not;
 *  - D = 2 where the kernel refuses process_vm_readv/writev with EPERM (a
 *    seccomp filter, tests/runtime/dp/no_cma.c) to both members or to member
 *    1 only: both fall back to the two copies, the mode names the refusal,
 *    and the sums keep the network's bits (which the single copy gives). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/bytes.h"
#include "base/clock.h"
#include "base/mem.h"
#include "base/rng.h"
#include "runtime/dp/group.h"
#include "runtime/dp/shm.h"
#include "tests/check.h"
#include "tests/runtime/dp/dp_dump.h"   /* OK() */
#include "tests/runtime/dp/dp_fork.h"
#include "tests/runtime/dp/no_cma.h"

typedef enum { SAME_BITS, MISMATCH, NO_SEGMENT, BAD_OFFER, FROZEN_BEFORE, FROZEN_AFTER, REFUSED_BOTH, REFUSED_ONE } what;

static void fill(float *x, size_t n, int me, int round) {
    for (size_t i = 0; i < n; i++) {
        uint64_t h = pz_splitmix64(i * 7919 + (uint64_t)round * 104729 + ((uint64_t)me << 40));
        x[i] = (float)((double)(h >> 11) * 0x1p-53 - 0.5) * (float)(1 << (h & 7));
    }
}

/* the shared-memory path against the network's on the same inputs */
static void same_bits(pz_dp_group *g, size_t n, int mean, pz_dp_algo algo, int round) {
    float *x = xmalloc(n * sizeof *x + 1), *ref = xmalloc(n * sizeof *ref + 1);
    fill(x, n, g->me, round);
    memcpy(ref, x, n * sizeof *x);
    g->net_only = 1;
    OK(pz_dp_allreduce(g, ref, n, mean, algo));
    g->net_only = 0;
    OK(pz_dp_allreduce(g, x, n, mean, algo));
    CHECK(memcmp(x, ref, n * sizeof *x) == 0, "D=%d n=%zu mean=%d algo=%d: not the network's bits", g->n, n, mean,
          (int)algo);
    OK(pz_dp_check_identical(g, x, n * sizeof *x, "the shared-memory sum"));
    free(x);
    free(ref);
}

static void in_flight(pz_dp_group *g) {
    static const size_t n[3] = {5000, 300001, 70000};
    float *x[3], *ref[3];
    pz_dp_op *op[3];
    for (int k = 0; k < 3; k++) {
        x[k] = xmalloc(n[k] * sizeof(float));
        ref[k] = xmalloc(n[k] * sizeof(float));
        fill(x[k], n[k], g->me, 100 + k);
        memcpy(ref[k], x[k], n[k] * sizeof(float));
    }
    g->net_only = 1;
    for (int k = 0; k < 3; k++) OK(pz_dp_allreduce(g, ref[k], n[k], k == 1, PZ_DP_RING));
    g->net_only = 0;
    for (int k = 0; k < 3; k++) OK(pz_dp_allreduce_start(g, x[k], n[k], k == 1, PZ_DP_RING, &op[k]));
    int done = 0;
    OK(pz_dp_op_test(op[2], &done));   /* the ops before it first: not done unless they are */
    if (done) op[2] = NULL;
    OK(pz_dp_op_wait(op[1]));
    OK(pz_dp_op_wait(op[0]));
    if (op[2]) OK(pz_dp_op_wait(op[2]));
    for (int k = 0; k < 3; k++) {
        CHECK(memcmp(x[k], ref[k], n[k] * sizeof(float)) == 0, "in flight, op %d: not the network's bits", k);
        free(x[k]);
        free(ref[k]);
    }
}

/* member 0 plays a forged set-up by hand: an offer, member 1's answer */
static void forged_offer(pz_dp_group *g, int fits) {
    enum { L = PZ_DP_SHM_NAME_LEN };
    uint8_t off[L + 8 + 8 + 4 + 16 + 1] = {0}, a = 9;
    snprintf((char *)off, L, "/pz-dp-%d-%032x", (int)getpid(), 0);
    size_t slot = PZ_DP_SHM_SLOT_BYTES, total = 8192 + 4 * slot;
    pz_put_u64(off + L, fits ? total : total + 1);
    pz_put_u64(off + L + 8, slot);
    pz_put_u32(off + L + 16, 2);
    off[sizeof off - 1] = 1;
    pz_request *r = NULL;
    OK(pz_dp_post(g, 1, 1, PZ_DP_KIND_SHM, 0, off, sizeof off, &r));
    OK(pz_dp_wait(g, r, NULL));
    OK(pz_dp_post(g, 0, 1, PZ_DP_KIND_SHM, 1, &a, 1, &r));
    size_t got = 0;
    OK(pz_dp_wait_recv(g, r, &got));
    CHECK(got == 1 && a == (fits ? 0 : 2), "member 1 answered %u to a%s offer", a, fits ? " fitting" : " bad");
    if (!fits) return;
    uint8_t v = 0;   /* the network */
    OK(pz_dp_post(g, 1, 1, PZ_DP_KIND_SHM, 2, &v, 1, &r));
    OK(pz_dp_wait(g, r, NULL));
    g->seq++;
}

static int errors(pz_dp_group *g, what w, int victim) {
    float x[1000];
    fill(x, 1000, g->me, 0);
    if (w == MISMATCH) {
        CHECK_STATUS(pz_dp_allreduce(g, x, g->me ? 999 : 1000, 0, PZ_DP_RING), PZ_ERR_PEER, "mismatched calls");
        return 0;
    }
    if (w == NO_SEGMENT || w == BAD_OFFER) {
        if (g->me == 0) {
            forged_offer(g, w == NO_SEGMENT);
            g->net_only = 1;   /* decided by hand: the network */
            if (w == NO_SEGMENT) OK(pz_dp_allreduce(g, x, 1000, 0, PZ_DP_RING));
        } else if (w == NO_SEGMENT) {
            float ref[1000];
            fill(ref, 1000, 0, 0);
            for (int i = 0; i < 1000; i++) ref[i] += x[i];
            OK(pz_dp_allreduce(g, x, 1000, 0, PZ_DP_RING));
            CHECK(!pz_dp_shm_active(g) && memcmp(x, ref, sizeof x) == 0, "no segment: not the network's sum");
        } else {
            CHECK_STATUS(pz_dp_allreduce(g, x, 1000, 0, PZ_DP_RING), PZ_ERR_PEER,
                         "rank 0 offered a size that does not fit its slots");
        }
        return 0;
    }
    /* frozen: the last member stops itself */
    if (w == FROZEN_AFTER) OK(pz_dp_allreduce(g, x, 1000, 0, PZ_DP_RING));
    if (g->me == victim) {
        raise(SIGSTOP);
        for (;;) pause();
    }
    double t0 = pz_now();
    char want[32];
    snprintf(want, sizeof want, "rank %d", victim);
    CHECK_STATUS(pz_dp_allreduce(g, x, 1000, 0, PZ_DP_RING), PZ_ERR_PEER, want);
    CHECK(pz_now() - t0 < 10, "named after %.1f s", pz_now() - t0);
    return 1;
}

/* a segment's name as a member 0 of pid `pid` would make it; made here */
static void leftover(char *name, size_t cap, int pid) {
    snprintf(name, cap, "/pz-dp-%d-%032x", pid, 7);
    int fd = shm_open(name, O_CREAT | O_RDWR, 0600);
    CHECK(fd >= 0, "shm_open %s", name);
    if (fd >= 0) close(fd);
}

static int exists(const char *name) {
    int fd = shm_open(name, O_RDWR, 0);
    if (fd >= 0) close(fd);
    return fd >= 0;
}

/* the kernel refuses the single copy (to both members, or to member 1 only,
 * whose peer can then read it but not be read): the two copies, the same bits */
static void refused(pz_dp_group *g, int both) {
    int round = 500;
    for (int mean = 0; mean <= 1; mean++) {
        same_bits(g, 300001, mean, PZ_DP_RING, round++);
        same_bits(g, 1000, mean, PZ_DP_AUTO, round++);
    }
    in_flight(g);
    const char *mode = pz_dp_shm_mode(g);
    int here = both || g->me == 1;
    CHECK(pz_dp_shm_active(g) && strncmp(mode, "two copies", 10) == 0 && strstr(mode, "no single copy"),
          "refused: %s", mode);
    CHECK(here ? strstr(mode, strerror(EPERM)) && strstr(mode, "ptrace_scope or a seccomp filter)")
               : strstr(mode, "rank 1 could not reach") != NULL,
          "refused%s: the mode does not name why: %s", here ? " here" : " to the peer", mode);
    printf("dp-shm: refused to %s, member %d: %s\n", both ? "both" : "member 1", g->me, mode);
}

static int child(int rank, int world, int port, void *arg) {
    what w = (what)(size_t)arg;
    static char tag[32];
    snprintf(tag, sizeof tag, "[rank %d] ", rank);
    check_tag = tag;
    check_fatal = 1;
    pz_transport *t = NULL;
    pz_dp_group g = {0};
    char why[120];
    if (w == REFUSED_BOTH || (w == REFUSED_ONE && rank == 1))
        CHECK(no_cma_install(why, sizeof why) == 0, "%s", why);
    OK(dp_world_group(&t, &g, rank, world, port, w == SAME_BITS ? 20.0 : 2.0));
    int failed = 0;
    if (w == SAME_BITS) {
        static const size_t sizes[] = {1, 2, 5, 1000, 16389, 300001};
        int round = 0;
        char dead[80] = "", live[80] = "";
        if (rank == 0 && world == 2) {
            pid_t p = fork();   /* a pid that is gone */
            if (p == 0) _exit(0);
            waitpid(p, NULL, 0);
            leftover(dead, sizeof dead, (int)p);
            leftover(live, sizeof live, (int)getppid());
        }
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
            for (int mean = 0; mean <= 1; mean++) {
                same_bits(&g, sizes[k], mean, PZ_DP_AUTO, round++);
                same_bits(&g, sizes[k], mean, PZ_DP_RING, round++);
            }
        CHECK(pz_dp_shm_active(&g), "the shared-memory path was not taken");
        const char *mode = pz_dp_shm_mode(&g);
        CHECK(world == 2 || strncmp(mode, "two copies", 10) == 0, "D=%d runs %s", world, mode);
        if (rank == 0) printf("dp-shm: D=%d: %s\n", world, mode);
        if (dead[0]) {
            CHECK(!exists(dead) && exists(live), "left over: %s removed %d, %s kept %d", dead, !exists(dead), live,
                  exists(live));
            shm_unlink(dead);
            shm_unlink(live);
        }
        in_flight(&g);
        /* pieces of 4 KiB: many rounds, the ring's chunks cut across pieces */
        pz_dp_group_free(&g);
        int ranks[3] = {0, 1, 2};
        OK(pz_dp_group_init(&g, t, rank, ranks, world));
        g.shm_slot_bytes = 4096;
        same_bits(&g, 40000, 1, PZ_DP_RING, round++);
        same_bits(&g, 123457, 0, PZ_DP_RING, round++);
        in_flight(&g);
        if (world == 2) {   /* the two copies where the single copy runs by default */
            pz_dp_group_free(&g);
            OK(pz_dp_group_init(&g, t, rank, ranks, world));
            g.shm_slot_bytes = 4096;
            g.shm_copy = 1;
            same_bits(&g, 40000, 1, PZ_DP_RING, round++);
            same_bits(&g, 123457, 0, PZ_DP_RING, round++);
            same_bits(&g, 1000, 1, PZ_DP_AUTO, round++);
            in_flight(&g);
            CHECK(strncmp(pz_dp_shm_mode(&g), "two copies", 10) == 0, "shm_copy: %s", pz_dp_shm_mode(&g));
        }
    } else if (w == REFUSED_BOTH || w == REFUSED_ONE) {
        refused(&g, w == REFUSED_BOTH);
    } else {
        failed = errors(&g, w, world - 1);
    }
    pz_dp_group_free(&g);
    pz_transport_close(t, failed || w == MISMATCH || w == BAD_OFFER);
    return check_summary("dp-shm");
}

/* whether a filter can be installed here (in a child: it cannot be undone) */
static int seccomp_works(char *why, size_t cap) {
    int fd[2];
    if (pipe(fd) != 0) return 0;
    pid_t p = fork();
    if (p == 0) {
        char w[120] = "";
        int r = no_cma_install(w, sizeof w);
        if (write(fd[1], w, strlen(w)) < 0) r = -1;
        _exit(r == 0 ? 0 : 1);
    }
    close(fd[1]);
    ssize_t n = read(fd[0], why, cap - 1);
    why[n > 0 ? n : 0] = 0;
    close(fd[0]);
    int status = 0;
    waitpid(p, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int main(void) {
    int ok = 1;
    ok &= dp_fork_run("shared memory, D=2: the network's bits", 2, 60, child, (void *)(size_t)SAME_BITS);
    ok &= dp_fork_run("shared memory, D=3: the network's bits", 3, 60, child, (void *)(size_t)SAME_BITS);
    ok &= dp_fork_run("shared memory, mismatched lengths fail", 2, 30, child, (void *)(size_t)MISMATCH);
    ok &= dp_fork_run("shared memory, no segment here: the network", 2, 30, child, (void *)(size_t)NO_SEGMENT);
    ok &= dp_fork_run("shared memory, a bad offer is refused", 2, 30, child, (void *)(size_t)BAD_OFFER);
    ok &= dp_fork_run_victim("shared memory, a member frozen before the set-up is named", 2, 30, child,
                             (void *)(size_t)FROZEN_BEFORE, 1);
    ok &= dp_fork_run_victim("shared memory, a member frozen after it is named", 3, 30, child,
                             (void *)(size_t)FROZEN_AFTER, 2);
    ok &= dp_fork_run_victim("shared memory, D=2: a member frozen after the set-up is named", 2, 30, child,
                             (void *)(size_t)FROZEN_AFTER, 1);
    char why[120] = "";
    if (seccomp_works(why, sizeof why)) {
        ok &= dp_fork_run("shared memory, D=2: single copy refused (EPERM) to both: two copies", 2, 30, child,
                          (void *)(size_t)REFUSED_BOTH);
        ok &= dp_fork_run("shared memory, D=2: single copy refused to member 1: two copies", 2, 30, child,
                          (void *)(size_t)REFUSED_ONE);
    } else {
        printf("skip - single copy refused: %s\n", why);
    }
    printf("test_dp_shm: %s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
