/* test_gpu_ops.c: every op of the CUDA backend against the CPU backend on
 * random inputs (suite gpu). Exits 77 (meson's SKIP) with a message when no
 * usable GPU is present.
 *
 * Each op runs on the same host inputs in both backends; outputs that
 * accumulate (+=) start from the same non-zero values, so the accumulation
 * itself is checked. A value passes when |gpu - cpu| <= atol + rtol * |cpu|.
 * Tolerances per op (fp32, TF32 off), and why:
 *  - elementwise (encoder, residual, GELU, AdamW): 1e-6 abs + 1e-5 rel: same
 *    formula, only expf and fma contraction differ (a few ulp);
 *  - LayerNorm: 1e-5 + 1e-4: warp-order sums of C terms;
 *  - matmul, attention: 1e-4 + 1e-3: cuBLAS sums K products in another order
 *    (and may split K), softmax sums in warp order;
 *  - cross-entropy: 1e-5 + 1e-4 on losses and dlogits;
 *  - sumsq: 1e-10 relative (double sums in another order).
 * Shapes are deliberately not multiples of 32 (T = 37, C = 72, hs = 18). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "base/mem.h"
#include "base/rng.h"

static const pz_backend *cpu, *gpu;
static pz_rng rng;
static int failures;

static float *rnd(size_t n, float scale) {
    float *p = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = scale * (2.0f * pz_rng_uniform(&rng) - 1.0f);
    return p;
}

/* gpu->free of each of n device buffers: the body of GPU_FREE_ALL, the
 * device side of PZ_FREE_ALL (base/mem.h) */
static void gpu_free_each(void *const *d, size_t n) {
    for (size_t i = 0; i < n; i++) gpu->free(d[i]);
}
#define GPU_FREE_ALL(...) \
    gpu_free_each((void *const[]){__VA_ARGS__}, sizeof((void *const[]){__VA_ARGS__}) / sizeof(void *))

/* a device copy of n floats (or ints) of host memory */
static void *dev(const void *h, size_t bytes) {
    void *d = gpu->alloc(bytes);
    gpu->from_host(d, h, bytes);
    return d;
}

/* compares the device array d against the CPU result want */
static void check(const char *what, const float *want, const void *d, size_t n, float atol, float rtol) {
    float *got = xmalloc(n * sizeof(float));
    gpu->to_host(got, d, n * sizeof(float));
    size_t bad = 0, worst = 0;
    double worst_excess = -1.0;
    for (size_t i = 0; i < n; i++) {
        const double lim = atol + rtol * fabs((double)want[i]), err = fabs((double)got[i] - (double)want[i]);
        if (!(err <= lim)) bad++;
        if (err - lim > worst_excess || isnan(err)) { worst_excess = isnan(err) ? INFINITY : err - lim; worst = i; }
    }
    printf("%-28s n=%-7zu %s (worst at %zu: cpu %.9g gpu %.9g)\n", what, n, bad ? "FAIL" : "ok",
           worst, (double)want[worst], (double)got[worst]);
    if (bad) failures++;
    free(got);
}

enum { B = 2, T = 37, C = 72, NH = 4, V = 101, VP = 128 };
#define N (B * T)

static void test_encoder(void) {
    int tok[N];
    for (int i = 0; i < N; i++) tok[i] = (int)pz_rng_below(&rng, 7); /* repeats on purpose */
    float *wte = rnd((size_t)V * C, 1), *wpe = rnd((size_t)T * C, 1), *out = xmalloc(sizeof(float) * N * C);
    float *dwte = rnd((size_t)V * C, 1), *dwpe = rnd((size_t)T * C, 1), *dout = rnd((size_t)N * C, 1);
    int *dtok = dev(tok, sizeof tok);
    float *gwte = dev(wte, sizeof(float) * V * C), *gwpe = dev(wpe, sizeof(float) * T * C);
    float *gout = gpu->alloc(sizeof(float) * N * C), *gdout = dev(dout, sizeof(float) * N * C);
    float *gdwte = dev(dwte, sizeof(float) * V * C), *gdwpe = dev(dwpe, sizeof(float) * T * C);
    cpu->encoder_forward(out, tok, wte, wpe, B, T, C);
    gpu->encoder_forward(gout, dtok, gwte, gwpe, B, T, C);
    check("encoder_forward out", out, gout, (size_t)N * C, 1e-6f, 1e-5f);
    cpu->encoder_backward(dwte, dwpe, dout, tok, B, T, C);
    gpu->encoder_backward(gdwte, gdwpe, gdout, dtok, B, T, C);
    check("encoder_backward dwte", dwte, gdwte, (size_t)V * C, 1e-6f, 1e-5f);
    check("encoder_backward dwpe", dwpe, gdwpe, (size_t)T * C, 1e-6f, 1e-5f);
    PZ_FREE_ALL(wte, wpe, out, dwte, dwpe, dout);
    GPU_FREE_ALL(dtok, gwte, gwpe, gout, gdout, gdwte, gdwpe);
}

