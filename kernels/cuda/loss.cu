/* loss.cu: softmax cross-entropy over the first V of Vp logits per row,
 * fused with its backward, with the semantics of kernels/cpu/loss.c:
 * losses (N) = log(sum exp(x - max)) + max - x[target]; if dscale != 0 the
 * row is overwritten with (softmax - onehot) * dscale in [0,V) and 0 in
 * [V,Vp); with dscale == 0 the logits are left untouched.
 * One block per row (a GPT-2 row is 50257 floats, 200 KB). Each thread sums
 * its strided share of exps in float (~200 terms in [0,1]) and the block
 * adds those partials in double, in a fixed order, like the CPU's blocked
 * float/double sum. */
#include "kernels/cuda/cuda_ops.cuh"

#include <math.h>

#define CE_THREADS 256 /* a power of two: the tree reductions below assume it */

__global__ static void crossentropy_kernel(float *losses, float *logits, const int *targets,
                                           int V, int Vp, float dscale) {
    __shared__ float smax[CE_THREADS];
    __shared__ double ssum[CE_THREADS];
    const int r = blockIdx.x, tid = threadIdx.x;
    float *x = logits + (size_t)r * Vp;
    const int tgt = targets[r];
    if (tgt < 0 || tgt >= V) {
        /* the host checks targets; never index outside the row anyway */
        if (tid == 0) losses[r] = NAN;
        return;
    }
    const float xt = x[tgt];  /* read before any thread overwrites the row */
    float mx = -INFINITY;
    for (int i = tid; i < V; i += CE_THREADS) mx = fmaxf(mx, x[i]);
    smax[tid] = mx;
    __syncthreads();
    for (int s = CE_THREADS / 2; s > 0; s >>= 1) {
        if (tid < s) smax[tid] = fmaxf(smax[tid], smax[tid + s]);
        __syncthreads();
    }
    mx = smax[0];
    float part = 0.0f;
    for (int i = tid; i < V; i += CE_THREADS) part += expf(x[i] - mx);
    ssum[tid] = (double)part;
    __syncthreads();
    for (int s = CE_THREADS / 2; s > 0; s >>= 1) {
        if (tid < s) ssum[tid] += ssum[tid + s];
        __syncthreads();
    }
    const double sum = ssum[0];
    if (tid == 0) losses[r] = (float)(log(sum) + (double)mx - (double)xt);
    if (dscale == 0.0f) return;
    const float scale = (float)((double)dscale / sum);
    for (int i = tid; i < V; i += CE_THREADS) x[i] = expf(x[i] - mx) * scale;
    for (int i = V + tid; i < Vp; i += CE_THREADS) x[i] = 0.0f;
    __syncthreads();  /* every write of the row is done before the target's */
    if (tid == 0) x[tgt] -= dscale;
}

void pz_cuda_crossentropy_forward(float *losses, float *logits, const int *targets,
                                  int N, int V, int Vp, float dscale) {
    if (N <= 0) return;
    crossentropy_kernel<<<N, CE_THREADS>>>(losses, logits, targets, V, Vp, dscale);
    CUDA_CHECK_LAUNCH();
}
