/* test_dp_allreduce.c: the data-parallel group's uncompressed all-reduce
 * (runtime/dp/group.c) between forked ranks on 127.0.0.1.
 *
 *  - layouts: S=2 x D=2 (two groups at once, rank = stage x D + replica, and
 *    rank = replica x S + stage), D=3 (recursive doubling's fold), D=4;
 *  - both algorithms and the automatic choice, sizes 0 .. 1.2 M floats, tiny
 *    ring segments (the 64-segment cap), chunks shorter than D;
 *  - sums exact (integer-valued inputs), means, and every member holding
 *    the same bits on random inputs (a digest summed over the group);
 *  - a member that passes another length: every member fails with an error
 *    naming the mismatch or the lost peer, nobody hangs;
 *  - broadcast; hosts from the members' host names (D=4);
 *  - non-blocking all-reduces, three in flight at once, driven by test;
 *  - a member killed or frozen (SIGSTOP) mid-call: the others fail naming it
 *    (the transport's failure detection and peer timeout). */
#include <math.h>
#include <signal.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/mem.h"
#include "base/rng.h"
#include "runtime/dp/group.h"
#include "tests/check.h"
#include "tests/runtime/dp/dp_dump.h"   /* OK() */
#include "tests/runtime/dp/dp_fork.h"


typedef struct {
    int D;
    int mismatch;
    int victim_signal;   /* SIGKILL or SIGSTOP: the last member sends it to itself mid-call */
    pz_dp_layout layout;
} scen;

/* integer-valued inputs: any summation order gives the exact sum */
static float ival(int replica, size_t i, int round) { return (float)((int)(pz_splitmix64(i * 31 + (size_t)round) % 201) - 100 + replica); }

static void check_sums(pz_dp_group *g, size_t n, pz_dp_algo algo, int round, int mean) {
    float *x = xmalloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = ival(g->me, i, round);
    OK(pz_dp_allreduce(g, x, n, mean, algo));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double want = 0;
        for (int r = 0; r < g->n; r++) want += ival(r, i, round);
        float w = mean ? (float)want / (float)g->n : (float)want;
        if (x[i] != w && bad++ < 3)
            CHECK(0, "n=%zu algo=%d mean=%d: element %zu is %g, want %g", n, (int)algo, mean, i, x[i], w);
    }
    CHECK(bad == 0, "n=%zu algo=%d: %zu wrong elements", n, (int)algo, bad);
    free(x);
}

/* three all-reduces in flight at once, driven by test only, in an order
 * that differs between members; then one finished by wait */
static void check_async(pz_dp_group *g, int round) {
    static const size_t sizes[3] = {300001, 70000, 1234567};
    float *x[3];
    pz_dp_op *op[3];
    int done[3] = {0, 0, 0}, left = 3;
    size_t old_seg = g->seg_bytes;
    g->seg_bytes = 64 << 10;
    for (int k = 0; k < 3; k++) {
        x[k] = xmalloc(sizes[k] * sizeof(float));
        for (size_t i = 0; i < sizes[k]; i++) x[k][i] = ival(g->me, i, round + k);
        OK(pz_dp_allreduce_start(g, x[k], sizes[k], k == 1, PZ_DP_RING, &op[k]));
    }
    for (long spins = 0; left > 0 && spins < 100000000L; spins++) {
        int k = (int)((spins + g->me) % 3);
        if (done[k]) continue;
        OK(pz_dp_op_test(op[k], &done[k]));
        if (done[k]) left--;
    }
    CHECK(left == 0, "async all-reduces did not finish");
    for (int k = 0; k < 3; k++) {
        size_t bad = 0;
        for (size_t i = 0; i < sizes[k]; i++) {
            double want = 0;
            for (int r = 0; r < g->n; r++) want += ival(r, i, round + k);
            float w = k == 1 ? (float)want / (float)g->n : (float)want;
            bad += x[k][i] != w;
        }
        CHECK(bad == 0, "async all-reduce %d: %zu wrong elements", k, bad);
        free(x[k]);
    }
    float *y = xmalloc(5000 * sizeof(float));
    for (size_t i = 0; i < 5000; i++) y[i] = ival(g->me, i, round + 3);
    pz_dp_op *w = NULL;
    OK(pz_dp_allreduce_start(g, y, 5000, 0, PZ_DP_RING, &w));
    OK(pz_dp_op_wait(w));
    for (size_t i = 0; i < 5000; i++) {
        double want = 0;
        for (int r = 0; r < g->n; r++) want += ival(r, i, round + 3);
        if (y[i] != (float)want) {
            CHECK(0, "waited all-reduce: element %zu is %g, want %g", i, y[i], want);
            break;
        }
    }
    free(y);
    g->seg_bytes = old_seg;
}

