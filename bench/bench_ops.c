/* bench_ops.c: timings of the CPU backend's ops at GPT-2 124M shapes, and of
 * a whole training step through the stage API.
 *
 *   bench_ops [threads (2)] [B (4)] [T (64)] [steps (5)] [ops (1): 0 = step only]
 *             [clock (wall): cpu = op times as CPU time / threads]
 *
 * Each op is run until ~0.3 s have passed and the best time is printed: on a
 * shared 2-core VM the minimum is the stable statistic. Matmuls are printed
 * next to a bare cblas_sgemm of the same shapes, so the bias pass and call
 * overhead show. Attention is also timed at T = 1024, and its forward
 * against the first version (per-row vectorized loops, kept here), which the
 * per-head sgemm version replaced. */
#include "base/isa.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_ops.h" /* pz_cpu_expf, for the old attention loop */
#include "stages/optim.h"
#include "runtime/plan/train.h"
#include "base/clock.h"
#include "base/mem.h"
#include "base/rng.h"
#include "base/status.h"
#include "tests/kernels/op_ctx.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const pz_backend *be;
static pz_rng rng;

/* CPU seconds used by all threads of the process. Under load from other
 * processes, wall time counts the time our threads wait for a core and CPU
 * time does not, so with OMP_WAIT_POLICY=passive (idle threads sleep rather
 * than spin) CPU time / threads estimates the wall time on a quiet machine. */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cpu_clock; /* time ops by CPU time / threads instead of wall time */

/* best seconds per call of fn over ~0.3 s (at least 3 calls, one warm-up) */
static double best_time(op_fn fn, void *ctx) {
    fn(ctx);
    double best = 1e30, start = pz_now();
    int reps = 0;
    while (reps < 3 || pz_now() - start < 0.3) {
        const double t0 = cpu_clock ? cpu_now() : pz_now();
        fn(ctx);
        double t = (cpu_clock ? cpu_now() : pz_now()) - t0;
        if (cpu_clock) t /= pz_backend_cpu_threads();
        best = t < best ? t : best;
        reps++;
    }
    return best;
}

static float *randbuf(size_t n, float sd) {
    float *x = be->alloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = sd * pz_rng_normal(&rng);
    return x;
}

/* ---- matmul ----------------------------------------------------------- */

static void sgemm_fwd(void *p) {
    mm_ctx *c = p;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c->N, c->OC, c->C, 1.0f, c->inp, c->C,
                c->w, c->C, 0.0f, c->out, c->OC);
}
static void sgemm_bwd(void *p) {
    mm_ctx *c = p;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c->N, c->C, c->OC, 1.0f, c->dout,
                c->OC, c->w, c->C, 1.0f, c->dinp, c->C);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c->OC, c->C, c->N, 1.0f, c->dout, c->OC,
                c->inp, c->C, 1.0f, c->dw, c->C);
}

/* prints one shape; returns the op's fwd + bwd seconds */
static double bench_matmul(const char *name, int N, int C, int OC, int has_bias) {
    mm_ctx c = {be, N, C, OC, randbuf((size_t)N * C, 1), randbuf((size_t)OC * C, 0.02f),
                has_bias ? randbuf(OC, 0.02f) : NULL, randbuf((size_t)N * OC, 1),
                randbuf((size_t)N * OC, 1e-3f), randbuf((size_t)N * C, 0),
                randbuf((size_t)OC * C, 0), has_bias ? randbuf(OC, 0) : NULL};
    const double f = 2.0 * N * C * OC;
    const double tf = best_time(mm_forward, &c), tb = best_time(mm_backward, &c);
    /* the baseline is a plain sgemm as any caller would make it: OpenBLAS's
     * own threads (the backend keeps it single-threaded) */
    openblas_set_num_threads(pz_backend_cpu_threads());
    const double sf = best_time(sgemm_fwd, &c), sb = best_time(sgemm_bwd, &c);
    openblas_set_num_threads(1);
    printf("  matmul %-8s N=%d C=%d OC=%d  fwd %7.2f ms %6.1f GF/s (sgemm %6.1f)"
           "  bwd %7.2f ms %6.1f GF/s (sgemm pair %6.1f)\n",
           name, N, C, OC, tf * 1e3, f / tf * 1e-9, f / sf * 1e-9, tb * 1e3, 2 * f / tb * 1e-9,
           2 * f / sb * 1e-9);
    be->free(c.inp); be->free(c.w); be->free(c.out); be->free(c.dout); be->free(c.dinp);
    be->free(c.dw);
    if (has_bias) { be->free(c.bias); be->free(c.db); }
    return tf + tb;
}

