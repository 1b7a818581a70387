/* attention.c: causal multi-head self-attention on the packed qkv tensor.
 *
 * qkv (B,T,3C) holds [q | k | v] per position; head h uses columns
 * h*hs .. h*hs+hs-1 of each third, hs = C/NH. Scores are q.k / sqrt(hs) for
 * keys t2 <= t only; att (B,NH,T,T) keeps the softmax rows (zero above the
 * diagonal) for backward.
 *
 * Each (b,h) head is one task of an OpenMP loop, and inside it every product
 * is a single-threaded sgemm on strided views of qkv (leading dimension 3C),
 * so nothing is packed or copied. To skip most of the masked upper triangle,
 * queries go in blocks of ATT_QB rows, and a block only multiplies the keys
 * 0 .. t0+ATT_QB-1 it can see (at T = 1024 this computes 6% more than the
 * triangle rather than 100% more). The first version, per-row loops of
 * vectorized hs-long dot products and axpys, took 470-590 ms for the forward
 * at B=4, T=1024 on 2 threads against 107 ms (60 GFLOP/s) for this, and
 * 1.75 ms against 0.71 ms at T=64 (bench/bench_ops.c prints both).
 * The sgemm calls run inside the OpenMP loop; that is safe because OpenBLAS
 * is kept single-threaded (backend_cpu.c).
 * Tasks write disjoint column ranges (their head) of out and dqkv. */
#include "kernels/cpu/cpu_ops.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#define ATT_QB 64 /* query rows (and key rows, backward) per block */

/* Softmax of causal score rows t0 .. t0+rows-1 of a (T,T) matrix in place:
 * row t keeps columns 0..t, zeros the rest. Max-shifted, so exp <= 1. */
static void softmax_rows_(float *a, int t0, int rows, int T) {
    for (int t = t0; t < t0 + rows; t++) {
        float *r = a + (size_t)t * T;
        float mx = r[0];
        #pragma omp simd reduction(max:mx)
        for (int t2 = 0; t2 <= t; t2++) mx = r[t2] > mx ? r[t2] : mx;
        float sum = 0.0f;
        #pragma omp simd reduction(+:sum)
        for (int t2 = 0; t2 <= t; t2++) {
            const float e = pz_cpu_expf(r[t2] - mx);
            r[t2] = e;
            sum += e;
        }
        const float inv = 1.0f / sum;
        #pragma omp simd
        for (int t2 = 0; t2 <= t; t2++) r[t2] *= inv;
        for (int t2 = t + 1; t2 < T; t2++) r[t2] = 0.0f;
    }
}

/* Head bh = b*NH + h: its q at qkv + qkv (k = q + C, v = q + 2C, leading
 * dimension 3C), its hs columns of a (B,T,C) tensor at btc, its (T,T) block
 * of att at tt; scores are scaled by 1/sqrt(hs). */
typedef struct {
    int hs;
    float scale;
    size_t qkv, btc, tt;
} att_head;

static att_head att_head_at(int bh, int T, int C, int NH) {
    const int b = bh / NH, h = bh % NH, hs = C / NH;
    return (att_head){hs, 1.0f / sqrtf((float)hs), (size_t)b * T * 3 * C + (size_t)h * hs,
                      (size_t)b * T * C + (size_t)h * hs, (size_t)bh * T * T};
}

/* out (B,T,C), att (B,NH,T,T) from qkv (B,T,3C) */
void pz_cpu_attention_forward(float *out, float *att, const float *qkv,
                              int B, int T, int C, int NH) {
    const int ld = 3 * C;
    #pragma omp parallel for schedule(dynamic, 1) num_threads(pz_cpu_nt())
    for (int bh = 0; bh < B * NH; bh++) {
        const att_head hd = att_head_at(bh, T, C, NH);
        float *a = att + hd.tt, *o = out + hd.btc;
        const float *q = qkv + hd.qkv, *k = q + C, *v = q + 2 * C;
        const int hs = hd.hs;
        const float scale = hd.scale;
        for (int t0 = 0; t0 < T; t0 += ATT_QB) {
            const int rows = T - t0 < ATT_QB ? T - t0 : ATT_QB, L = t0 + rows;
            /* scores of the block against the keys it can see */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, L, hs, scale,
                        q + (size_t)t0 * ld, ld, k, ld, 0.0f, a + (size_t)t0 * T, T);
            softmax_rows_(a, t0, rows, T);
            /* out rows = att rows . v */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hs, L, 1.0f,
                        a + (size_t)t0 * T, T, v, ld, 0.0f, o + (size_t)t0 * C, C);
        }
    }
}

/* Softmax backward of rows t0 .. t0+rows-1 in place: on entry d holds
 * datt = dout . v^T (columns 0..t, garbage beyond), on exit the gradient of
 * the scaled scores, dpre = att * (datt - sum(att * datt)), 0 above the
 * diagonal. */
