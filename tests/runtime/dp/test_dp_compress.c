/* test_dp_compress.c: the compressed data-parallel reductions
 * (runtime/dp/creduce.c) between forked ranks, with what an independent
 * NumPy model needs (tests/runtime/dp/dp_model.py runs this and checks).
 *
 *   test_dp_compress OUTDIR
 *
 * For each configuration (mode, D, hosts, codec spec) every rank runs 50
 * steps on fixed pseudo-random gradients and writes to OUTDIR/<config>/:
 *   meta.txt                      mode D H n steps spec bucket hold
 *   r<rank>_g.npy   (steps, n)    its gradients
 *   r<rank>_out.npy (steps, n)    what the reduction returned
 *   r<rank>_q1.npy  (steps, n)    its all-gather / to-owner messages, decoded
 *                                 by a separate codec object (tap)
 *   r<rank>_q2.npy  (steps, m)    its from-owner messages, decoded (twophase)
 *   r<rank>_ew.npy, r<rank>_es.npy  the residuals after the last step
 * (hierarchical: only the hosts' leaders send compressed messages; their q
 * files hold the leader reduction's messages.)
 * Checked here, in C: the error-feedback state saved after step 25 and
 * loaded into a fresh object gives the same outputs and residuals bit for
 * bit for the remaining steps; blobs of another configuration or damaged
 * ones are refused; stateful codecs, hosts not dividing D and vectors
 * shorter than D are refused; a replica with another vector length or
 * codec makes the others fail with an error; hierarchical (2 hosts x 2) sends at most half
 * of twophase's bytes between hosts at the same codec. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "base/rng.h"
#include "runtime/dp/creduce.h"
#include "runtime/dp/dpmsg.h"
#include "tests/check.h"
#include "tests/runtime/dp/dp_dump.h"
#include "tests/runtime/dp/dp_fork.h"

#define N 1001
#define STEPS 50
#define SAVE_AT 25

typedef struct {
    const char *name;
    pz_dp_mode mode;
    int D, H;
    const char *spec;
    size_t bucket, hold;   /* buckets (pz_dp_buckets; 0: one) */
} config;

/* bucketed: [200, 1001) in buckets of 300 from the top, then [0, 200); with
 * hold 2 the held bucket has fewer floats than D = 3 (empty parts) */
static const config configs[] = {
    {"twophase-fp16-d2", PZ_DP_TWOPHASE, 2, 0, "fp16", 0, 0},
    {"twophase-fp16-d3", PZ_DP_TWOPHASE, 3, 0, "fp16", 0, 0},
    {"twophase-sign-d3", PZ_DP_TWOPHASE, 3, 0, "sign", 0, 0},
    {"twophase-q4-d3", PZ_DP_TWOPHASE, 3, 0, "q4:group=512", 0, 0},
    {"twophase-topk-d2", PZ_DP_TWOPHASE, 2, 0, "topk:0.01", 0, 0},
    {"twophase-jointsq-d3", PZ_DP_TWOPHASE, 3, 0, "jointsq:2", 0, 0},
    {"allgather-fp16-d2", PZ_DP_ALLGATHER, 2, 0, "fp16", 0, 0},
    {"allgather-sign-d3", PZ_DP_ALLGATHER, 3, 0, "sign", 0, 0},
    {"allgather-nuq4-d3", PZ_DP_ALLGATHER, 3, 0, "nuq4:code=elias", 0, 0},
    {"allgather-jointsq-d2", PZ_DP_ALLGATHER, 2, 0, "jointsq:2", 0, 0},
    {"hierarchical-sign-d4h2", PZ_DP_HIERARCHICAL, 4, 2, "sign", 0, 0},
    {"hierarchical-fp16-d4h2", PZ_DP_HIERARCHICAL, 4, 2, "fp16", 0, 0},
    {"bucketed-twophase-sign-d2", PZ_DP_TWOPHASE, 2, 0, "sign", 300, 200},
    {"bucketed-twophase-sign-d3", PZ_DP_TWOPHASE, 3, 0, "sign", 300, 2},
    {"bucketed-twophase-q4-d3", PZ_DP_TWOPHASE, 3, 0, "q4:group=64", 300, 200},
    {"bucketed-allgather-sign-d2", PZ_DP_ALLGATHER, 2, 0, "sign", 300, 200},
    {"bucketed-allgather-fp16-d3", PZ_DP_ALLGATHER, 3, 0, "fp16", 300, 2},
    {"bucketed-hierarchical-sign-d4h2", PZ_DP_HIERARCHICAL, 4, 2, "sign", 300, 200},
};

static const char *g_out;

