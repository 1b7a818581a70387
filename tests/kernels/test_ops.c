/* test_ops.c: unit tests of every op in the CPU backend (kernels/backend.h).
 *
 * For each backward op: a finite-difference check. With a fixed random R of
 * the output's shape, L = sum(forward_out * R) (accumulated in double), and
 * dL/dx by central differences (L(x+h) - L(x-h)) / (2h) per input element,
 * with the forward itself in float. The analytic gradient is the backward
 * called with dout = R. Gradient buffers start at random values and the
 * backward is called twice: the first delta must match the differences and
 * the second must equal the first (the += contract).
 * Forward ops are checked against double-precision references, plus the
 * special contracts: matmul with NULL dinp/dbias/bias, cross-entropy padded
 * columns and dscale == 0, attention causality, AdamW bias correction and
 * decoupled decay, sumsq, and alloc/zero/copy.
 *
 * Every comparison prints its worst element as a fraction of its tolerance
 * |got - ref| <= atol + rtol * |ref|; any failure makes the exit status 1.
 * The whole suite runs at three sizes (the small one leaves most threads idle
 * in the column-split reductions, the second spreads them, the third has
 * T > 128 for the blocked attention) and at 1 and 3 threads (an odd split,
 * and more threads than this 2-core machine). */
#include "kernels/backend.h"
#include "base/mem.h"
#include "base/rng.h"
#include "tests/kernels/op_ctx.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const pz_backend *be;
static int failures;
static pz_rng rng;

/* ---- helpers ---------------------------------------------------------- */

static float *fbuf(size_t n) { return be->alloc(n * sizeof(float)); }
static double *dbuf(size_t n) { return xcalloc(n, sizeof(double)); }

static void fill_normal(float *x, size_t n, float sd) {
    for (size_t i = 0; i < n; i++) x[i] = sd * pz_rng_normal(&rng);
}

static void fill_ids(int *ids, size_t n, int V) {
    for (size_t i = 0; i < n; i++) ids[i] = (int)pz_rng_below(&rng, (uint64_t)V);
}

static void to_double(double *d, const float *f, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = (double)f[i];
}

/* sum of out (n) * R (n) in double */
static double dot_r(const float *out, const float *R, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)out[i] * (double)R[i];
    return s;
}

/* Compare got (n) with ref (n): pass iff every |got - ref| <= atol + rtol |ref|.
 * Prints the worst element and how much of its tolerance it used. */
static void expect_close(const char *what, const float *got, const double *ref, size_t n,
                         double atol, double rtol) {
    double worst = -1.0;
    size_t wi = 0;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        const double err = fabs((double)got[i] - ref[i]);
        /* err / 0 = inf fails an exact (0, 0) comparison; NaN fails too */
        const double ratio = err == 0.0 ? 0.0 : err / (atol + rtol * fabs(ref[i]));
        if (!(ratio <= 1.0)) bad = 1;
        if (!(ratio <= worst)) {
            worst = ratio;
            wi = i;
        }
    }
    if (bad) failures++;
    printf("  %s %-46s worst [%zu] got % .7g ref % .7g (%.1f%% of atol %.0e + rtol %.0e)\n",
           bad ? "FAIL" : "ok  ", what, wi, n ? (double)got[wi] : 0.0, n ? ref[wi] : 0.0,
           100.0 * worst, atol, rtol);
}

static void expect_true(const char *what, int cond) {
    if (!cond) failures++;
    printf("  %s %s\n", cond ? "ok  " : "FAIL", what);
}

/* ---- finite-difference gradient check --------------------------------- */

typedef double (*loss_fn)(void *ctx);   /* runs the forward, returns L */
typedef void (*bwd_fn)(void *ctx);      /* runs the backward with dout = R */

typedef struct {
    const char *name;
    float *x;  /* an input of the forward */
    float *g;  /* the gradient buffer the backward accumulates into */
    size_t n;
} grad_pair;

/* fd (n) = central differences of L w.r.t. x (n), step h. The step actually
 * taken is (float)(x+h) - (float)(x-h), not 2h, since x+h rounds in float. */
static void fd_grad(double *fd, float *x, size_t n, float h, loss_fn L, void *ctx) {
    for (size_t i = 0; i < n; i++) {
        const float v = x[i];
        const float xp = v + h, xm = v - h;
        x[i] = xp;
        const double lp = L(ctx);
        x[i] = xm;
        const double lm = L(ctx);
        x[i] = v;
        fd[i] = (lp - lm) / ((double)xp - (double)xm);
    }
}

