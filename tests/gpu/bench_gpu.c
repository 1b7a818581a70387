/* bench_gpu.c: speed of full GPT-2 training steps on the CUDA backend against
 * the GPU's cuBLAS sgemm peak measured in the same run (suite gpu; exits 77,
 * SKIP, without a usable GPU).
 *
 *   tests/gpu/bench_gpu [--tf32] [--steps N] [--batch B] [--seq T]
 *
 * Peak: the best median of cublasSgemm (or, with --tf32, cublasGemmEx in
 * TF32) over the GEMM shapes of a GPT-2 124M step at this B*T and a large
 * square one, timed with CUDA events. Model FLOPs per token follow llm.c
 * (and bench/bench_train.c): 6 * params + 6 * L * C * T. MFU here is that
 * model rate over the measured sgemm peak, not over the datasheet. The timed
 * steps are tests/bench_step.c's, shared with bench/bench_train.c. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
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
#include "tests/bench_step.h"

#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) pz_die("%s:%d: %s: %s", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); } while (0)
#define CB(call) do { cublasStatus_t s_ = (call); if (s_ != CUBLAS_STATUS_SUCCESS) pz_die("%s:%d: %s: %s", __FILE__, __LINE__, #call, cublasGetStatusString(s_)); } while (0)

/* median GFLOP/s of C (M,N) = A (M,K) . B (N,K)^T, row-major, as matmul_forward runs it */
static double sgemm_gflops(cublasHandle_t h, int tf32, int M, int N, int K, int reps) {
    float *A, *B, *C;
    CK(cudaMalloc((void **)&A, (size_t)M * K * sizeof(float)));
    CK(cudaMalloc((void **)&B, (size_t)N * K * sizeof(float)));
    CK(cudaMalloc((void **)&C, (size_t)M * N * sizeof(float)));
    CK(cudaMemset(A, 0, (size_t)M * K * sizeof(float)));
    CK(cudaMemset(B, 0, (size_t)N * K * sizeof(float)));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    double *t = xmalloc((size_t)reps * sizeof(double));
    const float one = 1.0f, zero = 0.0f;
    for (int r = -2; r < reps; r++) {  /* two warm-up calls */
        CK(cudaEventRecord(e0, 0));
        if (tf32)
            CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, B, CUDA_R_32F, K, A, CUDA_R_32F, K,
                            &zero, C, CUDA_R_32F, N, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
        else
            CB(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, B, K, A, K, &zero, C, N));
        CK(cudaEventRecord(e1, 0));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 0) t[r] = ms * 1e-3;
    }
    double med = bench_median(t, reps);
    CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(C));
    CK(cudaEventDestroy(e0)); CK(cudaEventDestroy(e1));
    free(t);
    return 2.0 * M * N * K / med * 1e-9;
}

static void sync_device(void) { CK(cudaDeviceSynchronize()); }

int main(int argc, char **argv) {
    int tf32 = 0, steps = 10, B = 4, T = 1024;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--tf32") == 0) tf32 = 1;
        else if (!bench_int_option(argc, argv, &i, "--steps", 1, 1000, &steps) &&
                 !bench_int_option(argc, argv, &i, "--batch", 1, 1024, &B) &&
                 !bench_int_option(argc, argv, &i, "--seq", 1, 1024, &T)) {
            fprintf(stderr, "usage: bench_gpu [--tf32] [--steps N] [--batch B] [--seq T]\n");
            return 1;
        }
    }
    char err[512];
    const pz_backend *be = pz_backend_cuda_init(0, tf32, err, sizeof err);
    if (!be) {
        printf("SKIP: %s\n", err);
        return 77;
    }
    struct cudaDeviceProp prop;
    int dev;
    CK(cudaGetDevice(&dev));
    CK(cudaGetDeviceProperties(&prop, dev));
    printf("device %d: %s, %d SMs, %.1f GiB; products in %s\n", dev, prop.name, prop.multiProcessorCount,
           (double)prop.totalGlobalMem / (1 << 30), tf32 ? "TF32" : "fp32");
    cublasHandle_t h;
    CB(cublasCreate(&h));
    CB(cublasSetMathMode(h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    const int NT = B * T;
    const int shapes[][3] = {{NT, 2304, 768}, {NT, 3072, 768}, {NT, 768, 3072}, {NT, 50304, 768}, {8192, 8192, 8192}};
    double peak = 0.0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        double g = sgemm_gflops(h, tf32, shapes[i][0], shapes[i][1], shapes[i][2], 9);
        printf("%s M=%d N=%d K=%d: %.0f GFLOP/s (median of 9)\n", tf32 ? "cublasGemmEx TF32" : "cublasSgemm",
               shapes[i][0], shapes[i][1], shapes[i][2], g);
        if (g > peak) peak = g;
    }
    CB(cublasDestroy(h));
    printf("sgemm peak (best shape): %.0f GFLOP/s\n", peak);
    const bench_step_opts gpu = {.device_params = 1, .sync = sync_device, .ms_digits = 2, .gflops_digits = 0,
                                 .show_loss = 1, .peak_name = "the sgemm peak (MFU)"};
    bench_train_steps(be, "gpt2", B, T, steps, peak, &gpu);
    bench_train_steps(be, "demo", 16, 256, steps, peak, &gpu);
    return 0;
}
