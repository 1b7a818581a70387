/* attention.cu: causal multi-head self-attention on the packed qkv tensor,
 * with the semantics of kernels/cpu/attention.c:
 *  - qkv (B,T,3C) holds [q | k | v] per position; head h uses columns
 *    h*hs .. h*hs+hs-1 of each third, hs = C/NH;
 *  - att (B,NH,T,T) keeps the softmax probabilities of q.k/sqrt(hs) over keys
 *    t2 <= t, and exact zeros above the diagonal;
 *  - backward ADDS into dqkv and overwrites scratch (B,NH,T,T) with the
 *    gradient of the scaled scores (zeros above the diagonal).
 *
 * Products are strided-batched GEMMs over the NH heads of one sequence, on
 * strided views of qkv (row stride 3C; head h starts hs floats after head
 * h-1, so the batch stride is hs), one call per sequence b. Heads of
 * different sequences are 3C*T floats apart, not hs, so one call cannot
 * cover (b, h) with a single stride without first permuting qkv into
 * (B,NH,T,hs), which would cost a copy and a buffer. The full T x T score
 * matrix is computed (twice the triangle's FLOPs); the masking kernels then
 * zero the upper triangle, which also makes the later full-length products
 * (att . v, dpre^T . q, att^T . dout) equal the CPU's triangular ones. */
#include "kernels/cuda/cuda_ops.cuh"

#include <math.h>

#define ATT_WARPS 8 /* rows (one warp each) per block of the row kernels */

/* In place over rows of a (rows, T) array whose row r belongs to query
 * t = r % T: softmax over columns 0..t, zeros beyond. One warp per row;
 * max-shifted, so every exp is <= 1 and the sum is >= 1. */
__global__ static void causal_softmax_kernel(float *att, size_t rows, int T) {
    const size_t r = (size_t)blockIdx.x * ATT_WARPS + threadIdx.y;
    if (r >= rows) return;  /* whole warps leave together: shuffles stay full */
    const int lane = threadIdx.x, t = (int)(r % (size_t)T);
    float *a = att + r * (size_t)T;
    float mx = -INFINITY;
    for (int j = lane; j <= t; j += 32) mx = fmaxf(mx, a[j]);
    mx = pz_warp_max(mx);
    float sum = 0.0f;
    for (int j = lane; j <= t; j += 32) {
        const float e = expf(a[j] - mx);
        a[j] = e;
        sum += e;
    }
    sum = pz_warp_sum(sum);
    const float inv = 1.0f / sum;
    for (int j = lane; j < T; j += 32) a[j] = j <= t ? a[j] * inv : 0.0f;
}

/* In place: on entry d holds datt = dout . v^T, on exit the gradient of the
 * scaled scores, dpre = att * (datt - sum(att * datt)) over columns 0..t and
 * 0 beyond (the CPU's softmax_backward_rows_). One warp per row. */
__global__ static void causal_softmax_backward_kernel(float *d, const float *att, size_t rows, int T) {
    const size_t r = (size_t)blockIdx.x * ATT_WARPS + threadIdx.y;
    if (r >= rows) return;
    const int lane = threadIdx.x, t = (int)(r % (size_t)T);
    float *dr = d + r * (size_t)T;
    const float *ar = att + r * (size_t)T;
    float s = 0.0f;
    for (int j = lane; j <= t; j += 32) s = fmaf(ar[j], dr[j], s);
    s = pz_warp_sum(s);
    for (int j = lane; j < T; j += 32) dr[j] = j <= t ? ar[j] * (dr[j] - s) : 0.0f;
}

static unsigned row_blocks(size_t rows) { return (unsigned)((rows + ATT_WARPS - 1) / ATT_WARPS); }

/* out (B,T,C), att (B,NH,T,T) from qkv (B,T,3C). Per sequence b, batched over h:
 *   att_h (T,T) = scale q_h (T,hs) . k_h^T       then masked softmax
 *   out_h (T,hs) = att_h (T,T) . v_h (T,hs) */
void pz_cuda_attention_forward(float *out, float *att, const float *qkv,
                               int B, int T, int C, int NH) {
    const int hs = C / NH, ld = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    const long long TT = (long long)T * T;
    for (int b = 0; b < B; b++) {
        const float *q = qkv + (size_t)b * T * ld, *k = q + C;
        float *a = att + (size_t)b * NH * TT;
        pz_cuda_gemm_rm(false, true, T, T, hs, scale, q, ld, hs, k, ld, hs, 0.0f, a, T, TT, NH);
    }
    const size_t rows = (size_t)B * NH * T;
    causal_softmax_kernel<<<row_blocks(rows), dim3(32, ATT_WARPS)>>>(att, rows, T);
    CUDA_CHECK_LAUNCH();
    for (int b = 0; b < B; b++) {
        const float *v = qkv + (size_t)b * T * ld + 2 * C;
        const float *a = att + (size_t)b * NH * TT;
        float *o = out + (size_t)b * T * C;
        pz_cuda_gemm_rm(false, false, T, hs, T, 1.0f, a, T, TT, v, ld, hs, 0.0f, o, C, hs, NH);
    }
}

/* dqkv (B,T,3C) += gradient through attention of dout (B,T,C). Per b, over h:
 *   d_h (T,T)    = dout_h (T,hs) . v_h^T; then d_h = softmax backward (dpre)
 *   dq_h (T,hs) += scale d_h . k_h
 *   dk_h (T,hs) += scale d_h^T . q_h
 *   dv_h (T,hs) += att_h^T . dout_h */