/* Check every pair's gradient against finite differences, then the +=
 * contract: gradients start random, a second backward adds the same delta. */
static void gradcheck(const char *op, grad_pair *p, int np, loss_fn L, bwd_fn bwd, void *ctx,
                      float h, double atol, double rtol) {
    double *fd[8], *g0[8], *delta[8];
    char what[96];
    for (int k = 0; k < np; k++) {
        fd[k] = dbuf(p[k].n);
        g0[k] = dbuf(p[k].n);
        delta[k] = dbuf(p[k].n);
        fd_grad(fd[k], p[k].x, p[k].n, h, L, ctx);
    }
    L(ctx); /* saved activations (mean, att, ...) of the unperturbed inputs */
    for (int k = 0; k < np; k++) {
        fill_normal(p[k].g, p[k].n, 1.0f);
        to_double(g0[k], p[k].g, p[k].n);
    }
    bwd(ctx);
    for (int k = 0; k < np; k++) {
        for (size_t i = 0; i < p[k].n; i++) delta[k][i] = (double)p[k].g[i] - g0[k][i];
        float *d = xmalloc(p[k].n * sizeof(float));
        for (size_t i = 0; i < p[k].n; i++) d[i] = (float)delta[k][i];
        snprintf(what, sizeof what, "%s d%s vs finite differences", op, p[k].name);
        expect_close(what, d, fd[k], p[k].n, atol, rtol);
        free(d);
        to_double(g0[k], p[k].g, p[k].n);
    }
    bwd(ctx);
    for (int k = 0; k < np; k++) {
        float *d = xmalloc(p[k].n * sizeof(float));
        for (size_t i = 0; i < p[k].n; i++) d[i] = (float)((double)p[k].g[i] - g0[k][i]);
        snprintf(what, sizeof what, "%s d%s second call adds same", op, p[k].name);
        /* both deltas went through one float add onto an O(1) value */
        expect_close(what, d, delta[k], p[k].n, 1e-5, 1e-5);
        free(d);
        free(fd[k]);
        free(g0[k]);
        free(delta[k]);
    }
}

/* ---- sizes ------------------------------------------------------------ */

typedef struct {
    int B, T, C, NH, OC, V, Vp;
} sizes;

/* ---- encoder ---------------------------------------------------------- */

typedef struct {
    const sizes *s;
    int *inp;
    float *wte, *wpe, *out, *R, *dwte, *dwpe;
} enc_ctx;

static double enc_loss(void *p) {
    enc_ctx *c = p;
    be->encoder_forward(c->out, c->inp, c->wte, c->wpe, c->s->B, c->s->T, c->s->C);
    return dot_r(c->out, c->R, (size_t)c->s->B * c->s->T * c->s->C);
}

static void enc_bwd(void *p) {
    enc_ctx *c = p;
    be->encoder_backward(c->dwte, c->dwpe, c->R, c->inp, c->s->B, c->s->T, c->s->C);
}

static void test_encoder(const sizes *s) {
    const size_t N = (size_t)s->B * s->T, C = (size_t)s->C;
    enc_ctx c = {s, be->alloc(N * sizeof(int)), fbuf(s->V * C), fbuf(s->T * C),
                 fbuf(N * C), fbuf(N * C), fbuf(s->V * C), fbuf(s->T * C)};
    fill_ids(c.inp, N, s->V);
    c.inp[1] = c.inp[0]; /* a repeated token: the scatter must add, not store */
    fill_normal(c.wte, s->V * C, 1.0f);
    fill_normal(c.wpe, s->T * C, 1.0f);
    fill_normal(c.R, N * C, 1.0f);
    grad_pair p[] = {{"wte", c.wte, c.dwte, s->V * C}, {"wpe", c.wpe, c.dwpe, s->T * C}};
    gradcheck("encoder", p, 2, enc_loss, enc_bwd, &c, 1e-2f, 1e-4, 1e-3);

    double *ref = dbuf(N * C);
    for (size_t bt = 0; bt < N; bt++)
        for (size_t k = 0; k < C; k++)
            ref[bt * C + k] = (double)c.wte[c.inp[bt] * C + k] + c.wpe[(bt % s->T) * C + k];
    enc_loss(&c);
    expect_close("encoder forward vs reference", c.out, ref, N * C, 0.0, 1e-7);
    free(ref);
    be->free(c.inp); be->free(c.wte); be->free(c.wpe); be->free(c.out);
    be->free(c.R); be->free(c.dwte); be->free(c.dwpe);
}

