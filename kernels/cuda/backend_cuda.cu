/* backend_cuda.cu: the CUDA pz_backend table, device memory, device set-up
 * and the cuBLAS handle.
 *
 * Device selection happens once per process (pz_backend_cuda_init): a
 * pipeline rank asks for GPU `rank`, taken modulo the number of GPUs, so S
 * stages on one host with S GPUs use one GPU each. Init probes everything
 * that can fail for reasons outside the program (driver, device, context,
 * cuBLAS) and reports it as a message; after that, CUDA failures abort
 * (cuda_ops.cuh says why). */
#include "kernels/cuda/cuda_ops.cuh"

#include <string.h>

static cublasHandle_t blas_handle;
static cublasComputeType_t compute_type = CUBLAS_COMPUTE_32F;

void pz_cuda_fatal(const char *file, int line, const char *call, const char *msg) {
    fflush(stdout);
    fprintf(stderr, "pipezip: CUDA error at %s:%d: %s: %s\n", file, line, call, msg);
    abort();
}

cublasHandle_t pz_cuda_blas(void) { return blas_handle; }
cublasComputeType_t pz_cuda_compute_type(void) { return compute_type; }

/* zero-filled, as the backend contract promises; aborts when out of memory */
static void *cuda_alloc(size_t bytes) {
    void *p = NULL;
    if (bytes == 0) bytes = 1;  /* a distinct valid pointer, like xaligned_alloc */
    CUDA_CHECK(cudaMalloc(&p, bytes));
    CUDA_CHECK(cudaMemset(p, 0, bytes));
    return p;
}

static void cuda_free(void *p) {
    if (p) CUDA_CHECK(cudaFree(p));
}

static void cuda_zero(void *p, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, 0));
}

/* device -> host: returns when the bytes are in host memory (and so after
 * every op queued before it) */
static void cuda_to_host(void *dst_host, const void *src, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemcpy(dst_host, src, bytes, cudaMemcpyDeviceToHost));
}

/* host -> device: returns when src_host may be reused (cudaMemcpy's rule for
 * both pinned and pageable sources) */
static void cuda_from_host(void *dst, const void *src_host, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemcpy(dst, src_host, bytes, cudaMemcpyHostToDevice));
}

static void cuda_copy(void *dst, const void *src, size_t bytes) {
    if (bytes && dst != src) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, 0));
}

/* pinned host memory: transfers from it run by DMA at full PCIe/NVLink speed */
static void *cuda_host_alloc(size_t bytes) {
    void *p = NULL;
    if (bytes == 0) bytes = 1;
    CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocDefault));
    memset(p, 0, bytes);
    return p;
}

static void cuda_host_free(void *p) {
    if (p) CUDA_CHECK(cudaFreeHost(p));
}

static pz_backend make_table(void) {
    pz_backend b;
    memset(&b, 0, sizeof b);
    b.name = "cuda";
    b.host_memory = 0;
    b.alloc = cuda_alloc;
    b.free = cuda_free;
    b.zero = cuda_zero;
    b.to_host = cuda_to_host;
    b.from_host = cuda_from_host;
    b.copy = cuda_copy;
    b.host_alloc = cuda_host_alloc;
    b.host_free = cuda_host_free;
    b.encoder_forward = pz_cuda_encoder_forward;
    b.encoder_backward = pz_cuda_encoder_backward;
    b.layernorm_forward = pz_cuda_layernorm_forward;
    b.layernorm_backward = pz_cuda_layernorm_backward;
    b.matmul_forward = pz_cuda_matmul_forward;
    b.matmul_backward = pz_cuda_matmul_backward;
    b.attention_forward = pz_cuda_attention_forward;
    b.attention_backward = pz_cuda_attention_backward;
    b.attention_cached_forward = pz_cuda_attention_cached_forward;
    b.gelu_forward = pz_cuda_gelu_forward;
    b.gelu_backward = pz_cuda_gelu_backward;
    b.residual_forward = pz_cuda_residual_forward;
    b.residual_backward = pz_cuda_residual_backward;
    b.crossentropy_forward = pz_cuda_crossentropy_forward;
    b.sumsq = pz_cuda_sumsq;
    b.adamw_update = pz_cuda_adamw_update;
    return b;
}

static pz_backend table;
static int initialised;

extern "C" const pz_backend *pz_backend_cuda_init(int ordinal, int tf32, char *err, size_t errlen) {
    if (initialised) return &table;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "no usable CUDA GPU (cudaGetDeviceCount: %s)", cudaGetErrorString(e));
        return NULL;
    }
    if (count < 1) {
        snprintf(err, errlen, "no usable CUDA GPU (cudaGetDeviceCount found none)");
        return NULL;
    }
    int dev = (ordinal < 0 ? 0 : ordinal) % count;
    if ((e = cudaSetDevice(dev)) != cudaSuccess || (e = cudaFree(0)) != cudaSuccess) {
        /* cudaFree(0) creates the context: a busy or broken GPU fails here */
        snprintf(err, errlen, "cannot use CUDA device %d of %d: %s", dev, count, cudaGetErrorString(e));
        return NULL;
    }
    cublasStatus_t s = cublasCreate(&blas_handle);
    if (s != CUBLAS_STATUS_SUCCESS) {
        snprintf(err, errlen, "cublasCreate on device %d: %s", dev, cublasGetStatusString(s));
        return NULL;
    }
    /* fp32 unless asked: TF32 rounds the products' inputs to 10 mantissa bits */
    compute_type = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    CUBLAS_CHECK(cublasSetMathMode(blas_handle, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    table = make_table();
    initialised = 1;
    return &table;
}
