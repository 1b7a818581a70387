/* test_binsgdm.c: --optimizer binsgdm's rule (stages/binsgdm.c) and its
 * 1-bit exchange (runtime/dp/creduce.c with PZ_BINSGDM_SPEC, no error
 * feedback) between forked ranks, with what an independent NumPy model
 * needs (tests/runtime/dp/binsgdm_model.py runs this and checks).
 *
 *   test_binsgdm OUTDIR
 *
 * Each configuration (mode, D, hosts) runs STEPS steps on N parameters that
 * start equal on every rank, each rank with its own fixed pseudo-random
 * gradients, the clip factor 0.5 on odd steps: moments, exchange of u = m/b,
 * update, as runtime/dp/replica.c does per chunk. Written to OUTDIR/<config>/:
 *   meta.txt                         mode D H n steps lr wd beta
 *   r<rank>_g.npy  (steps, n)        its gradients (before the clip factor)
 *   r<rank>_p.npy  (steps + 1, n)    its parameters, first the starting ones
 *   r<rank>_q1.npy (steps, n)        its all-gather / to-owner messages, decoded by
 *                                    a separate codec object (tap; hierarchical: leaders)
 *   r<rank>_q2.npy (steps, m)        its from-owner messages, decoded (twophase)
 *   r<rank>_m.npy, r<rank>_b.npy     its moments after the last step
 * Checked here, in C: every rank ends with the same parameters bit for bit;
 * the bytes each rank sends per step are the 1-bit message's (D = 2
 * allgather: one message of header + 4-byte scale + ceil(N/8) bytes to the
 * other rank), printed against float32's; one replica (a group of one with
 * no transport) runs the same rule in this process. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "base/rng.h"
#include "runtime/dp/creduce.h"
#include "runtime/dp/dpmsg.h"
#include "stages/binsgdm.h"
#include "tests/check.h"
#include "tests/runtime/dp/dp_dump.h"
#include "tests/runtime/dp/dp_fork.h"

#define N 1001
#define STEPS 30
#define LR 0.01f
#define WD 0.1f
#define BETA 0.9f

typedef struct {
    const char *name;
    pz_dp_mode mode;
    int D, H;
} config;

static const config configs[] = {
    {"one", PZ_DP_ALLGATHER, 1, 0},
    {"allgather-d2", PZ_DP_ALLGATHER, 2, 0},
    {"allgather-d4", PZ_DP_ALLGATHER, 4, 0},
    {"twophase-d4", PZ_DP_TWOPHASE, 4, 0},
    {"hierarchical-d4h2", PZ_DP_HIERARCHICAL, 4, 2},
};

static const char *g_out;

/* a gradient: noise around a per-element direction (so that some elements
 * keep their sign and |u| reaches 1), a replica bias, exact zeros at i % 97 */
static void gradient(float *g, int rank, int step) {
    pz_rng r;
    pz_rng_seed(&r, (uint64_t)rank << 32 | (uint64_t)step);
    for (size_t i = 0; i < N; i++) {
        float dir = (i % 3 == 0) ? 0.5f : (i % 3 == 1 ? -0.2f : 0.0f);
        float u = pz_rng_uniform(&r);
        g[i] = i % 97 == 0 ? 0.0f : dir + (2 * u - 1) + 0.05f * (float)rank;
    }
}

static float clip_of(int step) { return step % 2 ? 0.5f : 1.0f; }

/* bytes this rank sent over the run, and what one 1-bit message costs */
static void check_bytes(const config *cf, pz_dp_creduce *c, const pz_codec *codec, int rank) {
    const uint64_t *sent = pz_dp_creduce_sent_to(c);
    uint64_t total = 0;
    for (int j = 0; j < cf->D; j++) total += sent[j];
    pz_shape s = {1, {N}};
    size_t msg = PZ_DPMSG_HDR + pz_codec_max_encoded_size(codec, &s);
    if (cf->mode == PZ_DP_ALLGATHER && cf->D > 1) {
        CHECK(total == (uint64_t)STEPS * (uint64_t)(cf->D - 1) * msg, "sent %llu bytes in %d steps, want %d x %zu a step",
              (unsigned long long)total, STEPS, cf->D - 1, msg);
        CHECK(msg < 4 + N / 8 + 160, "a 1-bit message of %d values is %zu bytes", N, msg);
        if (rank == 0)
            printf("%s: %.0f bytes sent per step per replica (float32 all-gather: %d)\n", cf->name,
                   (double)total / STEPS, 4 * N * (cf->D - 1));
    }
}