/* ---- layernorm -------------------------------------------------------- */

typedef struct {
    int N, C;
    float *inp, *w, *b, *out, *mean, *rstd, *R, *dinp, *dw, *db;
} ln_ctx;

static double ln_loss(void *p) {
    ln_ctx *c = p;
    be->layernorm_forward(c->out, c->mean, c->rstd, c->inp, c->w, c->b, c->N, c->C);
    return dot_r(c->out, c->R, (size_t)c->N * c->C);
}

static void ln_bwd(void *p) {
    ln_ctx *c = p;
    be->layernorm_backward(c->dinp, c->dw, c->db, c->R, c->inp, c->w, c->mean, c->rstd,
                           c->N, c->C);
}

static void test_layernorm(const sizes *s) {
    const int N = s->B * s->T, C = s->C;
    const size_t NC = (size_t)N * C;
    ln_ctx c = {N, C, fbuf(NC), fbuf(C), fbuf(C), fbuf(NC), fbuf(N), fbuf(N), fbuf(NC),
                fbuf(NC), fbuf(C), fbuf(C)};
    /* an offset mean, so a one-pass E[x^2] - mean^2 variance would show */
    for (size_t i = 0; i < NC; i++) c.inp[i] = 3.0f + pz_rng_normal(&rng);
    for (int i = 0; i < C; i++) c.w[i] = 1.0f + 0.5f * pz_rng_normal(&rng);
    fill_normal(c.b, C, 0.5f);
    fill_normal(c.R, NC, 1.0f);
    grad_pair p[] = {{"inp", c.inp, c.dinp, NC}, {"weight", c.w, c.dw, C},
                     {"bias", c.b, c.db, C}};
    gradcheck("layernorm", p, 3, ln_loss, ln_bwd, &c, 1e-2f, 1e-3, 5e-3);

    double *ro = dbuf(NC), *rm = dbuf(N), *rr = dbuf(N);
    for (int r = 0; r < N; r++) {
        const float *x = c.inp + (size_t)r * C;
        double m = 0.0, v = 0.0;
        for (int k = 0; k < C; k++) m += x[k];
        m /= C;
        for (int k = 0; k < C; k++) v += (x[k] - m) * (x[k] - m);
        v /= C; /* population variance */
        const double rs = 1.0 / sqrt(v + 1e-5);
        for (int k = 0; k < C; k++) ro[(size_t)r * C + k] = (x[k] - m) * rs * c.w[k] + c.b[k];
        rm[r] = m;
        rr[r] = rs;
    }
    ln_loss(&c);
    expect_close("layernorm forward out vs double", c.out, ro, NC, 1e-5, 1e-5);
    expect_close("layernorm forward mean vs double", c.mean, rm, N, 1e-6, 1e-6);
    expect_close("layernorm forward rstd vs double", c.rstd, rr, N, 1e-6, 1e-5);
    free(ro); free(rm); free(rr);
    be->free(c.inp); be->free(c.w); be->free(c.b); be->free(c.out); be->free(c.mean);
    be->free(c.rstd); be->free(c.R); be->free(c.dinp); be->free(c.dw); be->free(c.db);
}

/* ---- matmul ----------------------------------------------------------- */

/* tests/kernels/op_ctx.h's mm_ctx; dout is R */
static double mm_loss(void *p) {
    mm_ctx *c = p;
    mm_forward(c);
    return dot_r(c->out, c->dout, (size_t)c->N * c->OC);
}