/* ---- attention, and the per-row loops it was measured against --------- */

/* The first attention forward, kept for comparison: one task per (b,h,t)
 * row, hs-long vectorized dot products for the scores and axpys for the
 * output. */
static void att_fwd_rows(void *p) {
    att_ctx *c = p;
    const int T = c->T, C = c->C, NH = c->NH, hs = C / NH;
    const size_t C3 = 3 * (size_t)C;
    const float scale = 1.0f / sqrtf((float)hs);
    const long rows = (long)c->B * NH * T;
    #pragma omp parallel for schedule(static, 1) num_threads(pz_backend_cpu_threads())
    for (long row = 0; row < rows; row++) {
        const int t = (int)(row % T), bh = (int)(row / T), b = bh / NH, h = bh % NH;
        const float *base = c->qkv + (size_t)b * T * C3 + (size_t)h * hs, *q = base + t * C3;
        float *a = c->att + (size_t)row * T, mx = -INFINITY, sum = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) {
            const float *k = base + t2 * C3 + C;
            float s = 0.0f;
            #pragma omp simd reduction(+:s)
            for (int i = 0; i < hs; i++) s = fmaf(q[i], k[i], s);
            a[t2] = s * scale;
            mx = a[t2] > mx ? a[t2] : mx;
        }
        #pragma omp simd reduction(+:sum)
        for (int t2 = 0; t2 <= t; t2++) sum += (a[t2] = pz_cpu_expf(a[t2] - mx));
        for (int t2 = 0; t2 <= t; t2++) a[t2] /= sum;
        for (int t2 = t + 1; t2 < T; t2++) a[t2] = 0.0f;
        float *o = c->out + ((size_t)b * T + t) * C + (size_t)h * hs;
        for (int i = 0; i < hs; i++) o[i] = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) {
            const float *v = base + t2 * C3 + 2 * C;
            #pragma omp simd
            for (int i = 0; i < hs; i++) o[i] = fmaf(a[t2], v[i], o[i]);
        }
    }
}

/* prints one size; returns fwd + bwd seconds */
static double bench_attention(int B, int T, int C, int NH) {
    const size_t n3 = (size_t)B * T * 3 * C, n = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    att_ctx c = {be, B, T, C, NH, randbuf(n3, 1), randbuf(n, 0), randbuf(na, 0), randbuf(n, 1),
                 randbuf(n3, 0), randbuf(na, 0)};
    /* useful (causal) flops: 2 products forward, 4 backward */
    const double f = 2.0 * B * NH * (T * (T + 1.0) / 2) * (C / NH) * 2;
    const double tf = best_time(att_forward, &c), tb = best_time(att_backward, &c);
    const double ts = best_time(att_fwd_rows, &c);
    printf("  attention B=%d T=%d  fwd %7.2f ms %5.1f GF/s  bwd %7.2f ms %5.1f GF/s"
           "  | per-row loops fwd %7.2f ms\n",
           B, T, tf * 1e3, f / tf * 1e-9, tb * 1e3, 2 * f / tb * 1e-9, ts * 1e3);
    be->free(c.qkv); be->free(c.out); be->free(c.att); be->free(c.dout); be->free(c.dqkv);
    be->free(c.scratch);
    return tf + tb;
}

/* ---- elementwise, layernorm, loss, optimizer ------------------------- */

typedef struct {
    size_t n;
    int N, C, V, Vp;
    float *a, *b, *c, *d, *mean, *rstd, *w, *bias, *dw, *db;
    int *ids;
} ew_ctx;

static void gelu_f(void *p) { ew_ctx *c = p; be->gelu_forward(c->b, c->a, c->n); }
static void gelu_b(void *p) { ew_ctx *c = p; be->gelu_backward(c->c, c->a, c->b, c->n); }
static void res_f(void *p) { ew_ctx *c = p; be->residual_forward(c->c, c->a, c->b, c->n); }
static void res_b(void *p) { ew_ctx *c = p; be->residual_backward(c->c, c->d, c->a, c->n); }
static void ln_f(void *p) {
    ew_ctx *c = p;
    be->layernorm_forward(c->b, c->mean, c->rstd, c->a, c->w, c->bias, c->N, c->C);
}
static void ln_b(void *p) {
    ew_ctx *c = p;
    be->layernorm_backward(c->c, c->dw, c->db, c->d, c->a, c->w, c->mean, c->rstd, c->N, c->C);
}
static void ce(void *p) {
    ew_ctx *c = p;
    /* refresh the logits each call: the op overwrites them with dlogits */
    memcpy(c->b, c->a, (size_t)c->N * c->Vp * sizeof(float));
    be->crossentropy_forward(c->mean, c->b, c->ids, c->N, c->V, c->Vp, 1.0f / c->N);
}
static void ce_copy(void *p) {
    ew_ctx *c = p;
    memcpy(c->b, c->a, (size_t)c->N * c->Vp * sizeof(float));
}
static void adamw(void *p) {
    ew_ctx *c = p;
    be->adamw_update(c->a, c->b, c->c, c->d, c->n, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 10);
}
static void zero(void *p) { ew_ctx *c = p; be->zero(c->c, c->n * sizeof(float)); }
static volatile double sink;
static void sumsq(void *p) { ew_ctx *c = p; sink = be->sumsq(c->b, c->n); }

