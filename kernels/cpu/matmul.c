/* matmul.c: the linear layer, out = inp . weight^T + bias, through OpenBLAS.
 *
 * Weights are (OC, C) as in nn.Linear. Row-major sgemm mapping:
 *   forward  out   = inp . W^T   sgemm(NoTrans, Trans,   M=N,  N=OC, K=C,  beta 0)
 *   backward dinp += dout . W    sgemm(NoTrans, NoTrans, M=N,  N=C,  K=OC, beta 1)
 *            dW   += dout^T.inp  sgemm(Trans,   NoTrans, M=OC, N=C,  K=N,  beta 1)
 *            dbias += column sums of dout.
 *
 * Threading: we split each product over our own OpenMP threads by output
 * columns (or rows of dW), and every thread calls a single-threaded sgemm on
 * its slice; backend_cpu.c sets OpenBLAS to one thread. The alternative, one
 * multi-threaded sgemm on OpenBLAS's own pthread pool (Debian's default
 * build) with libgomp's pool for the other ops, measured 2.6-6.0 s per GPT-2
 * 124M step (B=4, T=64, 2 threads) against 1.45-1.54 s for this, in
 * alternating runs: libgomp's idle threads spin for a while after every
 * parallel region (OMP_WAIT_POLICY unset) and OpenBLAS's idle workers spin
 * after every call, so each pool steals the cores the other is computing on.
 * Per call, the split matmuls run as fast as a plain 2-thread sgemm of the
 * same shape (bench/bench_ops.c prints both). Every slice is a disjoint
 * block of the output, so there are no races, and the partition, hence
 * every sum, does not depend on timing. It does depend on the thread count:
 * OpenBLAS may sum a narrower slice in another order (dinp with C = 96 over
 * 2 threads: 48-column slices differ from the whole call in the last bit at
 * about 7% of the elements), so runs compare bit for bit only at one
 * thread count (tests/pipeline/pipeline_equiv.sh). */
#include "kernels/cpu/cpu_ops.h"

#include <cblas.h>
#include <omp.h>

/* column slices are multiples of 16 floats: whole 64-byte lines per thread */
#define MM_ALIGN 16

/* out (N,OC) = inp (N,C) . weight (OC,C)^T + bias (OC); bias may be NULL.
 * Thread i computes columns [lo,hi) of out from rows [lo,hi) of weight. */
void pz_cpu_matmul_forward(float *out, const float *inp, const float *weight,
                           const float *bias, int N, int C, int OC) {
    #pragma omp parallel num_threads(pz_cpu_nt())
    {
        int lo, hi;
        pz_cpu_split(OC, omp_get_num_threads(), omp_get_thread_num(), MM_ALIGN, &lo, &hi);
        if (hi > lo) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, hi - lo, C,
                        1.0f, inp, C, weight + (size_t)lo * C, C, 0.0f, out + lo, OC);
            for (int r = 0; r < N && bias; r++) {
                float *o = out + (size_t)r * OC;
                #pragma omp simd
                for (int c = lo; c < hi; c++) o[c] += bias[c];
            }
        }
    }
}

/* dinp (N,C) += dout (N,OC) . weight (OC,C); dweight (OC,C) += dout^T . inp (N,C);
 * dbias (OC) += colsum(dout). dinp and dbias may be NULL (not needed); so may
 * dweight (then dbias is skipped too): the halves of a zero-bubble backward,
 * each computing exactly what the whole call does.
 * Thread i adds columns [lo,hi) of dinp (from columns of weight), then rows
 * [lo',hi') of dweight and entries [lo',hi') of dbias (from columns of dout). */
void pz_cpu_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, int N, int C, int OC) {
    #pragma omp parallel num_threads(pz_cpu_nt())
    {
        const int nt = omp_get_num_threads(), it = omp_get_thread_num();
        int lo, hi;
        pz_cpu_split(C, nt, it, MM_ALIGN, &lo, &hi);
        if (dinp && hi > lo)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, hi - lo, OC,
                        1.0f, dout, OC, weight + lo, C, 1.0f, dinp + lo, C);
        pz_cpu_split(OC, nt, it, MM_ALIGN, &lo, &hi);
        if (dweight && hi > lo) {
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, hi - lo, C, N,
                        1.0f, dout + lo, OC, inp, C, 1.0f, dweight + (size_t)lo * C, C);
            for (int r = 0; r < N && dbias; r++) {
                const float *d = dout + (size_t)r * OC;
                #pragma omp simd
                for (int c = lo; c < hi; c++) dbias[c] += d[c];
            }
        }
    }
}