void pz_cuda_attention_backward(float *dqkv, float *scratch, const float *dout,
                                const float *qkv, const float *att,
                                int B, int T, int C, int NH) {
    const int hs = C / NH, ld = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    const long long TT = (long long)T * T;
    for (int b = 0; b < B; b++) {
        const float *v = qkv + (size_t)b * T * ld + 2 * C;
        const float *dO = dout + (size_t)b * T * C;
        float *d = scratch + (size_t)b * NH * TT;
        pz_cuda_gemm_rm(false, true, T, T, hs, 1.0f, dO, C, hs, v, ld, hs, 0.0f, d, T, TT, NH);
    }
    const size_t rows = (size_t)B * NH * T;
    causal_softmax_backward_kernel<<<row_blocks(rows), dim3(32, ATT_WARPS)>>>(scratch, att, rows, T);
    CUDA_CHECK_LAUNCH();
    for (int b = 0; b < B; b++) {
        const size_t seq = (size_t)b * T * ld;
        const float *q = qkv + seq, *k = q + C;
        float *dq = dqkv + seq, *dk = dq + C, *dv = dq + 2 * C;
        const float *d = scratch + (size_t)b * NH * TT, *a = att + (size_t)b * NH * TT;
        const float *dO = dout + (size_t)b * T * C;
        pz_cuda_gemm_rm(false, false, T, hs, T, scale, d, T, TT, k, ld, hs, 1.0f, dq, ld, hs, NH);
        pz_cuda_gemm_rm(true, false, T, hs, T, scale, d, T, TT, q, ld, hs, 1.0f, dk, ld, hs, NH);
        pz_cuda_gemm_rm(true, false, T, hs, T, 1.0f, a, T, TT, dO, C, hs, 1.0f, dv, ld, hs, NH);
    }
}

/* ---- generation: n new positions against a KV cache -------------------- */

#define CACHED_THREADS 128 /* threads of a (position, head) block: 4 warps */

/* rows pos0.. of the caches (maxT,C) from the k and v thirds of qkv (n,3C) */
__global__ static void kv_append_kernel(float *kcache, float *vcache, const float *qkv, int pos0, int n, int C) {
    const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)n * C) return;
    const size_t i = idx / (size_t)C, c = idx % (size_t)C, dst = ((size_t)pos0 + i) * C + c;
    kcache[dst] = qkv[i * 3 * C + C + c];
    vcache[dst] = qkv[i * 3 * C + 2 * C + c];
}

/* v reduced over the block (max or sum); red holds one float per warp.
 * Every thread of the block must call it. */
__device__ static float block_reduce(float v, float *red, bool take_max) {
    v = take_max ? pz_warp_max(v) : pz_warp_sum(v);
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads();   /* red may still be read by an earlier call */
    if (lane == 0) red[w] = v;
    __syncthreads();
    if (w == 0) {
        float x = lane < nw ? red[lane] : (take_max ? -INFINITY : 0.0f);
        x = take_max ? pz_warp_max(x) : pz_warp_sum(x);
        if (lane == 0) red[0] = x;
    }
    __syncthreads();
    return red[0];
}

/* One block per (new position i, head h): scores over keys 0..pos0+i into
 * its row of scores (i,h,:), max-shifted softmax, then out (i, head h). */
__global__ static void cached_attention_kernel(float *out, const float *kcache, const float *vcache, float *scores,
                                               const float *qkv, int pos0, int n, int C, int NH) {
    __shared__ float red[CACHED_THREADS / 32];
    const int i = blockIdx.x / NH, h = blockIdx.x % NH, hs = C / NH, len = pos0 + i + 1;
    float *sc = scores + ((size_t)i * NH + h) * (size_t)(pos0 + n);
    const float *q = qkv + (size_t)i * 3 * C + (size_t)h * hs;
    const float scale = 1.0f / sqrtf((float)hs);
    float mx = -INFINITY;
    for (int t = threadIdx.x; t < len; t += blockDim.x) {
        const float *k = kcache + (size_t)t * C + (size_t)h * hs;
        float dot = 0.0f;
        for (int j = 0; j < hs; j++) dot = fmaf(q[j], k[j], dot);
        sc[t] = dot * scale;
        mx = fmaxf(mx, sc[t]);
    }
    mx = block_reduce(mx, red, true);
    float sum = 0.0f;
    for (int t = threadIdx.x; t < len; t += blockDim.x) {
        const float e = expf(sc[t] - mx);
        sc[t] = e;
        sum += e;
    }
    sum = block_reduce(sum, red, false);   /* its barriers also publish sc */
    const float inv = 1.0f / sum;
    for (int j = threadIdx.x; j < hs; j += blockDim.x) {
        float o = 0.0f;
        for (int t = 0; t < len; t++) o = fmaf(sc[t] * inv, vcache[(size_t)t * C + (size_t)h * hs + j], o);
        out[(size_t)i * C + (size_t)h * hs + j] = o;
    }
}

void pz_cuda_attention_cached_forward(float *out, float *kcache, float *vcache, float *scores,
                                      const float *qkv, int pos0, int n, int C, int NH) {
    const size_t nc = (size_t)n * C;
    kv_append_kernel<<<(unsigned)((nc + 255) / 256), 256>>>(kcache, vcache, qkv, pos0, n, C);
    CUDA_CHECK_LAUNCH();
    cached_attention_kernel<<<(unsigned)((size_t)n * NH), CACHED_THREADS>>>(out, kcache, vcache, scores, qkv, pos0, n,
                                                                           C, NH);
    CUDA_CHECK_LAUNCH();
}
