/* layernorm.c: LayerNorm over the channel dim, GPT-2 style: population
 * variance, eps 1e-5, mean and rstd saved for backward. */
#include "kernels/cpu/cpu_ops.h"

#include <omp.h>

#define LN_EPS 1e-5f

/* out (N,C) = (inp - mean) * rstd * weight (C) + bias (C); mean, rstd (N).
 * Two passes over the row (mean, then the squared deviations) rather than
 * E[x^2] - mean^2, which cancels badly when |mean| >> std. */
void pz_cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                              const float *weight, const float *bias, int N, int C) {
    #pragma omp parallel for schedule(static) num_threads(pz_cpu_nt())
    for (int r = 0; r < N; r++) {
        const float *x = inp + (size_t)r * C;
        float *o = out + (size_t)r * C;
        float sum = 0.0f;
        #pragma omp simd reduction(+:sum)
        for (int c = 0; c < C; c++) sum += x[c];
        const float m = sum / (float)C;
        float ss = 0.0f;
        #pragma omp simd reduction(+:ss)
        for (int c = 0; c < C; c++) {
            const float d = x[c] - m;
            ss = fmaf(d, d, ss);
        }
        const float s = 1.0f / sqrtf(ss / (float)C + LN_EPS);
        #pragma omp simd
        for (int c = 0; c < C; c++) o[c] = fmaf((x[c] - m) * s, weight[c], bias[c]);
        mean[r] = m;
        rstd[r] = s;
    }
}

/* dinp (N,C) += rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)),
 * where norm = (inp - mean) * rstd and dnorm = dout * weight;
 * dweight (C) += sum over rows of dout * norm; dbias (C) += sum of dout.
 * dinp is row-parallel. dweight and dbias reduce over rows, so they run as a
 * second, column-split pass (each thread owns a channel slice and walks all
 * rows in order: no races, and sums independent of the thread count).
 * dinp must not alias dout: the column pass reads dout while rows of dinp
 * are still being written. */
void pz_cpu_layernorm_backward(float *dinp, float *dweight, float *dbias,
                               const float *dout, const float *inp, const float *weight,
                               const float *mean, const float *rstd, int N, int C) {
    const int nt = pz_cpu_nt();
    #pragma omp parallel num_threads(nt)
    {
        /* nowait: the column pass writes other arrays and only reads inputs */
        #pragma omp for schedule(static) nowait
        for (int r = 0; r < N; r++) {
            const float *x = inp + (size_t)r * C, *d = dout + (size_t)r * C;
            float *di = dinp + (size_t)r * C;
            const float m = mean[r], s = rstd[r];
            float sum_dn = 0.0f, sum_dnn = 0.0f;
            #pragma omp simd reduction(+:sum_dn, sum_dnn)
            for (int c = 0; c < C; c++) {
                const float dn = d[c] * weight[c];
                sum_dn += dn;
                sum_dnn = fmaf(dn, (x[c] - m) * s, sum_dnn);
            }
            const float a = sum_dn / (float)C, b = sum_dnn / (float)C;
            #pragma omp simd
            for (int c = 0; c < C; c++) {
                const float norm = (x[c] - m) * s;
                const float dn = d[c] * weight[c];
                di[c] = fmaf(s, dn - a - norm * b, di[c]);
            }
        }
        int lo, hi;
        pz_cpu_split(C, omp_get_num_threads(), omp_get_thread_num(), 16, &lo, &hi);
        for (int r = 0; r < N && lo < hi; r++) {
            const float *x = inp + (size_t)r * C, *d = dout + (size_t)r * C;
            const float m = mean[r], s = rstd[r];
            #pragma omp simd
            for (int c = lo; c < hi; c++) {
                dweight[c] = fmaf(d[c], (x[c] - m) * s, dweight[c]);
                dbias[c] += d[c];
            }
        }
    }
}
