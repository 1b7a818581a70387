/* attention.c: causal multi-head self-attention on the packed qkv tensor.
 *
 * qkv (B,T,3C) holds [q | k | v] per position; head h uses columns
 * h*hs .. h*hs+hs-1 of each third, hs = C/NH. Scores are q.k / sqrt(hs) for
 * keys t2 <= t only; att (B,NH,T,T) keeps the softmax rows (zero above the
 * diagonal) for backward.
 *
 * Work is split over (b, h, t) rows: each row is a set of hs-long dot
 * products and axpys, which vectorize (hs = 64 is four AVX-512 vectors), and
 * all of one head's K and V (T*hs floats each, 256 KB at T = 1024) stay in
 * L2 across its rows. Row cost grows with t under the causal mask, so rows
 * are dealt round-robin (schedule(static, 1)) to balance threads. We measured
 * this against one sgemm per head on strided views (see the report in
 * bench/bench_ops.c); sgemm computes the full T x T square and pays a call
 * per head, and must run outside OpenMP regions. */
#include "kernels/cpu/cpu_ops.h"

#include <math.h>

/* dot product of a and b (n) */
static inline float dot_(const float *a, const float *b, int n) {
    float s = 0.0f;
    #pragma omp simd reduction(+:s)
    for (int i = 0; i < n; i++) s = fmaf(a[i], b[i], s);
    return s;
}

/* y (n) += alpha * x (n) */
static inline void axpy_(float *restrict y, float alpha, const float *restrict x, int n) {
    #pragma omp simd
    for (int i = 0; i < n; i++) y[i] = fmaf(alpha, x[i], y[i]);
}

/* out (B,T,C), att (B,NH,T,T) from qkv (B,T,3C) */
void pz_cpu_attention_forward(float *out, float *att, const float *qkv,
                              int B, int T, int C, int NH) {
    const int hs = C / NH;
    const size_t C3 = 3 * (size_t)C;
    const float scale = 1.0f / sqrtf((float)hs);
    const long rows = (long)B * NH * T;
    #pragma omp parallel for schedule(static, 1) num_threads(pz_cpu_nt())
    for (long row = 0; row < rows; row++) {
        const int t = (int)(row % T), bh = (int)(row / T);
        const int b = bh / NH, h = bh % NH;
        const float *base = qkv + (size_t)b * T * C3 + (size_t)h * hs;
        const float *q = base + (size_t)t * C3;
        float *a = att + (size_t)row * T;
        /* scores and their max; t2 <= t */
        float mx = -INFINITY;
        for (int t2 = 0; t2 <= t; t2++) {
            const float s = scale * dot_(q, base + (size_t)t2 * C3 + C, hs);
            a[t2] = s;
            mx = s > mx ? s : mx;
        }
        float sum = 0.0f;
        #pragma omp simd reduction(+:sum)
        for (int t2 = 0; t2 <= t; t2++) {
            const float e = pz_cpu_expf(a[t2] - mx);
            a[t2] = e;
            sum += e;
        }
        const float inv = 1.0f / sum;
        #pragma omp simd
        for (int t2 = 0; t2 <= t; t2++) a[t2] *= inv;
        for (int t2 = t + 1; t2 < T; t2++) a[t2] = 0.0f;
        /* out row = sum over t2 of att * v */
        float *o = out + ((size_t)b * T + t) * C + (size_t)h * hs;
        for (int i = 0; i < hs; i++) o[i] = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) axpy_(o, a[t2], base + (size_t)t2 * C3 + 2 * C, hs);
    }
}

/* dqkv (B,T,3C) += gradient of the attention output dout (B,T,C), given qkv
 * and att from forward; scratch (B,NH,T,T) is overwritten with dpreatt, the
 * gradient of the scaled scores (zero above the diagonal).
 * Two sweeps, so that every thread owns the rows it writes:
 *  1. per query row t: datt[t2] = dout[t].v[t2], dpre = att (datt - att.datt)
 *     (the softmax backward), dq[t] += scale sum_t2 dpre[t2] k[t2];
 *  2. per key row t2: dk[t2] += scale sum_{t>=t2} dpre[t][t2] q[t] and
 *     dv[t2] += sum_{t>=t2} att[t][t2] dout[t]. */
void pz_cpu_attention_backward(float *dqkv, float *scratch, const float *dout,
                               const float *qkv, const float *att,
                               int B, int T, int C, int NH) {
    const int hs = C / NH;
    const size_t C3 = 3 * (size_t)C;
    const float scale = 1.0f / sqrtf((float)hs);
    const long rows = (long)B * NH * T;
    #pragma omp parallel num_threads(pz_cpu_nt())
    {
        #pragma omp for schedule(static, 1)
        for (long row = 0; row < rows; row++) {
            const int t = (int)(row % T), bh = (int)(row / T);
            const int b = bh / NH, h = bh % NH;
            const float *base = qkv + (size_t)b * T * C3 + (size_t)h * hs;
            const float *a = att + (size_t)row * T;
            const float *d = dout + ((size_t)b * T + t) * C + (size_t)h * hs;
            float *dp = scratch + (size_t)row * T;
            float s = 0.0f;
            for (int t2 = 0; t2 <= t; t2++) {
                const float da = dot_(d, base + (size_t)t2 * C3 + 2 * C, hs);
                dp[t2] = da;
                s = fmaf(a[t2], da, s);
            }
            #pragma omp simd
            for (int t2 = 0; t2 <= t; t2++) dp[t2] = a[t2] * (dp[t2] - s);
            for (int t2 = t + 1; t2 < T; t2++) dp[t2] = 0.0f;
            float *dq = dqkv + ((size_t)b * T + t) * C3 + (size_t)h * hs;
            for (int t2 = 0; t2 <= t; t2++)
                axpy_(dq, scale * dp[t2], base + (size_t)t2 * C3 + C, hs);
        }
        /* implicit barrier: sweep 2 reads every row of dpre */
        #pragma omp for schedule(static, 1)
        for (long row = 0; row < rows; row++) {
            const int t2 = (int)(row % T), bh = (int)(row / T);
            const int b = bh / NH, h = bh % NH;
            const float *base = qkv + (size_t)b * T * C3 + (size_t)h * hs;
            const float *a = att + (size_t)bh * T * T;
            const float *dp = scratch + (size_t)bh * T * T;
            float *dk = dqkv + ((size_t)b * T + t2) * C3 + C + (size_t)h * hs;
            float *dv = dk + C;
            for (int t = t2; t < T; t++) {
                const size_t at = (size_t)t * T + t2;
                axpy_(dk, scale * dp[at], base + (size_t)t * C3, hs);
                axpy_(dv, a[at], dout + ((size_t)b * T + t) * C + (size_t)h * hs, hs);
            }
        }
    }
}
