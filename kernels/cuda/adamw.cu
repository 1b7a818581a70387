/* adamw.cu: the optimizer-side ops: the squared gradient norm (in double)
 * and the AdamW update (the shared formula of kernels/op_math.h). */
#include "kernels/cuda/cuda_ops.cuh"

#include <math.h>

#define SS_THREADS 256
#define SS_BLOCKS 1024 /* fixed grid: the partial sums, hence the result, do not depend on n */

/* partial[blockIdx.x] = sum of x[i]^2 in double over the block's grid-stride share */
__global__ static void sumsq_partial_kernel(double *partial, const float *x, size_t n) {
    __shared__ double s[SS_THREADS];
    double acc = 0.0;
    for (size_t i = blockIdx.x * (size_t)SS_THREADS + threadIdx.x; i < n; i += (size_t)SS_BLOCKS * SS_THREADS) {
        const double d = (double)x[i];
        acc += d * d;
    }
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int k = SS_THREADS / 2; k > 0; k >>= 1) {
        if ((int)threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

/* partial[0] = sum of partial[0..SS_BLOCKS), one block, fixed order */
__global__ static void sumsq_final_kernel(double *partial) {
    __shared__ double s[SS_THREADS];
    double acc = 0.0;
    for (int i = threadIdx.x; i < SS_BLOCKS; i += SS_THREADS) acc += partial[i];
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int k = SS_THREADS / 2; k > 0; k >>= 1) {
        if ((int)threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[0] = s[0];
}

/* Sum of x (n) squared. The partials live in a device buffer allocated on
 * first use and kept: one per process, as the backend serves one thread. */
double pz_cuda_sumsq(const float *x, size_t n) {
    static double *partial = NULL;
    if (!partial) CUDA_CHECK(cudaMalloc(&partial, SS_BLOCKS * sizeof(double)));
    if (n == 0) return 0.0;
    sumsq_partial_kernel<<<SS_BLOCKS, SS_THREADS>>>(partial, x, n);
    CUDA_CHECK_LAUNCH();
    sumsq_final_kernel<<<1, SS_THREADS>>>(partial);
    CUDA_CHECK_LAUNCH();
    double r = 0.0;
    CUDA_CHECK(cudaMemcpy(&r, partial, sizeof r, cudaMemcpyDeviceToHost));
    return r;
}

__global__ static void adamw_kernel(float *param, const float *grad, float *m, float *v, size_t n,
                                    float lr, float beta1, float beta2, float eps, float wd,
                                    float grad_scale, float inv_bc1, float inv_bc2) {
    PZ_GRID_STRIDE(i, n)
        pz_adamw_elem(&param[i], &m[i], &v[i], grad[i], lr, beta1, beta2, eps, wd, grad_scale, inv_bc1, inv_bc2);
}

/* bias corrections in double on the host, as kernels/cpu/adamw.c */
void pz_cuda_adamw_update(float *param, const float *grad, float *m, float *v, size_t n,
                          float lr, float beta1, float beta2, float eps, float wd,
                          float grad_scale, int t) {
    if (!n) return;
    const float inv_bc1 = (float)(1.0 / (1.0 - pow((double)beta1, (double)t)));
    const float inv_bc2 = (float)(1.0 / (1.0 - pow((double)beta2, (double)t)));
    adamw_kernel<<<pz_cuda_blocks(n, 256), 256>>>(param, grad, m, v, n, lr, beta1, beta2, eps, wd,
                                                  grad_scale, inv_bc1, inv_bc2);
    CUDA_CHECK_LAUNCH();
}