/* a gradient: uniform in [-1, 1) plus a per-replica bias and a slow drift */
static void gradient(float *g, int rank, int step) {
    for (size_t i = 0; i < N; i++) {
        double u = (double)(pz_splitmix64(((uint64_t)rank << 48) ^ ((uint64_t)step << 24) ^ i) >> 11) * 0x1p-53;
        g[i] = (float)(2 * u - 1 + 0.1 * rank - 0.05 * ((i % 7) == 0) + 0.01 * step / STEPS);
    }
}

static void check_refusals(pz_dp_group *g, pz_dp_creduce *a, const config *cf, const uint8_t *blob, size_t len) {
    pz_dp_copts o = {cf->mode, 1, 7, cf->H, cf->bucket, cf->hold};
    pz_dp_creduce *other = NULL;
    /* another codec */
    OK(pz_dp_creduce_create(&other, g, strcmp(cf->spec, "fp16") ? "fp16" : "sign", &o, N));
    CHECK_STATUS(pz_dp_creduce_load(other, blob, len), PZ_ERR_FORMAT, "another codec");
    pz_dp_creduce_free(other);
    /* another length */
    OK(pz_dp_creduce_create(&other, g, cf->spec, &o, N + 1));
    CHECK_STATUS(pz_dp_creduce_load(other, blob, len), PZ_ERR_FORMAT, "vector length");
    pz_dp_creduce_free(other);
    /* damaged: one flipped bit anywhere is caught by the CRC */
    uint8_t *bad = xmalloc(len);
    memcpy(bad, blob, len);
    bad[len / 2] ^= 4;
    CHECK_STATUS(pz_dp_creduce_load(a, bad, len), PZ_ERR_FORMAT, "CRC");
    CHECK_STATUS(pz_dp_creduce_load(a, bad, len - 1), PZ_ERR_FORMAT, NULL);
    free(bad);
}

/* one configuration on this rank's transport */
static void run_config(pz_transport *t, int rank, const config *cf) {
    check_tag = dp_tag(cf->name, rank);
    pz_dp_group g;
    OK(dp_group_of(&g, t, rank, cf->D));
    pz_dp_copts o = {cf->mode, 1, 7, cf->H, cf->bucket, cf->hold};
    pz_dp_creduce *a = NULL, *b = NULL;
    OK(pz_dp_creduce_create(&a, &g, cf->spec, &o, N));
    dp_tap_ctx tc;
    OK(dp_tap_init(&tc, cf->spec, cf->mode, cf->D, cf->H, rank, N, STEPS, cf->bucket, cf->hold));
    pz_dp_creduce_set_tap(a, dp_tap, &tc);
    float *gs = xmalloc((size_t)STEPS * N * 4), *outs = xmalloc((size_t)STEPS * N * 4), *ob = xmalloc(N * 4);
    uint8_t *blob = NULL;
    size_t blen = 0;
    for (int s = 0; s < STEPS; s++) {
        float *gr = gs + (size_t)s * N, *out = outs + (size_t)s * N;
        gradient(gr, rank, s);
        tc.step = s;
        OK(pz_dp_creduce_run(a, gr, out, (uint64_t)s));
        if (s + 1 == SAVE_AT) {
            OK(pz_dp_creduce_save(a, &blob, &blen));
            OK(pz_dp_creduce_create(&b, &g, cf->spec, &o, N));
            OK(pz_dp_creduce_load(b, blob, blen));
            check_refusals(&g, a, cf, blob, blen);
        } else if (b) {
            /* the restored object, in lockstep: the same bits */
            OK(pz_dp_creduce_run(b, gr, ob, (uint64_t)s));
            CHECK(memcmp(ob, out, N * 4) == 0, "step %d: the restored state gives other outputs", s);
        }
    }
    CHECK(tc.failed == 0, "%d messages failed the tap", tc.failed);
    size_t nw, ns, slo, nw2, ns2, slo2;
    const float *ew = pz_dp_creduce_worker_error(a, &nw), *es = pz_dp_creduce_server_error(a, &slo, &ns);
    const float *ew2 = pz_dp_creduce_worker_error(b, &nw2), *es2 = pz_dp_creduce_server_error(b, &slo2, &ns2);
    size_t held = pz_dp_creduce_bytes(a);
    CHECK(held >= 4 * (nw + ns) && held < (size_t)64 * N * (size_t)cf->D + (1u << 16), "%zu bytes held", held);
    CHECK(nw == nw2 && ns == ns2 && (!nw || memcmp(ew, ew2, nw * 4) == 0) && (!ns || memcmp(es, es2, ns * 4) == 0),
          "the restored object's residuals differ");
    size_t want_ns = tc.sends && cf->mode != PZ_DP_ALLGATHER ? tc.m : 0;
    CHECK(nw == (tc.sends ? (size_t)N : 0) && ns == want_ns && (!ns || slo == tc.lo),
          "residual sizes %zu, %zu at %zu", nw, ns, slo);
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", g_out, cf->name);
    OK(dp_write_npy(dir, rank, "g", STEPS, N, gs));
    OK(dp_write_npy(dir, rank, "out", STEPS, N, outs));
    OK(dp_tap_write(&tc, dir, rank, cf->mode));
    if (tc.sends) {
        OK(dp_write_npy(dir, rank, "ew", 0, nw, ew));
        if (ns) OK(dp_write_npy(dir, rank, "es", 0, ns, es));
    }
    free(blob);
    free(gs);
    free(outs);
    free(ob);
    dp_tap_free(&tc);
    pz_dp_creduce_free(a);
    pz_dp_creduce_free(b);
    pz_dp_group_free(&g);
}

