/* adamw.c: the optimizer-side ops over flat parameter arrays: the squared
 * gradient norm and the AdamW update. Both are memory-bound single passes
 * (AdamW moves 28 bytes per parameter), split statically over threads. */
#include "kernels/cpu/cpu_ops.h"

#include <math.h>

/* sum of x (n) squared, accumulated in double: 124M float squares summed in
 * float would lose most of their digits. Memory-bound; the static schedule
 * makes the result depend only on the thread count. */
double pz_cpu_sumsq(const float *x, size_t n) {
    double acc = 0.0;
    #pragma omp parallel for simd schedule(static) reduction(+:acc) num_threads(pz_cpu_nt())
    for (size_t i = 0; i < n; i++) {
        const double d = (double)x[i];
        acc += d * d;
    }
    return acc;
}

/* AdamW (Loshchilov & Hutter) on param, grad, m, v (n), t the 1-based step:
 *   g = grad * grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 *   param -= lr * (mhat / (sqrt(vhat) + eps) + wd * param),
 * mhat = m / (1 - b1^t), vhat = v / (1 - b2^t). The decay is decoupled: it
 * uses the parameter before this step's update, not the gradient. The bias
 * corrections are computed once in double (b2^t for t ~ 1e5 underflows
 * nothing but loses digits in float). */
void pz_cpu_adamw_update(float *param, const float *grad, float *m, float *v, size_t n,
                         float lr, float beta1, float beta2, float eps, float wd,
                         float grad_scale, int t) {
    const float inv_bc1 = (float)(1.0 / (1.0 - pow((double)beta1, (double)t)));
    const float inv_bc2 = (float)(1.0 / (1.0 - pow((double)beta2, (double)t)));
    const float a1 = 1.0f - beta1, a2 = 1.0f - beta2;
    #pragma omp parallel for simd schedule(static) num_threads(pz_cpu_nt())
    for (size_t i = 0; i < n; i++) {
        const float g = grad[i] * grad_scale;
        const float mi = fmaf(beta1, m[i], a1 * g);
        const float vi = fmaf(beta2, v[i], a2 * g * g);
        m[i] = mi;
        v[i] = vi;
        const float mhat = mi * inv_bc1, vhat = vi * inv_bc2;
        const float p = param[i];
        param[i] = p - lr * (mhat / (sqrtf(vhat) + eps) + wd * p);
    }
}
