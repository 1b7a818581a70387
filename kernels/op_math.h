/* op_math.h: per-element formulas of the ops, shared by the CUDA kernels and
 * the unit tests (tests/kernels/test_op_math.c checks them on the host against the
 * CPU backend, so the GPU code's arithmetic is tested even without a GPU).
 *
 * The CPU backend keeps its own vectorized copies of these formulas (its
 * pz_cpu_expf exists because glibc's expf does not vectorize); these use the
 * platform expf, so CPU and GPU agree to a few ulp, not bitwise.
 * Everything is static inline and PZ_HD (__host__ __device__ under nvcc). */
#ifndef PZ_OP_MATH_H
#define PZ_OP_MATH_H

#include <math.h>

#include "base/hd.h"

/* GELU, tanh form: g(x) = x (1 + tanh u) / 2, u = sqrt(2/pi) (x + 0.044715 x^3),
 * through s = (1 + tanh u) / 2 = 1 / (1 + e), e = exp(-2u), exactly as
 * kernels/cpu/elementwise.c (no cancellation for large negative x); the
 * exponent is clamped to +-80 so e and s stay normal floats. */
#define PZ_GELU_K0 0.7978845608028654f /* sqrt(2/pi) */
#define PZ_GELU_K1 0.044715f

/* e = exp(-2u(x)); *du = du/dx */
static inline PZ_HD float pz_gelu_exp(float x, float *du) {
    const float x2 = x * x;
    const float u = PZ_GELU_K0 * fmaf(PZ_GELU_K1 * x2, x, x);
    *du = PZ_GELU_K0 * fmaf(3.0f * PZ_GELU_K1, x2, 1.0f);
    float a = -2.0f * u;
    a = a > 80.0f ? 80.0f : (a < -80.0f ? -80.0f : a);
    return expf(a);
}

static inline PZ_HD float pz_gelu(float x) {
    float du;
    return x / (1.0f + pz_gelu_exp(x, &du));
}

/* d gelu / dx = s + x s (1 - s) 2 du/dx, with 1 - s = e s */
static inline PZ_HD float pz_gelu_grad(float x) {
    float du;
    const float e = pz_gelu_exp(x, &du);
    const float s = 1.0f / (1.0f + e);
    return fmaf(2.0f * x * du, s * (e * s), s);
}

/* One AdamW element (kernels/backend.h has the formula): updates *p, *m, *v.
 * inv_bc1 = 1/(1-b1^t), inv_bc2 = 1/(1-b2^t), computed once in double by the
 * caller as the CPU backend does. */
static inline PZ_HD void pz_adamw_elem(float *p, float *m, float *v, float grad, float lr,
                                       float beta1, float beta2, float eps, float wd,
                                       float grad_scale, float inv_bc1, float inv_bc2) {
    const float g = grad * grad_scale;
    const float mi = fmaf(beta1, *m, (1.0f - beta1) * g);
    const float vi = fmaf(beta2, *v, (1.0f - beta2) * g * g);
    *m = mi;
    *v = vi;
    const float mhat = mi * inv_bc1, vhat = vi * inv_bc2;
    const float p0 = *p;
    *p = p0 - lr * (mhat / (sqrtf(vhat) + eps) + wd * p0);
}

#endif
