/* layernorm.cu: LayerNorm over the channel dim, as kernels/cpu/layernorm.c:
 * population variance, eps 1e-5, two passes (mean, then squared deviations,
 * never E[x^2] - mean^2), mean and rstd saved for backward. One warp per row;
 * the parameter gradients are column sums, done by a separate deterministic
 * kernel rather than atomics, so runs repeat bit for bit. */
#include "kernels/cuda/cuda_ops.cuh"

#define LN_EPS 1e-5f
#define LN_WARPS 8 /* rows per block */

/* out (N,C) = (inp - mean) * rstd * weight + bias; mean, rstd (N) */
__global__ static void layernorm_forward_kernel(float *out, float *mean, float *rstd, const float *inp,
                                                const float *weight, const float *bias, int N, int C) {
    const int r = blockIdx.x * LN_WARPS + threadIdx.y, lane = threadIdx.x;
    if (r >= N) return;
    const float *x = inp + (size_t)r * C;
    float *o = out + (size_t)r * C;
    float sum = 0.0f;
    for (int c = lane; c < C; c += 32) sum += x[c];
    const float m = pz_warp_sum(sum) / (float)C;
    float ss = 0.0f;
    for (int c = lane; c < C; c += 32) {
        const float d = x[c] - m;
        ss = fmaf(d, d, ss);
    }
    const float s = 1.0f / sqrtf(pz_warp_sum(ss) / (float)C + LN_EPS);
    for (int c = lane; c < C; c += 32) o[c] = fmaf((x[c] - m) * s, weight[c], bias[c]);
    if (lane == 0) {
        mean[r] = m;
        rstd[r] = s;
    }
}

/* dinp (N,C) += rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)),
 * norm = (inp - mean) * rstd, dnorm = dout * weight. One warp per row. */
__global__ static void layernorm_dinp_kernel(float *dinp, const float *dout, const float *inp,
                                             const float *weight, const float *mean, const float *rstd,
                                             int N, int C) {
    const int r = blockIdx.x * LN_WARPS + threadIdx.y, lane = threadIdx.x;
    if (r >= N) return;
    const float *x = inp + (size_t)r * C, *d = dout + (size_t)r * C;
    float *di = dinp + (size_t)r * C;
    const float m = mean[r], s = rstd[r];
    float sum_dn = 0.0f, sum_dnn = 0.0f;
    for (int c = lane; c < C; c += 32) {
        const float dn = d[c] * weight[c];
        sum_dn += dn;
        sum_dnn = fmaf(dn, (x[c] - m) * s, sum_dnn);
    }
    const float a = pz_warp_sum(sum_dn) / (float)C, b = pz_warp_sum(sum_dnn) / (float)C;
    for (int c = lane; c < C; c += 32) {
        const float norm = (x[c] - m) * s;
        const float dn = d[c] * weight[c];
        di[c] = fmaf(s, dn - a - norm * b, di[c]);
    }
}

/* dweight (C) += sum over rows of dout * norm; dbias (C) += sum of dout.
 * Block (32, LNP_ROWS) owns 32 channels, as pz_cuda_colsum_add. */
#define LNP_ROWS 16
__global__ static void layernorm_params_kernel(float *dweight, float *dbias, const float *dout,
                                               const float *inp, const float *mean, const float *rstd,
                                               int N, int C) {
    __shared__ float pw[LNP_ROWS][33], pb[LNP_ROWS][33];
    const int c = blockIdx.x * 32 + threadIdx.x;
    float sw = 0.0f, sb = 0.0f;
    if (c < C)
        for (int r = threadIdx.y; r < N; r += LNP_ROWS) {
            const size_t i = (size_t)r * C + c;
            sw = fmaf(dout[i], (inp[i] - mean[r]) * rstd[r], sw);
            sb += dout[i];
        }
    pw[threadIdx.y][threadIdx.x] = sw;
    pb[threadIdx.y][threadIdx.x] = sb;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float tw = 0.0f, tb = 0.0f;
        for (int k = 0; k < LNP_ROWS; k++) {
            tw += pw[k][threadIdx.x];
            tb += pb[k][threadIdx.x];
        }
        dweight[c] += tw;
        dbias[c] += tb;
    }
}

void pz_cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                               const float *weight, const float *bias, int N, int C) {
    if (N <= 0) return;
    layernorm_forward_kernel<<<(N + LN_WARPS - 1) / LN_WARPS, dim3(32, LN_WARPS)>>>(
        out, mean, rstd, inp, weight, bias, N, C);
    CUDA_CHECK_LAUNCH();
}

/* dinp must not alias dout (the CPU backend's rule too) */
void pz_cuda_layernorm_backward(float *dinp, float *dweight, float *dbias,
                                const float *dout, const float *inp, const float *weight,
                                const float *mean, const float *rstd, int N, int C) {
    if (N <= 0) return;
    layernorm_dinp_kernel<<<(N + LN_WARPS - 1) / LN_WARPS, dim3(32, LN_WARPS)>>>(
        dinp, dout, inp, weight, mean, rstd, N, C);
    CUDA_CHECK_LAUNCH();
    layernorm_params_kernel<<<(C + 31) / 32, dim3(32, LNP_ROWS)>>>(dweight, dbias, dout, inp, mean, rstd, N, C);
    CUDA_CHECK_LAUNCH();
}
