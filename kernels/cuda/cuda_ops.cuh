/* cuda_ops.cuh: private header of the CUDA backend (kernels/cuda/).
 *
 * Every CUDA and cuBLAS call is checked. A failure inside an op is a
 * programming or resource error (the shapes were validated on the host, the
 * device was probed at init), so, as with xmalloc on the host, it aborts with
 * the file, line, call and the library's own message instead of returning a
 * code through every op. Kernel launches are checked with cudaGetLastError;
 * faults inside a kernel surface at the next checked call.
 *
 * All work runs on the legacy default stream (stream 0), which orders every
 * kernel, cuBLAS call and cudaMemcpy after the previous one, so ops need no
 * events; cudaMemcpy to the host waits for everything queued before it.
 *
 * Shapes follow kernels/backend.h: B batch, T time, C channels, OC output
 * channels, NH heads, hs = C/NH, V real vocab, Vp padded vocab, N = B*T. */
#ifndef PZ_CUDA_OPS_CUH
#define PZ_CUDA_OPS_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/backend.h"
#include "kernels/op_math.h"

/* The message of a failed CUDA runtime or cuBLAS call, NULL on success: one
 * overload per status type, so that one check macro serves both. */
static inline const char *pz_cuda_failure(cudaError_t e) {
    return e == cudaSuccess ? NULL : cudaGetErrorString(e);
}
static inline const char *pz_cuda_failure(cublasStatus_t s) {
    return s == CUBLAS_STATUS_SUCCESS ? NULL : cublasGetStatusString(s);
}

#define PZ_CUDA_CHECK_CALL(call)                                                      \
    do {                                                                              \
        const char *pz_m_ = pz_cuda_failure(call);                                    \
        if (pz_m_) pz_cuda_fatal(__FILE__, __LINE__, #call, pz_m_);                   \
    } while (0)
#define CUDA_CHECK(call) PZ_CUDA_CHECK_CALL(call)
#define CUBLAS_CHECK(call) PZ_CUDA_CHECK_CALL(call)

/* after every kernel launch: bad launch configurations show up here */
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

/* prints "pipezip: CUDA error at FILE:LINE: CALL: MESSAGE" and aborts */
[[noreturn]] void pz_cuda_fatal(const char *file, int line, const char *call, const char *msg);

/* the process's cuBLAS handle and its GEMM compute type (fp32, or TF32 when
 * the backend was initialised with tf32) */
cublasHandle_t pz_cuda_blas(void);
cublasComputeType_t pz_cuda_compute_type(void);

/* blocks for a grid-stride loop over n items with `threads` per block:
 * enough to fill any current GPU, and within gridDim.x's limit */
static inline unsigned pz_cuda_blocks(size_t n, unsigned threads) {
    size_t b = (n + threads - 1) / threads;
    const size_t cap = (size_t)1 << 20;
    return (unsigned)(b < 1 ? 1 : (b > cap ? cap : b));
}

/* Row-major GEMM on column-major cuBLAS:
 *   C (M,N) = alpha op(A) (M,K) . op(B) (K,N) + beta C, all row-major with
 *   leading dimensions lda, ldb, ldc (elements between rows),
 * batched over `batch` matrices at element strides sA, sB, sC.
 * A row-major matrix is the column-major storage of its transpose, so cuBLAS
 * computes C^T (N,M) = op(B)^T . op(A)^T: the operands swap places and M, N
 * swap, while each operand keeps its own transpose flag. */
void pz_cuda_gemm_rm(bool transA, bool transB, int M, int N, int K, float alpha,
                     const float *A, int lda, long long sA, const float *B, int ldb, long long sB,
                     float beta, float *C, int ldc, long long sC, int batch);

/* ops (see kernels/backend.h for the contracts) */
void pz_cuda_encoder_forward(float *out, const int *inp, const float *wte,
                             const float *wpe, int B, int T, int C);
void pz_cuda_encoder_backward(float *dwte, float *dwpe, const float *dout,
                              const int *inp, int B, int T, int C);
void pz_cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                               const float *weight, const float *bias, int N, int C);
void pz_cuda_layernorm_backward(float *dinp, float *dweight, float *dbias,
                                const float *dout, const float *inp, const float *weight,
                                const float *mean, const float *rstd, int N, int C);
void pz_cuda_matmul_forward(float *out, const float *inp, const float *weight,
                            const float *bias, int N, int C, int OC);
void pz_cuda_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                             const float *inp, const float *weight, int N, int C, int OC);
void pz_cuda_attention_forward(float *out, float *att, const float *qkv,
                               int B, int T, int C, int NH);
void pz_cuda_attention_backward(float *dqkv, float *scratch, const float *dout,
                                const float *qkv, const float *att,
                                int B, int T, int C, int NH);
void pz_cuda_attention_cached_forward(float *out, float *kcache, float *vcache, float *scores,
                                      const float *qkv, int pos0, int n, int C, int NH);
void pz_cuda_gelu_forward(float *out, const float *inp, size_t n);
void pz_cuda_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n);
void pz_cuda_residual_forward(float *out, const float *a, const float *b, size_t n);
void pz_cuda_residual_backward(float *da, float *db, const float *dout, size_t n);
void pz_cuda_crossentropy_forward(float *losses, float *logits, const int *targets,
                                  int N, int V, int Vp, float dscale);
double pz_cuda_sumsq(const float *x, size_t n);
void pz_cuda_adamw_update(float *param, const float *grad, float *m, float *v, size_t n,
                          float lr, float beta1, float beta2, float eps, float wd,
                          float grad_scale, int t);

/* Column sums of a row-major (rows, cols) array, for bias gradients:
 * out[c] += sum over r of x[r*cols + c]. Deterministic: a fixed partition and
 * a fixed reduction order (layernorm.cu has the same pattern for its two
 * parameter gradients). */
void pz_cuda_colsum_add(float *out, const float *x, int rows, int cols);

/* warp-wide sums and max (all 32 lanes active) */
__device__ __forceinline__ float pz_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ double pz_warp_sum_d(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float pz_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

#endif
