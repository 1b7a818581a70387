/* bench_train.c: speed of a full training step (forward, backward, AdamW)
 * against this machine's cblas_sgemm peak measured in the same run.
 *
 *   build/bench/bench_train [--threads N] [--steps N] [--only gpt2|demo]
 *
 * Peak: the best median GFLOP/s of cblas_sgemm over the GEMM shapes a GPT-2
 * 124M step at B=4, T=64 runs (and a large square one), one independent
 * sgemm per thread at once (see sgemm_gflops). Model FLOPs per token
 * follow llm.c's estimate: 6 * params (padded wte included) + 6 * L * C * T.
 * The timed steps are tests/bench_step.c's, shared with tests/gpu/bench_gpu.c.
 *
 * One run per instruction-set level from the CPU's best down to x86-64-v3
 * (issue 26: >= 80% of the peak at v3 and at v4), each a child process
 * started with PIPEZIP_ISA set, which prints its own peak and steps; with
 * PIPEZIP_ISA set, only that level. At x86-64-v3 the run (child, or this
 * process run again when PIPEZIP_ISA=x86-64-v3 was set by hand) also gets
 * OPENBLAS_CORETYPE=Haswell (unless it is set), so that OpenBLAS's sgemm,
 * in the peak and in the step alike, is its AVX2 kernel, as on a CPU
 * without AVX-512; the header names the kernel OpenBLAS chose. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "stages/optim.h"
#include "stages/stage.h"
#include "base/clock.h"
#include "base/mem.h"
#include "base/parse.h"
#include "base/rng.h"
#include "bench/bench_isa.h"
#include "tests/bench_step.h"

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
    double med = bench_median(t, reps);
    for (int k = 0; k < nt; k++) { free(A[k]); free(B[k]); free(C[k]); }
    free(A); free(B); free(C); free(t);
    return 2.0 * M * N * K * nt / med * 1e-9;
}

/* the environment at a level: AVX2 sgemm at x86-64-v3, unless the caller
 * chose a kernel; returns 1 if it set anything */
static int level_env(pz_isa level) {
    if (level != PZ_ISA_AVX2 || getenv("OPENBLAS_CORETYPE")) return 0;
    setenv("OPENBLAS_CORETYPE", "Haswell", 1);
    return 1;
}

int main(int argc, char **argv) {
    int threads = 0, steps = 5;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (bench_int_option(argc, argv, &i, "--threads", 0, 1024, &threads) ||
            bench_int_option(argc, argv, &i, "--steps", 1, 1000, &steps))
            continue;
        if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else {
            fprintf(stderr, "usage: bench_train [--threads N] [--steps N] [--only gpt2|demo]\n");
            return 1;
        }
    }
    const char *env = getenv("PIPEZIP_ISA");
    if (!(env && *env) && pz_isa_built() > PZ_ISA_BASELINE && pz_isa_cpu() >= PZ_ISA_AVX2)
        return bench_each_isa(argv, PZ_ISA_AVX2, level_env);
    bench_isa_same_env(argv, level_env);   /* PIPEZIP_ISA=x86-64-v3 by hand: the same sgemm as the v3 child's */
    setvbuf(stdout, NULL, _IOLBF, 0);   /* a run takes minutes: each line as it is measured, also through tee */
    pz_backend_cpu_set_threads(threads);
    printf("kernels compiled for: %s; OpenBLAS sgemm kernel: %s\n", pz_isa_describe(), openblas_get_corename());
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
    static const bench_step_opts cpu = {.ms_digits = 1, .gflops_digits = 1, .peak_name = "sgemm peak"};
    if (!only || strcmp(only, "gpt2") == 0) bench_train_steps(pz_backend_cpu(), "gpt2", 4, 64, steps, peak, &cpu);
    if (!only || strcmp(only, "demo") == 0) bench_train_steps(pz_backend_cpu(), "demo", 8, 256, steps, peak, &cpu);
    return 0;
}