static void test_layernorm(void) {
    float *inp = rnd((size_t)N * C, 3), *w = rnd(C, 1), *b = rnd(C, 1);
    for (size_t i = 0; i < (size_t)N * C; i++) inp[i] += 5.0f; /* |mean| >> std, as in the CPU test */
    float *out = xmalloc(sizeof(float) * N * C), *mean = xmalloc(sizeof(float) * N), *rstd = xmalloc(sizeof(float) * N);
    float *dout = rnd((size_t)N * C, 1), *dinp = rnd((size_t)N * C, 1), *dw = rnd(C, 1), *db = rnd(C, 1);
    float *ginp = dev(inp, sizeof(float) * N * C), *gw = dev(w, sizeof(float) * C), *gb = dev(b, sizeof(float) * C);
    float *gout = gpu->alloc(sizeof(float) * N * C), *gmean = gpu->alloc(sizeof(float) * N), *grstd = gpu->alloc(sizeof(float) * N);
    float *gdout = dev(dout, sizeof(float) * N * C), *gdinp = dev(dinp, sizeof(float) * N * C);
    float *gdw = dev(dw, sizeof(float) * C), *gdb = dev(db, sizeof(float) * C);
    cpu->layernorm_forward(out, mean, rstd, inp, w, b, N, C);
    gpu->layernorm_forward(gout, gmean, grstd, ginp, gw, gb, N, C);
    check("layernorm_forward out", out, gout, (size_t)N * C, 1e-5f, 1e-4f);
    check("layernorm_forward mean", mean, gmean, N, 1e-5f, 1e-5f);
    check("layernorm_forward rstd", rstd, grstd, N, 1e-5f, 1e-4f);
    /* backward from the CPU's saved statistics on both sides */
    gpu->from_host(gmean, mean, sizeof(float) * N);
    gpu->from_host(grstd, rstd, sizeof(float) * N);
    cpu->layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
    gpu->layernorm_backward(gdinp, gdw, gdb, gdout, ginp, gw, gmean, grstd, N, C);
    check("layernorm_backward dinp", dinp, gdinp, (size_t)N * C, 1e-5f, 1e-4f);
    check("layernorm_backward dweight", dw, gdw, C, 1e-5f, 1e-4f);
    check("layernorm_backward dbias", db, gdb, C, 1e-5f, 1e-4f);
    PZ_FREE_ALL(inp, w, b, out, mean, rstd, dout, dinp, dw, db);
    GPU_FREE_ALL(ginp, gw, gb, gout, gmean, grstd, gdout, gdinp, gdw, gdb);
}

static void test_matmul(int OC, int with_bias, int with_dinp) {
    float *inp = rnd((size_t)N * C, 1), *w = rnd((size_t)OC * C, 0.3f), *b = rnd(OC, 1);
    float *out = xmalloc(sizeof(float) * N * OC), *dout = rnd((size_t)N * OC, 1);
    float *dinp = rnd((size_t)N * C, 1), *dw = rnd((size_t)OC * C, 1), *db = rnd(OC, 1);
    float *ginp = dev(inp, sizeof(float) * N * C), *gw = dev(w, sizeof(float) * OC * C), *gb = dev(b, sizeof(float) * OC);
    float *gout = gpu->alloc(sizeof(float) * N * OC), *gdout = dev(dout, sizeof(float) * N * OC);
    float *gdinp = dev(dinp, sizeof(float) * N * C), *gdw = dev(dw, sizeof(float) * OC * C), *gdb = dev(db, sizeof(float) * OC);
    char name[64];
    cpu->matmul_forward(out, inp, w, with_bias ? b : NULL, N, C, OC);
    gpu->matmul_forward(gout, ginp, gw, with_bias ? gb : NULL, N, C, OC);
    snprintf(name, sizeof name, "matmul_forward OC=%d%s", OC, with_bias ? "" : " nobias");
    check(name, out, gout, (size_t)N * OC, 1e-4f, 1e-3f);
    cpu->matmul_backward(with_dinp ? dinp : NULL, dw, with_bias ? db : NULL, dout, inp, w, N, C, OC);
    gpu->matmul_backward(with_dinp ? gdinp : NULL, gdw, with_bias ? gdb : NULL, gdout, ginp, gw, N, C, OC);
    snprintf(name, sizeof name, "matmul_backward dinp%s", with_dinp ? "" : " (NULL)");
    check(name, dinp, gdinp, (size_t)N * C, 1e-4f, 1e-3f);
    check("matmul_backward dweight", dw, gdw, (size_t)OC * C, 1e-4f, 1e-3f);
    check("matmul_backward dbias", db, gdb, OC, 1e-4f, 1e-3f);
    /* the zero-bubble input half (dweight NULL) on the GPU against the CPU */
    if (with_dinp) {
        cpu->matmul_backward(dinp, NULL, NULL, dout, inp, w, N, C, OC);
        gpu->matmul_backward(gdinp, NULL, NULL, gdout, ginp, gw, N, C, OC);
        check("matmul_backward input half (zb B)", dinp, gdinp, (size_t)N * C, 1e-4f, 1e-3f);
    }
    PZ_FREE_ALL(inp, w, b, out, dout, dinp, dw, db);
    GPU_FREE_ALL(ginp, gw, gb, gout, gdout, gdinp, gdw, gdb);
}