static void test_matmul(const sizes *s) {
    const int N = s->B * s->T, C = s->C, OC = s->OC;
    const size_t NC = (size_t)N * C, OCC = (size_t)OC * C, NO = (size_t)N * OC;
    mm_ctx c = {be, N, C, OC, fbuf(NC), fbuf(OCC), fbuf(OC), fbuf(NO), fbuf(NO), fbuf(NC),
                fbuf(OCC), fbuf(OC)};
    fill_normal(c.inp, NC, 1.0f);
    fill_normal(c.w, OCC, 1.0f);
    fill_normal(c.bias, OC, 1.0f);
    fill_normal(c.dout, NO, 1.0f);
    grad_pair p[] = {{"inp", c.inp, c.dinp, NC}, {"weight", c.w, c.dw, OCC},
                     {"bias", c.bias, c.db, OC}};
    /* L is linear in each input, so the differences are exact up to rounding */
    gradcheck("matmul", p, 3, mm_loss, mm_backward, &c, 5e-2f, 1e-3, 1e-3);

    double *ref = dbuf(NO);
    for (int r = 0; r < N; r++)
        for (int o = 0; o < OC; o++) {
            double a = c.bias[o];
            for (int k = 0; k < C; k++) a += (double)c.inp[(size_t)r * C + k] * c.w[(size_t)o * C + k];
            ref[(size_t)r * OC + o] = a;
        }
    mm_loss(&c);
    expect_close("matmul forward vs double", c.out, ref, NO, 1e-5, 1e-5);
    /* bias NULL means no bias */
    for (int r = 0; r < N; r++)
        for (int o = 0; o < OC; o++) ref[(size_t)r * OC + o] -= c.bias[o];
    be->matmul_forward(c.out, c.inp, c.w, NULL, N, C, OC);
    expect_close("matmul forward, bias NULL", c.out, ref, NO, 1e-5, 1e-5);
    free(ref);

    /* dinp == NULL and dbias == NULL: dweight must be the same as with them */
    float *dw2 = fbuf(OCC);
    double *dw1 = dbuf(OCC);
    be->zero(c.dinp, NC * sizeof(float));
    be->zero(c.dw, OCC * sizeof(float));
    be->zero(c.db, OC * sizeof(float));
    mm_backward(&c);
    to_double(dw1, c.dw, OCC);
    be->matmul_backward(NULL, dw2, NULL, c.dout, c.inp, c.w, N, C, OC);
    expect_close("matmul backward, dinp and dbias NULL", dw2, dw1, OCC, 0.0, 0.0);
    /* the zero-bubble halves: B (dweight and dbias NULL) gives the whole
     * call's dinp bit for bit, W (dinp NULL) its dweight and dbias */
    float *di2 = fbuf(NC), *db2 = fbuf(OC);
    double *di1 = dbuf(NC), *db1 = dbuf(OC);
    to_double(di1, c.dinp, NC);
    to_double(db1, c.db, OC);
    be->zero(di2, NC * sizeof(float));
    be->zero(dw2, OCC * sizeof(float));
    be->zero(db2, OC * sizeof(float));
    be->matmul_backward(di2, NULL, NULL, c.dout, c.inp, c.w, N, C, OC);
    be->matmul_backward(NULL, dw2, db2, c.dout, c.inp, c.w, N, C, OC);
    expect_close("matmul backward, input half (zero-bubble B)", di2, di1, NC, 0.0, 0.0);
    expect_close("matmul backward, weight half (zero-bubble W): dweight", dw2, dw1, OCC, 0.0, 0.0);
    expect_close("matmul backward, weight half (zero-bubble W): dbias", db2, db1, OC, 0.0, 0.0);
    free(di1);
    free(db1);
    be->free(di2);
    be->free(db2);
    free(dw1);
    be->free(dw2);
    be->free(c.inp); be->free(c.w); be->free(c.bias); be->free(c.out); be->free(c.dout);
    be->free(c.dinp); be->free(c.dw); be->free(c.db);
}

/* ---- attention -------------------------------------------------------- */

/* tests/kernels/op_ctx.h's att_ctx; dout is R */
static double att_loss(void *p) {
    att_ctx *c = p;
    att_forward(c);
    return dot_r(c->out, c->dout, (size_t)c->B * c->T * c->C);
}

/* out (B,T,C) and att (B,NH,T,T) of causal attention, in double */
static void att_reference(double *out, double *att, const float *qkv, int B, int T, int C, int NH) {
    const int hs = C / NH;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * 3 * C + h * hs;
                double *a = att + (((size_t)b * NH + h) * T + t) * T;
                double mx = -INFINITY, sum = 0.0;
                for (int t2 = 0; t2 < T; t2++) {
                    a[t2] = 0.0;
                    if (t2 > t) continue;
                    const float *k = qkv + ((size_t)b * T + t2) * 3 * C + C + h * hs;
                    for (int i = 0; i < hs; i++) a[t2] += (double)q[i] * k[i];
                    a[t2] /= sqrt((double)hs);
                    if (a[t2] > mx) mx = a[t2];
                }
                for (int t2 = 0; t2 <= t; t2++) sum += (a[t2] = exp(a[t2] - mx));
                for (int t2 = 0; t2 <= t; t2++) a[t2] /= sum;
                double *o = out + ((size_t)b * T + t) * C + h * hs;
                for (int i = 0; i < hs; i++) {
                    o[i] = 0.0;
                    for (int t2 = 0; t2 <= t; t2++)
                        o[i] += a[t2] * qkv[((size_t)b * T + t2) * 3 * C + 2 * C + h * hs + i];
                }
            }
}