static void bench_misc(int N, int C, int V, int Vp, size_t nparams, double *per_step_ms) {
    ew_ctx e = {0};
    e.n = (size_t)N * 4 * C;
    e.a = randbuf(e.n, 1); e.b = randbuf(e.n, 1); e.c = randbuf(e.n, 0); e.d = randbuf(e.n, 1);
    const double gf = best_time(gelu_f, &e), gb = best_time(gelu_b, &e);
    printf("  gelu n=%zu  fwd %6.3f ms  bwd %6.3f ms\n", e.n, gf * 1e3, gb * 1e3);
    e.n = (size_t)N * C;
    const double rf = best_time(res_f, &e), rb = best_time(res_b, &e);
    printf("  residual n=%zu  fwd %6.3f ms  bwd %6.3f ms\n", e.n, rf * 1e3, rb * 1e3);
    e.N = N; e.C = C;
    e.mean = randbuf(N, 0); e.rstd = randbuf(N, 0); e.w = randbuf(C, 1); e.bias = randbuf(C, 1);
    e.dw = randbuf(C, 0); e.db = randbuf(C, 0);
    const double lf = best_time(ln_f, &e), lb = best_time(ln_b, &e);
    printf("  layernorm N=%d C=%d  fwd %6.3f ms  bwd %6.3f ms\n", N, C, lf * 1e3, lb * 1e3);
    be->free(e.a); be->free(e.b);

    e.V = V; e.Vp = Vp;
    e.a = randbuf((size_t)N * Vp, 2); e.b = randbuf((size_t)N * Vp, 0);
    e.ids = be->alloc(N * sizeof(int));
    for (int i = 0; i < N; i++) e.ids[i] = (int)pz_rng_below(&rng, (uint64_t)V);
    const double cet = best_time(ce, &e) - best_time(ce_copy, &e);
    printf("  crossentropy N=%d Vp=%d (with dlogits)  %6.3f ms\n", N, Vp, cet * 1e3);
    be->free(e.a); be->free(e.b); be->free(e.c); be->free(e.d); be->free(e.ids);

    e.n = nparams;
    e.a = randbuf(e.n, 1); e.b = randbuf(e.n, 1e-3f); e.c = randbuf(e.n, 0); e.d = randbuf(e.n, 0);
    const double ta = best_time(adamw, &e), ts = best_time(sumsq, &e), tz = best_time(zero, &e);
    printf("  adamw n=%zu  %6.1f ms (%.1f GB/s)   sumsq %6.1f ms   zero %6.1f ms\n", e.n,
           ta * 1e3, 28.0 * e.n / ta * 1e-9, ts * 1e3, tz * 1e3);
    be->free(e.a); be->free(e.b); be->free(e.c); be->free(e.d);
    be->free(e.mean); be->free(e.rstd); be->free(e.w); be->free(e.bias); be->free(e.dw);
    be->free(e.db);
    /* per step: 12 blocks x (2 layernorm, 1 gelu, 2 residual) + final layernorm,
     * loss, and over all parameters one zero (the gradients), sumsq and AdamW */
    *per_step_ms = 1e3 * (12 * (2 * (lf + lb) + gf + gb + 2 * (rf + rb)) + lf + lb + cet + ta +
                          ts + tz);
}

/* ---- a whole step through the stage API ------------------------------- */