/* random inputs: every member must end with the same bits */
static void check_identical(pz_dp_group *g, pz_transport *t, size_t n, pz_dp_algo algo) {
    float *x = xmalloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)((double)(pz_splitmix64(i ^ ((uint64_t)g->me << 40)) >> 11) * 0x1p-53 - 0.5);
    OK(pz_dp_allreduce(g, x, n, 1, algo));
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &x[i], 4);
        h = pz_splitmix64(h ^ b);
    }
    /* every rank of the world adds its digest's halves; the groups' members
     * agree when each sum is D x its own halves (checked per group below) */
    double v[2 * 8] = {0};
    int grp = g->ranks[0];   /* a group by its first rank (< 8 here) */
    v[2 * grp] = (double)(h & 0xffffffffu);
    v[2 * grp + 1] = (double)(h >> 32);
    OK(pz_transport_allreduce_sum_f64(t, v, 16));
    CHECK(v[2 * grp] == g->n * (double)(h & 0xffffffffu) && v[2 * grp + 1] == g->n * (double)(h >> 32),
          "n=%zu algo=%d: members of the group hold different results", n, (int)algo);
    free(x);
}

static int child(int rank, int world, int port, void *arg) {
    const scen *s = arg;
    static char tag[32];
    snprintf(tag, sizeof tag, "[rank %d] ", rank);
    check_tag = tag;
    check_fatal = 1;
    pz_transport *t = NULL;
    OK(dp_transport(&t, rank, world, port, s->mismatch || s->victim_signal ? 2.0 : 20.0));
    int ranks[PZ_DP_MAX];
    int S = world / s->D;
    int stage = pz_dp_layout_stage(s->layout, rank, S, s->D);
    pz_dp_layout_ranks(s->layout, stage, S, s->D, ranks);
    pz_dp_group g = {0};
    OK(pz_dp_group_init(&g, t, rank, ranks, s->D));
    g.net_only = 1;   /* the transport's algorithms (test_dp_shm.c: the shared-memory path) */
    if (s->victim_signal) {
        /* the last member dies (or freezes) after its first sends; the others
         * must fail naming it: within a few seconds when killed, after the
         * 2 s peer timeout when frozen */
        size_t n = 4u << 20;
        float *x = xcalloc(n, sizeof *x);
        if (g.me == s->D - 1) {
            pz_request *r = NULL;
            pz_dp_post(&g, 1, 0, PZ_DP_KIND_RING, 0, x, (n / (size_t)s->D) * sizeof(float), &r);
            raise(s->victim_signal);
            for (;;) pause();   /* SIGSTOP: until the parent kills it */
        }
        double t0 = pz_now();
        pz_status st = pz_dp_allreduce(&g, x, n, 0, PZ_DP_RING);
        char want[32];
        snprintf(want, sizeof want, "rank %d", ranks[s->D - 1]);
        const char *e = pz_last_error();
        /* member 0 receives from the victim (its left neighbour in the ring)
         * and names it; the others wait on a member that itself waits on the
         * victim, and may lose it or time out on it first (see group.h) */
        CHECK(st == PZ_ERR_PEER && (g.me != 0 || strstr(e, want) != NULL),
              "%s: %s (%s)", s->victim_signal == SIGKILL ? "killed member" : "frozen member", pz_status_name(st), e);
        CHECK(pz_now() - t0 < 15, "detected after %.1f s", pz_now() - t0);
        fprintf(stderr, "[rank %d] expected error after %.1f s: %s\n", rank, pz_now() - t0, e);
        free(x);
        pz_dp_group_free(&g);
        pz_transport_close(t, 1);
        return check_summary("dp-victim");
    }
    if (s->mismatch) {
        /* the last member sums one element more than the others */
        size_t n = 100000 + (g.me == s->D - 1);
        float *x = xcalloc(n, sizeof *x);
        pz_status st = pz_dp_allreduce(&g, x, n, 0, PZ_DP_RING);
        CHECK(st == PZ_ERR_PEER, "mismatched lengths: %s (%s)", pz_status_name(st), pz_last_error());
        const char *e = pz_last_error();
        CHECK(strstr(e, "expected") || strstr(e, "larger than the receive buffer") || strstr(e, "lost rank") ||
                  strstr(e, "no answer"),
              "mismatch message names the problem: %s", e);
        fprintf(stderr, "[rank %d] expected error: %s\n", rank, e);
        free(x);
        pz_dp_group_free(&g);
        pz_transport_close(t, 1);
        return check_summary("dp-mismatch");
    }
    static const size_t sizes[] = {0, 1, 2, 3, 5, 1000, 16389, 300001};
    int round = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (int a = 0; a <= 2; a++)
            check_sums(&g, sizes[k], (pz_dp_algo)a, round++, k % 2);
    /* the 64-segment cap and segments of uneven length */
    g.seg_bytes = 4096;
    check_sums(&g, 1234567, PZ_DP_RING, round++, 0);
    check_sums(&g, 40000, PZ_DP_RING, round++, 1);
    g.seg_bytes = PZ_DP_SEG_BYTES;
    /* waits that poll before they wait */
    g.spin_s = 1e-3;
    check_sums(&g, 70000, PZ_DP_RING, round++, 0);
    check_sums(&g, 700, PZ_DP_RDOUBLING, round++, 1);
    g.spin_s = 0;
    /* broadcast from the last member */
    float bc[777];
    for (int i = 0; i < 777; i++) bc[i] = g.me == s->D - 1 ? (float)i * 0.25f : -1.0f;
    OK(pz_dp_broadcast(&g, s->D - 1, bc, 777));
    int bad_bc = 0;
    for (int i = 0; i < 777; i++) bad_bc += bc[i] != (float)i * 0.25f;
    CHECK(bad_bc == 0, "broadcast: %d wrong elements", bad_bc);
    CHECK_STATUS(pz_dp_broadcast(&g, s->D, bc, 777), PZ_ERR_ARG, "root");
    round++;   /* the broadcast counts as a collective */
    check_async(&g, round);
    round += 4;
    check_identical(&g, t, 100003, PZ_DP_RING);
    check_identical(&g, t, 5001, PZ_DP_RDOUBLING);
    CHECK(g.seq == (uint32_t)round + 2, "collective count %u", g.seq);
    /* replicas' agreement: the same bytes pass, one flipped bit on the last
     * member is named by every member, and so is another length */
    float p[1000];
    for (int i = 0; i < 1000; i++) p[i] = (float)i * 0.5f;
    OK(pz_dp_check_identical(&g, p, sizeof p, "parameters"));
    if (g.me == s->D - 1) p[123] = -p[123];
    char want[64];
    snprintf(want, sizeof want, "rank %d holds CRC-32C", ranks[s->D - 1]);
    CHECK_STATUS(pz_dp_check_identical(&g, p, sizeof p, "parameters"), PZ_ERR_PEER, want);
    CHECK_STATUS(pz_dp_check_identical(&g, p, g.me == s->D - 1 ? 8 : 12, "moments"), PZ_ERR_PEER, "8 bytes");
    if (s->D == 4) {
        /* hosts from names: 2 x 2; all on one; interleaved or uneven refused */
        static const char *const names[4][4] = {{"hA", "hA", "hB", "hB"}, {"h", "h", "h", "h"},
                                               {"hA", "hB", "hA", "hB"}, {"hA", "hA", "hA", "hB"}};
        int H = -1;
        OK(pz_dp_group_hosts(&g, names[0][g.me], &H));
        CHECK(H == 2, "hosts %d, want 2", H);
        OK(pz_dp_group_hosts(&g, names[1][g.me], &H));
        CHECK(H == 1, "hosts %d, want 1", H);
        CHECK_STATUS(pz_dp_group_hosts(&g, names[2][g.me], &H), PZ_ERR_ARG, "hA holds members that are not consecutive (rank 2)");
        CHECK_STATUS(pz_dp_group_hosts(&g, names[3][g.me], &H), PZ_ERR_ARG, "3 members on host hA, which does not divide");
        OK(pz_dp_group_hosts(&g, NULL, &H));   /* this machine's name: one host */
        CHECK(H == 1, "hosts %d on one machine", H);
    }
    pz_dp_group_free(&g);
    /* argument errors */
    int dup[2] = {rank, rank}, other[1] = {(rank + 1) % world};
    CHECK_STATUS(pz_dp_group_init(&g, t, rank, dup, 2), PZ_ERR_ARG, "twice");
    CHECK_STATUS(pz_dp_group_init(&g, t, rank, other, 1), PZ_ERR_ARG, "not a member");
    CHECK_STATUS(pz_dp_group_init(&g, t, rank, ranks, 0), PZ_ERR_ARG, "members");
    pz_dp_group_free(&g);
    pz_transport_close(t, 0);
    return check_summary("dp-allreduce");
}

int main(void) {
    int ok = 1;
    scen s22 = {2, 0, 0, PZ_DP_LAYOUT_CONTIGUOUS}, s22s = {2, 0, 0, PZ_DP_LAYOUT_STRIDED}, s3 = {3, 0, 0, 0},
         s4 = {4, 0, 0, 0}, bad = {2, 1, 0, 0}, killed = {3, 0, SIGKILL, 0}, frozen = {3, 0, SIGSTOP, 0};
    ok &= dp_fork_run("all-reduce, S=2 x D=2", 4, 60, child, &s22);
    ok &= dp_fork_run("all-reduce, S=2 x D=2, replicas' pipelines contiguous", 4, 60, child, &s22s);
    ok &= dp_fork_run("all-reduce, D=3", 3, 60, child, &s3);
    ok &= dp_fork_run("all-reduce, D=4", 4, 60, child, &s4);
    ok &= dp_fork_run("all-reduce, mismatched lengths fail", 2, 30, child, &bad);
    ok &= dp_fork_run_victim("all-reduce, a killed member is named", 3, 30, child, &killed, 2);
    ok &= dp_fork_run_victim("all-reduce, a frozen member is named", 3, 30, child, &frozen, 2);
    printf("test_dp_allreduce: %s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