static void run_config(pz_transport *t, int rank, const config *cf) {
    check_tag = dp_tag(cf->name, rank);
    pz_dp_group g;
    OK(dp_group_of(&g, t, rank, cf->D));
    pz_dp_copts o = {cf->mode, 0, 11, cf->H, 0, 0};
    pz_dp_creduce *c = NULL;
    OK(pz_dp_creduce_create(&c, &g, PZ_BINSGDM_SPEC, &o, N));
    dp_tap_ctx tc;
    OK(dp_tap_init(&tc, PZ_BINSGDM_SPEC, cf->mode, cf->D, cf->H, rank, N, STEPS, 0, 0));
    pz_dp_creduce_set_tap(c, dp_tap, &tc);
    /* one block: gradients (STEPS rows), parameters (STEPS + 1), m, b, u */
    float *gs = xcalloc((size_t)(2 * STEPS + 4) * N, 4), *ps = gs + (size_t)STEPS * N;
    float *m = ps + (size_t)(STEPS + 1) * N, *b = m + N, *u = b + N;
    pz_rng r;
    pz_rng_seed(&r, 0xfeed);
    for (size_t i = 0; i < N; i++) ps[i] = pz_rng_uniform(&r) - 0.5f;   /* equal on every rank */
    for (int s = 0; s < STEPS; s++) {
        float *gr = gs + (size_t)s * N, *p = ps + (size_t)(s + 1) * N;
        gradient(gr, rank, s);
        tc.step = s;
        pz_binsgdm_moments(m, b, u, gr, N, BETA, clip_of(s));
        OK(pz_dp_creduce_run(c, u, u, (uint64_t)s));
        memcpy(p, p - N, N * 4);
        pz_binsgdm_apply(p, u, N, LR, WD);
    }
    CHECK(tc.failed == 0, "%d messages failed the tap", tc.failed);
    check_bytes(cf, c, tc.dec, rank);
    if (t) OK(pz_dp_check_identical(&g, ps + (size_t)STEPS * N, N * 4, "binsgdm parameters"));   /* the same bits */
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", g_out, cf->name);
    OK(dp_write_npy(dir, rank, "g", STEPS, N, gs));
    OK(dp_write_npy(dir, rank, "p", STEPS + 1, N, ps));
    OK(dp_write_npy(dir, rank, "m", 0, N, m));
    OK(dp_write_npy(dir, rank, "b", 0, N, b));
    OK(dp_tap_write(&tc, dir, rank, cf->mode));
    free(gs);
    dp_tap_free(&tc);
    pz_dp_creduce_free(c);
    pz_dp_group_free(&g);
}

/* a forked rank: every configuration of `world` replicas; arg names it */
static int child(int rank, int world, int port, void *arg) {
    check_fatal = 1;
    pz_transport *t = NULL;
    OK(dp_transport(&t, rank, world, port, 20.0));
    const config *end = configs + sizeof configs / sizeof configs[0];
    for (const config *cf = configs; cf < end; cf++)
        if (cf->D == world) run_config(t, rank, cf);
    pz_transport_close(t, 0);
    return check_summary(arg);
}

static int write_meta(const config *cf) {
    char line[256];
    snprintf(line, sizeof line, "%s %d %d %d %d %.9g %.9g %.9g\n",
             dp_mode_word(cf->mode),
             cf->D, cf->H ? cf->H : 1, N, STEPS, (double)LR, (double)WD, (double)BETA);
    return dp_write_meta(g_out, cf->name, line);
}

int main(int argc, char **argv) {
    g_out = dp_out_arg(argc, argv, "test_binsgdm");
    int ok = 1;
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) ok &= write_meta(&configs[i]);
    /* one replica: a group of one without a transport, in this process */
    run_config(NULL, 0, &configs[0]);
    ok &= check_summary("binsgdm one replica") == 0;
    ok &= dp_fork_run("binsgdm D=2: allgather", 2, 60, child, "binsgdm D=2");
    ok &= dp_fork_run("binsgdm D=4: allgather, twophase, hierarchical", 4, 60, child, "binsgdm D=4");
    printf("test_binsgdm: %s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
