/* cpu_ops.h: private header of the CPU backend (kernels/cpu/).
 *
 * Declares the op implementations that backend_cpu.c puts into the pz_backend
 * table, plus two helpers every file needs:
 *  - pz_cpu_nt(): the thread count for `num_threads(...)` on every OpenMP
 *    region. We pass it explicitly instead of relying on omp_set_num_threads,
 *    whose setting is per calling thread: a stage driven from another pthread
 *    would otherwise silently run on all cores.
 *  - pz_cpu_expf(): an inlinable expf that vectorizes under `omp simd`.
 *    glibc only exposes its vector expf to the vectorizer under -ffast-math,
 *    which we refuse (it broke llm.c's GELU backward), so softmax, GELU and
 *    cross-entropy would otherwise call scalar expf per element.
 *
 * Shapes follow kernels/backend.h: B batch, T time, C channels, OC output
 * channels, NH heads, hs = C/NH, V real vocab, Vp padded vocab, N = B*T. */
#ifndef PZ_CPU_OPS_H
#define PZ_CPU_OPS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Threads for every OpenMP region of the backend (backend_cpu.c). */
int pz_cpu_nt(void);

/* exp(x) in float, within ~2 ulp of the true value for x in [-87, 88].
 * Below -87 it returns 0 (the true value is subnormal or zero), above 88 it
 * saturates at exp(88) ~ 1.65e38 instead of overflowing to inf; callers only
 * feed it x - max (<= 0) or arguments clamped to that range.
 * Method: x = n ln2 + r with |r| <= ln2/2 (Cody-Waite split of ln2 so n*ln2hi
 * is exact), exp(r) by its degree-7 Taylor polynomial (truncation error
 * r^8/8! < 5e-9 relative, below half an ulp), and 2^n built in the exponent
 * bits. fmaf keeps the Horner steps single-rounded: in ISO C mode gcc does not
 * contract a*b+c into an FMA on its own (-ffp-contract=off). */
static inline float pz_cpu_expf(float x) {
    /* a NaN (from non-finite weights) must not reach the integer conversion
     * below (undefined behaviour): it is computed as 0 and returned as is */
    float xc = x != x ? 0.0f : x > 88.0f ? 88.0f : x;
    xc = xc < -87.0f ? -87.0f : xc;
    /* round-to-nearest integer by the 1.5*2^23 trick: exact for |v| < 2^22 */
    const float kd = xc * 1.44269504088896341f + 12582912.0f;
    const float n = kd - 12582912.0f;
    float r = fmaf(n, -0.693145751953125f, xc);     /* ln2 high part: 17 bits */
    r = fmaf(n, -1.42860682030941723212e-6f, r);    /* ln2 low part */
    float p = 1.0f / 5040.0f;
    p = fmaf(p, r, 1.0f / 720.0f);
    p = fmaf(p, r, 1.0f / 120.0f);
    p = fmaf(p, r, 1.0f / 24.0f);
    p = fmaf(p, r, 1.0f / 6.0f);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    /* 2^n for n in [-126, 127]: a normal float with biased exponent n+127 */
    const int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    const float e = p * scale;
    return x != x ? x : x < -87.0f ? 0.0f : e;
}

/* encoder: out (B,T,C) = wte[inp] + wpe[t]; backward scatters into dwte, dwpe */
void pz_cpu_encoder_forward(float *out, const int *inp, const float *wte,
                            const float *wpe, int B, int T, int C);
void pz_cpu_encoder_backward(float *dwte, float *dwpe, const float *dout,
                             const int *inp, int B, int T, int C);

/* layernorm over the last dim of (N,C); mean, rstd (N) saved for backward */
void pz_cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                              const float *weight, const float *bias, int N, int C);
void pz_cpu_layernorm_backward(float *dinp, float *dweight, float *dbias,
                               const float *dout, const float *inp, const float *weight,
                               const float *mean, const float *rstd, int N, int C);

/* out (N,OC) = inp (N,C) . weight (OC,C)^T + bias (OC) */
void pz_cpu_matmul_forward(float *out, const float *inp, const float *weight,
                           const float *bias, int N, int C, int OC);
void pz_cpu_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, int N, int C, int OC);

/* causal attention: qkv (B,T,3C) -> out (B,T,C), att (B,NH,T,T) */
void pz_cpu_attention_forward(float *out, float *att, const float *qkv,
                              int B, int T, int C, int NH);
void pz_cpu_attention_backward(float *dqkv, float *scratch, const float *dout,
                               const float *qkv, const float *att,
                               int B, int T, int C, int NH);
/* n new positions against a KV cache (backend.h's attention_cached_forward) */
void pz_cpu_attention_cached_forward(float *out, float *kcache, float *vcache, float *scores,
                                     const float *qkv, int pos0, int n, int C, int NH);

/* elementwise over n: GELU (tanh form) and the residual add */
void pz_cpu_gelu_forward(float *out, const float *inp, size_t n);
void pz_cpu_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n);
void pz_cpu_residual_forward(float *out, const float *a, const float *b, size_t n);
void pz_cpu_residual_backward(float *da, float *db, const float *dout, size_t n);

/* softmax cross-entropy over the first V of Vp logits, fused with its backward */
void pz_cpu_crossentropy_forward(float *losses, float *logits, const int *targets,
                                 int N, int V, int Vp, float dscale);

/* optimizer side: sum of squares in double, AdamW step */
double pz_cpu_sumsq(const float *x, size_t n);
void pz_cpu_adamw_update(float *param, const float *grad, float *m, float *v, size_t n,
                         float lr, float beta1, float beta2, float eps, float wd,
                         float grad_scale, int t);

/* Split [0, n) into `parts` contiguous ranges whose boundaries are multiples
 * of `align` (except the final end), and return range `i` in [*lo, *hi).
 * Used for column-split reductions: each thread owns a slice of the output,
 * so sums are race-free and their order does not depend on the thread count. */
static inline void pz_cpu_split(int n, int parts, int i, int align, int *lo, int *hi) {
    const int chunks = (n + align - 1) / align;
    const int a = (int)((long)chunks * i / parts), b = (int)((long)chunks * (i + 1) / parts);
    *lo = a * align < n ? a * align : n;
    *hi = b * align < n ? b * align : n;
}

#endif