static void test_attention(int nh) {
    const size_t nqkv = (size_t)N * 3 * C, natt = (size_t)B * nh * T * T;
    float *qkv = rnd(nqkv, 1.5f), *out = xmalloc(sizeof(float) * N * C), *att = xmalloc(sizeof(float) * natt);
    float *dout = rnd((size_t)N * C, 1), *dqkv = rnd(nqkv, 1), *scr = rnd(natt, 1);
    float *gqkv = dev(qkv, sizeof(float) * nqkv), *gout = gpu->alloc(sizeof(float) * N * C);
    float *gatt = dev(scr, sizeof(float) * natt); /* garbage in: forward must overwrite all of it */
    float *gdout = dev(dout, sizeof(float) * N * C), *gdqkv = dev(dqkv, sizeof(float) * nqkv);
    float *gscr = dev(scr, sizeof(float) * natt);
    char name[64];
    cpu->attention_forward(out, att, qkv, B, T, C, nh);
    gpu->attention_forward(gout, gatt, gqkv, B, T, C, nh);
    snprintf(name, sizeof name, "attention_forward NH=%d out", nh);
    check(name, out, gout, (size_t)N * C, 1e-4f, 1e-3f);
    check("attention_forward att", att, gatt, natt, 1e-5f, 1e-3f);
    /* backward from the CPU's probabilities on both sides */
    gpu->from_host(gatt, att, sizeof(float) * natt);
    cpu->attention_backward(dqkv, scr, dout, qkv, att, B, T, C, nh);
    gpu->attention_backward(gdqkv, gscr, gdout, gqkv, gatt, B, T, C, nh);
    check("attention_backward dqkv", dqkv, gdqkv, nqkv, 1e-4f, 1e-3f);
    check("attention_backward scratch", scr, gscr, natt, 1e-5f, 1e-3f);
    PZ_FREE_ALL(qkv, out, att, dout, dqkv, scr);
    GPU_FREE_ALL(gqkv, gout, gatt, gdout, gdqkv, gscr);
}

/* generation's attention against a KV cache: a prompt of 20 positions, then
 * 5, then 1, each call appending to the caches (maxT = T rows) */
static void test_attention_cached(int nh) {
    const size_t ncache = (size_t)T * C;
    float *kc = xcalloc(ncache, sizeof(float)), *vc = xcalloc(ncache, sizeof(float));
    float *scores = xmalloc(sizeof(float) * 20 * nh * T), *out = xmalloc(sizeof(float) * 20 * C);
    float *gkc = dev(kc, sizeof(float) * ncache), *gvc = dev(vc, sizeof(float) * ncache);
    float *gscores = gpu->alloc(sizeof(float) * 20 * nh * T), *gout = gpu->alloc(sizeof(float) * 20 * C);
    const int steps[3][2] = {{0, 20}, {20, 5}, {25, 1}};   /* pos0, n */
    char name[80];
    for (int s = 0; s < 3; s++) {
        const int pos0 = steps[s][0], n = steps[s][1];
        float *qkv = rnd((size_t)n * 3 * C, 1.5f), *gqkv = dev(qkv, sizeof(float) * n * 3 * C);
        cpu->attention_cached_forward(out, kc, vc, scores, qkv, pos0, n, C, nh);
        gpu->attention_cached_forward(gout, gkc, gvc, gscores, gqkv, pos0, n, C, nh);
        snprintf(name, sizeof name, "attention_cached NH=%d pos0=%d n=%d", nh, pos0, n);
        check(name, out, gout, (size_t)n * C, 1e-4f, 1e-3f);
        check("attention_cached kcache", kc, gkc, ncache, 0.0f, 0.0f);
        check("attention_cached vcache", vc, gvc, ncache, 0.0f, 0.0f);
        free(qkv);
        gpu->free(gqkv);
    }
    PZ_FREE_ALL(kc, vc, scores, out);
    GPU_FREE_ALL(gkc, gvc, gscores, gout);
}

