/* test_onebit.c: 1-bit Adam's steps after the warm-up (--dp-compress-what
 * momentum: stages/optim.c pz_onebit_momentum and pz_onebit_frozen, the
 * exchange through runtime/dp/creduce.c with sign and error feedback, as
 * runtime/dp/onebit.c runs them per chunk) between forked ranks,
 * with what an independent NumPy model needs (tests/runtime/dp/
 * onebit_model.py runs this and checks).
 *
 *   test_onebit OUTDIR
 *
 * Each configuration (mode, D) starts every rank from the same parameters,
 * momentum m and frozen second moment v (as the uncompressed warm-up leaves
 * them: identical on the replicas), after T0 warm-up steps; then STEPS steps
 * with each rank's own fixed pseudo-random gradients, the clip factor 0.5 on
 * odd steps: m = b1 m + (1 - b1) g c, m = the compressed mean of the ranks'
 * m, the frozen-v update. Written to OUTDIR/<config>/:
 *   meta.txt                         mode D n steps t0 lr wd beta1 beta2 eps
 *   r<rank>_g.npy  (steps, n)        its gradients (before the clip factor)
 *   r<rank>_p.npy  (steps + 1, n)    its parameters, first the starting ones
 *   r<rank>_m.npy  (steps + 1, n)    its momentum, first the starting one
 *   r<rank>_v.npy  (n)               the frozen v
 *   r<rank>_q1.npy, r<rank>_q2.npy   its messages, decoded by a codec object
 *                                    of its own (the tap; q2: twophase)
 * Checked here, in C: every rank ends with the same parameters and momentum
 * bit for bit, and v did not move. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "base/rng.h"
#include "runtime/dp/creduce.h"
#include "stages/optim.h"
#include "tests/check.h"
#include "tests/runtime/dp/dp_dump.h"
#include "tests/runtime/dp/dp_fork.h"

#define N 1001
#define STEPS 20
#define T0 5   /* the warm-up's steps: v froze after them */
#define LR 0.01f
#define WD 0.1f
#define SPEC "sign"

typedef struct {
    const char *name;
    pz_dp_mode mode;
    int D;
} config;

static const config configs[] = {
    {"allgather-d2", PZ_DP_ALLGATHER, 2},
    {"twophase-d2", PZ_DP_TWOPHASE, 2},
    {"twophase-d4", PZ_DP_TWOPHASE, 4},
};

static const char *g_out;

static pz_optim_config cfg_of(void) {
    pz_optim_config c;
    pz_optim_config_default(&c);   /* b1 0.9, b2 0.95, eps 1e-8 */
    c.lr = LR;
    c.weight_decay = WD;
    return c;
}

/* a gradient: noise around a per-element direction and a replica bias */
static void gradient(float *g, int rank, int step) {
    pz_rng r;
    pz_rng_seed(&r, (uint64_t)rank << 32 | (uint64_t)step | 1u << 20);
    for (size_t i = 0; i < N; i++) {
        float dir = (i % 3 == 0) ? 0.5f : (i % 3 == 1 ? -0.2f : 0.0f);
        g[i] = dir + (2 * pz_rng_uniform(&r) - 1) + 0.05f * (float)rank;
    }
}

/* the state the warm-up left, equal on every rank: p, m and v > 0 */
static void start(float *p, float *m, float *v) {
    pz_rng r;
    pz_rng_seed(&r, 0xbeef);
    for (size_t i = 0; i < N; i++) {
        p[i] = pz_rng_uniform(&r) - 0.5f;
        m[i] = 0.1f * (pz_rng_uniform(&r) - 0.5f);
        float s = 0.05f + pz_rng_uniform(&r);
        v[i] = 0.01f * s * s;
    }
}

