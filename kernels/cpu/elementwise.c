/* elementwise.c: token + position embedding, GELU and the residual add.
 *
 * All memory-bound loops: one OpenMP parallel-for over the outer index and a
 * `omp simd` inner loop, so each thread streams a contiguous slice. */
#include "kernels/cpu/cpu_ops.h"

#include <omp.h>

/* out (B,T,C) = wte (V,C) [inp (B,T)] + wpe (maxT,C) [t]. */
void pz_cpu_encoder_forward(float *out, const int *inp, const float *wte,
                            const float *wpe, int B, int T, int C) {
    const long N = (long)B * T;
    #pragma omp parallel for schedule(static) num_threads(pz_cpu_nt())
    for (long bt = 0; bt < N; bt++) {
        float *o = out + bt * C;
        const float *we = wte + (size_t)inp[bt] * C;
        const float *pe = wpe + (bt % T) * C;
        #pragma omp simd
        for (int c = 0; c < C; c++) o[c] = we[c] + pe[c];
    }
}

/* dwte (V,C) += scatter of dout (B,T,C) by token id; dwpe (maxT,C) [t] +=
 * sum over b of dout[b,t]. A token may repeat within a batch, so threads split
 * the channels instead of the rows: each owns columns [lo,hi) of both tables
 * and adds rows in (b,t) order, which is race-free and gives the same sums
 * whatever the thread count. */
void pz_cpu_encoder_backward(float *dwte, float *dwpe, const float *dout,
                             const int *inp, int B, int T, int C) {
    const long N = (long)B * T;
    #pragma omp parallel num_threads(pz_cpu_nt())
    {
        int lo, hi;
        pz_cpu_split(C, omp_get_num_threads(), omp_get_thread_num(), 16, &lo, &hi);
        for (long bt = 0; bt < N && lo < hi; bt++) {
            const float *d = dout + bt * C;
            float *we = dwte + (size_t)inp[bt] * C;
            float *pe = dwpe + (bt % T) * C;
            #pragma omp simd
            for (int c = lo; c < hi; c++) {
                we[c] += d[c];
                pe[c] += d[c];
            }
        }
    }
}

/* GELU, tanh form: g(x) = x/2 (1 + tanh u), u = sqrt(2/pi) (x + 0.044715 x^3).
 * We evaluate it through the identity (1 + tanh u)/2 = s = 1/(1 + e), with
 * e = exp(-2u). This keeps full relative precision where 1 + tanh u cancels
 * (large negative x) and gives the backward 1 - s = e s without cancelling
 * either. The exp argument is clamped to +-80, which keeps e and s normal
 * floats (no slow subnormal arithmetic): past it s is 1 exactly or below
 * 2e-35, so outputs change by less than 1e-33 in absolute terms. */
#define GELU_K0 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_K1 0.044715f

/* scalar x -> returns e = exp(-2u(x)), stores du/dx in *du */
static inline float gelu_exp_(float x, float *du) {
    const float x2 = x * x;
    const float u = GELU_K0 * fmaf(GELU_K1 * x2, x, x);
    *du = GELU_K0 * fmaf(3.0f * GELU_K1, x2, 1.0f); /* du/dx */
    float a = -2.0f * u;
    a = a > 80.0f ? 80.0f : (a < -80.0f ? -80.0f : a);
    return pz_cpu_expf(a);
}

/* out (n) = gelu(inp (n)) */
void pz_cpu_gelu_forward(float *out, const float *inp, size_t n) {
    #pragma omp parallel for simd schedule(static) num_threads(pz_cpu_nt())
    for (size_t i = 0; i < n; i++) {
        float du;
        const float e = gelu_exp_(inp[i], &du);
        out[i] = inp[i] / (1.0f + e);
    }
}

/* dinp (n) += gelu'(inp) * dout, with g' = s + x s (1 - s) 2 du/dx */
void pz_cpu_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n) {
    #pragma omp parallel for simd schedule(static) num_threads(pz_cpu_nt())
    for (size_t i = 0; i < n; i++) {
        const float x = inp[i];
        float du;
        const float e = gelu_exp_(x, &du);
        const float s = 1.0f / (1.0f + e);
        const float grad = fmaf(2.0f * x * du, s * (e * s), s);
        dinp[i] = fmaf(grad, dout[i], dinp[i]);
    }
}

/* out (n) = a + b; out may alias a or b */
void pz_cpu_residual_forward(float *out, const float *a, const float *b, size_t n) {
    #pragma omp parallel for simd schedule(static) num_threads(pz_cpu_nt())
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

/* da (n) += dout; db (n) += dout */
void pz_cpu_residual_backward(float *da, float *db, const float *dout, size_t n) {
    #pragma omp parallel for simd schedule(static) num_threads(pz_cpu_nt())
    for (size_t i = 0; i < n; i++) {
        da[i] += dout[i];
        db[i] += dout[i];
    }
}