/* hierarchical (2 hosts x 2) against twophase over the same 4 ranks and
 * codec: bytes that leave a host, summed over ranks and steps */
static void run_bytes(pz_transport *t, int rank, const char *spec) {
    static char tagbuf[64];
    snprintf(tagbuf, sizeof tagbuf, "[bytes %s rank %d] ", spec, rank);
    check_tag = tagbuf;
    int ranks[4] = {0, 1, 2, 3};
    pz_dp_group g = {0};
    OK(pz_dp_group_init(&g, t, rank, ranks, 4));
    pz_dp_copts flat = {PZ_DP_TWOPHASE, 1, 7, 0, 0, 0}, hier = {PZ_DP_HIERARCHICAL, 1, 7, 2, 0, 0};
    pz_dp_creduce *f = NULL, *h = NULL;
    OK(pz_dp_creduce_create(&f, &g, spec, &flat, N));
    OK(pz_dp_creduce_create(&h, &g, spec, &hier, N));
    float *gr = xmalloc(N * 4), *out = xmalloc(N * 4);
    for (int s = 0; s < 5; s++) {
        gradient(gr, rank, s);
        OK(pz_dp_creduce_run(f, gr, out, (uint64_t)s));
        OK(pz_dp_creduce_run(h, gr, out, (uint64_t)s));
    }
    double v[2] = {0, 0};
    for (int j = 0; j < 4; j++)
        if (j / 2 != rank / 2) v[0] += (double)pz_dp_creduce_sent_to(f)[j], v[1] += (double)pz_dp_creduce_sent_to(h)[j];
    OK(pz_transport_allreduce_sum_f64(t, v, 2));
    if (rank == 0) printf("inter-host bytes over 5 steps (%s): twophase %.0f, hierarchical %.0f (%.2fx)\n", spec, v[0],
                          v[1], v[1] / v[0]);
    CHECK(v[1] > 0 && v[1] <= 0.5 * v[0], "hierarchical sends %.0f bytes between hosts, twophase %.0f", v[1], v[0]);
    free(gr);
    free(out);
    pz_dp_creduce_free(f);
    pz_dp_creduce_free(h);
    pz_dp_group_free(&g);
}

/* every configuration of group size `world` (a fork per group size: the
 * transport's start-up is most of a configuration's time) */
static int child(int rank, int world, int port, void *arg) {
    (void)arg;
    check_fatal = 1;
    pz_transport *t = NULL;
    OK(dp_transport(&t, rank, world, port, 20.0));
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++)
        if (configs[i].D == world) run_config(t, rank, &configs[i]);
    if (world == 4) {
        run_bytes(t, rank, "sign");
        run_bytes(t, rank, "q4:group=512");
    }
    pz_transport_close(t, 0);
    return check_summary("dp-compress");
}