static void softmax_backward_rows_(float *d, const float *a, int t0, int rows, int T) {
    for (int t = t0; t < t0 + rows; t++) {
        float *dr = d + (size_t)t * T;
        const float *ar = a + (size_t)t * T;
        float s = 0.0f;
        #pragma omp simd reduction(+:s)
        for (int t2 = 0; t2 <= t; t2++) s = fmaf(ar[t2], dr[t2], s);
        #pragma omp simd
        for (int t2 = 0; t2 <= t; t2++) dr[t2] = ar[t2] * (dr[t2] - s);
        for (int t2 = t + 1; t2 < T; t2++) dr[t2] = 0.0f;
    }
}

/* dqkv (B,T,3C) += gradient of the attention output dout (B,T,C), given qkv
 * and att from forward; scratch (B,NH,T,T) is overwritten with dpre, the
 * gradient of the scaled scores (zero above the diagonal). Per head:
 *  1. query blocks: datt = dout . v^T, dpre = softmax backward,
 *     dq += scale dpre . k (keys 0..t0+rows-1 only);
 *  2. key blocks j0..j0+cols-1, which only queries t >= j0 see:
 *     dk += scale dpre^T . q and dv += att^T . dout over those queries. */
void pz_cpu_attention_backward(float *dqkv, float *scratch, const float *dout,
                               const float *qkv, const float *att,
                               int B, int T, int C, int NH) {
    const int ld = 3 * C;
    #pragma omp parallel for schedule(dynamic, 1) num_threads(pz_cpu_nt())
    for (int bh = 0; bh < B * NH; bh++) {
        const att_head hd = att_head_at(bh, T, C, NH);
        const float *q = qkv + hd.qkv, *k = q + C, *v = q + 2 * C;
        float *dq = dqkv + hd.qkv, *dk = dq + C, *dv = dq + 2 * C;
        const float *a = att + hd.tt, *dO = dout + hd.btc;
        float *d = scratch + hd.tt;
        const int hs = hd.hs;
        const float scale = hd.scale;
        for (int t0 = 0; t0 < T; t0 += ATT_QB) {
            const int rows = T - t0 < ATT_QB ? T - t0 : ATT_QB, L = t0 + rows;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, L, hs, 1.0f,
                        dO + (size_t)t0 * C, C, v, ld, 0.0f, d + (size_t)t0 * T, T);
            softmax_backward_rows_(d, a, t0, rows, T);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hs, L, scale,
                        d + (size_t)t0 * T, T, k, ld, 1.0f, dq + (size_t)t0 * ld, ld);
        }
        for (int j0 = 0; j0 < T; j0 += ATT_QB) {
            const int cols = T - j0 < ATT_QB ? T - j0 : ATT_QB, M = T - j0;
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, hs, M, scale,
                        d + (size_t)j0 * T + j0, T, q + (size_t)j0 * ld, ld, 1.0f,
                        dk + (size_t)j0 * ld, ld);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, hs, M, 1.0f,
                        a + (size_t)j0 * T + j0, T, dO + (size_t)j0 * C, C, 1.0f,
                        dv + (size_t)j0 * ld, ld);
        }
    }
}

/* Generation's attention: n new positions against the KV cache, one
 * (position, head) pair per task, each with its own row of scores. Plain
 * loops: a new position is one query row, too little for an sgemm. */
void pz_cpu_attention_cached_forward(float *out, float *kcache, float *vcache, float *scores,
                                     const float *qkv, int pos0, int n, int C, int NH) {
    const int hs = C / NH, len_max = pos0 + n;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int i = 0; i < n; i++) {
        memcpy(kcache + (size_t)(pos0 + i) * C, qkv + (size_t)i * 3 * C + C, (size_t)C * sizeof(float));
        memcpy(vcache + (size_t)(pos0 + i) * C, qkv + (size_t)i * 3 * C + 2 * C, (size_t)C * sizeof(float));
    }
#pragma omp parallel for collapse(2) schedule(static) num_threads(pz_cpu_nt())
    for (int i = 0; i < n; i++) {
        for (int h = 0; h < NH; h++) {
            const int len = pos0 + i + 1;   /* keys 0 .. pos0+i */
            float *sc = scores + ((size_t)i * NH + h) * len_max;
            const float *q = qkv + (size_t)i * 3 * C + (size_t)h * hs;
            float mx = -INFINITY;
            for (int t = 0; t < len; t++) {
                const float *k = kcache + (size_t)t * C + (size_t)h * hs;
                float dot = 0.0f;
                for (int j = 0; j < hs; j++) dot += q[j] * k[j];
                sc[t] = dot * scale;
                if (sc[t] > mx) mx = sc[t];
            }
            float sum = 0.0f;
            for (int t = 0; t < len; t++) {
                sc[t] = expf(sc[t] - mx);
                sum += sc[t];
            }
            const float inv = 1.0f / sum;
            float *o = out + (size_t)i * C + (size_t)h * hs;
            for (int j = 0; j < hs; j++) o[j] = 0.0f;
            for (int t = 0; t < len; t++) {
                const float a = sc[t] * inv;
                const float *v = vcache + (size_t)t * C + (size_t)h * hs;
                for (int j = 0; j < hs; j++) o[j] += a * v[j];
            }
        }
    }
}
