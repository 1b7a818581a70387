/* test_dp_sync.c: the bucketed gradient average (runtime/dp/sync.c) between
 * forked ranks on 127.0.0.1, driven as the executor drives it: arm, the
 * backward's marks falling block by block with compute between them, drain,
 * finish.
 *
 *  - the cut: bucket counts and ranges (top down, the held prefix apart),
 *    the memory plan's bytes against what pz_dp_op_bytes says per bucket;
 *  - D=2: the result is bit for bit the unbucketed pz_dp_allreduce's, on
 *    random floats (a + b commutes, wherever the buckets are cut), with tiny
 *    buckets, one bucket, and a held prefix; a second step on the same sync;
 *  - D=3: every member holds the same bits, close to the exact mean;
 *  - the overlap, over a simulated 200 Mbit/s link: the first bucket starts
 *    before the backward ends, and a good part of the sync time is hidden
 *    (sync_s - the time spent waiting in drain and finish), where a sync
 *    that starts only after the backward hides nothing;
 *  - a sync never armed (no backward reported) averages everything in finish;
 *  - compressed (pz_dp_sync_codec: twophase and allgather, sign and fp16;
 *    hierarchical at D=4 over 2 hosts, sign and fp16, and over 1 and 4):
 *    the buckets driven by the hook give bit for bit what the same
 *    reduction run blocking (pz_dp_creduce_run, the same cut) gives, outputs
 *    and error-feedback state, over 3 steps; on the simulated link the first
 *    compressed bucket starts before the backward ends and part of the sync
 *    is hidden (twophase at D=2; hierarchical at D=4 over 2 hosts, the link
 *    between the hosts). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/mem.h"
#include "base/rng.h"
#include "runtime/dp/sync.h"
#include "tests/check.h"
#include "tests/runtime/dp/dp_fork.h"

#define OK(expr)                                                                         \
    do {                                                                                 \
        pz_status s_ = (expr);                                                           \
        CHECK(s_ == PZ_OK, "%s -> %s: %s", #expr, pz_status_name(s_), pz_last_error()); \
    } while (0)

/* random floats of both signs and many magnitudes: sums that round */
static void fill(float *x, size_t n, int member, int round) {
    for (size_t i = 0; i < n; i++) {
        uint64_t h = pz_splitmix64(i * 7919 + (uint64_t)member * 104729 + (uint64_t)round * 1299709);
        x[i] = (float)((double)(h >> 11) / 9007199254740992.0 - 0.5) * (float)(1 << (h & 7));
    }
}

/* One backward over `blocks` equal pieces from the top of grad down, each
 * `compute_s` long, the mark reported after each; then drain and finish. */
static void backward_and_sync(pz_dp_sync *s, int blocks, double compute_s) {
    pz_dp_sync_arm(s);
    for (int k = blocks - 1; k >= 0; k--) {
        double until = pz_now() + compute_s;
        while (pz_now() < until) usleep(500);
        pz_dp_sync_ready(s, s->n * (size_t)k / (size_t)blocks);
    }
    OK(pz_dp_sync_drain(s));
    OK(pz_dp_sync_finish(s));
}

typedef struct {
    int D;
    size_t n, hold, bucket;
    int link;   /* simulated link and compute: the overlap */
    int hosts;  /* > 0: D=4's hierarchical checks (and only those) over this many hosts */
} scen;

static const char *mode_name(pz_dp_mode m) {
    return m == PZ_DP_TWOPHASE ? "twophase" : m == PZ_DP_ALLGATHER ? "allgather" : "hierarchical";
}

/* a compressed reduction of the sync's cut (hierarchical: over `hosts`) */
static pz_dp_creduce *creduce_of(pz_dp_group *g, const scen *sc, pz_dp_mode mode, int hosts, const char *spec) {
    pz_dp_copts o = {mode, 1, 5, mode == PZ_DP_HIERARCHICAL ? hosts : 0, sc->bucket, sc->hold};
    pz_dp_creduce *c = NULL;
    OK(pz_dp_creduce_create(&c, g, spec, &o, sc->n));
    return c;
}

/* the hook-driven buckets against the blocking run of another object with
 * the same cut: the same bits, and the same error feedback */
