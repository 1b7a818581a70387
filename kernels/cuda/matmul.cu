/* matmul.cu: the linear layer through cuBLAS, plus the row-major GEMM helper
 * that attention.cu shares and the deterministic column sum for biases.
 *
 * Weights are (OC, C) as in nn.Linear, everything row-major. In row-major
 * terms (pz_cuda_gemm_rm) the products are those of kernels/cpu/matmul.c:
 *   forward  out   = inp . W^T    (N, T, M=N,  N=OC, K=C,  beta 0)
 *   backward dinp += dout . W     (N, N, M=N,  N=C,  K=OC, beta 1)
 *            dW   += dout^T . inp (T, N, M=OC, N=C,  K=N,  beta 1)
 * and cuBLAS, column-major, sees each as its transpose. For the forward:
 *   out^T (OC,N) = W (OC,C) . inp^T (C,N),
 * where the row-major W (OC,C) is stored as the column-major W^T (C,OC), so
 * it enters with op T (lda = C), and the row-major inp (N,C) is the
 * column-major inp^T (C,N), op N (ldb = C); the result, column-major (OC,N)
 * with ldc = OC, is the row-major out (N,OC):
 *   cublasGemmEx(T, N, m=OC, n=N, k=C, W, C, inp, C, out, OC). */
#include "kernels/cuda/cuda_ops.cuh"

void pz_cuda_gemm_rm(bool transA, bool transB, int M, int N, int K, float alpha,
                     const float *A, int lda, long long sA, const float *B, int ldb, long long sB,
                     float beta, float *C, int ldc, long long sC, int batch) {
    if (M <= 0 || N <= 0 || batch <= 0) return;
    const cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (batch == 1) {
        CUBLAS_CHECK(cublasGemmEx(pz_cuda_blas(), opB, opA, N, M, K, &alpha, B, CUDA_R_32F, ldb,
                                  A, CUDA_R_32F, lda, &beta, C, CUDA_R_32F, ldc,
                                  pz_cuda_compute_type(), CUBLAS_GEMM_DEFAULT));
    } else {
        CUBLAS_CHECK(cublasGemmStridedBatchedEx(pz_cuda_blas(), opB, opA, N, M, K, &alpha,
                                                B, CUDA_R_32F, ldb, sB, A, CUDA_R_32F, lda, sA,
                                                &beta, C, CUDA_R_32F, ldc, sC, batch,
                                                pz_cuda_compute_type(), CUBLAS_GEMM_DEFAULT));
    }
}

/* out (rows, cols) += bias (cols) broadcast over rows */
__global__ static void add_bias_kernel(float *out, const float *bias, size_t rows, int cols) {
    const size_t n = rows * (size_t)cols;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] += bias[i % (size_t)cols];
}

/* Column sums, deterministically: block (32, CS_ROWS) owns 32 columns; thread
 * (tx, ty) adds rows ty, ty + CS_ROWS, ... of column c in order, then the
 * CS_ROWS partial sums are added in a fixed order. Reads are coalesced: the
 * 32 threads of a warp read 32 consecutive floats of one row. */
#define CS_ROWS 16
__global__ static void colsum_add_kernel(float *out, const float *x, int rows, int cols) {
    __shared__ float part[CS_ROWS][33];
    const int c = blockIdx.x * 32 + threadIdx.x;
    float s = 0.0f;
    if (c < cols)
        for (int r = threadIdx.y; r < rows; r += CS_ROWS) s += x[(size_t)r * cols + c];
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
        float t = 0.0f;
        for (int k = 0; k < CS_ROWS; k++) t += part[k][threadIdx.x];
        out[c] += t;
    }
}

void pz_cuda_colsum_add(float *out, const float *x, int rows, int cols) {
    if (rows <= 0 || cols <= 0) return;
    colsum_add_kernel<<<(cols + 31) / 32, dim3(32, CS_ROWS)>>>(out, x, rows, cols);
    CUDA_CHECK_LAUNCH();
}

/* out (N,OC) = inp (N,C) . weight (OC,C)^T + bias (OC); bias may be NULL */
void pz_cuda_matmul_forward(float *out, const float *inp, const float *weight,
                            const float *bias, int N, int C, int OC) {
    pz_cuda_gemm_rm(false, true, N, OC, C, 1.0f, inp, C, 0, weight, C, 0, 0.0f, out, OC, 0, 1);
    if (bias) {
        add_bias_kernel<<<pz_cuda_blocks((size_t)N * OC, 256), 256>>>(out, bias, (size_t)N, OC);
        CUDA_CHECK_LAUNCH();
    }
}

/* dinp (N,C) += dout (N,OC) . weight (OC,C); dweight (OC,C) += dout^T . inp;
 * dbias (OC) += colsum(dout). dinp and dbias may be NULL; so may dweight
 * (then dbias is skipped too): the halves of a zero-bubble backward. */
void pz_cuda_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                             const float *inp, const float *weight, int N, int C, int OC) {
    if (dinp) pz_cuda_gemm_rm(false, false, N, C, OC, 1.0f, dout, OC, 0, weight, C, 0, 1.0f, dinp, C, 0, 1);
    if (!dweight) return;
    pz_cuda_gemm_rm(true, false, OC, C, N, 1.0f, dout, OC, 0, inp, C, 0, 1.0f, dweight, C, 0, 1);
    if (dbias) pz_cuda_colsum_add(dbias, dout, N, OC);
}