static void test_attention(const sizes *s) {
    const int B = s->B, T = s->T, C = s->C, NH = s->NH;
    const size_t n3 = (size_t)B * T * 3 * C, nout = (size_t)B * T * C;
    const size_t natt = (size_t)B * NH * T * T;
    att_ctx c = {be, B, T, C, NH, fbuf(n3), fbuf(nout), fbuf(natt), fbuf(nout), fbuf(n3),
                 fbuf(natt)};
    fill_normal(c.qkv, n3, 1.0f);
    fill_normal(c.dout, nout, 1.0f);
    grad_pair p[] = {{"qkv", c.qkv, c.dqkv, n3}};
    gradcheck("attention", p, 1, att_loss, att_backward, &c, 1e-2f, 1e-3, 5e-3);

    double *ro = dbuf(nout), *ra = dbuf(natt);
    att_reference(ro, ra, c.qkv, B, T, C, NH);
    att_loss(&c);
    expect_close("attention forward out vs double", c.out, ro, nout, 1e-6, 1e-5);
    expect_close("attention forward att vs double (0 above diag)", c.att, ra, natt, 1e-7, 1e-5);

    /* causality: changing the last position's q, k and v leaves all earlier
     * outputs bit-for-bit the same */
    float *before = xmalloc(nout * sizeof(float));
    memcpy(before, c.out, nout * sizeof(float));
    for (int b = 0; b < B; b++)
        for (int i = 0; i < 3 * C; i++) c.qkv[((size_t)b * T + T - 1) * 3 * C + i] += 1.0f;
    att_loss(&c);
    int same = 1, changed = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int i = 0; i < C; i++) {
                const size_t k = ((size_t)b * T + t) * C + i;
                if (t < T - 1) same &= c.out[k] == before[k];
                else changed |= c.out[k] != before[k];
            }
    expect_true("attention causal: a future position does not change earlier outputs",
                same && changed);
    free(before);
    free(ro); free(ra);
    be->free(c.qkv); be->free(c.out); be->free(c.att); be->free(c.dout); be->free(c.dqkv);
    be->free(c.scratch);
}

/* ---- gelu and residual ------------------------------------------------ */

typedef struct {
    size_t n;
    float *inp, *out, *R, *dinp;
} gelu_ctx;

static double gelu_loss(void *p) {
    gelu_ctx *c = p;
    be->gelu_forward(c->out, c->inp, c->n);
    return dot_r(c->out, c->R, c->n);
}

static void gelu_bwd(void *p) {
    gelu_ctx *c = p;
    be->gelu_backward(c->dinp, c->inp, c->R, c->n);
}

static void test_gelu(const sizes *s) {
    const size_t n = (size_t)s->B * s->T * 4 * s->C;
    gelu_ctx c = {n, fbuf(n), fbuf(n), fbuf(n), fbuf(n)};
    fill_normal(c.inp, n, 2.0f);
    fill_normal(c.R, n, 1.0f);
    grad_pair p[] = {{"inp", c.inp, c.dinp, n}};
    gradcheck("gelu", p, 1, gelu_loss, gelu_bwd, &c, 1e-2f, 1e-4, 1e-3);
    be->free(c.inp); be->free(c.out); be->free(c.R); be->free(c.dinp);

    /* precision on a sweep over [-12, 12]: forward and derivative against the
     * tanh formula in double. The derivative crosses 0 near x = -0.75, so the
     * bound there is absolute, a few ulp of the O(1) terms that cancel. */
    const size_t m = 24001;
    float *x = fbuf(m), *y = fbuf(m), *g = fbuf(m), *one = fbuf(m);
    double *ry = dbuf(m), *rg = dbuf(m);
    for (size_t i = 0; i < m; i++) {
        x[i] = -12.0f + 0.001f * (float)i;
        one[i] = 1.0f;
        const double xd = x[i], k0 = sqrt(2.0 / M_PI), k1 = 0.044715;
        const double u = k0 * (xd + k1 * xd * xd * xd), th = tanh(u);
        ry[i] = 0.5 * xd * (1.0 + th);
        rg[i] = 0.5 * (1.0 + th) + 0.5 * xd * (1.0 - th * th) * k0 * (1.0 + 3.0 * k1 * xd * xd);
    }
    be->gelu_forward(y, x, m);
    be->gelu_backward(g, x, one, m);
    expect_close("gelu forward vs double on [-12,12]", y, ry, m, 1e-7, 1e-6);
    expect_close("gelu backward vs double on [-12,12]", g, rg, m, 1e-7, 1e-6);
    be->free(x); be->free(y); be->free(g); be->free(one);
    free(ry); free(rg);
}