static void check_compressed(pz_dp_group *g, const scen *sc, pz_dp_mode mode, int hosts, const char *spec) {
    float *x = xmalloc(sc->n * sizeof *x), *ref = xmalloc(sc->n * sizeof *ref);
    pz_dp_creduce *a = creduce_of(g, sc, mode, hosts, spec), *b = creduce_of(g, sc, mode, hosts, spec);
    pz_dp_sync s;
    OK(pz_dp_sync_init(&s, g, x, sc->n, sc->hold, sc->bucket));
    for (int step = 0; step < 3; step++) {
        fill(x, sc->n, g->me, 10 + step);
        memcpy(ref, x, sc->n * sizeof *x);
        OK(pz_dp_creduce_run(b, ref, ref, (uint64_t)step));
        OK(pz_dp_sync_codec(&s, a, (uint64_t)step));
        backward_and_sync(&s, 7, 0.0);
        CHECK(memcmp(x, ref, sc->n * sizeof *x) == 0, "%s %s (%d hosts), step %d: the bucketed sync's result is not "
              "the blocking run's", mode_name(mode), spec, hosts, step);
    }
    uint8_t *ba = NULL, *bb = NULL;
    size_t la = 0, lb = 0;
    OK(pz_dp_creduce_save(a, &ba, &la));
    OK(pz_dp_creduce_save(b, &bb, &lb));
    CHECK(la == lb && memcmp(ba, bb, la) == 0, "%s: the error feedback differs from the blocking run's", spec);
    OK(pz_dp_check_identical(g, x, sc->n * sizeof *x, "the compressed mean"));
    pz_dp_copts other = {mode, 1, 5, mode == PZ_DP_HIERARCHICAL ? hosts : 0, sc->n / 2 + 1, sc->hold};   /* another cut */
    pz_dp_creduce *c = NULL;
    OK(pz_dp_creduce_create(&c, g, spec, &other, sc->n));
    CHECK(pz_dp_creduce_load(c, ba, la) == PZ_ERR_FORMAT && strstr(pz_last_error(), "--dp-bucket-mb"),
          "a blob of another cut: %s", pz_last_error());
    CHECK(pz_dp_sync_codec(&s, c, 0) == PZ_ERR_ARG, "a reduction of another cut");
    pz_dp_creduce_free(c);
    free(ba);
    free(bb);
    pz_dp_sync_free(&s);
    pz_dp_creduce_free(a);
    pz_dp_creduce_free(b);
    free(x);
    free(ref);
}

static void check_same_as_unbucketed(pz_dp_group *g, const scen *sc, int round) {
    float *x = xmalloc(sc->n * sizeof *x), *ref = xmalloc(sc->n * sizeof *ref);
    fill(x, sc->n, g->me, round);
    memcpy(ref, x, sc->n * sizeof *x);
    OK(pz_dp_allreduce(g, ref, sc->n, 1, PZ_DP_AUTO));
    pz_dp_sync s;
    OK(pz_dp_sync_init(&s, g, x, sc->n, sc->hold, sc->bucket));
    CHECK(s.nb == pz_dp_sync_count(sc->n, sc->hold, sc->bucket), "bucket count");
    backward_and_sync(&s, 7, 0.0);
    if (g->n == 2) {
        CHECK(memcmp(x, ref, sc->n * sizeof *x) == 0, "D=2, %zu floats in buckets of %zu (hold %zu): not the "
              "unbucketed all-reduce's bits", sc->n, sc->bucket, sc->hold);
    } else {
        double worst = 0;
        for (size_t i = 0; i < sc->n; i++) worst = fmax(worst, fabs((double)x[i] - ref[i]));
        /* terms up to 64: the two sums differ by a few roundings of about 2^-17 */
        CHECK(worst < 1e-4, "D=%d: bucketed mean off the unbucketed by %g", g->n, worst);
        OK(pz_dp_check_identical(g, x, sc->n * sizeof *x, "the bucketed mean"));
    }
    CHECK(s.sent > 0 && s.sync_s > 0, "figures: sent %llu, sync %g s", (unsigned long long)s.sent, s.sync_s);
    pz_dp_sync_free(&s);
    free(x);
    free(ref);
}

/* compressed buckets (fp16: half the ring's bytes; twophase, or
 * hierarchical over sc->hosts with the link between the hosts) move as the
 * ring's do: the first starts before the backward's end, and most of the
 * sync is hidden */