static void test_elementwise(void) {
    const size_t n = 100003;
    float *x = rnd(n, 12), *y = rnd(n, 1), *d = rnd(n, 1), *acc = rnd(n, 1), *acc2 = rnd(n, 1);
    float *out = xmalloc(n * sizeof(float));
    float *gx = dev(x, n * 4), *gy = dev(y, n * 4), *gd = dev(d, n * 4), *gacc = dev(acc, n * 4), *gacc2 = dev(acc2, n * 4);
    float *gout = gpu->alloc(n * 4);
    cpu->gelu_forward(out, x, n);
    gpu->gelu_forward(gout, gx, n);
    check("gelu_forward", out, gout, n, 1e-6f, 1e-5f);
    cpu->gelu_backward(acc, x, d, n);
    gpu->gelu_backward(gacc, gx, gd, n);
    check("gelu_backward", acc, gacc, n, 1e-6f, 1e-5f);
    cpu->residual_forward(out, x, y, n);
    gpu->residual_forward(gout, gx, gy, n);
    check("residual_forward", out, gout, n, 0.0f, 0.0f);
    cpu->residual_backward(acc, acc2, d, n);
    gpu->residual_backward(gacc, gacc2, gd, n);
    check("residual_backward da", acc, gacc, n, 1e-6f, 1e-5f);
    check("residual_backward db", acc2, gacc2, n, 1e-6f, 1e-5f);
    PZ_FREE_ALL(x, y, d, acc, acc2, out);
    GPU_FREE_ALL(gx, gy, gd, gacc, gacc2, gout);
}

static void test_crossentropy(float dscale) {
    int tgt[N];
    for (int i = 0; i < N; i++) tgt[i] = (int)pz_rng_below(&rng, V);
    float *logits = rnd((size_t)N * VP, 8), *losses = xmalloc(sizeof(float) * N);
    int *gtgt = dev(tgt, sizeof tgt);
    float *glogits = dev(logits, sizeof(float) * N * VP), *glosses = gpu->alloc(sizeof(float) * N);
    char name[64];
    cpu->crossentropy_forward(losses, logits, tgt, N, V, VP, dscale);
    gpu->crossentropy_forward(glosses, glogits, gtgt, N, V, VP, dscale);
    snprintf(name, sizeof name, "crossentropy dscale=%g loss", (double)dscale);
    check(name, losses, glosses, N, 1e-5f, 1e-4f);
    check("crossentropy logits/dlogits", logits, glogits, (size_t)N * VP, 1e-6f, 1e-4f);
    PZ_FREE_ALL(logits, losses);
    GPU_FREE_ALL(gtgt, glogits, glosses);
}

static void test_optimizer(void) {
    const size_t n = 300007;
    float *g = rnd(n, 2), *p = rnd(n, 1), *m = rnd(n, 0.1f), *v = rnd(n, 0.1f);
    for (size_t i = 0; i < n; i++) v[i] = fabsf(v[i]);
    double want = cpu->sumsq(g, n);
    float *gg = dev(g, n * 4), *gp = dev(p, n * 4), *gm = dev(m, n * 4), *gv = dev(v, n * 4);
    double got = gpu->sumsq(gg, n);
    int ok = fabs(got - want) <= 1e-10 * want;
    printf("%-28s n=%-7zu %s (cpu %.17g gpu %.17g)\n", "sumsq", n, ok ? "ok" : "FAIL", want, got);
    if (!ok) failures++;
    for (int t = 1; t <= 3; t++) {
        cpu->adamw_update(p, g, m, v, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, t);
        gpu->adamw_update(gp, gg, gm, gv, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, t);
    }
    check("adamw param (3 steps)", p, gp, n, 1e-6f, 1e-5f);
    check("adamw m", m, gm, n, 1e-7f, 1e-5f);
    check("adamw v", v, gv, n, 1e-7f, 1e-5f);
    PZ_FREE_ALL(g, p, m, v);
    GPU_FREE_ALL(gg, gp, gm, gv);
}

int main(void) {
    char err[512];
    gpu = pz_backend_cuda_init(0, 0, err, sizeof err);
    if (!gpu) {
        printf("SKIP: %s\n", err);
        return 77;
    }
    cpu = pz_backend_cpu();
    pz_rng_seed(&rng, 42);
    test_encoder();
    test_layernorm();
    test_matmul(3 * C, 1, 1);
    test_matmul(C, 0, 0);
    test_matmul(VP, 0, 1);
    test_attention(NH);
    test_attention(1);
    test_attention_cached(NH);
    test_attention_cached(1);
    test_elementwise();
    test_crossentropy(0.0f);
    test_crossentropy(1.0f / N);
    test_optimizer();
    printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