typedef struct {
    size_t n;
    float *a, *b, *out, *R, *da, *db;
} res_ctx;

static double res_loss(void *p) {
    res_ctx *c = p;
    be->residual_forward(c->out, c->a, c->b, c->n);
    return dot_r(c->out, c->R, c->n);
}

static void res_bwd(void *p) {
    res_ctx *c = p;
    be->residual_backward(c->da, c->db, c->R, c->n);
}

static void test_residual(const sizes *s) {
    const size_t n = (size_t)s->B * s->T * s->C + 3; /* a ragged simd tail */
    res_ctx c = {n, fbuf(n), fbuf(n), fbuf(n), fbuf(n), fbuf(n), fbuf(n)};
    fill_normal(c.a, n, 1.0f);
    fill_normal(c.b, n, 1.0f);
    fill_normal(c.R, n, 1.0f);
    grad_pair p[] = {{"a", c.a, c.da, n}, {"b", c.b, c.db, n}};
    gradcheck("residual", p, 2, res_loss, res_bwd, &c, 1e-2f, 1e-4, 1e-3);
    be->free(c.a); be->free(c.b); be->free(c.out); be->free(c.R); be->free(c.da);
    be->free(c.db);
}

/* ---- cross-entropy ---------------------------------------------------- */

typedef struct {
    int N, V, Vp;
    float *logits, *losses;
    int *targets;
} ce_ctx;

static double ce_loss(void *p) {
    ce_ctx *c = p;
    be->crossentropy_forward(c->losses, c->logits, c->targets, c->N, c->V, c->Vp, 0.0f);
    double s = 0.0;
    for (int r = 0; r < c->N; r++) s += c->losses[r];
    return s;
}

static void test_crossentropy(const sizes *s) {
    const int N = s->B * s->T, V = s->V, Vp = s->Vp;
    const size_t n = (size_t)N * Vp;
    ce_ctx c = {N, V, Vp, fbuf(n), fbuf(N), be->alloc(N * sizeof(int))};
    fill_normal(c.logits, n, 2.0f);
    fill_ids(c.targets, N, V);
    for (int r = 0; r < N; r++)
        for (int i = V; i < Vp; i++) c.logits[(size_t)r * Vp + i] = 50.0f; /* must be ignored */
    /* rows whose exp would overflow or underflow without the max shift */
    for (int i = 0; i < V; i++) {
        c.logits[i] += 100.0f;
        c.logits[(size_t)Vp + i] -= 120.0f;
    }

    /* losses against log-sum-exp in double */
    double *ref = dbuf(N);
    for (int r = 0; r < N; r++) {
        const float *x = c.logits + (size_t)r * Vp;
        double mx = x[0], sum = 0.0;
        for (int i = 1; i < V; i++) mx = x[i] > mx ? x[i] : mx;
        for (int i = 0; i < V; i++) sum += exp((double)x[i] - mx);
        ref[r] = log(sum) + mx - x[c.targets[r]];
    }
    float *copy = xmalloc(n * sizeof(float));
    memcpy(copy, c.logits, n * sizeof(float));
    ce_loss(&c);
    expect_close("crossentropy loss vs double", c.losses, ref, N, 1e-6, 1e-6);
    expect_true("crossentropy dscale == 0 leaves logits untouched",
                memcmp(copy, c.logits, n * sizeof(float)) == 0);

    /* dlogits = dscale * d(sum of losses)/dlogits, 0 in padded columns (where
     * the differences are exactly 0 too, as the loss ignores them) */
    double *fd = dbuf(n);
    fd_grad(fd, c.logits, n, 1e-2f, ce_loss, &c);
    const float dscale = 0.37f;
    for (size_t i = 0; i < n; i++) fd[i] *= dscale;
    be->crossentropy_forward(c.losses, c.logits, c.targets, N, V, Vp, dscale);
    expect_close("crossentropy loss with dscale != 0", c.losses, ref, N, 1e-6, 1e-6);
    expect_close("crossentropy dlogits vs finite differences", c.logits, fd, n, 1e-4, 1e-2);
    int pad_zero = 1;
    for (int r = 0; r < N; r++)
        for (int i = V; i < Vp; i++) pad_zero &= c.logits[(size_t)r * Vp + i] == 0.0f;
    expect_true("crossentropy padded columns get exactly 0", pad_zero);
    /* exact form: (softmax - onehot) * dscale against double */
    for (int r = 0; r < N; r++) {
        const float *x = copy + (size_t)r * Vp;
        double mx = x[0], sum = 0.0;
        for (int i = 1; i < V; i++) mx = x[i] > mx ? x[i] : mx;
        for (int i = 0; i < V; i++) sum += exp((double)x[i] - mx);
        for (int i = 0; i < Vp; i++)
            fd[(size_t)r * Vp + i] = i < V ? dscale * (exp((double)x[i] - mx) / sum -
                                                      (i == c.targets[r])) : 0.0;
    }
    expect_close("crossentropy dlogits vs double softmax", c.logits, fd, n, 1e-7, 1e-5);
    free(fd); free(ref); free(copy);
    be->free(c.logits); be->free(c.losses); be->free(c.targets);
}

