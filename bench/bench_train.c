/* bench_train.c: speed of a full training step (forward, backward, AdamW)
 * against this machine's cblas_sgemm peak measured in the same run.
 *
 *   build/bench/bench_train [--threads N] [--steps N] [--only gpt2|demo]
 *
 * Peak: the best median GFLOP/s of cblas_sgemm over the GEMM shapes a GPT-2
 * 124M step at B=4, T=64 runs (and a large square one), one independent
 * sgemm per thread at once (see sgemm_gflops). Model FLOPs per token
 * follow llm.c's estimate: 6 * params (padded wte included) + 6 * L * C * T. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "runtime/optim.h"
#include "stages/stage.h"
#include "base/clock.h"
#include "base/mem.h"
#include "base/parse.h"
#include "base/rng.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Median GFLOP/s of cblas_sgemm C(M,N) = A(M,K) . B(K,N)^T when every one of
 * our threads runs its own single-threaded sgemm at once: the machine's total
 * sgemm throughput, with no splitting or synchronisation cost. (OpenBLAS's own
 * multi-threaded sgemm was slower than this on the 2-core build machine.) */
static double sgemm_gflops(int M, int N, int K, int reps) {
    int nt = pz_backend_cpu_threads();
    double *t = xmalloc((size_t)reps * sizeof(double));
    float **A = xcalloc((size_t)nt, sizeof *A), **B = xcalloc((size_t)nt, sizeof *B), **C = xcalloc((size_t)nt, sizeof *C);
    for (int k = 0; k < nt; k++) {
        A[k] = xaligned_alloc((size_t)M * K * sizeof(float));
        B[k] = xaligned_alloc((size_t)K * N * sizeof(float));
        C[k] = xaligned_alloc((size_t)M * N * sizeof(float));
        for (size_t i = 0; i < (size_t)M * K; i++) A[k][i] = (float)(i % 7) * 0.01f;
        for (size_t i = 0; i < (size_t)K * N; i++) B[k][i] = (float)(i % 5) * 0.01f;
    }
    for (int r = -1; r < reps; r++) {   /* r = -1 warms up */
        double t0 = pz_now();
#pragma omp parallel for num_threads(nt) schedule(static, 1)
        for (int k = 0; k < nt; k++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, A[k], K, B[k], K, 0.0f, C[k], N);
        if (r >= 0) t[r] = pz_now() - t0;
    }
    double med = median(t, reps);
    for (int k = 0; k < nt; k++) { free(A[k]); free(B[k]); free(C[k]); }
    free(A); free(B); free(C); free(t);
    return 2.0 * M * N * K * nt / med * 1e-9;
}

static void bench_model(const char *preset, int B, int T, int steps, double peak) {
    pz_gpt2_config cfg;
    if (pz_gpt2_preset(preset, &cfg) != PZ_OK) pz_die("%s", pz_last_error());
    pz_stage s;
    pz_stage_range r = pz_whole_model(&cfg);
    if (pz_stage_init(&s, pz_backend_cpu(), &cfg, &r, B, T) != PZ_OK) pz_die("%s", pz_last_error());
    pz_gpt2_params_init(&s.params, 42);
    pz_acts a;
    pz_acts_init(&a, &s);
    pz_optim_config oc;
    pz_optim_config_default(&oc);
    pz_optim o;
    pz_optim_init(&o, &s, &oc);
    int N = B * T;
    int *inp = xmalloc((size_t)N * sizeof(int)), *tgt = xmalloc((size_t)N * sizeof(int));
    pz_rng rng;
    pz_rng_seed(&rng, 7);
    for (int i = 0; i < N; i++) {
        inp[i] = (int)pz_rng_below(&rng, (uint64_t)cfg.vocab_size);
        tgt[i] = (int)pz_rng_below(&rng, (uint64_t)cfg.vocab_size);
    }
    double *ms = xmalloc((size_t)steps * sizeof(double));
    double *fwd = xmalloc((size_t)steps * sizeof(double));
    double *bwd = xmalloc((size_t)steps * sizeof(double));
    double *opt = xmalloc((size_t)steps * sizeof(double));
    for (int k = -1; k < steps; k++) { /* k = -1: warm-up step, not timed */
        double t0 = pz_now();
        pz_stage_zero_grad(&s);
        pz_stage_forward(&s, &a, inp, NULL, tgt, 1.0f / (float)N);
        double t1 = pz_now();
        pz_stage_backward(&s, &a, NULL, NULL);
        double t2 = pz_now();
        double norm = sqrt(pz_grad_sumsq(&s));
        pz_optim_step(&o, &s, pz_clip_scale(&o.cfg, norm));
        double t3 = pz_now();
        if (k >= 0) { ms[k] = 1e3 * (t3 - t0); fwd[k] = 1e3 * (t1 - t0); bwd[k] = 1e3 * (t2 - t1); opt[k] = 1e3 * (t3 - t2); }
    }
    double step_ms = median(ms, steps);
    double nparams = (double)pz_gpt2_numel(&cfg);
    double flops_tok = 6.0 * nparams + 6.0 * cfg.num_layers * cfg.channels * T;
    double gflops = flops_tok * N / (step_ms * 1e-3) * 1e-9;
    printf("%-5s B=%d T=%d params=%.1fM: step %.1f ms (fwd %.1f, zero+bwd %.1f, clip+adamw %.1f; median of %d), "
           "%.0f tok/s, %.1f GFLOP/s = %.1f%% of sgemm peak\n",
           preset, B, T, nparams / 1e6, step_ms, median(fwd, steps), median(bwd, steps), median(opt, steps),
           steps, N / (step_ms * 1e-3), gflops, 100.0 * gflops / peak);
    free(ms); free(fwd); free(bwd); free(opt); free(inp); free(tgt);
    pz_optim_free(&o, &s);
    pz_acts_free(&a, &s);
    pz_stage_free(&s);
}

int main(int argc, char **argv) {
    int threads = 0, steps = 5;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        long v;
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            if (pz_parse_int(argv[++i], 0, 1024, &v, "--threads") != PZ_OK) pz_die("%s", pz_last_error());
            threads = (int)v;
        } else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
            if (pz_parse_int(argv[++i], 1, 1000, &v, "--steps") != PZ_OK) pz_die("%s", pz_last_error());
            steps = (int)v;
        } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else {
            fprintf(stderr, "usage: bench_train [--threads N] [--steps N] [--only gpt2|demo]\n");
            return 1;
        }
    }
    pz_backend_cpu_set_threads(threads);
    /* GEMM shapes of one GPT-2 124M block and the head at B*T = 256, plus a square one */
    static const int shapes[][3] = {{256, 2304, 768}, {256, 3072, 768}, {256, 768, 3072},
                                    {256, 50304, 768}, {1024, 1024, 1024}};
    double peak = 0.0;
    printf("threads: %d\n", pz_backend_cpu_threads());
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        double g = sgemm_gflops(shapes[i][0], shapes[i][1], shapes[i][2], 9);
        printf("cblas_sgemm M=%d N=%d K=%d, one per thread: %.1f GFLOP/s (median of 9)\n", shapes[i][0], shapes[i][1], shapes[i][2], g);
        if (g > peak) peak = g;
    }
    printf("sgemm peak (best shape, all threads): %.1f GFLOP/s\n", peak);
    if (!only || strcmp(only, "gpt2") == 0) bench_model("gpt2", 4, 64, steps, peak);
    if (!only || strcmp(only, "demo") == 0) bench_model("demo", 8, 256, steps, peak);
    return 0;
}