static void check_overlap_compressed(pz_dp_group *g, const scen *sc, pz_dp_mode mode) {
    float *x = xmalloc(sc->n * sizeof *x);
    pz_dp_creduce *c = creduce_of(g, sc, mode, sc->hosts, "fp16");
    pz_dp_sync s;
    fill(x, sc->n, g->me, 9);
    OK(pz_dp_sync_init(&s, g, x, sc->n, 0, sc->bucket));
    OK(pz_dp_sync_codec(&s, c, 0));
    backward_and_sync(&s, 8, 0.04);
    printf("%soverlap, compressed (%s): sync %.0f ms, %.0f ms of it hidden, %llu bytes sent\n", check_tag,
           mode_name(mode), 1e3 * s.sync_s, 1e3 * s.hidden_s, (unsigned long long)s.sent);
    CHECK(s.b[0].t_start < s.t_backward_end - 0.1, "compressed: the first bucket started %.3f s before the backward's "
          "end", s.t_backward_end - s.b[0].t_start);
    CHECK(s.hidden_s > 0.3 * s.sync_s, "compressed: %.3f s of %.3f s hidden", s.hidden_s, s.sync_s);
    /* the reduction's messages (hierarchical: the leaders' between hosts, none from the others) */
    int sends = mode != PZ_DP_HIERARCHICAL || g->me % (g->n / sc->hosts) == 0;
    CHECK(sends ? s.sent > sc->n / 2 : s.sent == 0, "compressed: %llu bytes sent", (unsigned long long)s.sent);
    pz_dp_sync_free(&s);
    pz_dp_creduce_free(c);
    free(x);
}

/* The overlap: 4 buckets of 1 MiB on a 200 Mbit/s link (about 160 ms of
 * ring traffic), a backward of 8 blocks of 40 ms. */
static void check_overlap(pz_dp_group *g, const scen *sc) {
    pz_dp_group_set_link(g, 0, 200, 1);
    float *x = xmalloc(sc->n * sizeof *x);
    double hidden[2], sync[2];
    for (int late = 0; late < 2; late++) {
        fill(x, sc->n, g->me, 9);
        pz_dp_sync s;
        OK(pz_dp_sync_init(&s, g, x, sc->n, 0, sc->bucket));
        if (late) {   /* the unbucketed way: the backward first, then the whole average */
            backward_and_sync(&s, 1, 8 * 0.04);
        } else {
            backward_and_sync(&s, 8, 0.04);
            CHECK(s.b[0].t_start < s.t_backward_end - 0.1, "the first bucket started at %.3f s, the backward "
                  "ended at %.3f s", s.b[0].t_start - s.t_first, s.t_backward_end - s.t_first);
        }
        hidden[late] = s.hidden_s, sync[late] = s.sync_s;
        pz_dp_sync_free(&s);
    }
    printf("%soverlap: bucketed sync %.0f ms, %.0f ms of it hidden; after the backward: %.0f ms, %.0f ms hidden\n",
           check_tag, 1e3 * sync[0], 1e3 * hidden[0], 1e3 * sync[1], 1e3 * hidden[1]);
    CHECK(hidden[0] > 0.3 * sync[0], "bucketed: %.3f s of %.3f s hidden", hidden[0], sync[0]);
    CHECK(hidden[1] < 0.2 * sync[1], "after the backward: %.3f s of %.3f s hidden", hidden[1], sync[1]);
    check_overlap_compressed(g, sc, PZ_DP_TWOPHASE);
    free(x);
}