/* argument errors, and a replica with another vector length */
static int child_errors(int rank, int world, int port, void *arg) {
    int codec_differs = arg != NULL;
    static char tagbuf[32];
    snprintf(tagbuf, sizeof tagbuf, "[errors rank %d] ", rank);
    check_tag = tagbuf;
    check_fatal = 1;
    pz_transport *t = NULL;
    OK(dp_transport(&t, rank, world, port, 3.0));
    int ranks[2] = {0, 1};
    pz_dp_group g = {0};
    OK(pz_dp_group_init(&g, t, rank, ranks, 2));
    pz_dp_copts o = {PZ_DP_TWOPHASE, 1, 7, 0, 0, 0}, h3 = {PZ_DP_HIERARCHICAL, 1, 7, 3, 0, 0}, bad = {(pz_dp_mode)9, 1, 7, 0, 0, 0};
    pz_dp_creduce *c = NULL;
    CHECK_STATUS(pz_dp_creduce_create(&c, &g, "ef(sign)", &o, N), PZ_ERR_ARG, "keeps state");
    CHECK_STATUS(pz_dp_creduce_create(&c, &g, "sign", &h3, N), PZ_ERR_ARG, "do not divide");
    CHECK_STATUS(pz_dp_creduce_create(&c, &g, "sign", &bad, N), PZ_ERR_ARG, "unknown mode");
    CHECK_STATUS(pz_dp_creduce_create(&c, &g, "sign", &o, 1), PZ_ERR_ARG, "at least one per replica");
    CHECK_STATUS(pz_dp_creduce_create(&c, &g, "nosuchcodec", &o, N), PZ_ERR_ARG, NULL);
    /* rank 1 runs with a longer vector, or another codec */
    size_t n = N + (codec_differs ? 0 : (size_t)rank * 10);
    OK(pz_dp_creduce_create(&c, &g, codec_differs && rank == 1 ? "sign" : "q4", &o, n));
    float *x = xcalloc(n, 4);
    pz_status st = pz_dp_creduce_run(c, x, x, 0);
    CHECK(st == PZ_ERR_PEER, "another %s: %s %s", codec_differs ? "codec" : "vector length", pz_status_name(st),
          pz_last_error());
    if (codec_differs) CHECK(strstr(pz_last_error(), "written by codec") || strstr(pz_last_error(), "lost rank") ||
                             strstr(pz_last_error(), "larger than"), "names the codec: %s", pz_last_error());
    fprintf(stderr, "[rank %d] expected error: %s\n", rank, pz_last_error());
    free(x);
    pz_dp_creduce_free(c);
    pz_dp_group_free(&g);
    pz_transport_close(t, 1);
    return check_summary("dp-errors");
}

/* the header check names each field that differs (runtime/dp/dpmsg.c) */
static void check_header(void) {
    pz_dpmsg h = {PZ_DPMSG_TO_OWNER, 3, 2, 1, 9, 334, 333, 5};
    uint8_t b[PZ_DPMSG_HDR + 5] = {0};
    char why[160];
    pz_dpmsg_put(b, &h);
    CHECK(pz_dpmsg_check(b, sizeof b, &h, why, sizeof why) == PZ_DPMSG_OK && !why[0], "valid header refused: %s", why);
    CHECK(pz_dpmsg_check(b, PZ_DPMSG_HDR - 1, &h, why, sizeof why) == PZ_DPMSG_SHORT, "short");
    CHECK(pz_dpmsg_check(b, sizeof b - 1, &h, why, sizeof why) == PZ_DPMSG_LENGTH, "length");
    static const struct { size_t at; pz_dpmsg_result r; const char *needle; } cases[] = {
        {0, PZ_DPMSG_MAGIC_BAD, "magic"}, {4, PZ_DPMSG_MAGIC_BAD, "version"}, {5, PZ_DPMSG_PHASE, "phase"},
        {6, PZ_DPMSG_GROUP, "group size"}, {8, PZ_DPMSG_SRC, "sender"}, {10, PZ_DPMSG_CHUNK, "chunk"},
        {12, PZ_DPMSG_SEQ, "collective"}, {16, PZ_DPMSG_RANGE, "first element"}, {24, PZ_DPMSG_RANGE, "elements 332"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t c[sizeof b];
        memcpy(c, b, sizeof b);
        c[cases[i].at] ^= 1;
        pz_dpmsg_result r = pz_dpmsg_check(c, sizeof c, &h, why, sizeof why);
        CHECK(r == cases[i].r && strstr(why, cases[i].needle), "byte %zu changed: %s (%s)", cases[i].at,
              pz_dpmsg_result_name(r), why);
    }
}

int main(int argc, char **argv) {
    g_out = dp_out_arg(argc, argv, "test_dp_compress");
    int ok = 1;
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
        const config *cf = &configs[i];
        char line[256];
        snprintf(line, sizeof line, "%s %d %d %d %d %s %zu %zu\n", dp_mode_word(cf->mode), cf->D, cf->H ? cf->H : 1, N,
                 STEPS, cf->spec, cf->bucket, cf->hold);
        if (!dp_write_meta(g_out, cf->name, line)) return 1;
    }
    ok &= dp_fork_run("D=2: twophase, allgather", 2, 60, child, NULL);
    ok &= dp_fork_run("D=3: twophase, allgather", 3, 60, child, NULL);
    ok &= dp_fork_run("D=4: hierarchical, bytes between hosts", 4, 60, child, NULL);
    ok &= dp_fork_run("errors, another vector length", 2, 30, child_errors, NULL);
    ok &= dp_fork_run("another codec", 2, 30, child_errors, "codec");
    check_header();   /* after the forks: the children must not inherit its counts */
    ok &= check_summary("dp-header") == 0;
    printf("test_dp_compress: %s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