/* STEPS steps of configuration cf on rank, over group g; the runs to dir */
static void run_steps(pz_dp_group *g, int rank, const config *cf, const char *dir) {
    const pz_optim_config oc = cfg_of();
    pz_dp_copts o = {cf->mode, 1, 11, 0, 0, 0};
    pz_dp_creduce *c = NULL;
    dp_tap_ctx tc;
    OK(pz_dp_creduce_create(&c, g, SPEC, &o, N));
    OK(dp_tap_init(&tc, SPEC, cf->mode, cf->D, 0, rank, N, STEPS, 0, 0));
    pz_dp_creduce_set_tap(c, dp_tap, &tc);
    /* one block: gradients (STEPS rows), parameters and momenta (STEPS + 1 each), v and its copy */
    float *gs = xcalloc((size_t)(3 * STEPS + 4) * N, 4), *ps = gs + (size_t)STEPS * N;
    float *ms = ps + (size_t)(STEPS + 1) * N, *v = ms + (size_t)(STEPS + 1) * N, *v0 = v + N;
    start(ps, ms, v);
    memcpy(v0, v, N * 4);
    for (int s = 0; s < STEPS; s++) {
        float *gr = gs + (size_t)s * N, *p = ps + (size_t)(s + 1) * N, *m = ms + (size_t)(s + 1) * N;
        gradient(gr, rank, s);
        tc.step = s;
        memcpy(m, m - N, N * 4);
        pz_onebit_momentum(m, gr, N, oc.beta1, s % 2 ? 0.5f : 1.0f);
        OK(pz_dp_creduce_run(c, m, m, (uint64_t)s));
        memcpy(p, p - N, N * 4);
        pz_onebit_frozen(p, m, v, N, LR, &oc, WD, T0 + s + 1, T0);
    }
    pz_dp_creduce_free(c);
    CHECK(tc.failed == 0, "%d messages failed the tap", tc.failed);
    CHECK(memcmp(v, v0, N * 4) == 0, "the frozen v moved");
    OK(pz_dp_check_identical(g, ps + (size_t)STEPS * N, N * 4, "1-bit Adam parameters"));
    OK(pz_dp_check_identical(g, ms + (size_t)STEPS * N, N * 4, "1-bit Adam momentum"));
    const struct { const char *what; int rows; const float *v; } out[] = {
        {"g", STEPS, gs}, {"p", STEPS + 1, ps}, {"m", STEPS + 1, ms}, {"v", 0, v}};
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++)
        OK(dp_write_npy(dir, rank, out[i].what, out[i].rows, N, out[i].v));
    OK(dp_tap_write(&tc, dir, rank, cf->mode));
    dp_tap_free(&tc);
    free(gs);
}

/* a forked rank of one configuration (arg): its own transport and group */
static int child(int rank, int world, int port, void *arg) {
    const config *cf = arg;
    check_fatal = 1;
    check_tag = dp_tag(cf->name, rank);
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", g_out, cf->name);
    pz_transport *t = NULL;
    pz_dp_group g;
    OK(dp_world_group(&t, &g, rank, world, port, 20.0));
    run_steps(&g, rank, cf, dir);
    pz_dp_group_free(&g);
    pz_transport_close(t, 0);
    return check_summary(cf->name);
}

static int write_meta(const config *cf) {
    const pz_optim_config oc = cfg_of();
    char line[256];
    snprintf(line, sizeof line, "%s %d %d %d %d %.9g %.9g %.9g %.9g %.9g\n", dp_mode_word(cf->mode), cf->D, N, STEPS,
             T0, (double)LR, (double)WD, (double)oc.beta1, (double)oc.beta2, (double)oc.eps);
    return dp_write_meta(g_out, cf->name, line);
}

int main(int argc, char **argv) {
    g_out = dp_out_arg(argc, argv, "test_onebit");
    int ok = 1;
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) ok &= write_meta(&configs[i]);
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++)
        ok &= dp_fork_run(configs[i].name, configs[i].D, 60, child, (void *)&configs[i]);
    printf("test_onebit: %s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