static void bench_step(int B, int T, int steps) {
    pz_stage s;
    pz_acts a;
    pz_optim opt;
    pz_optim_config oc;
    if (pz_model_create(&s, be, "gpt2", NULL, 0, 1, B, T) != PZ_OK ||
        pz_acts_init(&a, &s) != PZ_OK) {
        printf("  step: cannot build the model: %s\n", pz_last_error());
        return;
    }
    pz_optim_config_default(&oc);
    if (pz_optim_init(&opt, &s, &oc) != PZ_OK) {
        printf("  step: cannot init the optimizer: %s\n", pz_last_error());
        return;
    }
    int *tok = xmalloc((size_t)B * (T + 1) * sizeof(int));
    for (int i = 0; i < B * (T + 1); i++) tok[i] = (int)pz_rng_below(&rng, 50257);
    double best = 1e30, tfwd = 0, tbwd = 0, topt = 0, best_cpu = 1e30;
    for (int i = 0; i <= steps; i++) {
        const double c0 = cpu_now(), t0 = pz_now();
        pz_stage_zero_grad(&s);
        pz_stage_forward(&s, &a, tok, NULL, tok + B, 1.0f / (B * T));
        const double t1 = pz_now();
        pz_stage_backward(&s, &a, NULL, NULL);
        const double t2 = pz_now();
        const double norm = sqrt(pz_grad_sumsq(&s));
        pz_optim_step(&opt, &s, pz_clip_scale(&opt.cfg, norm));
        const double t3 = pz_now(), cpu = cpu_now() - c0;
        if (i > 0 && t3 - t0 < best) { /* step 0 pays first-touch page faults */
            best = t3 - t0;
            tfwd = t1 - t0; tbwd = t2 - t1; topt = t3 - t2;
        }
        if (i > 0 && cpu < best_cpu) best_cpu = cpu;
        printf("  step %d: %.3f s, cpu %.3f s (loss %.4f)\n", i, t3 - t0, cpu, a.loss);
    }
    const double flops = 6.0 * 124475904.0 * B * T + 6.0 * 12 * 768 * (double)T * B * T; /* ~mfu.h */
    printf("  best step %.3f s = zero+fwd %.3f + bwd %.3f + norm+adamw %.3f; %.1f GFLOP/s"
           " (%.0f GFLOP per step)\n", best, tfwd, tbwd, topt, flops / best * 1e-9, flops * 1e-9);
    printf("  best cpu time per step %.3f s = %.3f s per thread\n", best_cpu,
           best_cpu / pz_backend_cpu_threads());
    free(tok);
    pz_optim_free(&opt, &s);
    pz_acts_free(&a, &s);
    pz_stage_free(&s);
}

/* every op at the step's shapes, and their sum per step */
static void bench_all_ops(int B, int T) {
    const int C = 768, NH = 12, V = 50257, Vp = 50304, N = B * T;
    double mm = 12 * (bench_matmul("qkv", N, C, 3 * C, 1) + bench_matmul("attproj", N, C, C, 1) +
                      bench_matmul("fc", N, C, 4 * C, 1) + bench_matmul("fcproj", N, 4 * C, C, 1));
    mm += bench_matmul("lm_head", N, C, Vp, 0);
    const double att = 12 * bench_attention(B, T, C, NH);
    if (T != 1024) bench_attention(B, 1024, C, NH);
    double misc;
    bench_misc(N, C, V, Vp, 124475904, &misc);
    printf("  sum of op times per step: matmul %.0f ms + attention %.0f ms + other %.0f ms"
           " = %.0f ms\n", mm * 1e3, att * 1e3, misc, mm * 1e3 + att * 1e3 + misc);
}

int main(int argc, char **argv) {
    const int nt = argc > 1 ? atoi(argv[1]) : 2;
    const int B = argc > 2 ? atoi(argv[2]) : 4, T = argc > 3 ? atoi(argv[3]) : 64;
    const int steps = argc > 4 ? atoi(argv[4]) : 5, ops = argc > 5 ? atoi(argv[5]) : 1;
    cpu_clock = argc > 6 && strcmp(argv[6], "cpu") == 0;
    be = pz_backend_cpu();
    pz_backend_cpu_set_threads(nt);
    pz_rng_seed(&rng, 42);
    /* the matmuls are OpenBLAS's, whose kernel follows the CPU (or OPENBLAS_CORETYPE), not PIPEZIP_ISA */
    printf("bench_ops: threads %d, B=%d T=%d (GPT-2 124M shapes), op times by %s, ops compiled for %s; "
           "OpenBLAS sgemm kernel: %s\n",
           pz_backend_cpu_threads(), B, T, cpu_clock ? "CPU time / threads" : "wall clock", pz_isa_describe(),
           openblas_get_corename());
    if (ops) bench_all_ops(B, T);
    if (steps > 0) bench_step(B, T, steps);
    return 0;
}