/* GPT-2's vocabulary: many blocks of partial sums, against double */
static void test_crossentropy_gpt2(void) {
    const int N = 3, V = 50257, Vp = 50304;
    const size_t n = (size_t)N * Vp;
    float *logits = fbuf(n), *losses = fbuf(N);
    int *targets = be->alloc(N * sizeof(int));
    double *ref = dbuf(N), *dref = dbuf(n);
    fill_normal(logits, n, 3.0f);
    fill_ids(targets, N, V);
    const float dscale = 1.0f / 3.0f;
    for (int r = 0; r < N; r++) {
        const float *x = logits + (size_t)r * Vp;
        double mx = x[0], sum = 0.0;
        for (int i = 1; i < V; i++) mx = x[i] > mx ? x[i] : mx;
        for (int i = 0; i < V; i++) sum += exp((double)x[i] - mx);
        ref[r] = log(sum) + mx - x[targets[r]];
        for (int i = 0; i < Vp; i++)
            dref[(size_t)r * Vp + i] = i < V ? dscale * (exp((double)x[i] - mx) / sum -
                                                        (i == targets[r])) : 0.0;
    }
    be->crossentropy_forward(losses, logits, targets, N, V, Vp, dscale);
    expect_close("crossentropy V=50257 loss vs double", losses, ref, N, 1e-6, 1e-6);
    /* probabilities are ~1e-5 here, so the bound is relative */
    expect_close("crossentropy V=50257 dlogits vs double", logits, dref, n, 1e-12, 1e-5);
    be->free(logits); be->free(losses); be->free(targets);
    free(ref); free(dref);
}

/* ---- optimizer side --------------------------------------------------- */

static void test_sumsq(void) {
    const size_t n = 1000003;
    float *x = fbuf(n);
    fill_normal(x, n, 3.0f);
    double ref = 0.0;
    for (size_t i = 0; i < n; i++) ref += (double)x[i] * x[i];
    const float got = (float)be->sumsq(x, n);
    expect_close("sumsq vs double loop (1e6 elements)", &got, &ref, 1, 0.0, 1e-7);
    const double exact = be->sumsq(x, n);
    expect_true("sumsq accumulates in double (rel err < 1e-12)", fabs(exact - ref) <= 1e-12 * ref);
    be->free(x);
}

/* one AdamW step of (param, grad, m, v) (n) at 1-based step t, in double */
static void adamw_reference(double *p, double *m, double *v, const float *grad, size_t n,
                            double lr, double b1, double b2, double eps, double wd,
                            double gs, int t) {
    for (size_t i = 0; i < n; i++) {
        const double g = grad[i] * gs;
        m[i] = b1 * m[i] + (1 - b1) * g;
        v[i] = b2 * v[i] + (1 - b2) * g * g;
        const double mhat = m[i] / (1 - pow(b1, t)), vhat = v[i] / (1 - pow(b2, t));
        p[i] -= lr * (mhat / (sqrt(vhat) + eps) + wd * p[i]);
    }
}

