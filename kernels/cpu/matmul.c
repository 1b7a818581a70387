/* matmul.c: the linear layer, out = inp . weight^T + bias, through OpenBLAS.
 *
 * Weights are (OC, C) as in nn.Linear. Row-major sgemm mapping:
 *   forward  out   = inp . W^T   sgemm(NoTrans, Trans,   M=N,  N=OC, K=C,  beta 0)
 *   backward dinp += dout . W    sgemm(NoTrans, NoTrans, M=N,  N=C,  K=OC, beta 1)
 *            dW   += dout^T.inp  sgemm(Trans,   NoTrans, M=OC, N=C,  K=N,  beta 1)
 *            dbias += column sums of dout.
 * The sgemm calls are made outside any OpenMP region: the Debian OpenBLAS
 * runs its own thread pool and must not be entered from several OpenMP
 * threads at once. */
#include "kernels/cpu/cpu_ops.h"

#include <cblas.h>
#include <omp.h>

/* out (N,OC) = inp (N,C) . weight (OC,C)^T + bias (OC); bias may be NULL */
#include <stdlib.h>
static int split_mode_(void) {
    static int m = -1;
    if (m < 0) m = getenv("PZ_MM_SPLIT") ? atoi(getenv("PZ_MM_SPLIT")) : 0;
    return m;
}

void pz_cpu_matmul_forward(float *out, const float *inp, const float *weight,
                           const float *bias, int N, int C, int OC) {
    if (split_mode_()) {
        #pragma omp parallel num_threads(pz_cpu_nt())
        {
            int lo, hi;
            pz_cpu_split(OC, omp_get_num_threads(), omp_get_thread_num(), 16, &lo, &hi);
            if (hi > lo) {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, hi - lo, C,
                            1.0f, inp, C, weight + (size_t)lo * C, C, 0.0f, out + lo, OC);
                if (bias)
                    for (int r = 0; r < N; r++) {
                        float *o = out + (size_t)r * OC;
                        #pragma omp simd
                        for (int c = lo; c < hi; c++) o[c] += bias[c];
                    }
            }
        }
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C,
                1.0f, inp, C, weight, C, 0.0f, out, OC);
    if (!bias) return;
    #pragma omp parallel for schedule(static) num_threads(pz_cpu_nt())
    for (int r = 0; r < N; r++) {
        float *o = out + (size_t)r * OC;
        #pragma omp simd
        for (int c = 0; c < OC; c++) o[c] += bias[c];
    }
}

/* dbias (OC) += column sums of dout (N,OC). Column-split: each thread owns
 * an OC slice and walks all rows, so no partial sums need merging. */
static void colsum_acc_(float *dbias, const float *dout, int N, int OC) {
    #pragma omp parallel num_threads(pz_cpu_nt())
    {
        int lo, hi;
        pz_cpu_split(OC, omp_get_num_threads(), omp_get_thread_num(), 16, &lo, &hi);
        for (int r = 0; r < N && lo < hi; r++) {
            const float *d = dout + (size_t)r * OC;
            #pragma omp simd
            for (int c = lo; c < hi; c++) dbias[c] += d[c];
        }
    }
}

/* dinp (N,C) += dout (N,OC) . weight (OC,C); dweight (OC,C) += dout^T . inp (N,C);
 * dbias (OC) += colsum(dout). dinp and dbias may be NULL (not needed). */
void pz_cpu_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, int N, int C, int OC) {
    if (split_mode_()) {
        #pragma omp parallel num_threads(pz_cpu_nt())
        {
            const int nt = omp_get_num_threads(), it = omp_get_thread_num();
            int lo, hi;
            pz_cpu_split(C, nt, it, 16, &lo, &hi);
            if (dinp && hi > lo)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, hi - lo, OC,
                            1.0f, dout, OC, weight + lo, C, 1.0f, dinp + lo, C);
            pz_cpu_split(OC, nt, it, 16, &lo, &hi);
            if (hi > lo) {
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, hi - lo, C, N,
                            1.0f, dout + lo, OC, inp, C, 1.0f, dweight + (size_t)lo * C, C);
                if (dbias)
                    for (int r = 0; r < N; r++) {
                        const float *d = dout + (size_t)r * OC;
                        #pragma omp simd
                        for (int c = lo; c < hi; c++) dbias[c] += d[c];
                    }
            }
        }
        return;
    }
    if (dinp)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC,
                    1.0f, dout, OC, weight, C, 1.0f, dinp, C);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N,
                1.0f, dout, OC, inp, C, 1.0f, dweight, C);
    if (dbias) colsum_acc_(dbias, dout, N, OC);
}
