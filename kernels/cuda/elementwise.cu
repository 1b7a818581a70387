/* elementwise.cu: token + position embedding, GELU and the residual add.
 * Memory-bound grid-stride loops over size_t indices; GELU's formula is the
 * shared one of kernels/op_math.h. */
#include "kernels/cuda/cuda_ops.cuh"

#define EW_THREADS 256

/* out (B,T,C) = wte (V,C) [inp (B,T)] + wpe (maxT,C) [t] */
__global__ static void encoder_forward_kernel(float *out, const int *inp, const float *wte,
                                              const float *wpe, size_t N, int T, int C) {
    PZ_GRID_STRIDE(i, N * (size_t)C) {
        const size_t bt = i / (size_t)C, c = i % (size_t)C, t = bt % (size_t)T;
        out[i] = wte[(size_t)inp[bt] * C + c] + wpe[t * C + c];
    }
}

/* dwte (V,C) += scatter of dout rows by token id. A token can repeat in a
 * batch, so rows cannot be split without atomics (whose float sums depend on
 * timing). Instead each thread owns one channel c and adds all N rows in
 * (b,t) order, as the CPU backend's threads do: deterministic, equal to the
 * CPU sums in order, but only C threads wide; it is a small part of a step. */
__global__ static void encoder_backward_wte_kernel(float *dwte, const float *dout, const int *inp,
                                                   size_t N, int C) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    for (size_t bt = 0; bt < N; bt++) dwte[(size_t)inp[bt] * C + c] += dout[bt * C + c];
}

/* dwpe (T,C) [t] += sum over b of dout[b,t]: one thread per (t, c), b in order */
__global__ static void encoder_backward_wpe_kernel(float *dwpe, const float *dout, int B, int T, int C) {
    PZ_GRID_STRIDE(i, (size_t)T * C) {
        float s = 0.0f;
        for (int b = 0; b < B; b++) s += dout[(size_t)b * T * C + i];
        dwpe[i] += s;
    }
}

__global__ static void gelu_forward_kernel(float *out, const float *inp, size_t n) {
    PZ_GRID_STRIDE(i, n) out[i] = pz_gelu(inp[i]);
}

__global__ static void gelu_backward_kernel(float *dinp, const float *inp, const float *dout, size_t n) {
    PZ_GRID_STRIDE(i, n) dinp[i] = fmaf(pz_gelu_grad(inp[i]), dout[i], dinp[i]);
}

/* out may alias a or b: each element is read before it is written */
__global__ static void residual_forward_kernel(float *out, const float *a, const float *b, size_t n) {
    PZ_GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

__global__ static void residual_backward_kernel(float *da, float *db, const float *dout, size_t n) {
    PZ_GRID_STRIDE(i, n) {
        const float d = dout[i];
        da[i] += d;
        db[i] += d;
    }
}

void pz_cuda_encoder_forward(float *out, const int *inp, const float *wte,
                             const float *wpe, int B, int T, int C) {
    const size_t N = (size_t)B * T;
    if (N == 0 || C <= 0) return;
    encoder_forward_kernel<<<pz_cuda_blocks(N * C, EW_THREADS), EW_THREADS>>>(out, inp, wte, wpe, N, T, C);
    CUDA_CHECK_LAUNCH();
}

void pz_cuda_encoder_backward(float *dwte, float *dwpe, const float *dout,
                              const int *inp, int B, int T, int C) {
    const size_t N = (size_t)B * T;
    if (N == 0 || C <= 0) return;
    encoder_backward_wte_kernel<<<(C + 127) / 128, 128>>>(dwte, dout, inp, N, C);
    CUDA_CHECK_LAUNCH();
    encoder_backward_wpe_kernel<<<pz_cuda_blocks((size_t)T * C, EW_THREADS), EW_THREADS>>>(dwpe, dout, B, T, C);
    CUDA_CHECK_LAUNCH();
}

void pz_cuda_gelu_forward(float *out, const float *inp, size_t n) {
    if (!n) return;
    gelu_forward_kernel<<<pz_cuda_blocks(n, EW_THREADS), EW_THREADS>>>(out, inp, n);
    CUDA_CHECK_LAUNCH();
}

void pz_cuda_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n) {
    if (!n) return;
    gelu_backward_kernel<<<pz_cuda_blocks(n, EW_THREADS), EW_THREADS>>>(dinp, inp, dout, n);
    CUDA_CHECK_LAUNCH();
}

void pz_cuda_residual_forward(float *out, const float *a, const float *b, size_t n) {
    if (!n) return;
    residual_forward_kernel<<<pz_cuda_blocks(n, EW_THREADS), EW_THREADS>>>(out, a, b, n);
    CUDA_CHECK_LAUNCH();
}

void pz_cuda_residual_backward(float *da, float *db, const float *dout, size_t n) {
    if (!n) return;
    residual_backward_kernel<<<pz_cuda_blocks(n, EW_THREADS), EW_THREADS>>>(da, db, dout, n);
    CUDA_CHECK_LAUNCH();
}