static int child(int rank, int world, int port, void *arg) {
    const scen *sc = arg;
    static char tag[32];
    snprintf(tag, sizeof tag, "[rank %d] ", rank);
    check_tag = tag, check_fatal = 1;
    pz_transport *t = NULL;
    pz_dp_group g = {0};
    OK(dp_world_group(&t, &g, rank, world, port, 20.0));
    if (sc->link && sc->hosts) {   /* the simulated link between the hosts only, as --dp-hosts */
        pz_dp_group_set_link(&g, sc->hosts, 100, 1);
        check_overlap_compressed(&g, sc, PZ_DP_HIERARCHICAL);
    } else if (sc->link) {
        check_overlap(&g, sc);
    } else if (sc->hosts) {
        check_compressed(&g, sc, PZ_DP_HIERARCHICAL, 2, "sign");
        check_compressed(&g, sc, PZ_DP_HIERARCHICAL, 2, "fp16");
        check_compressed(&g, sc, PZ_DP_HIERARCHICAL, 1, "sign");   /* one host: the leaders' exchange alone */
        check_compressed(&g, sc, PZ_DP_HIERARCHICAL, 4, "sign");   /* hosts of one: no host mean */
    } else {
        check_same_as_unbucketed(&g, sc, 1);
        check_same_as_unbucketed(&g, sc, 2);   /* the sync's second step */
        check_compressed(&g, sc, PZ_DP_TWOPHASE, 0, "sign");
        check_compressed(&g, sc, PZ_DP_ALLGATHER, 0, "sign");
        check_compressed(&g, sc, PZ_DP_TWOPHASE, 0, "fp16");
        /* never armed: finish averages everything */
        float *x = xmalloc(sc->n * sizeof *x), *ref = xmalloc(sc->n * sizeof *ref);
        fill(x, sc->n, rank, 3);
        memcpy(ref, x, sc->n * sizeof *x);
        OK(pz_dp_allreduce(&g, ref, sc->n, 1, PZ_DP_AUTO));
        pz_dp_sync s;
        OK(pz_dp_sync_init(&s, &g, x, sc->n, sc->hold, sc->bucket));
        OK(pz_dp_sync_finish(&s));
        CHECK(world > 2 || memcmp(x, ref, sc->n * sizeof *x) == 0, "finish without arm");
        pz_dp_sync_free(&s);
        free(x);
        free(ref);
    }
    pz_dp_group_free(&g);
    pz_transport_close(t, 0);
    return check_summary("dp_sync") ? 1 : 0;
}

/* the cut, without ranks */
static int check_cut(void) {
    check_tag = "[cut] ";
    CHECK(pz_dp_sync_count(100, 0, 30) == 4 && pz_dp_sync_count(100, 40, 30) == 2 + 2 &&
              pz_dp_sync_count(100, 100, 1000) == 1 && pz_dp_sync_count(0, 0, 8) == 0 && pz_dp_sync_count(8, 0, 0) == 0,
          "bucket counts");
    pz_dp_group g = {.n = 3};
    pz_dp_sync s;
    float buf[100];
    CHECK(pz_dp_sync_init(&s, &g, buf, 100, 40, 30) == PZ_OK && s.nb == 4, "init");
    const size_t want[4][2] = {{70, 100}, {40, 70}, {10, 40}, {0, 10}};
    for (int i = 0; i < 4 && i < s.nb; i++)
        CHECK(s.b[i].lo == want[i][0] && s.b[i].hi == want[i][1], "bucket %d is [%zu, %zu), want [%zu, %zu)", i,
              s.b[i].lo, s.b[i].hi, want[i][0], want[i][1]);
    size_t bytes = 4 * sizeof(pz_dp_bucket) + pz_dp_op_bytes(30, 3) * 3 + pz_dp_op_bytes(10, 3);
    CHECK(pz_dp_sync_bytes(100, 40, 30, 3) == bytes, "plan bytes %zu, want %zu", pz_dp_sync_bytes(100, 40, 30, 3), bytes);
    pz_dp_sync_free(&s);
    CHECK(pz_dp_sync_init(&s, &g, buf, 100, 101, 30) != PZ_OK, "a held prefix longer than the buffer");
    CHECK(pz_dp_sync_init(&s, &g, buf, 100, 0, 0) != PZ_OK, "buckets of 0 floats");
    return check_summary("dp_sync cut") == 0;
}

int main(void) {
    int ok = check_cut();
    scen tiny = {2, 100003, 0, 997, 0, 0}, held = {2, 300001, 70000, 40000, 0, 0}, one = {2, 50000, 0, 1 << 20, 0, 0},
         d3 = {3, 200003, 30000, 25000, 0, 0}, link = {2, 1 << 20, 0, 1 << 18, 1, 0},
         hier = {4, 200003, 30000, 25000, 0, 2}, hlink = {4, 1 << 20, 0, 1 << 18, 1, 2};
    ok &= dp_fork_run("sync, D=2, buckets of 997 floats", 2, 60, child, &tiny);
    ok &= dp_fork_run("sync, D=2, a held prefix", 2, 60, child, &held);
    ok &= dp_fork_run("sync, D=2, one bucket", 2, 60, child, &one);
    ok &= dp_fork_run("sync, D=3", 3, 60, child, &d3);
    ok &= dp_fork_run("sync, D=2, overlap on a simulated link", 2, 60, child, &link);
    ok &= dp_fork_run("sync, D=4, hierarchical", 4, 60, child, &hier);
    ok &= dp_fork_run("sync, D=4, hierarchical, overlap on a simulated link between 2 hosts", 4, 60, child, &hlink);
    printf("test_dp_sync: %s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