static void test_adamw(void) {
    const size_t n = 4099;
    float *p = fbuf(n), *g = fbuf(n), *m = fbuf(n), *v = fbuf(n);
    double *rp = dbuf(n), *rm = dbuf(n), *rv = dbuf(n);
    const float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, gs = 0.5f;
    fill_normal(p, n, 1.0f);
    fill_normal(g, n, 1.0f);
    to_double(rp, p, n);
    /* step 1 from zero moments: bias correction makes the step ~lr * sign(g) */
    be->adamw_update(p, g, m, v, n, lr, b1, b2, eps, wd, gs, 1);
    adamw_reference(rp, rm, rv, g, n, lr, b1, b2, eps, wd, gs, 1);
    expect_close("adamw t=1 param vs double", p, rp, n, 1e-7, 1e-6);
    expect_close("adamw t=1 m vs double", m, rm, n, 1e-8, 1e-6);
    expect_close("adamw t=1 v vs double", v, rv, n, 1e-9, 1e-6);
    /* step 7 with the moments of step 1 and a new gradient */
    fill_normal(g, n, 1.0f);
    be->adamw_update(p, g, m, v, n, lr, b1, b2, eps, wd, gs, 7);
    adamw_reference(rp, rm, rv, g, n, lr, b1, b2, eps, wd, gs, 7);
    expect_close("adamw t=7 param vs double", p, rp, n, 1e-7, 1e-6);
    expect_close("adamw t=7 m vs double", m, rm, n, 1e-8, 1e-6);
    expect_close("adamw t=7 v vs double", v, rv, n, 1e-9, 1e-6);
    be->free(p); be->free(g); be->free(m); be->free(v);
    free(rp); free(rm); free(rv);
}

/* ---- memory ----------------------------------------------------------- */

static void test_memory(void) {
    const size_t sizes[] = {1, 100, 4096, (size_t)3 << 20};
    int ok = 1;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        unsigned char *a = be->alloc(sizes[k]);
        ok &= ((uintptr_t)a % 64) == 0;
        for (size_t i = 0; i < sizes[k]; i++) ok &= a[i] == 0;
        memset(a, 0xab, sizes[k]);
        be->zero(a, sizes[k]);
        for (size_t i = 0; i < sizes[k]; i++) ok &= a[i] == 0;
        unsigned char *h = xmalloc(sizes[k]), *h2 = xmalloc(sizes[k]);
        for (size_t i = 0; i < sizes[k]; i++) h[i] = (unsigned char)(i * 7 + 1);
        unsigned char *b = be->alloc(sizes[k]);
        be->from_host(a, h, sizes[k]);
        be->copy(b, a, sizes[k]);
        be->to_host(h2, b, sizes[k]);
        ok &= memcmp(h, h2, sizes[k]) == 0;
        be->free(b);
        free(h);
        free(h2);
        be->free(a);
    }
    expect_true("alloc is 64-byte aligned and zeroed; zero, from_host, copy, to_host", ok);
}

int main(void) {
    be = pz_backend_cpu();
    const sizes cases[] = {
        {2, 5, 8, 2, 12, 11, 16},      /* small: everything fits one vector */
        {2, 33, 48, 3, 40, 37, 48},    /* ragged vectors, three channel slices */
        {1, 130, 16, 2, 24, 37, 48},   /* three attention blocks of 64, 64, 2 rows */
    };
    const int ncases = (int)(sizeof cases / sizeof cases[0]);
    const int threads[] = {1, 3};
    for (int ti = 0; ti < 2; ti++) {
        pz_backend_cpu_set_threads(threads[ti]);
        for (int ci = 0; ci < ncases; ci++) {
            const sizes *s = &cases[ci];
            printf("threads %d, B=%d T=%d C=%d NH=%d OC=%d V=%d Vp=%d\n", pz_backend_cpu_threads(),
                   s->B, s->T, s->C, s->NH, s->OC, s->V, s->Vp);
            pz_rng_seed(&rng, 1234 + ci);
            test_encoder(s);
            test_layernorm(s);
            test_matmul(s);
            test_attention(s);
            test_gelu(s);
            test_residual(s);
            test_crossentropy(s);
        }
        test_crossentropy_gpt2();
        test_sumsq();
        test_adamw();
        test_memory();
    }
    if (failures) {
        printf("test_ops: %d check(s) FAILED\n", failures);
        return 1;
    }
    printf("test_ops: all checks passed\n");
    return 0;
}
